"""Issue 24: two sweeps into one out_root never share a folder, and after random interleavings
and random kills, a rerun + collect gives every job's rows exactly once, equal to a clean run's
(timing and run ids aside).  Seeded (SPECBENCH_CONCURRENT_SEEDS="1,2,3"), printed on failure."""

import os
import random
import signal
import subprocess
import time

import pandas as pd

from specbench.results.files import STEPS_FILE, read_csv
from specbench.study.job.collect import main as collect_main
from specbench.study.job.collect import scan
from test_resume import ROOT, RUN, TIMING, env, run, sweep_cmd

A = ["tree=chain,binary", "tree.budget=2"]
B = ["tree=binary,kary", "tree.budget=2"]  # binary/2 is in both sweeps
COMMON = ["engine=live", "max_new_tokens=6"]


def start(dirs, out, grid, delay: float):
    time.sleep(delay)
    return subprocess.Popen(
        sweep_cmd(dirs, out, *COMMON, *grid),
        cwd=ROOT,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def interleave(dirs, out, rng: random.Random | None) -> list:
    """Both sweeps started a random delay apart; each killed at a random time or left to finish
    (``rng`` None: started together, both finish)."""
    plan = [
        (grid, rng.uniform(0, 1.0), rng.choice([None, rng.uniform(0.5, 12)])) if rng else (grid, 0.0, None)
        for grid in (A, B)
    ]
    procs = [start(dirs, out, grid, delay) for grid, delay, _ in plan]
    t0 = time.time()
    for proc, (_, _, kill) in sorted(zip(procs, plan), key=lambda pk: pk[1][2] or 1e9):
        if kill is not None:
            time.sleep(max(0.0, kill - (time.time() - t0)))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=600)
    return [(round(d, 2), k and round(k, 2)) for _, d, k in plan]


def collected(out, res) -> tuple[pd.DataFrame, pd.DataFrame]:
    """collect's summary and steps (in this process; timing and run ids aside)."""
    collect_main([str(out), "--out", str(res), "--fresh"])
    summary, steps = read_csv(res / "summary.csv"), read_csv(res / STEPS_FILE)
    return (
        summary.drop(columns=[c for c in TIMING + RUN if c in summary]),
        steps.drop(columns=[c for c in TIMING + RUN if c in steps]),
    )


def test_two_sweeps_interleaved_and_killed_then_rerun_collect_each_job_once(tiny_pair_dirs, tmp_path):
    ref = tmp_path / "ref"
    run(sweep_cmd(tiny_pair_dirs, ref, *COMMON, "tree=chain,binary,kary", "tree.budget=2"))
    want = collected(ref, tmp_path / "ref_res")
    seeds = [int(s) for s in os.environ.get("SPECBENCH_CONCURRENT_SEEDS", "1,2").split(",")]
    for seed in seeds:
        rng, out = random.Random(seed), tmp_path / f"out{seed}"
        plan = interleave(tiny_pair_dirs, out, rng)
        interleave(tiny_pair_dirs, out, None)  # rerun both, concurrently, to the end
        sweeps = os.listdir(out / "multirun")
        assert 2 <= len(sweeps) <= 4 and len({s[-6:] for s in sweeps}) == len(sweeps), sweeps  # one folder per command
        s = scan([str(out)])
        assert not [d for reason, d, _ in s.skipped if reason == "mixed"], f"a folder shared (seed {seed}, {plan})"
        got = collected(out, tmp_path / f"res{seed}")
        for w, g in zip(want, got):
            pd.testing.assert_frame_equal(g, w, obj=f"seed {seed}: starts/kills {plan}")
