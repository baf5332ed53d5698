"""A real SLURM run: a one-node controller + daemon on localhost (scripts/slurm_local.sh), a 4-job
tiny-model sweep through hydra/launcher=submitit_slurm, collected rows equal to the basic launcher's,
and the study plan's tiny phase end to end (SPECBENCH_LAUNCHER=slurm bash scripts/run_plan.sh tiny).
Skipped, with the one-line reason, where the cluster cannot be set up (not root, no apt, ...)."""

import os
import subprocess
import sys

import pandas as pd
import pytest

from specbench.results.files import read_csv
from test_launchers import GRID, basic_rows  # noqa: F401  (fixture)
from test_resume import ROOT, RUN, TIMING, run, sweep_cmd

pytestmark = pytest.mark.slurm
SCRIPT = os.path.join(ROOT, "scripts", "slurm_local.sh")


@pytest.fixture(scope="module")
def slurm_conf(tmp_path_factory):
    d = tmp_path_factory.mktemp("slurm")
    r = subprocess.run(["bash", SCRIPT, "start", str(d)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        reason = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        pytest.skip(f"no local SLURM cluster: {reason}")
    conf = str(d / "slurm.conf")
    os.environ["SLURM_CONF"] = conf
    try:
        yield conf
    finally:
        os.environ.pop("SLURM_CONF", None)
        subprocess.run(["bash", SCRIPT, "stop", str(d)], timeout=60)


def collected(out, res) -> pd.DataFrame:
    run([sys.executable, "-m", "specbench.collect", str(out), "--out", str(res)])
    rows = read_csv(os.path.join(res, "summary.csv"))
    return rows.drop(columns=[c for c in TIMING + RUN if c in rows]).sort_values("config_hash").reset_index(drop=True)


def test_submitit_slurm_sweep_gives_the_basic_launchers_rows(tiny_pair_dirs, tmp_path, slurm_conf, basic_rows):
    launcher = [
        "hydra/launcher=submitit_slurm",
        "hydra.launcher.timeout_min=5",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.mem_gb=1",
    ]
    r = run(sweep_cmd(tiny_pair_dirs, tmp_path / "out", *GRID, *launcher))
    assert len(list((tmp_path / "out").rglob("summary.csv"))) == 4, r.stderr[-2000:]
    assert list((tmp_path / "out").rglob("*_submission.sh"))  # it really went through sbatch
    pd.testing.assert_frame_equal(collected(tmp_path / "out", tmp_path / "res"), basic_rows)


def test_the_tiny_plan_runs_through_slurm_and_is_collected(tiny_pair_dirs, tmp_path, slurm_conf):
    """SPECBENCH_LAUNCHER=slurm: scripts/run_plan.sh submits the plan's sweep as a SLURM array
    (hydra/launcher=slurm, the preset sized down for this one node), then collects."""
    from test_plan_launchers import check_plan_ran, run_plan, tiny_pair

    sized = ["hydra.launcher.timeout_min=5", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1"]
    r = run_plan(tmp_path / "out", "tiny", *tiny_pair(tiny_pair_dirs), *sized, launcher="slurm")
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    assert list((tmp_path / "out").rglob("*_submission.sh"))  # it really went through sbatch
    check_plan_ran(tmp_path / "out", tiny_pair_dirs, r)
    assert "sweep tiny: 100%" in r.stderr
