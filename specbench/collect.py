"""`python -m specbench.collect [DIRS]`: merge finished job folders into results/.

Finds every summary.csv (a finished job) under DIRS (default: outputs/),
takes the steps.csv beside it, de-duplicates by config hash (and prompt, step),
sorts deterministically and writes results/steps.csv and results/summary.csv.
Running it twice gives identical files.
"""
from __future__ import annotations

import argparse
import glob
import os

import pandas as pd

from .results import read_csv, write_csv

SUMMARY_ORDER = ["pair", "dataset", "verify", "temperature", "tree", "budget", "engine", "config_hash"]


def job_dirs(roots) -> list[str]:
    found = set()
    for root in roots:
        for path in glob.glob(os.path.join(root, "**", "summary.csv"), recursive=True):
            found.add(os.path.dirname(os.path.abspath(path)))
    return sorted(found)


def merge(dirs, existing: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    summaries, steps = [], []
    if existing:                                   # keep rows already in results/
        for name, acc in (("summary.csv", summaries), ("steps.csv", steps)):
            path = os.path.join(existing, name)
            if os.path.exists(path):
                acc.append(read_csv(path))
    for d in dirs:
        summaries.append(read_csv(os.path.join(d, "summary.csv")))
        if os.path.exists(os.path.join(d, "steps.csv")):
            steps.append(read_csv(os.path.join(d, "steps.csv")))
    if not summaries:
        raise ValueError("no finished jobs (summary.csv) found: run `python -m specbench.run` first")
    summary = pd.concat(summaries, ignore_index=True).drop_duplicates("config_hash", keep="last")
    summary = summary.sort_values([c for c in SUMMARY_ORDER if c in summary]).reset_index(drop=True)
    step = pd.concat(steps, ignore_index=True) if steps else pd.DataFrame()
    if len(step):
        step = step.drop_duplicates(["config_hash", "prompt_id", "step"], keep="last")
        step = step.sort_values(["config_hash", "prompt_id", "step"]).reset_index(drop=True)
    alpha = sorted((c for c in summary if c.startswith("alpha_")), key=lambda c: int(c[6:]))
    summary = summary[[c for c in summary if not c.startswith("alpha_")] + alpha]
    return summary, step


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", default=["outputs"], help="folders to search for jobs")
    ap.add_argument("--out", default="results", help="where steps.csv and summary.csv go")
    ap.add_argument("--fresh", action="store_true", help="ignore rows already in --out")
    args = ap.parse_args(argv)
    try:
        summary, steps = merge(job_dirs(args.dirs), None if args.fresh else args.out)
    except ValueError as e:
        raise SystemExit(f"specbench: error: {e}")
    write_csv(summary, os.path.join(args.out, "summary.csv"))
    if len(steps):
        write_csv(steps, os.path.join(args.out, "steps.csv"))
    print(f"specbench: collected {len(summary)} configurations, {len(steps)} steps -> {args.out}/")


if __name__ == "__main__":
    main()
