"""The study plan's sweeps through Hydra's launchers (scripts/sweeps.sh, scripts/run_plan.sh): the tiny
plan end to end through joblib's worker processes, one progress bar per sweep instead of a line per
job, then collected; a rerun skips every finished job; an unknown SPECBENCH_LAUNCHER (or a study
argument that is not a launcher setting) stops in one line, exit 2, before anything is written.
tests/test_slurm.py runs the same plan through SLURM."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import tiny_pair_overrides
from specbench.results import plan
from specbench.results.files import read_csv
from specbench.study.job import sweepjobs
from specbench.study.tools import eta
from test_resume import ROOT, env

PAIR_KEYS = ("pair=", "pair.draft.path=", "pair.target.path=")


def tiny_pair(dirs) -> list[str]:
    """The tiny local pair's overrides the tiny plan needs (its own set dtype, device, progress)."""
    return [o for o in tiny_pair_overrides(dirs) if o.startswith(PAIR_KEYS)]


def run_plan(out, *args, launcher="", script="scripts/run_plan.sh", timeout=300):
    e = dict(env(), SPECBENCH_OUT=str(out), SPECBENCH_LAUNCHER=launcher, PY=sys.executable)
    e["SPECBENCH_CACHE"] = str(Path(out).parent / "cache")
    return subprocess.run(["bash", script, *args], cwd=ROOT, env=e, capture_output=True, text=True, timeout=timeout)


def check_plan_ran(out, dirs, r) -> None:
    """Every tiny-plan job in its predicted folder, finished, and collected once."""
    ((_, sweep),) = plan.runs("tiny")
    names = sweepjobs.job_dirs(eta.plan_jobs(sweep, tiny_pair(dirs)))
    got = sorted(p.name for p in (Path(out) / sweep.folder).iterdir() if p.is_dir() and p.name[0] != ".")
    assert got == sorted(names), (got, r.stderr[-2000:])
    assert all(sweepjobs.finished(str(Path(out) / sweep.folder / n)) for n in names)
    summary = read_csv(os.path.join(out, "results", "summary.csv"))
    assert len(summary) == len(names) == 2 and summary.config_hash.is_unique
    assert set(summary.engine) == {"replay", "live"} and set(summary.tree) == {"binary"}


@pytest.fixture(scope="module")
def joblib_run(tiny_pair_dirs, tmp_path_factory):
    out = tmp_path_factory.mktemp("plan_joblib") / "out"
    r = run_plan(out, "tiny", *tiny_pair(tiny_pair_dirs), "hydra.launcher.n_jobs=2", launcher="joblib")
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    return out, r


def test_the_tiny_plan_runs_through_joblib_with_one_bar_and_is_collected(tiny_pair_dirs, joblib_run):
    out, r = joblib_run
    check_plan_ran(out, tiny_pair_dirs, r)
    assert "The study's plan (phases: tiny;" in r.stdout  # printed before it starts
    assert "sweep tiny: 100%" in r.stderr and "2/2" in r.stderr
    job_lines = re.findall(r"^specbench: (?:skip )?[0-9a-f]{12}\b.*$", r.stdout + r.stderr, re.M)
    assert not job_lines and "#0 :" not in r.stdout + r.stderr  # no line per job (the run's, Hydra's)
    assert (Path(out) / "step_times.csv").read_text().count("study: part tiny: sweep=reference") == 1


def test_a_rerun_skips_every_finished_job(tiny_pair_dirs, joblib_run):
    out, _ = joblib_run
    ((_, sweep),) = plan.runs("tiny")
    before = {p: p.stat().st_mtime_ns for p in (Path(out) / sweep.folder).rglob("summary.csv")}
    r = run_plan(out, "tiny", *tiny_pair(tiny_pair_dirs))  # the basic launcher, this time
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 (2 done)" in r.stdout and "2/2" in r.stderr
    assert {p: p.stat().st_mtime_ns for p in (Path(out) / sweep.folder).rglob("summary.csv")} == before


@pytest.mark.parametrize(
    "launcher, args, key",
    [
        ("pbs", [], "SPECBENCH_LAUNCHER=pbs"),
        ("", ["device=cuda"], "device=cuda"),
        ("slurm", ["hydra/launcher=joblib"], "hydra/launcher=joblib"),
    ],
)
def test_an_unknown_launcher_stops_in_one_line_before_anything_runs(tmp_path, launcher, args, key):
    for script, extra in (("scripts/full_study.sh", []), ("scripts/run_plan.sh", ["tiny"])):
        if script.endswith("run_plan.sh") and args:
            continue  # run_plan.sh passes any override on to its sweeps
        r = run_plan(tmp_path / "out", *extra, *args, launcher=launcher, script=script, timeout=60)
        assert r.returncode == 2, (script, r.stdout, r.stderr)
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and key in r.stderr
        assert "joblib" in r.stderr or "launcher" in r.stderr
        assert not (tmp_path / "out").exists()
