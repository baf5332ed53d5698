"""Each step of ``bash run_all.sh`` beside its compute ceiling, into results/run_times.csv.

A step's ceiling is the time the tokens its forwards processed (``core.forwards``: every model's
forwards and tokens, per step, in $OUT/forwards.csv) would take at each model's own large-batch
rate on this machine: its widest measured forward (``n_tokens`` = 128) on its curve by
``results.costcurve.CEILING`` (results/costs.csv, bf16, cpu: the shorter KV length, the median over
the pairs that share the model, linear beyond the widest).  ``ratio`` =
ceiling / wall seconds: 1 is a step that only ran wide forwards.  What keeps a step below it:
``forward_s`` is the time of its forwards at their own widths (each model's forward count times the
cost curve at its mean width, an estimate: the curve is convex), and ``in_forwards`` = forward_s /
wall seconds: near 1, the step is narrow forwards (decoding at batch 1, by design); far below 1, its
time goes outside the models' forwards.  ``busiest`` and ``tokens_per_forward``: the model with the
most tokens, and its mean forward width.  ``chain``: the first run of ``--times`` (one $OUT folder: a run
and the runs that resumed it; the report's table per machine is its latest chain).

    python -m specbench.study.tools.ceiling --times $OUT/step_times.csv --forwards $OUT/forwards.csv \\
        --costs results/costs.csv --out results/run_times.csv [--machine $OUT/machine.json --dtype float32]

Imports: pandas, ``core.atomic``, ``core.args``, ``core.readers``, ``results.costcurve`` and ``results.upsert``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ...core import readers
from ...core.args import Parser, check_out, refuse
from ...core.atomic import os_line
from ...results import costtable, record
from ...results.costcurve import CEILING, Curve, curves, one_per_curve
from ...results.files import read_run_times
from ...results.schemas import RUN_TIMES_COLUMNS
from ...results.upsert import replace_rows, upsert

COLUMNS = RUN_TIMES_COLUMNS  # run_times.csv's (results.schemas.RUN_TIMES)


def step_row(seconds: float, fwd: pd.DataFrame, by_model: dict[str, Curve]) -> dict:
    """One step's ceiling columns from its models' forward counts: ``ceiling_s`` (every token at
    its model's widest rate) and ``forward_s`` (each model's forwards at their mean width)."""
    rated = fwd[fwd.model.isin(by_model)]
    out: dict[str, Any] = {"forwards": int(fwd.forwards.sum()), "tokens": int(fwd.tokens.sum())}
    out["unrated"] = " ".join(sorted(set(fwd.model) - set(by_model)))
    if rated.empty or seconds <= 0:
        return out
    wide = {m: float(c.sizes[-1]) for m, c in by_model.items()}
    ceiling = sum(r.tokens * by_model[r.model].seconds(wide[r.model]) / wide[r.model] for r in rated.itertuples())
    at_width = sum(r.forwards * by_model[r.model].seconds(r.tokens / r.forwards) for r in rated.itertuples())
    busiest = rated.loc[rated.tokens.idxmax()]
    out |= {"ceiling_s": ceiling, "ratio": ceiling / seconds, "forward_s": at_width, "in_forwards": at_width / seconds}
    out |= {"busiest": busiest.model, "tokens_per_forward": busiest.tokens / max(busiest.forwards, 1)}
    return out


def ceilings(
    times: pd.DataFrame, forwards: pd.DataFrame, costs: pd.DataFrame, machine: dict | None = None
) -> pd.DataFrame:
    """``times`` (run, step, seconds) with each step's ceiling columns (NaN where no forward was
    counted: a step of no model, or a run from before the counts).  With ``machine`` (the run's
    machine.json, ``inputs.machine``): each row names it, and the ceiling reads only that machine's
    cost rows in the run's dtype (another machine's curve would set one CPU's steps against another's rate)."""
    if machine and "machine_id" in costs:
        costs = costs[costs.machine_id.fillna("").astype(str) == str(machine["machine_id"])]
    else:  # no run's machine named: the study's curves, one machine's per pair (never two machines pooled)
        costs = one_per_curve(costs)
    by_model = curves(costs, CEILING, dtype=machine.get("run_dtype") if machine else None)
    named = {"machine": machine["machine"], "machine_id": machine["machine_id"]} if machine else {}
    rows = []
    for t in times.itertuples(index=False):
        fwd = forwards[(forwards.run.astype(str) == str(t.run)) & (forwards.step == t.step)]
        row = {"run": t.run, "step": t.step, "seconds": t.seconds, **step_row(t.seconds, fwd, by_model)}
        rows.append({**row, **named})
    # chain: the first run of these times (one $OUT folder: a run and the runs that resumed it), so the report
    # sets one run's steps together and never fills a step one run skipped from another run of the machine
    chain = min(times.run.astype(str), key=lambda r: (len(r), r))
    return pd.DataFrame(rows).assign(chain=chain).reindex(columns=COLUMNS)


def read_machine(path: str | None, dtype: str | None) -> dict | None:
    """The run's machine record (``--machine``, ``results.record.read_machine``) with the dtype it ran (``--dtype``), or None."""
    if not path:
        return None
    try:
        rec = record.read_machine(path)
    except record.RecordError as e:
        refuse(
            f"--machine={path}: not a machine record ({e.kind}); give python -m specbench.inputs.machine --out's file"
        )
    return {"machine": str(rec["machine"]), "machine_id": str(rec["machine_id"]), "run_dtype": dtype}


def keep_other_runs(out: pd.DataFrame, old: pd.DataFrame | None) -> pd.DataFrame:
    """These runs' rows replace their own in ``old`` (the table at ``--out``); every other run's rows are kept
    (a default run beside the full study's parts: each part's time stays on record, #52 item 8)."""
    if old is None:
        return out
    both = replace_rows(old.reindex(columns=COLUMNS), out, ["run"])
    return both.sort_values("run", kind="stable").reset_index(drop=True)


def read_out(path: str) -> pd.DataFrame:
    """``--out`` as written here (every column, numbers in range, no (run, step) twice) or a ``TableError``
    (``results.files.read_run_times``)."""
    return read_run_times(path)


def times_writer(df: pd.DataFrame):
    return lambda tmp: df.to_csv(tmp, index=False, float_format="%.4g")


def main(argv=None) -> None:
    """Every input read and checked (``core.readers``: a missing, cut, binary or garbled file, wrong
    columns, a value out of range) before ``--out`` is replaced: a refusal is one line, exit 2."""
    ap = Parser(prog="python -m specbench.study.tools.ceiling", description=__doc__.split("\n\n")[0])
    ap.add_argument("--times", required=True, help="run_all.sh's step_times.csv (run, step, seconds)")
    ap.add_argument("--forwards", required=True, help="the forward counts (core.forwards) of the same runs")
    ap.add_argument("--costs", default="results/costs.csv", help="the forward costs (study.tools.costs)")
    ap.add_argument("--out", default="results/run_times.csv", help="the table written (its other runs kept)")
    ap.add_argument("--machine", default=None, help="the run's machine.json: each row names it, its costs alone")
    ap.add_argument("--dtype", default=None, help="with --machine: the dtype the run's costs were measured in")
    a = ap.parse_args(argv)
    check_out(a.out, "--out")  # a folder, a path under a file, a read-only place: one line before any reading
    machine = read_machine(a.machine, a.dtype)
    try:
        times = readers.read(a.times, readers.STEP_TIMES, "--times")
        fwd = readers.read(a.forwards, readers.FORWARDS, "--forwards")
        costs = costtable.read_checked(a.costs, costtable.CURVES, "--costs")
        new = ceilings(times, fwd, costs, machine)
        out = upsert(a.out, lambda old: keep_other_runs(new, old), read_out, times_writer)
    except readers.TableError as e:
        refuse(str(e))
    except OSError as e:
        refuse(f"{os_line(e, a.out, '--out')} (nothing was written)")
    done = out.dropna(subset=["ratio"])
    print(f"[ceiling] {len(done)} of {len(out)} steps with a ceiling -> {a.out}")


if __name__ == "__main__":
    main()
