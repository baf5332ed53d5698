"""The command-line contract: a real tiny multirun, collect, and one-line errors."""

import glob
import os

import pandas as pd
import pytest

import forkserver
from conftest import tiny_pair_overrides
from specbench.results.files import OUTPUTS_FILE, STEPS_FILE, read_csv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


JOB_MODULES = ("specbench.study.job.run", "specbench.study.job.collect")  # what a job's interpreter imports


def specbench(*args, cwd=ROOT):
    """``python -m ARGS`` (forked from an interpreter that has imported a job's modules: forkserver.py)."""
    env = dict(os.environ, HYDRA_FULL_ERROR="0", TOKENIZERS_PARALLELISM="false")
    return forkserver.run(args, cwd=cwd, env=env, timeout=600, preload=JOB_MODULES)


def job_args(dirs, out, *extra):
    flags = [a for a in extra if a.startswith("-")]
    extra = [a for a in extra if not a.startswith("-")]
    return [
        "specbench.run",
        *flags,
        *tiny_pair_overrides(dirs),
        "dataset=smoke",
        "dataset.limit=2",
        "max_new_tokens=12",
        f"out_root={out}",
        *extra,
    ]


def test_multirun_four_jobs_then_collect_twice(tiny_pair_dirs, tmp_path):
    out = tmp_path / "outputs"
    r = specbench(*job_args(tiny_pair_dirs, out, "-m", "tree=chain,binary", "tree.budget=2,4", "engine=live"))
    assert r.returncode == 0, r.stderr[-3000:]
    summaries = glob.glob(str(out / "**" / "summary.csv"), recursive=True)
    assert len(summaries) == 4
    rows = pd.concat([read_csv(s) for s in summaries])
    assert rows.config_hash.nunique() == 4
    assert set(zip(rows.tree, rows.budget)) == {("chain", 2), ("chain", 4), ("binary", 2), ("binary", 4)}
    assert ((rows.acceptance_rate >= 0) & (rows.acceptance_rate <= 1)).all()
    res = tmp_path / "results"
    files = []
    for _ in range(2):
        r = specbench("specbench.collect", str(out), "--out", str(res))
        assert r.returncode == 0, r.stderr[-2000:]
        files.append(
            [(res / f).read_bytes() for f in ("summary.csv", STEPS_FILE, OUTPUTS_FILE)]
        )  # gzip: same rows, same bytes
    assert files[0] == files[1]
    merged = read_csv(res / "summary.csv")
    assert len(merged) == 4 and merged.config_hash.is_unique


BAD = {
    "unknown tree group": (["tree=bnary"], "Valid:"),
    "unknown tree name": (["tree.name=bnary"], "Valid:"),
    "budget zero": (["tree.budget=0"], "budget"),
    "unknown mode": (["verify.name=gredy"], "Valid:"),
    "empty dataset": (["dataset.limit=0"], "dataset.limit=0"),
    "top-k siblings at draft temperature 0": (["verify.draft_temperature=0"], "draft_temperature"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_writes_nothing(tiny_pair_dirs, tmp_path, case):
    extra, needle = BAD[case]
    out = tmp_path / "outputs"
    r = specbench(*job_args(tiny_pair_dirs, out, *extra))
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("specbench: error:"), r.stderr[-2000:]
    assert needle in lines[-1]
    assert not glob.glob(str(out / "**" / "*.csv"), recursive=True)


def test_tokenizer_mismatch_is_one_line(tiny_pair_dirs, tiny_other_tokenizer_dir, tmp_path):
    out = tmp_path / "outputs"
    r = specbench(*job_args(tiny_pair_dirs, out, f"pair.draft.path={tiny_other_tokenizer_dir}"))
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("specbench: error:") and "tokenizer" in last
    assert not glob.glob(str(out / "**" / "*.csv"), recursive=True)
