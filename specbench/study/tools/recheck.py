"""`python -m specbench.study.tools.recheck`: the acceptance-sample check of the default run.

A fixed, stratified sample of the committed greedy configurations (results/summary.csv),
re-derived on this machine at the batch each committed row ran at and compared with the committed
rows step by step.

* ``sample``: every pair, shape family (``tree``), frontier rule and dataset of the committed
  greedy rows is represented: a greedy cover, each pick the row that adds the most values not yet
  represented, ties to the cheapest to re-derive (``cost_rank``): a replayed row before a live one,
  a row whose committed prompts ran as one batch (``one_batch``: fewest prompts to re-run), then the smallest target, batch and new tokens, a row needing no new target continuation
  (a target x dataset x batch already picked), the budget nearest ``BUDGET`` (4: the shapes differ
  there), and the config hash (fixed: the same committed rows give the same sample).
* ``jobs``: one ``specbench.run`` override line per sampled row (``--only``: the configurations
  the plan kept, ``study.tools.budget``): its pair, dataset, tree and scalar tree parameters, budget,
  rule, dtype, temperature, new tokens, seed and engine (the committed row's), at the committed
  row's batch on the prompts of its run (``run_prompts``: its first prompt at batch 1, else all its
  prompts): in bfloat16 a padded batch resolves near-ties differently from a batch of one, and the
  loop refills a finished row's slot with the next prompt, so a row is re-derived in its own run,
  its continuation too: replay's cache keys a record by the batched run that computed it
  (``engine.replay.batch_keys``), so ONE ``--cache DIR`` serves every job.  (Until it did, a study's
  cache kept whichever run first computed a continuation: some committed batch-32 rows replay the
  continuation a batch-64 job computed, identical step for step from it, while others are identical
  from the batch-32 one.)
* ``compare``: each re-derived job's steps against the committed steps of its row's config hash
  and the same prompts, column by column (``COLUMNS``), one row per (configuration, prompt) into
  ``--out`` (results/acceptance_check.csv; each row names the machine, ``--machine``: another machine's
  last check in the file is kept beside it), and ONE line: ``acceptance-sample check: PASS ...`` or
  ``FAIL`` naming what differs.  Exit 0 either way (the result is the CSV); 2 for bad input.

    python -m specbench.study.tools.recheck jobs --results results [--only HASH,...] --cache OUT/replay_cache \\
        > OUT/recheck_jobs.txt
    python -m specbench.study.tools.recheck compare --results results --runs OUT/recheck \\
        --out results/acceptance_check.csv --machine OUT/machine.json

torch-free: pandas, scipy, ``core``, ``results.files``, ``study.tools.budget``'s model sizes and ``ceiling``'s
machine-record reader (``compare`` without ``--machine`` reads this machine's identity: torch).
"""

from __future__ import annotations

import glob
import os
import sys

import pandas as pd

from ...core import readers
from ...core.args import Parser, check_out, refuse
from ...core.atomic import os_line
from ...results import acceptcheck, schemas
from ...results.acceptcheck import COLUMNS, SAME, verdict
from ...results.columns import tree_params
from ...results.files import read_csv, read_steps, read_summary
from ...results.upsert import replace_rows, upsert
from .ceiling import read_machine
from .sizes import STRATA, continuation_key, models, params, run_prompts  # noqa: F401  (run_prompts: its API)

BUDGET = 4  # the budget sampled where a configuration has several: shapes differ there, and replay's cost hardly does
KEY = (*SAME, "engine", "batch_size")  # a re-derived row's committed one: the same configuration, engine and batch
NEEDS = (*KEY, *COLUMNS, "prompt_id", "step")  # a re-derived steps.csv's columns that the comparison reads


def sample_file(results: str) -> str:
    path = os.path.join(results, "summary.csv")
    if not os.path.isfile(path):
        refuse(f"--results: {path} not found; give the folder of the committed summary.csv")
    try:  # a binary, cut or garbled summary: one line, as the report refuses it
        readers.check_text(path, schemas.COLLECT_FIX, "--results")
    except readers.TableError as e:
        refuse(str(e))
    return path


def greedy(summary: pd.DataFrame) -> pd.DataFrame:
    """The committed greedy rows at temperature 0 (either engine): what a machine re-derives exactly."""
    s = summary[summary.verify == "greedy"]
    return s[s.temperature.astype(float) == 0]


def one_batch(rows: pd.DataFrame) -> pd.Series:
    """Whether each row's committed prompts ran as one batch (batch 1, or no more prompts than the
    batch): the cheapest to re-derive; otherwise a finished prompt's place was taken by the next one,
    so its whole run is re-derived (``run_prompts``)."""
    b = rows.batch_size.astype(int)
    n = rows.n_prompts.astype(int) if "n_prompts" in rows else b
    return (b == 1) | (n <= b)


def cost_rank(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` ordered cheapest to re-derive first (see the module docstring), fresh continuations aside."""
    return rows.assign(
        _live=rows.engine != "replay",
        _split=~one_batch(rows),
        _target=[params(models(p)[1]) for p in rows.pair],
        _batch=rows.batch_size.astype(int),
        _tokens=rows.max_new_tokens.astype(int),
        _b=(rows.budget.astype(int) - BUDGET).abs(),
    ).sort_values(["_live", "_split", "_target", "_batch", "_tokens", "_b", "budget", "config_hash"], kind="mergesort")


def sample(path: str) -> pd.DataFrame:
    """The fixed stratified sample of ``path``'s greedy rows (see the module docstring)."""
    rows = cost_rank(greedy(read_summary(path, strict=False)))  # checked as text by sample_file
    seen: set = set()
    conts: set = set()
    picked = []
    while len(rows):
        gain = rows.apply(lambda r: sum((k, r[k]) not in seen for k in STRATA), axis=1)
        if gain.max() == 0:
            break
        fresh = rows.apply(lambda r: continuation_key(r) not in conts, axis=1)
        order = ["_g", "_live", "_split", "_target", "_batch", "_tokens", "_n"]
        best = rows.assign(_g=-gain, _n=fresh).sort_values(order, kind="mergesort").iloc[0]
        picked.append(best.name)
        seen.update((k, best[k]) for k in STRATA)
        conts.add(continuation_key(best))
    return rows.loc[picked].drop(columns=[c for c in rows.columns if c.startswith("_")])


def _value(v) -> str:
    return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def job_line(row, pair_overrides: str = "", cache: str = "") -> str:
    """The ``specbench.run`` overrides that re-derive ``row`` in its committed run (``run_prompts``)."""
    params_ = tree_params(row["tree_params"], strict=True)
    scalar = [f"tree.{k}={_value(v)}" for k, v in sorted(params_.items()) if not isinstance(v, (list, dict))]
    pair = pair_overrides or f"pair={row['pair']}"
    batch = int(row["batch_size"])
    return " ".join(
        [
            pair,
            f"dataset={row['dataset']}",
            f"tree={row['tree']}",
            *scalar,
            f"tree.budget={int(row['budget'])}",
            f"verify={row['verify']}",
            f"verify.temperature={_value(float(row['temperature']))}",
            f"dtype={row['dtype']}",
            f"max_new_tokens={int(row['max_new_tokens'])}",
            f"seed={int(row['seed'])}",
            f"dataset.limit={run_prompts(row)}",
            f"batch_size={batch}",
            f"engine={row['engine']}",
            *([f"+replay_cache={cache}"] if cache and row["engine"] == "replay" else []),
            "progress=false",
        ]
    )


def jobs(rows: pd.DataFrame, only=(), pair_overrides: str = "", cache: str = "") -> list[str]:
    """The job lines of ``rows`` (those in ``only``, if given), all replayed ones in the one ``cache``."""
    kept = rows[rows.config_hash.isin(only)] if len(only) else rows
    return [job_line(r, pair_overrides, cache) for _, r in kept.iterrows()]


def _text(v) -> str:
    """A key value alike however the CSV typed it (4, 4.0 and "4" are one budget)."""
    try:
        return repr(float(v))
    except (TypeError, ValueError):
        return str(v)


def _key(df: pd.DataFrame) -> pd.Series:
    return df[list(KEY)].map(_text).agg("|".join, axis=1)


def compare(summary: pd.DataFrame, steps: pd.DataFrame, runs: str) -> pd.DataFrame:
    """One row per re-derived (configuration, prompt): its step count and each column equal or not."""
    committed = greedy(summary)
    want = dict(zip(_key(committed), committed.config_hash))
    batch = dict(zip(committed.config_hash, committed.batch_size)) if "batch_size" in committed else {}
    out = []
    for path in sorted(glob.glob(os.path.join(runs, "**", "steps.csv"), recursive=True)):
        if "paired" in path.split(os.sep):
            continue
        new = read_csv(path)
        missing = sorted(set(NEEDS) - set(new.columns))
        if missing:
            refuse(f"--runs: {path} has no column {', '.join(missing)}: not a specbench.run job's steps.csv; "
                   "give the folder the re-derived jobs alone wrote")  # fmt: skip
        chash = want.get(_key(new.head(1)).iloc[0]) if len(new) else None
        old = steps[steps.config_hash == chash] if chash else steps.iloc[:0]
        for pid, g in new.groupby("prompt_id", sort=True):
            o = old[old.prompt_id == pid].sort_values("step")
            g = g.sort_values("step")
            row = {"config_hash": chash or "", **{k: g[k].iloc[0] for k in SAME}, "prompt_id": pid}
            row.update(steps=len(g), committed_steps=len(o), found=bool(len(o)))
            row.update(emitted=int(g.emitted.sum()), committed_emitted=int(o.emitted.sum()) if len(o) else 0)
            row["committed_batch"] = batch.get(chash, float("nan"))
            row["batch"] = int(g.batch_size.iloc[0])  # the batch the re-derived job ran its prompts in
            row.update(_agreement(o, g))
            row["identical"] = bool(len(o)) and all(row[f"same_{c}"] for c in COLUMNS)
            out.append(row)
    return pd.DataFrame(out)


def _agreement(old: pd.DataFrame, new: pd.DataFrame) -> dict:
    """Each column equal at every step (and the same step count), and how many first steps agree in
    every column (where two decodes part, if they do): one comparison per column."""
    n = min(len(old), len(new))
    eq = {c: old[c].head(n).map(_text).values == new[c].head(n).map(_text).values for c in COLUMNS}
    row: dict = {f"same_{c}": bool(len(old) == len(new) and eq[c].all()) for c in COLUMNS}
    every = pd.DataFrame(eq, index=range(n)).all(axis=1).to_numpy()
    row["same_prefix_steps"] = int(n if every.all() else every.argmin())
    return row


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m specbench.study.tools.recheck", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("jobs", help="the sample's specbench.run overrides, one line each")
    j.add_argument("--results", default="results")
    j.add_argument("--only", default="", help="the configurations the plan kept: config hashes, comma-separated")
    j.add_argument("--cache", default="", help="the replay cache every re-derived job shares (as the study's did)")
    j.add_argument("--pair-overrides", default="", help="instead of pair=NAME (a local pair's folders)")
    c = sub.add_parser("compare", help="the re-derived steps against the committed ones")
    c.add_argument("--results", default="results")
    c.add_argument("--runs", required=True, help="the folder the re-derived jobs wrote")
    c.add_argument("--out", default="results/acceptance_check.csv", help="other machines' checks in it are kept")
    c.add_argument("--machine", default=None, help="the machine record (python -m specbench.inputs.machine --out)")
    args = ap.parse_args(argv)
    path = sample_file(args.results)
    if args.cmd == "jobs":
        rows = sample(path)
        only = [h for h in args.only.split(",") if h]
        unknown = sorted(set(only) - set(rows.config_hash))
        if unknown:
            refuse(f"--only: {','.join(unknown)} not in the sample of {path}; give config hashes the plan kept")
        for line in jobs(rows, only, args.pair_overrides, args.cache):
            print(line)
        return 0
    steps_path = os.path.join(args.results, "steps.csv.gz")
    if not os.path.isfile(steps_path):
        refuse(f"--results: {steps_path} not found; the committed steps are what the sample is compared with")
    if not os.path.isdir(args.runs):
        refuse(f"--runs={args.runs}: not a folder; give the folder the re-derived jobs wrote")
    machine = read_machine(args.machine, None)  # a bad record is refused before the comparison's work
    check_out(args.out, "--out")
    try:
        read_out(args.out)  # a garbled destination: refused before the comparison's work (and again under the lock)
        check = compare(read_summary(path, strict=False), read_steps(steps_path, strict=False), args.runs)
        if not check.empty:
            check = check.assign(**where(machine))
            upsert(args.out, lambda old: kept_beside(old, check), read_out)
    except readers.TableError as e:
        refuse(str(e))
    except OSError as e:
        refuse(f"{os_line(e, args.out, '--out')} (nothing was written)")
    print(verdict(check))
    return 0


def read_out(path: str) -> pd.DataFrame | None:
    """``--out`` as ``compare`` writes it (``results.acceptcheck.read``), None where there is none; a ``TableError``
    otherwise."""
    return acceptcheck.read(path, "--out") if os.path.exists(path) else None


def where(rec: dict | None) -> dict:
    """The machine that re-derived the sample: its record (``--machine``, read by the ceiling step's reader
    before any work), else this one's identity."""
    if rec is None:
        from ...inputs.machine import identity  # heavy: torch, only where no record is given

        rec = identity()
    return {k: str(rec[k]) for k in ("machine_id", "machine")}


def kept_beside(old: pd.DataFrame | None, check: pd.DataFrame) -> pd.DataFrame:
    """The file after a check: this one, and every other machine's last check kept after it (a check on one
    CPU never erases another's); rows that name no machine (a file from before checks named theirs) are replaced."""
    if old is None or "machine_id" not in old:
        return check
    return replace_rows(old[old.machine_id.notna()], check, ["machine_id"], new_first=True)


if __name__ == "__main__":
    sys.exit(main())
