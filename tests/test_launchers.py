"""The same 4-job sweep gives the same summary rows with Hydra's basic launcher, the joblib
launcher (2 parallel processes) and submitit_local (the SLURM launcher's local twin)."""

import os
from pathlib import Path

import pandas as pd
import pytest

from test_resume import run, summaries, summary_rows, sweep_cmd

GRID = ["tree=chain,binary", "tree.budget=2,4", "engine=live"]
LAUNCHERS = {
    "basic": [],
    "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
    "submitit_local": ["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10"],
}


@pytest.fixture(scope="module")
def basic_rows(tiny_pair_dirs, tmp_path_factory):
    out = tmp_path_factory.mktemp("basic")
    run(sweep_cmd(tiny_pair_dirs, out, *GRID))
    assert len(summaries(out)) == 4
    return summary_rows(out)


@pytest.mark.parametrize("launcher", ["joblib", "submitit_local"])
def test_launchers_give_the_basic_launchers_rows(tiny_pair_dirs, tmp_path, basic_rows, launcher):
    run(sweep_cmd(tiny_pair_dirs, tmp_path, *GRID, *LAUNCHERS[launcher]))
    assert len(summaries(tmp_path)) == 4
    pd.testing.assert_frame_equal(summary_rows(tmp_path), basic_rows)


def test_slurm_preset_composes(tiny_pair_dirs, tmp_path):
    import sys

    # forked from the server the sweeps above started; run asserts exit 0
    cmd = ["specbench.run", "hydra/launcher=slurm", "hydra.launcher.partition=gpu", "--cfg", "hydra"]
    r = run([sys.executable, "-m", *cmd, "--package", "hydra.launcher"], timeout=300)
    assert "SlurmLauncher" in r.stdout and "partition: gpu" in r.stdout


def test_replay_in_parallel_workers_gives_the_live_acceptance_columns(tiny_pair_dirs, tmp_path, basic_rows):
    """engine=replay under joblib: two processes share the on-disk cache (atomic writes)."""
    grid = [a for a in GRID if not a.startswith("engine=")] + ["engine=replay"]
    run(sweep_cmd(tiny_pair_dirs, tmp_path, *grid, *LAUNCHERS["joblib"]))
    rep = summary_rows(tmp_path)
    assert set(rep.engine) == {"replay"}
    cols = [
        "tree",
        "budget",
        "n_steps",
        "new_tokens",
        "acceptance_rate",
        "acceptance_length",
        "tokens_per_step",
        "accept_hist",
        "alpha_1",
        "alpha_2",
    ]
    key = ["tree", "budget"]
    pd.testing.assert_frame_equal(
        rep[cols].sort_values(key).reset_index(drop=True), basic_rows[cols].sort_values(key).reset_index(drop=True)
    )
    cache = (
        os.path.join(os.environ["SPECBENCH_CACHE"], "replay")
        if os.environ.get("SPECBENCH_CACHE")
        else tmp_path / ".cache" / "replay"
    )
    assert list(Path(cache).rglob("*.json"))  # c and ranks were cached
