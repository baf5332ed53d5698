"""Resumable sweeps: a multirun killed with SIGKILL part-way, then rerun, ends with
exactly the rows of an uninterrupted run (nothing lost, nothing duplicated)."""

import glob
import os
import random
import signal
import subprocess
import sys
import time

import pandas as pd

import forkserver
from conftest import tiny_pair_overrides
from specbench.results.files import STEPS_FILE, read_csv
from test_hydra import JOB_MODULES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMING = ["wall_s", "tokens_per_s", "draft_s", "verify_s"]
RUN = ["run_id"]  # differs between any two runs of a config, by design
GRID = ["tree=chain,binary,kary", "tree.budget=2,4"]


def env() -> dict:
    # tiny models: one thread each (2 spin-waiting OpenMP threads on a busy 2-core box crawl)
    return dict(
        os.environ, HYDRA_FULL_ERROR="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1"
    )


def sweep_cmd(dirs, out, *extra) -> list[str]:
    return [
        sys.executable,
        "-m",
        "specbench.run",
        "-m",
        *tiny_pair_overrides(dirs),
        "dataset=smoke",
        "dataset.limit=2",
        "max_new_tokens=16",
        f"out_root={out}",
        *extra,
    ]


def run(cmd, timeout=900, fresh=False):
    """``cmd`` (``python -m ...``), forked from an interpreter that has imported a job's modules
    (``fresh``: in a fresh one, as the killed runs start, whose timing it gives)."""
    assert cmd[:2] == [sys.executable, "-m"], cmd
    if fresh:
        r = subprocess.run(cmd, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=timeout)
    else:
        r = forkserver.run(cmd[2:], cwd=ROOT, env=env(), timeout=timeout, preload=JOB_MODULES)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    return r


def summaries(out) -> list[str]:
    return sorted(glob.glob(os.path.join(str(out), "**", "summary.csv"), recursive=True))


def summary_rows(out) -> pd.DataFrame:
    """Every summary row under out (one per file), timing columns dropped, by config hash."""
    rows = pd.concat([read_csv(p) for p in summaries(out)], ignore_index=True)
    return rows.drop(columns=[c for c in TIMING + RUN if c in rows]).sort_values("config_hash").reset_index(drop=True)


def steps_rows(out) -> pd.DataFrame:
    """The steps.csv beside every finished summary, timing dropped."""
    frames = [read_csv(os.path.join(os.path.dirname(p), "steps.csv")) for p in summaries(out)]
    rows = pd.concat(frames, ignore_index=True).drop(columns=TIMING[2:] + RUN)
    return rows.sort_values(["config_hash", "prompt_id", "step"]).reset_index(drop=True)


def test_sigkilled_sweep_resumes_to_exactly_the_uninterrupted_rows(tiny_pair_dirs, tmp_path):
    ref, out = tmp_path / "ref", tmp_path / "out"
    run(sweep_cmd(tiny_pair_dirs, ref, "engine=live", *GRID))
    assert len(summaries(ref)) == 6

    proc = subprocess.Popen(
        sweep_cmd(tiny_pair_dirs, out, "engine=live", *GRID),
        cwd=ROOT,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 600
    while len(summaries(out)) < 2 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(summaries(out))
    assert 1 <= done_before < 6, f"the kill came too late or too early ({done_before} of 6 jobs done)"

    r = run(sweep_cmd(tiny_pair_dirs, out, "engine=live", *GRID))
    assert r.stdout.count("skip ") + r.stderr.count("skip ") >= done_before  # finished jobs not rerun
    got, want = summary_rows(out), summary_rows(ref)
    assert got.config_hash.is_unique and len(got) == 6  # nothing duplicated or lost
    pd.testing.assert_frame_equal(got, want)
    pd.testing.assert_frame_equal(steps_rows(out), steps_rows(ref))

    run(sweep_cmd(tiny_pair_dirs, out, "engine=live", *GRID))  # a third run adds nothing
    assert len(summaries(out)) == 6


def collected(out, res) -> tuple[pd.DataFrame, pd.DataFrame]:
    """collect's summary and steps (timing and run ids aside)."""
    run([sys.executable, "-m", "specbench.collect", str(out), "--out", str(res), "--fresh"])
    summary = read_csv(os.path.join(res, "summary.csv"))
    steps = read_csv(os.path.join(res, STEPS_FILE))
    return (summary.drop(columns=[c for c in TIMING + RUN if c in summary]), steps.drop(columns=TIMING[2:] + RUN))


def test_random_sigkill_points_then_rerun_and_collect_equal_an_uninterrupted_run(tiny_pair_dirs, tmp_path):
    """Property: whatever the kill points (seeded, printed on failure), rerun + collect = no kill."""
    grid = ["engine=live", "tree=chain,binary", "tree.budget=2,4", "max_new_tokens=8"]
    t0 = time.time()
    run(sweep_cmd(tiny_pair_dirs, tmp_path / "ref", *grid), fresh=True)  # timed as the killed runs start
    wall = time.time() - t0
    rng = random.Random(int(os.environ.get("SPECBENCH_KILL_SEED", "14")))
    out, kills = tmp_path / "out", []
    for _ in range(3):
        kills.append(round(rng.uniform(0.2, wall), 2))
        proc = subprocess.Popen(
            sweep_cmd(tiny_pair_dirs, out, *grid),
            cwd=ROOT,
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(kills[-1])
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    run(sweep_cmd(tiny_pair_dirs, out, *grid))
    want, got = collected(tmp_path / "ref", tmp_path / "ref_res"), collected(out, tmp_path / "res")
    for w, g in zip(want, got):
        pd.testing.assert_frame_equal(g, w, obj=f"collected rows after kills at {kills} s")
