"""`bash run_all.sh` end to end in a fresh clone (#52 item 6): every step of the default run on the
tiny local pair (SPECBENCH_PROFILE=tiny), each writing its file, REPORT.md regenerated, a second run
a no-op; the real profile's plan printed without running it; bad settings refused in one line.  llama.cpp's
step runs on the tiny GGUF (SPECBENCH_TINY_GGUF) with the built llama.cpp, and is one skip line where none is built."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time

import pandas as pd
import pytest

from conftest import ROOT

STEPS = (
    "set-up",
    "the machine measured",
    "tiny: the reference rows",
    "the plan",
    "forward costs",
    "the acceptance-sample check",
    "the speed benchmark",
    "llama.cpp's benchmark for the main pair",
    "tree-attention benchmark",
    "the run's record",
    "each step's ceiling",
    "the report (",
)
FILES = (
    "machine.json",
    "plan.json",
    "results/costs.csv",
    "results/acceptance_check.csv",
    "results/speed.csv",
    "results/attention.csv",
    "results/summary.csv",
    "results/default_run.json",
    "results/run_times.csv",
    "REPORT.md",
)


def _env_stamp_matches() -> bool:
    """setup.sh leaves the shared .venv alone only while its stamp matches (else it would pip install)."""
    venv = os.path.join(ROOT, ".venv")
    try:
        want = open(os.path.join(venv, ".specbench-env.sha256")).read().strip()
    except OSError:
        return False
    text = b"".join(open(os.path.join(ROOT, f), "rb").read() for f in ("requirements.txt", "pyproject.toml"))
    ver = subprocess.run([os.path.join(venv, "bin", "python"), "-V"], capture_output=True, text=True).stdout
    return hashlib.sha256(text + ver.encode()).hexdigest() == want


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    if not _env_stamp_matches():
        pytest.skip("the .venv's set-up stamp does not match: run bash scripts/setup.sh first")
    d = tmp_path_factory.mktemp("clone") / "specbench"
    subprocess.run(["git", "clone", "-q", ROOT, str(d)], check=True, timeout=300)
    os.symlink(os.path.join(ROOT, ".venv"), d / ".venv")
    return d


def run_all(clone, out, extra: dict, *args: str) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        SPECBENCH_OUT=str(out),
        SPECBENCH_CACHE=str(out.parent / "cache"),
        SPECBENCH_SKIP_LLAMACPP="1",  # set-up would build llama.cpp into this fresh cache (minutes): no step needs it
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
        **extra,
    )
    return subprocess.run(
        ["bash", "run_all.sh", *args], cwd=clone, env=env, capture_output=True, text=True, timeout=900
    )


def tiny_llamacpp(root) -> dict:
    """SPECBENCH_TINY_GGUF for the tiny run, and this machine's llama.cpp build linked into the run's fresh cache
    (``root``/cache: set-up does not build it there); {} where llama.cpp is not built (its step then skips)."""
    from specbench.inputs import llamacpp, tinygguf

    if llamacpp.unavailable():
        return {}
    (root / "cache").mkdir(exist_ok=True)
    os.symlink(llamacpp.home().parent, root / "cache" / "llama.cpp")
    files = [str(tinygguf.write(root / "gguf" / role / "model.gguf")) for role in ("draft", "target")]
    return {"SPECBENCH_TINY_GGUF": ":".join(files)}


@pytest.fixture(scope="module")
def tiny_runs(clone, tiny_pair_dirs, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "tiny"
    extra = {"SPECBENCH_PROFILE": "tiny", "SPECBENCH_TINY_PAIR": ":".join(tiny_pair_dirs), **tiny_llamacpp(out.parent)}
    t0 = time.time()
    first = run_all(clone, out, extra)
    took = time.time() - t0
    assert first.returncode == 0, (first.stdout[-3000:], first.stderr[-3000:])
    stamps = {f: os.path.getmtime(out / f) for f in FILES}
    second = run_all(clone, out, extra)
    assert second.returncode == 0, (second.stdout[-3000:], second.stderr[-3000:])
    print(f"tiny run_all.sh: {took:.0f} s")
    return out, first.stdout, second.stdout, stamps


def test_every_default_step_runs_on_the_tiny_pair_and_writes_its_file(tiny_runs, clone):
    out, log, _, _ = tiny_runs
    times = pd.read_csv(out / "step_times.csv")
    for name in STEPS:
        assert f"] {name}" in log, name
        assert times.step.str.startswith(name).any(), name
    for f in FILES:
        assert (out / f).stat().st_size > 0, f
    assert "The last default run (`bash run_all.sh`, tiny profile" in (out / "REPORT.md").read_text()
    check = pd.read_csv(out / "results" / "acceptance_check.csv")
    assert len(check) and check.identical.all()
    assert "acceptance-sample check: PASS" in log and "total ETA" in log
    recorded = pd.read_csv(out / "results" / "run_times.csv")  # the report's own time, recorded after it
    assert recorded.step.str.startswith("the report (").sum() == 1 and "done: see" in log
    speed = pd.read_csv(out / "results" / "speed.csv")
    assert {"plain", "chain N=2", "binary N=2"} <= set(speed.candidate)
    from specbench.inputs import llamacpp

    if llamacpp.unavailable():  # its step is one line saying why, and the run goes on
        assert "llama.cpp's benchmark: skipped: " in log
    else:  # llama.cpp's benchmark and cost curve on the tiny GGUF, beside specbench's rows
        mine = speed[speed.engine.astype(str) == "llamacpp"]
        assert {"plain", "plain (A/A)", "draft n_max=2 p_min=0", "draft n_max=2 p_min=0 (twin)"} == set(mine.candidate)
        costs = pd.read_csv(out / "results" / "costs.csv")
        assert (costs.engine.astype(str) == "llamacpp").any()
    # the clone's own files are untouched: everything went to SPECBENCH_OUT
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
    assert [ln for ln in status.splitlines() if not ln.endswith(".venv")] == []


def test_a_second_run_is_a_no_op_for_finished_steps(tiny_runs):
    out, _, again, stamps = tiny_runs
    assert "kept the plan of an earlier run" in again
    assert again.count("already done") >= 8
    for f in FILES[2:]:
        assert os.path.getmtime(out / f) == stamps[f], f


def test_the_real_plan_prints_without_running_anything(clone, tmp_path):
    out = tmp_path / "default"
    r = run_all(clone, out, {"SPECBENCH_MINUTES": "45"}, "--plan-only")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "plan (real profile" in r.stdout and "total ETA" in r.stdout and "covers:" in r.stdout
    for step in ("costs", "recheck", "speed", "attention", "report"):
        assert f"  {step} " in r.stdout, step
    assert (out / "plan.preview.json").is_file() and not (out / "plan.json").exists()
    assert not (out / "costs.done").exists()
    assert (out / "step_times.csv").read_text().count("\n") == 1  # a preview times no step: its header alone


def test_a_run_to_resume_under_another_budget_is_refused_in_one_line(tiny_runs, clone, tiny_pair_dirs):
    out = tiny_runs[0]
    before = (out / "step_times.csv").read_text()
    extra = {"SPECBENCH_PROFILE": "tiny", "SPECBENCH_TINY_PAIR": ":".join(tiny_pair_dirs), "SPECBENCH_MINUTES": "60"}
    r = run_all(clone, out, extra)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "SPECBENCH_MINUTES=60" in r.stderr and "SPECBENCH_MINUTES=45" in r.stderr and f"rm -r {out}" in r.stderr
    assert (out / "step_times.csv").read_text() == before  # nothing ran


@pytest.mark.parametrize(
    "extra, key",
    [
        ({"SPECBENCH_MINUTES": "0"}, "SPECBENCH_MINUTES"),
        ({"SPECBENCH_PROFILE": "huge"}, "SPECBENCH_PROFILE"),
        ({"SPECBENCH_PROFILE": "tiny"}, "SPECBENCH_TINY_PAIR"),
    ],
)
def test_bad_settings_are_one_line_and_run_nothing(clone, tmp_path, extra, key):
    out = tmp_path / "o"
    r = run_all(clone, out, {"SPECBENCH_TINY_PAIR": "", **extra})
    assert r.returncode == 2 and key in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()
