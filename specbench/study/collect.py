"""`python -m specbench.collect [DIRS]`: merge finished job folders into results/.

A finished job is a folder with ``summary.csv`` (one row), the ``steps.csv``
beside it and (jobs since outputs were added) ``outputs.jsonl``.  A job's rows
are replaced as a unit: for each config hash the newest run (``run_id``) wins,
and its summary, steps and outputs replace every row of that hash already in
``--out``.  Steps or outputs without their summary are never kept.  A file
that cannot be read completely (header only, truncated, steps that disagree
with their summary) is a one-line error naming it, and nothing is written.
Failed jobs (``error.txt``, no summary) are skipped and listed.  Sorted
deterministically: running it twice gives identical files.

Derived tables, rebuilt from the merged rows on every collect:
``acceptance_matrix.csv`` (``study.acceptance``) and, where ``--out`` holds
greedy acceptance vectors (``acceptance_vector*.csv``), ``gap_to_optimum.csv``
(``study.optimum``).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
from dataclasses import dataclass, field

import pandas as pd

from ..core.atomic import write_jsonl
from .results import read_csv, write_csv

SUMMARY_ORDER = ["pair", "dataset", "verify", "temperature", "tree", "budget", "engine", "config_hash"]
STEP_ORDER = ["config_hash", "prompt_id", "step"]
FIX = "rerun the job or delete its folder"


class CollectError(ValueError):
    """A job file collect cannot trust: one line naming the file."""


@dataclass
class JobRows:
    summary: pd.DataFrame                      # exactly one row
    steps: pd.DataFrame
    outputs: list[dict] = field(default_factory=list)
    source: str = ""

    @property
    def config_hash(self) -> str:
        return str(self.summary.config_hash.iloc[0])

    @property
    def order(self) -> tuple[str, str]:        # newest run wins; ties by folder, deterministically
        run = self.summary.get("run_id", pd.Series([""])).iloc[0]
        return (str(run) if isinstance(run, str) else "", self.source)


def job_dirs(roots) -> tuple[list[str], list[str]]:
    """(finished job folders, failed job folders: error.txt and no summary) under roots."""
    done, failed = set(), set()
    for root in roots:
        for name, acc in (("summary.csv", done), ("error.txt", failed)):
            for path in glob.glob(os.path.join(root, "**", name), recursive=True):
                acc.add(os.path.dirname(os.path.abspath(path)))
    return sorted(done), sorted(failed - done)


def _complete(path: str) -> None:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() == 0:
            raise CollectError(f"{path} is empty: {FIX}")
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) != b"\n":
            raise CollectError(f"{path} is truncated (no final newline): {FIX}")


def _csv(path: str) -> pd.DataFrame:
    if not os.path.exists(path):
        raise CollectError(f"{path} is missing: {FIX}")
    _complete(path)
    try:
        return read_csv(path)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise CollectError(f"{path} cannot be read ({str(e).splitlines()[0]}): {FIX}") from None


def _jsonl(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    _complete(path)
    with open(path, encoding="utf-8") as fh:
        try:
            return [json.loads(line) for line in fh if line.strip()]
        except ValueError as e:
            raise CollectError(f"{path} cannot be read ({e}): {FIX}") from None


def check_job(summary: pd.DataFrame, steps: pd.DataFrame, where: str) -> None:
    """One summary row whose n_steps / new_tokens match its steps exactly."""
    if len(summary) != 1 or not {"config_hash", "n_steps", "new_tokens"} <= set(summary):
        raise CollectError(f"{where}/summary.csv has {len(summary)} rows (a job has exactly one, with "
                           f"config_hash, n_steps, new_tokens): {FIX}")
    s = summary.iloc[0]
    if len(steps) != int(s.n_steps) or (len(steps) and set(steps.config_hash) != {s.config_hash}) \
            or int(steps.emitted.sum() if len(steps) else 0) != int(s.new_tokens):
        raise CollectError(f"{where}/steps.csv has {len(steps)} rows for {s.config_hash} but its summary "
                           f"says {int(s.n_steps)} steps and {int(s.new_tokens)} tokens: {FIX}")


def read_job(d: str) -> JobRows:
    summary = _csv(os.path.join(d, "summary.csv"))
    steps = _csv(os.path.join(d, "steps.csv"))
    check_job(summary, steps, d)
    h = str(summary.config_hash.iloc[0])
    outputs = [{"config_hash": h, **o} for o in _jsonl(os.path.join(d, "outputs.jsonl"))]
    return JobRows(summary, steps, outputs, d)


def read_collected(out: str) -> tuple[list[JobRows], int]:
    """The jobs already in --out, and how many step rows had no summary (dropped)."""
    spath = os.path.join(out, "summary.csv")
    if not os.path.exists(spath):
        return [], 0
    summary = _csv(spath)
    stpath = os.path.join(out, "steps.csv")
    steps = _csv(stpath) if os.path.exists(stpath) else pd.DataFrame(columns=["config_hash"])
    outputs = _jsonl(os.path.join(out, "outputs.jsonl"))
    by_hash = dict(tuple(steps.groupby("config_hash", sort=False))) if len(steps) else {}
    jobs = []
    for i in range(len(summary)):
        row = summary.iloc[[i]].reset_index(drop=True)
        h = str(row.config_hash.iloc[0])
        st = by_hash.pop(h, steps.iloc[:0]).reset_index(drop=True)
        jobs.append(JobRows(row, st, [o for o in outputs if o.get("config_hash") == h], out))
    return jobs, sum(len(g) for g in by_hash.values())


def merge(dirs, existing: list[JobRows] = ()) -> tuple[pd.DataFrame, pd.DataFrame, list[dict]]:
    """summary, steps and outputs of the newest run of every config hash; a job folder's
    rows replace those of its hash in ``existing`` (jobs already collected)."""
    jobs = {j.config_hash: j for j in existing}
    fresh: dict[str, JobRows] = {}
    for d in dirs:
        j = read_job(d)
        if j.config_hash not in fresh or j.order > fresh[j.config_hash].order:
            fresh[j.config_hash] = j
    jobs.update(fresh)
    if not jobs:
        raise CollectError("no finished jobs (summary.csv) found: run `python -m specbench.run` first")
    summary = pd.concat([j.summary for j in jobs.values()], ignore_index=True)
    summary = summary.sort_values([c for c in SUMMARY_ORDER if c in summary]).reset_index(drop=True)
    alpha = sorted((c for c in summary if c.startswith("alpha_")), key=lambda c: int(c[6:]))
    summary = summary[[c for c in summary if not c.startswith("alpha_")] + alpha]
    frames = [j.steps for j in jobs.values() if len(j.steps)]
    steps = pd.concat(frames, ignore_index=True).sort_values(STEP_ORDER).reset_index(drop=True) \
        if frames else pd.DataFrame()
    outputs = sorted((o for j in jobs.values() for o in j.outputs),
                     key=lambda o: (str(o["config_hash"]), str(o["prompt_id"])))
    return summary, steps, outputs


def write_derived(out: str, summary: pd.DataFrame, steps: pd.DataFrame) -> None:
    """acceptance_matrix.csv and (with greedy acceptance vectors in ``out``) gap_to_optimum.csv."""
    from .acceptance import acceptance_matrix
    write_csv(acceptance_matrix(summary, steps), os.path.join(out, "acceptance_matrix.csv"))
    files = sorted(glob.glob(os.path.join(out, "acceptance_vector*.csv")))
    if files:
        from .optimum import gap_to_optimum
        vectors = pd.concat([read_csv(f) for f in files], ignore_index=True)
        write_csv(gap_to_optimum(summary, vectors), os.path.join(out, "gap_to_optimum.csv"))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", default=["outputs"], help="folders to search for jobs")
    ap.add_argument("--out", default="results", help="where summary.csv, steps.csv and outputs.jsonl go")
    ap.add_argument("--fresh", action="store_true", help="ignore rows already in --out")
    args = ap.parse_args(argv)
    done, failed = job_dirs(args.dirs)
    try:
        existing, orphans = ([], 0) if args.fresh else read_collected(args.out)
        summary, steps, outputs = merge(done, existing)
    except CollectError as e:
        raise SystemExit(f"specbench: error: {e}")
    if failed:
        print(f"specbench: skipped {len(failed)} failed job(s) (see error.txt): {', '.join(failed)}")
    if orphans:
        print(f"specbench: dropped {orphans} step rows of {args.out}/steps.csv that had no summary row")
    write_csv(steps, os.path.join(args.out, "steps.csv"))       # summary last: it lists the jobs
    write_jsonl(os.path.join(args.out, "outputs.jsonl"), outputs)
    write_csv(summary, os.path.join(args.out, "summary.csv"))
    write_derived(args.out, summary, steps)
    print(f"specbench: collected {len(summary)} configurations, {len(steps)} steps, "
          f"{len(outputs)} outputs -> {args.out}/")


if __name__ == "__main__":
    main()
