"""A pair is its draft + target content (``identity.pair_id``), not its config name: two
different pairs under one ``pair=local`` name (a model folder changed in place) keep
their own Sequoia acceptance vectors and stay apart in collect and the report."""

import glob
import shutil

from conftest import report_text
from specbench.results.files import read_csv
from test_bad_input import one_line_error, written
from test_hydra import job_args, specbench


def calibrate(dirs, vec, out):
    r = specbench(
        "specbench.study.tools.calibrate",
        "--ranks",
        "4",
        "--out",
        str(vec),
        "pair=local",
        f"pair.draft.path={dirs[0]}",
        f"pair.target.path={dirs[1]}",
        "dtype=float32",
        "device=cpu",
        "progress=false",
        "dataset=smoke",
        "dataset.limit=2",
        "max_new_tokens=12",
        "verify=greedy",
        f"out_root={out}",
    )
    assert r.returncode == 0, r.stderr[-2000:]


def sequoia_job(dirs, out, vec):
    return specbench(*job_args(dirs, out, "tree=sequoia", "tree.budget=4", f"tree.vector={vec}", "engine=live"))


def test_a_vector_calibrated_on_one_local_pair_is_not_used_for_another_and_the_report_keeps_them_apart(
    tiny_pair_dirs, tmp_path
):
    dirs = (str(tmp_path / "draft"), str(tmp_path / "target"))
    for src, dst in zip(tiny_pair_dirs, dirs):
        shutil.copytree(src, dst)
    vec, out = tmp_path / "acceptance_vector.csv", tmp_path / "outputs"
    calibrate(dirs, vec, tmp_path / "cache")
    r = sequoia_job(dirs, out / "a", vec)
    assert r.returncode == 0, r.stderr[-2000:]

    shutil.copy(tiny_pair_dirs[0] + "/model.safetensors", dirs[1] + "/model.safetensors")  # another pair
    r = sequoia_job(dirs, out / "b", vec)
    line = one_line_error(r)
    assert "no calibrated acceptance vector for pair_id=" in line, line
    assert not written(out / "b")

    calibrate(dirs, vec, tmp_path / "cache")  # now both pairs have a vector, one name
    vectors = read_csv(vec)
    assert vectors.pair.nunique() == 1 and vectors.pair_id.nunique() == 2
    r = sequoia_job(dirs, out / "b", vec)
    assert r.returncode == 0, r.stderr[-2000:]

    res = tmp_path / "results"
    assert specbench("specbench.collect", str(out), "--out", str(res)).returncode == 0
    summary = read_csv(res / "summary.csv")
    assert summary.pair.nunique() == 1 and summary.pair_id.nunique() == 2
    assert sorted(summary.pair_id) == sorted(vectors.pair_id.unique())
    for row in summary.itertuples():  # each job read its own pair's vector
        assert f'"calib_pair_id": "{row.pair_id}"' in row.tree_params
    report = tmp_path / "REPORT.md"
    r = specbench("specbench.report", "--results", str(res), "--out", str(report))
    assert r.returncode == 0, r.stderr[-2000:]
    text = report_text(report)
    name = summary.pair.iloc[0]
    for pid in summary.pair_id:
        assert f"### {name} [{pid}] · smoke · greedy T=0" in text
    assert not glob.glob(str(tmp_path / "**" / ".tmp-*"), recursive=True)
