"""Issue 24: a full or read-only disk, an offline hub and a failing benchmark run: one line naming
the path or key, a non-zero exit status, and no 0-byte, partial or replaced file."""

import glob
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from mounts import fill, ro_mount, tiny_tmpfs  # noqa: F401  (fixtures)
from test_bad_input import one_line_error, written
from test_hydra import job_args, specbench

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["-m", "tree=chain,binary,kary,topk_wide", "tree.budget=4,8", "max_new_tokens=8", "dataset.limit=4"]


def result_files(root) -> list[Path]:
    """Every file under root but Hydra's job logs (a log line a full disk refused is not a result)."""
    return [p for p in Path(root).rglob("*") if p.is_file() and p.suffix != ".log"]


def assert_nothing_half_written(root) -> None:
    files = result_files(root)
    assert not [p for p in files if p.name.startswith(".tmp-")], "a temp file was left behind"
    assert not [p for p in files if p.stat().st_size == 0 and p.name != ".fill"], "a 0-byte file was left"
    for p in files:
        if p.suffix in (".csv", ".jsonl", ".yaml", ".txt") and p.name != ".fill":
            assert p.read_bytes().endswith(b"\n"), f"{p} is partial"


def test_a_sweep_onto_a_filling_disk_runs_every_job_and_counts_the_failures(tiny_pair_dirs, tiny_tmpfs, tmp_path):
    fill(tiny_tmpfs, leave_pages=24)  # room for a few of the 8 jobs
    r = specbench(*job_args(tiny_pair_dirs, tiny_tmpfs, *SWEEP))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("specbench: ") and " of 8 jobs failed" in last, last
    k = int(last.split()[1])
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("specbench: error:")]
    assert len(errors) == k >= 1 and all("No space left on device" in e for e in errors)
    done = glob.glob(str(tiny_tmpfs / "**" / "summary.csv"), recursive=True)
    assert len(done) == 8 - k >= 1  # the later jobs still ran
    assert_nothing_half_written(tiny_tmpfs)
    c = specbench("specbench.collect", str(tiny_tmpfs), "--out", str(tmp_path / "res"))
    assert c.returncode == 0, c.stderr[-2000:]
    assert len(pd.read_csv(tmp_path / "res" / "summary.csv")) == 8 - k
    listed = sum(int(ln.split()[2]) for ln in c.stdout.splitlines() if ln.startswith("specbench: skipped"))
    assert listed == k  # every failed folder listed


def run_filling(tiny_pair_dirs, mnt, *extra) -> tuple[int, str]:
    """A job (or sweep) onto ``mnt``, its disk filled up once a job has started (after its
    checks): nothing of that job can be written.  Returns (exit status, stderr)."""
    args = job_args(tiny_pair_dirs, mnt, "max_new_tokens=4", *extra)
    env = dict(os.environ, HYDRA_FULL_ERROR="0", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.Popen(
        [sys.executable, "-m", *args], cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.time() + 120
    while not list(mnt.rglob("overrides.yaml")) and time.time() < deadline:  # the job has started
        time.sleep(0.01)
    fill(mnt)
    _, err = proc.communicate(timeout=300)
    assert "Traceback" not in err, err[-3000:]
    return proc.returncode, err


def test_a_multirun_whose_error_txt_cannot_be_written_still_exits_nonzero(tiny_pair_dirs, tiny_tmpfs):
    code, err = run_filling(tiny_pair_dirs, tiny_tmpfs, "-m", "tree=chain")
    lines = err.strip().splitlines()
    assert code == 1 and "error.txt could not be written" in lines[-2], err[-3000:]
    assert lines[-1].startswith("specbench: 1 of 1 jobs failed") and "1 of them could not write" in lines[-1]
    assert not glob.glob(str(tiny_tmpfs / "**" / "error.txt"), recursive=True)
    assert_nothing_half_written(tiny_tmpfs)


def test_a_joblib_worker_that_cannot_write_error_txt_is_counted_and_listed(tiny_pair_dirs, tiny_tmpfs):
    """The worker's FAILED list is in another process: the sweep folder says which job failed."""
    code, err = run_filling(
        tiny_pair_dirs, tiny_tmpfs, "-m", "tree=chain,binary", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"
    )
    last = err.strip().splitlines()[-1]
    assert code == 1 and last.startswith("specbench: 2 of 2 jobs failed"), err[-3000:]
    jobs = [p for p in next(tiny_tmpfs.glob("multirun/*")).iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(jobs) == 2 and all(str(j) in last.partition("could not write")[2] for j in jobs), last
    assert_nothing_half_written(tiny_tmpfs)


def test_a_single_run_on_a_disk_that_fills_up_fails_in_one_line_though_run_log_is_empty(tiny_pair_dirs, tiny_tmpfs):
    """Hydra's run.log cannot take a line on the full disk: the failure still reaches stderr."""
    code, err = run_filling(tiny_pair_dirs, tiny_tmpfs, f"hydra.run.dir={tiny_tmpfs / 'run'}")
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code != 0 and lines[-1].startswith("specbench: error: "), err[-3000:]
    assert "No space left on device" in lines[-1] and "error.txt could not be written" in lines[-1], lines[-1]
    log = tiny_tmpfs / "run" / "run.log"
    # The log may hold lines written between the job's start and the fill (a race the test does not
    # control); what it cannot hold is the failure, which therefore had to reach stderr.
    assert not log.exists() or "No space left on device" not in log.read_text(errors="replace")
    assert not written(tiny_tmpfs) and not (tiny_tmpfs / "run" / "error.txt").exists()


@pytest.mark.parametrize("where", ["out_root on a full disk", "hydra.run.dir read-only", "out_root read-only"])
def test_a_folder_that_cannot_be_written_is_one_line_before_anything_runs(tiny_pair_dirs, tmp_path, request, where):
    if "full" in where:
        mnt = request.getfixturevalue("tiny_tmpfs")
        fill(mnt)
    else:
        mnt = request.getfixturevalue("ro_mount")
    key = "hydra.run.dir" if "hydra" in where else "out_root"
    args = [
        a for a in job_args(tiny_pair_dirs, mnt / "out") if not (key == "hydra.run.dir" and a.startswith("out_root"))
    ]
    r = specbench(*args, *([f"hydra.run.dir={mnt / 'run'}", f"out_root={tmp_path / 'o'}"] if key != "out_root" else []))
    line = one_line_error(r)
    assert line.startswith(f"specbench: error: {key}=") and str(mnt) in line, line
    assert ("No space left on device" if "full" in where else "is not writable") in line
    assert not written(mnt) and not (tmp_path / "o").exists()
    assert_nothing_half_written(mnt)


@pytest.mark.parametrize("how", ["HF_HUB_OFFLINE=1", "hub unreachable"])
def test_a_hub_model_offline_fails_fast_naming_the_key(tiny_pair_dirs, tmp_path, how):
    env = dict(os.environ, HYDRA_FULL_ERROR="0", TOKENIZERS_PARALLELISM="false", HF_HOME=str(tmp_path / "hf"))
    env.update({"HF_HUB_OFFLINE": "1"} if how.startswith("HF") else {"HF_ENDPOINT": "http://127.0.0.1:9"})
    args = job_args(tiny_pair_dirs, tmp_path / "out", "pair.target.source=hub", "+pair.target.id=nobody/nothing")
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    line = one_line_error(r)
    assert time.time() - t0 < 60 and "pair.target.id=nobody/nothing" in line and "cache" in line, line
    assert "loaded local model" not in r.stdout + r.stderr and not written(tmp_path / "out")


# --------------------------------------------------------------------------
# the attention benchmark
# --------------------------------------------------------------------------
GOOD = pd.DataFrame(
    [
        {
            "level": "kernel",
            "batch": 1,
            "kv_len": 16,
            "tree_size": 1,
            "shape": "chain",
            "dtype": "float32",
            "impl": "fused",
            "note": "",
            "median_s": 1e-5,
        }
    ]
)


@pytest.mark.parametrize(
    "bad,needle",
    [
        ("repeats=0", "repeats=0: must be an integer >= 1"),
        ("grid=nope", "grid='nope' is unknown"),
        ("max_seconds=0", "max_seconds=0"),
    ],
)
def test_attention_bench_bad_values_are_one_line_and_keep_the_csv(tmp_path, bad, needle):
    csv = tmp_path / "attention.csv"
    GOOD.to_csv(csv, index=False)
    before = csv.read_bytes()
    r = specbench(
        "specbench.attention_bench",
        "grid=tiny",
        f"out_csv={csv}",
        f"fig_dir={tmp_path / 'fig'}",
        "dims={heads: 2, kv_heads: 1, head_dim: 8}",
        bad,
    )
    line = one_line_error(r)
    assert r.returncode == 2 and needle in line, line
    assert csv.read_bytes() == before and not (tmp_path / "fig").exists()


def test_a_failed_measurement_never_replaces_a_good_row():
    from specbench.attention.bench import KEY
    from specbench.attention.config import all_failed, merge_rows

    bad = GOOD.assign(note="failed: IndexError: x", median_s=float("nan"))
    other = GOOD.assign(tree_size=4, note="failed: IndexError: x")
    merged = merge_rows(GOOD, pd.concat([bad, other], ignore_index=True), KEY)
    assert len(merged) == 2 and merged[merged.tree_size == 1].note.iloc[0] == ""  # the good row stays
    assert merged[merged.tree_size == 4].note.iloc[0].startswith("failed")  # a new point is recorded
    better = GOOD.assign(median_s=2e-5)
    assert merge_rows(bad, better, KEY).median_s.tolist() == [2e-5]  # good replaces failed
    assert all_failed(bad).startswith("all 1 measurements failed") and all_failed(better) is None


def test_an_attention_run_where_everything_fails_exits_nonzero_and_writes_nothing(tmp_path, monkeypatch):
    from hydra import compose, initialize_config_dir

    from specbench.attention import bench as ab

    csv = tmp_path / "attention.csv"
    GOOD.to_csv(csv, index=False)
    before = csv.read_bytes()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "attention_bench",
            overrides=[
                "grid=tiny",
                f"out_csv={csv}",
                f"fig_dir={tmp_path / 'f'}",
                "dims={heads: 2, kv_heads: 1, head_dim: 8}",
                "bandwidth_mb=1",
                "matmul_n=8",
                "progress=false",
            ],
        )
    monkeypatch.setattr(
        ab,
        "bench_point",
        lambda cfg, point, impls, dims, limits: [
            {
                "level": "kernel",
                "batch": point[0],
                "kv_len": point[1],
                "tree_size": point[2],
                "shape": point[3],
                "dtype": point[4],
                "impl": i,
                "note": "failed: IndexError: list index out of range",
            }
            for i in impls
        ],
    )
    with pytest.raises(RuntimeError, match="measurements failed"):
        ab.main_run(cfg)
    assert csv.read_bytes() == before and not (tmp_path / "f").exists()


def test_readme_and_config_comments_name_files_that_exist():
    import re

    texts = {
        p: p.read_text()
        for p in [
            ROOT / "README.md",
            *ROOT.glob("docs/*.md"),
            *ROOT.glob("conf/**/*.yaml"),
            *ROOT.glob("specbench/**/*.py"),
            *ROOT.glob("tests/*.py"),
        ]
        if p.name != "test_faults.py"
    }
    for path, text in texts.items():
        for ref in re.findall(r"specbench/[\w/]+\.(?:py|jsonl)", text):
            assert (ROOT / ref).exists(), f"{path.name} names {ref}, which does not exist"
        if not (ROOT / "DESIGN.md").exists():
            assert "DESIGN.md" not in text, f"{path.name} cites DESIGN.md, which is not in the project"


# --------------------------------------------------------------------------
# the report on a full or read-only disk
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def report_results(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
    from make_results import make_results

    return make_results(str(tmp_path_factory.mktemp("src") / "results"))


def old_report(where) -> dict:
    """A previous REPORT.md and figures/ under ``where``: {path: bytes}."""
    (where / "figures").mkdir(parents=True)
    (where / "figures" / "old.png").write_bytes(b"old figure")
    (where / "REPORT.md").write_text("old report\n")
    return {p: p.read_bytes() for p in where.rglob("*") if p.is_file()}


@pytest.mark.parametrize("where", ["a full disk", "a nearly full disk", "REPORT.md read-only", "figures read-only"])
def test_the_report_on_a_disk_it_cannot_write_is_one_line_and_replaces_nothing(
    report_results, tmp_path, request, where
):
    from test_report import run_report

    mnt = request.getfixturevalue("ro_mount" if "read-only" in where else "tiny_tmpfs")
    if "read-only" in where:  # the other half goes to a writable folder holding an old copy
        before = old_report(tmp_path)
        out = mnt / "REPORT.md" if where.startswith("REPORT") else tmp_path / "REPORT.md"
        figs = mnt / "figures" if where.startswith("figures") else tmp_path / "figures"
        bad, unchanged = (out if where.startswith("REPORT") else figs), tmp_path
    else:
        before = old_report(mnt)
        fill(mnt, leave_pages=0 if where == "a full disk" else 24)  # 24 pages: past the up-front probe, a few figures
        out, figs, bad, unchanged = mnt / "REPORT.md", mnt / "figures", mnt, mnt
    r = run_report(tmp_path, "--results", report_results, "--out", str(out), "--figures", str(figs))
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and str(bad) in lines[0], r.stderr[-3000:]
    if where == "a nearly full disk":  # room for the up-front check (core.args.PROBE_BYTES), not for the report
        assert r.returncode == 1 and lines[0].startswith("error: "), lines[0]
        assert "No space left on device" in lines[0] and "point --out / --figures at a writable folder" in lines[0]
    else:  # refused before the report is built: the key, the folder and why (exit 2: a refused input)
        key = "--figures=" if where.startswith("figures") else "--out="
        reason = "is not writable" if "read-only" in where else "No space left on device"
        assert r.returncode == 2 and lines[0].startswith(f"specbench: error: {key}") and reason in lines[0], lines[0]
    after = {p: p.read_bytes() for p in unchanged.rglob("*") if p.is_file() and p.name not in (".fill",)}
    assert after == before  # the old report and figures, nothing else (no temp files)
