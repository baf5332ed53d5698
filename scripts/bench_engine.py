"""Live vs replay on the same greedy mini-sweep (4 shapes x 3 budgets, 4 HumanEval prompts,
64 new tokens) on the real pair.  Checks that the acceptance columns agree and prints the
time ratio on its last line.

    flock /tmp/specbench-real.lock .venv/bin/python scripts/bench_engine.py
    .venv/bin/python scripts/bench_engine.py --pair local --pair-override draft.path=D \
        --pair-override target.path=T --dataset smoke --prompts 1 --tokens 4 --shapes chain \
        --budgets 2 --out /tmp/scratch                           # a tiny local pair, seconds

(specbench is imported from the editable install `bash scripts/setup.sh` makes; no sys.path edit.)

It runs `python -m specbench.run -m sweep=engine_bench` three times into a scratch folder:
live, replay with a cold cache (computes c and the ranks once per prompt), and replay again
with the warm cache (what every further static configuration costs).  Times are the
per-job engine seconds (summary `wall_s`, model loading excluded) and the process walls.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

import pandas as pd

from specbench.results.files import read_csv
from specbench.study.job import scriptargs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ACCEPT_COLS = ["n_steps", "new_tokens", "acceptance_rate", "acceptance_length", "tokens_per_step", "accept_hist"]
STEP_COLS = ["prompt_id", "step", "tree_size", "tree_depth", "accepted", "emitted", "accept_path"]


def sweep(out: str, engine: str, args, cache: str) -> tuple[float, pd.DataFrame, pd.DataFrame]:
    cmd = [
        sys.executable,
        "-m",
        "specbench.run",
        "-m",
        "sweep=engine_bench",
        *scriptargs.hydra_pair_overrides(args),
        f"dataset={args.dataset}",
        f"engine={engine}",
        f"out_root={out}",
        f"dataset.limit={args.prompts}",
        f"max_new_tokens={args.tokens}",
        f"dtype={args.dtype}",
        f"tree={args.shapes}",
        f"tree.budget={args.budgets}",
        "progress=false",
        "resume=false",
        f"+replay_cache={cache}",
        *args.overrides,
    ]
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"bench_engine: {engine} sweep failed:\n{r.stderr[-3000:]}")
    files = sorted(glob.glob(os.path.join(out, "**", "summary.csv"), recursive=True))
    expected = len(args.shapes.split(",")) * len(args.budgets.split(","))
    if len(files) != expected:
        sys.exit(f"bench_engine: {engine} sweep finished {len(files)} of {expected} jobs:\n{r.stderr[-3000:]}")
    summary = pd.concat([read_csv(f) for f in files], ignore_index=True)
    steps = pd.concat([read_csv(os.path.join(os.path.dirname(f), "steps.csv")) for f in files], ignore_index=True)
    return wall, summary, steps


def compare(live: pd.DataFrame, rep: pd.DataFrame, keys: list[str], cols: list[str]) -> pd.DataFrame:
    """Rows whose columns differ between the two engines."""
    cols = [c for c in cols if c in live and c in rep]
    m = live[keys + cols].merge(rep[keys + cols], on=keys, suffixes=("_live", "_replay"), how="outer")
    bad = pd.Series(False, index=m.index)
    for c in cols:
        a, b = m[f"{c}_live"], m[f"{c}_replay"]
        same = (a == b) | (a.isna() & b.isna())
        if a.dtype.kind == "f":
            same |= (a - b).abs() <= 1e-9
        bad |= ~same
    return m[bad]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    scriptargs.add_pair_args(ap)
    scriptargs.add_dataset_arg(ap)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--shapes", default="chain,binary,kary,topk_wide")
    ap.add_argument("--budgets", default="4,8,16")
    ap.add_argument("--dtype", default="float32", help="replay equals live only in float32 (see docs/engines.md)")
    ap.add_argument("--out", default=None, help="scratch folder (default: a new temp dir)")
    ap.add_argument("overrides", nargs="*", help="extra Hydra overrides of the study, e.g. batch_size=2")
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    out = args.out or tempfile.mkdtemp(prefix="bench_engine-")
    cache = os.path.join(out, "cache")

    live_wall, live, live_steps = sweep(os.path.join(out, "live"), "live", args, cache)
    cold_wall, cold, cold_steps = sweep(os.path.join(out, "replay_cold"), "replay", args, cache)
    warm_wall, warm, _ = sweep(os.path.join(out, "replay_warm"), "replay", args, cache)

    keys = ["tree", "tree_params", "budget"]
    alpha = [c for c in live if c.startswith("alpha_")]
    bad = compare(live, cold, keys, ACCEPT_COLS + alpha)
    bad_steps = compare(live_steps, cold_steps, keys + ["prompt_id", "step"], STEP_COLS[2:])
    n_cfg = len(live)
    print(
        f"configurations: {n_cfg} ({args.shapes} x {args.budgets}), {args.prompts} prompts, "
        f"{args.tokens} tokens, {args.dtype}; scratch {out}"
    )
    for name, df, wall in (
        ("live", live, live_wall),
        ("replay (cold cache)", cold, cold_wall),
        ("replay (warm cache)", warm, warm_wall),
    ):
        print(f"{name:20s} engine {df.wall_s.sum():8.2f} s   process wall {wall:8.2f} s")
    per_live = live.wall_s.mean()
    per_warm = warm.wall_s.mean()
    print(
        f"one live configuration: {per_live:.2f} s; one extra static configuration (warm replay): "
        f"{per_warm:.4f} s = {100 * per_warm / per_live:.2f}% of a live one "
        f"(process wall incl. Hydra per job: {warm_wall / n_cfg:.2f} s)"
    )
    if len(bad) or len(bad_steps):
        print(
            f"MISMATCH: {len(bad)} of {n_cfg} configurations and {len(bad_steps)} of {len(live_steps)} "
            f"steps differ between live and replay (bf16 rounding between the teacher-forced and the "
            f"tree forwards, see docs/engines.md):"
        )
        print(bad.to_string(max_cols=12, max_colwidth=20))
    else:
        print(f"acceptance columns identical: {n_cfg} configurations, {len(live_steps)} steps")
    ratio = live.wall_s.sum() / cold.wall_s.sum()
    print(
        f"live/replay time ratio: {ratio:.1f}x (engine seconds; cold replay cache, "
        f"process walls {live_wall / cold_wall:.1f}x)"
        f"{'' if not (len(bad) or len(bad_steps)) else ' -- acceptance columns DIFFER'}"
    )


if __name__ == "__main__":
    main()
