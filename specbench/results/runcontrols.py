"""The controls pooled over a machine's runs (torch-free), and the report's speed tables.

One run's controls (``speedstats.controls``) see only what varies between its units.  Pooled over every
run of one machine they show two things one run cannot: a lean of a few percent that the first-named
copy keeps in every run (``pooled_controls``: a binomial test over units and runs, and a t interval
over runs), and how often a run's own interval missed its control (``_misses``: the binomial count
that the run effect of ``results.harness`` adds to every interval), from each run's own controls and order
design (``own_controls``, ``order_design``: ABBA or not).  ``tables`` assembles the report's measured
answer, its controls and these, computing the runs' own controls once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from .speedstats import (
    ABBA,
    LEVEL,
    UNBALANCED,
    answers,
    control_pairs,
    controls,
    random_weights,
    run_controls,
    spreads,
    t_half,
    unit_sums,
)

CONTROL_OF = {"speedup": "A/A", "difference": "twin"}  # a ``controls`` row's kind -> ``speedstats.control_pairs``' name


def order_design(run: pd.DataFrame) -> str:
    """``ABBA`` when every second unit of the run (in time order) decoded the candidates in the reverse of
    the unit before's order (``study.tools.speed.unit_orders``), else ``UNBALANCED``: each unit in one
    random order (runs before ABBA), so an order effect within a unit does not cancel, and runs of one
    seed repeated one sequence of orders."""
    if "order" not in run or run.order.isna().any():
        return UNBALANCED
    seqs = [tuple(u.sort_values("order").candidate) for _, u in run.groupby(["round", "unit"], sort=True)]
    pairs = list(zip(seqs[::2], seqs[1::2]))
    return ABBA if pairs and all(b == a[::-1] for a, b in pairs) else UNBALANCED


def own_controls(speed: pd.DataFrame) -> list[tuple]:
    """Every pretrained run's own controls (``controls`` on its units alone, no run effect): (machine,
    machine_id, run id, order design, control): how often one run's interval misses its control."""
    speed = speed[~random_weights(speed)]
    out = []
    for (machine, mid, run_id), run in speed.groupby(["machine", "machine_id", "run_id"], sort=True):
        design = order_design(run)
        out += [(machine, str(mid), str(run_id), design, c) for c in controls(unit_sums(run))]
    return out


def pooled_controls(speed: pd.DataFrame, level: float = LEVEL, own: list[tuple] | None = None) -> pd.DataFrame:
    """Per machine, order design (``order_design``: ABBA runs apart from earlier ones) and control (A/A,
    twin), the units of every pretrained run pooled: one run's 16 units
    cannot see a lean of a few percent, all of them can.  Per unit (a run's round and unit), the
    first-named copy's seconds over the second's; ``slower``: the units where the first took longer, with
    a two-sided binomial test of an even split (``p``); ``runs_slower``, ``runs_p``: the same over runs
    (a run's mean), since a run's units share its process; ``lean``: the geometric mean ratio - 1, each
    run one observation (its units' mean), with a ``level`` t interval over runs (``lo``, ``hi``), so a
    lean of one process is not taken for the harness's.  Both copies decode the same tokens, so a lean whose
    interval excludes 0 is the harness's, not the trees'.  ``runs_failed`` of ``runs_judged``: the runs whose
    own control failed (``controls``; ``own``: ``own_controls(speed)``, computed here where not given), with
    ``fail_p`` (``_misses``): whether one run's interval covers as it says."""
    speed = speed[~random_weights(speed)]
    logs: dict[tuple[str, str, str], list[np.ndarray]] = {}
    failed: dict[tuple[str, str, str], list[float]] = {}  # per run: 0 where its control held, else how far off
    for (machine, _run), run in speed.groupby(["machine", "run_id"], sort=True):
        wall = run.pivot_table(index=["round", "unit"], columns="candidate", values="wall_s", aggfunc="sum")
        design = order_design(run)
        for control, a, b in control_pairs(wall.columns):
            both = wall[[a, b]].dropna()
            logs.setdefault((machine, design, control), []).append(np.log(both[a] / both[b]).to_numpy(float))
    for machine, _mid, _run, design, c in own_controls(speed) if own is None else own:
        if not c.get("judged", True):
            continue  # no interval (too few units): it neither held nor failed
        failed.setdefault((machine, design, CONTROL_OF[c["kind"]]), []).append(0.0 if c["holds"] else abs(c["off"]))
    out = []
    for (machine, orders, control), runs in logs.items():
        x, means = np.concatenate(runs), np.array([r.mean() for r in runs if len(r)])
        lean = [float(np.expm1(v)) for v in _over_runs(means, level)]
        slower, runs_slower = int((x > 0).sum()), int((means > 0).sum())
        p, runs_p = (
            stats.binomtest(k, n).pvalue if n else float("nan")
            for k, n in ((slower, len(x)), (runs_slower, len(means)))
        )
        misses = failed.get((machine, orders, control), [])
        out.append(dict(machine=machine, orders=orders, control=control, runs=len(runs), units=len(x),
                        slower=slower, p=p, runs_slower=runs_slower, runs_p=runs_p,
                        lean=lean[0], lo=lean[1], hi=lean[2], **_misses(misses, level)))  # fmt: skip
    return pd.DataFrame(out)


def _misses(off: list[float], level: float) -> dict:
    """How often the runs' own intervals missed (``runs_failed`` of ``runs_judged``; ``off``: 0 where a run's
    control held, else its estimate's distance from no difference), ``failed_max`` (the farthest such) and
    ``fail_p``: a one-sided binomial test against the 1 - ``level`` a run's interval allows (small: a run's
    interval is narrower than the spread between two names for one decode)."""
    k, n = sum(1 for o in off if o > 0), len(off)
    p = stats.binomtest(k, n, 1 - level, alternative="greater").pvalue if n else float("nan")
    return {"runs_failed": k, "runs_judged": n, "fail_p": p, "failed_max": max(off, default=0.0)}


def _over_runs(means: np.ndarray, level: float) -> tuple[float, float, float]:
    """(mean, lo, hi) of the runs' mean log ratios, a Student t interval over runs (few clusters: a
    bootstrap over 8 runs is too narrow)."""
    if len(means) < 2:
        return float(means.mean()) if len(means) else float("nan"), float("nan"), float("nan")
    mean, half = float(means.mean()), t_half(means, level)
    return mean, mean - half, mean + half


def tables(bench: pd.DataFrame | None) -> dict:
    """The report's ``measured`` (``answers``), ``controls`` (``run_controls``), ``pooled_controls`` and
    ``spreads`` (the machines' run effects), where a run exists; the runs' own controls computed once."""
    if bench is None or bench.empty:
        return {}
    own = own_controls(bench)
    spread = spreads(bench)
    return dict(measured=answers(bench, spread), controls=run_controls(bench, spread),
                pooled_controls=pooled_controls(bench, own=own), spreads=spread)  # fmt: skip
