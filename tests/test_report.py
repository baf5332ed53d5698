"""python -m specbench.report: determinism, links, coverage, no torch, graceful degradation."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from make_results import make_results  # noqa: E402
from specbench.results import read_csv  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def run_report(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "specbench.report", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The fixture results rendered twice, in two separate folders."""
    src = make_results(str(tmp_path_factory.mktemp("src") / "results"))
    outs = []
    for name in ("a", "b"):
        d = tmp_path_factory.mktemp(name)
        shutil.copytree(src, d / "results")
        proc = run_report(d)
        assert proc.returncode == 0, proc.stderr
        outs.append(d)
    return outs


def test_report_is_byte_deterministic(built):
    a, b = built
    assert (a / "REPORT.md").read_bytes() == (b / "REPORT.md").read_bytes()
    figs_a = sorted(p.name for p in (a / "results" / "figures").glob("*.png"))
    figs_b = sorted(p.name for p in (b / "results" / "figures").glob("*.png"))
    assert figs_a == figs_b and len(figs_a) >= 8
    for name in figs_a:
        assert (a / "results" / "figures" / name).read_bytes() == (b / "results" / "figures" / name).read_bytes(), name


def test_every_linked_figure_exists(built):
    d = built[0]
    text = (d / "REPORT.md").read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(links) >= 8
    for link in links:
        assert (d / link).is_file(), link
    expected = {"tokens_per_step_vs_budget.png", "acceptance_rate_vs_budget.png", "alpha_by_depth.png",
                "heatmap_shape_budget.png", "acceptance_vector.png", "acceptance_by_dataset.png",
                "lossy_tradeoff.png", "attention_timing.png", "projected_speedup.png"}
    assert expected <= {Path(link).name for link in links}


def test_every_configuration_appears(built):
    d = built[0]
    text = (d / "REPORT.md").read_text()
    summary = read_csv(d / "results" / "summary.csv")
    for h in summary.config_hash:
        assert f"| {h} |" in text, h


def test_sections_and_definitions(built):
    text = (built[0] / "REPORT.md").read_text()
    for heading in ("## Method", "## Setup", "## Metric definitions", "## Results", "## Figures",
                    "## Tree attention", "## Projected speedup", "## Analysis", "## References"):
        assert heading in text
    assert "bonus token is **not** counted" in text and "bonus token **is** counted" in text
    for ref in ("Leviathan", "Chen", "SpecInfer", "Sequoia", "EAGLE-2", "Medusa", "Spec-Bench"):
        assert ref in text
    assert "Best shape by tokens_per_step" in text and "stops paying" in text
    assert "(lossy) changes acceptance_rate" in text and "accepts" in text
    assert "| synthetic |" in text  # environment.json rendered


def test_report_does_not_import_torch(tmp_path):
    make_results(str(tmp_path / "results"))
    code = ("import sys; from specbench import report; "
            f"rc = report.main(['--results', {str(tmp_path / 'results')!r}, '--out', {str(tmp_path / 'R.md')!r}]); "
            "assert rc == 0; print('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False"


def test_degrades_with_summary_only(tmp_path):
    src = tmp_path / "full"
    make_results(str(src))
    res = tmp_path / "results"
    res.mkdir()
    summary = read_csv(src / "summary.csv")
    keep = ["config_hash", "pair", "tree", "budget", "verify", "dataset", "acceptance_rate",
            "acceptance_length", "tokens_per_step"]
    summary.loc[0, "config_hash"] = "0123e4567890"  # looks like a float: must stay text
    summary[keep].to_csv(res / "summary.csv", index=False)
    proc = run_report(tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "REPORT.md").read_text()
    assert "attention.csv is absent" in text and "costs.csv is absent" in text
    assert "environment.json is absent" in text
    for h in summary.config_hash:
        assert f"| {h} |" in text
    for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert (tmp_path / link).is_file()


def test_missing_summary_is_one_line_error(tmp_path):
    proc = run_report(tmp_path)
    assert proc.returncode == 2
    assert "specbench.collect" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "REPORT.md").exists()


def test_notebook_executes(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    make_results(str(tmp_path / "results"))
    monkeypatch.setenv("SPECBENCH_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(ROOT / "notebooks" / "analysis.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "configurations" in text and "Best shape by tokens_per_step" in text
