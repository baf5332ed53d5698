"""`python -m specbench.study.tools.stale`: the committed replayed rows whose tokens are not their own
run's continuation, and the jobs that regenerate them.

Greedy replay emits the target's continuation of each prompt, so a committed row's tokens
(results/outputs.jsonl.gz) ARE the continuation it replayed.  At batch B > 1 that continuation is
what a batched run of the row's prompts computed (``engine.replay.batch_keys``: the batch size and
every prompt, a finished slot refilled by the next prompt).  Until the replay cache keyed records
by that run, a study's cache served whichever run first computed a prompt (a batch-64 job's, a
32-prompt job's), so some committed rows replayed another run's continuation.  This finds them:

* ``references``: one job line per batched run the committed greedy replay rows come from (target,
  dataset, batch, prompts, tokens, dtype): its cheapest row (``recheck.cost_rank``), re-derived;
  its tokens are that run's continuation.
* ``stale``: after those jobs ran into ``--runs``, every committed row of a run they cover whose
  tokens differ on some prompt, cheapest first, as job lines that regenerate it (the same config
  hash: ``python -m specbench.collect`` then replaces it as a unit); one summary line on stderr.
  A row whose job no longer has its hash (``keeps_hash``: Sequoia's tree, built from
  results/acceptance_vector.csv, is another tree once the vector was recalibrated) cannot be
  regenerated in place: its line goes to stderr after ``new hash (replaces HASH):``.  Run those lines
  into a folder, then collect it with the old rows dropped (``specbench.collect``'s ``--drop``).

    python -m specbench.study.tools.stale references --results results --cache DIR > refs.txt
    # run each line: python -m specbench.run $line out_root=OUT/refs hydra.run.dir=OUT/refs/$i
    python -m specbench.study.tools.stale stale --results results --runs OUT/refs --cache DIR > stale.txt
    # run each line of stale.txt into OUT (and each "new hash (replaces H):" line of stderr), then
    python -m specbench.collect OUT --out results [--drop H,...]

torch-free but for ``keeps_hash`` (a job's identity): pandas, ``results.files`` and ``recheck``.
"""

from __future__ import annotations

import glob
import os
import sys
from collections import defaultdict

import pandas as pd

from ...core.args import Parser, refuse
from ...results.files import output_rows, read_csv, read_outputs, read_summary
from .recheck import cost_rank, greedy, job_line, sample_file

RUN = ("target", "dataset", "batch_size", "n_prompts", "max_new_tokens", "dtype")  # a batched run


def batched(summary: pd.DataFrame) -> pd.DataFrame:
    """The committed greedy replay rows at batch > 1, cheapest to re-derive first."""
    s = greedy(summary)
    return cost_rank(s[(s.engine == "replay") & (s.batch_size.astype(int) > 1)])


def run_of(row) -> tuple:
    return tuple(str(row[k]) if k in ("target", "dataset", "dtype") else int(row[k]) for k in RUN)


def references(summary: pd.DataFrame, cache: str = "") -> list[str]:
    """One job line per batched run: its cheapest committed row."""
    rows = batched(summary)
    first = rows[~pd.Series([run_of(r) for _, r in rows.iterrows()], index=rows.index).duplicated()]
    return [job_line(r, cache=cache) for _, r in first.iterrows()]


def continuations(runs: str) -> dict[tuple, dict[str, list[int]]]:
    """{run: {prompt: tokens}} of every greedy replay job under ``runs`` (its summary.csv and outputs.jsonl)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(runs, "**", "summary.csv"), recursive=True)):
        job = read_csv(path).iloc[0]
        if job.engine == "replay" and job.verify == "greedy" and float(job.temperature) == 0:
            rows = output_rows(os.path.join(os.path.dirname(path), "outputs.jsonl"))
            tokens = {str(o["prompt_id"]): [int(t) for t in o["token_ids"]] for _, o in rows}
            if tokens:  # a folder without a job's outputs (e.g. a results/ copy) is no reference
                out[run_of(job)] = tokens
    return out


def stale(summary: pd.DataFrame, committed: dict, refs: dict) -> pd.DataFrame:
    """The batched rows of ``refs``' runs whose committed tokens differ from their run's on some prompt,
    cheapest first, with how many prompts differ (``differ``)."""
    mine: dict[str, dict[str, list[int]]] = defaultdict(dict)
    for (chash, pid), tokens in committed.items():
        mine[chash][pid] = tokens
    rows = batched(summary)
    differ = pd.Series(
        [
            sum(ref.get(pid) != t for pid, t in mine[r.config_hash].items()) if (ref := refs.get(run_of(r))) else 0
            for _, r in rows.iterrows()
        ],
        index=rows.index,
        dtype=int,
    )
    return rows.assign(differ=differ)[differ > 0]


def keeps_hash(line: str, chash: str) -> bool:
    """Whether the job ``line`` still has the config hash ``chash``, so that running it replaces that
    committed row (``specbench.collect`` keys rows by hash).  Imports torch (``study.job``)."""
    from ..job import identity, launch  # heavy: torch, for a job's identity; the rest of the tool is torch-free

    return identity.bound(launch.checked_job(line.split()))[2] == chash


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m specbench.study.tools.stale", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, what in (("references", "one job per batched run"), ("stale", "the jobs that regenerate stale rows")):
        p = sub.add_parser(name, help=what)
        p.add_argument("--results", default="results")
        p.add_argument("--cache", default="", help="the replay cache the jobs share")
        if name == "stale":
            p.add_argument("--runs", required=True, help="the folder the reference jobs wrote")
    args = ap.parse_args(argv)
    summary = read_summary(sample_file(args.results), strict=False)  # checked as text by sample_file
    if args.cmd == "references":
        print("\n".join(references(summary, args.cache)))
        return 0
    if not os.path.isdir(args.runs):
        refuse(f"--runs: {args.runs} is not a folder; give the out_root the reference jobs wrote")
    refs = continuations(args.runs)
    bad = stale(summary, read_outputs(os.path.join(args.results, "outputs.jsonl.gz")), refs)
    moved = 0
    for _, r in bad.iterrows():
        line = job_line(r, cache=args.cache)
        same = keeps_hash(line, str(r.config_hash))
        moved += not same
        print(line if same else f"new hash (replaces {r.config_hash}): {line}", file=sys.stdout if same else sys.stderr)
    by = bad.groupby(["pair", "dataset"]).size().to_dict() if len(bad) else {}
    print(
        f"stale: {len(bad)} committed rows of {len(refs)} re-derived runs replay another run's continuation"
        + "".join(f"; {p} {d} {n}" for (p, d), n in by.items())
        + f"; {moved} of them no longer have their config hash (new hash: above; collect their reruns with --drop), the rest regenerate in place",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
