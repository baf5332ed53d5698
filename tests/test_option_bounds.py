"""Issue 85: every command's options typed and bounded before any work.  For each command, a numeric
option past its range, a non-number, and a path that leaves where the command writes: one line naming
the option, a non-zero exit, nothing written, no model load and no measuring."""

from __future__ import annotations

import os

import pytest

from mounts import ro_mount  # noqa: F401  (fixture)
from test_hydra import ROOT, specbench

SPEEDUP = os.path.join(ROOT, "results", "speedup.csv")
NO_WORK = ("loaded local model", "Traceback", "attention grid", "GFLOP/s")

# (command, arguments, what the one line names); {out}: a file in the test's folder
CASES = {
    # python -m specbench.attention_bench (Hydra keys)
    "attention heads 0": ("specbench.attention_bench", ["dims={heads:0,kv_heads:1,head_dim:64}"], "dims.heads=0"),
    "attention heads abc": ("specbench.attention_bench", ["dims={heads:abc,kv_heads:1,head_dim:64}"], "dims.heads"),
    "attention heads 2 of 3": ("specbench.attention_bench", ["dims={heads:2,kv_heads:3,head_dim:64}"], "dims.heads=2"),
    "attention impls bogus": ("specbench.attention_bench", ["impls=[bogus]"], "bogus"),
    "attention impls twice": ("specbench.attention_bench", ["impls=[fused,fused]"], "named twice"),
    "lossless warm abc": ("specbench.study.tools.lossless", ["--warm", "abc"], "--warm"),
    "attention seed -1": ("specbench.attention_bench", ["seed=-1"], "seed=-1"),
    "attention seed abc": ("specbench.attention_bench", ["seed=abc"], "seed='abc'"),
    "attention threads 1e6": ("specbench.attention_bench", ["threads=1000000"], "threads=1000000"),
    "attention threads 0": ("specbench.attention_bench", ["threads=0"], "threads=0"),
    "attention matmul_n 1e15": ("specbench.attention_bench", ["matmul_n=1e15"], "matmul_n="),
    "attention matmul_n huge": ("specbench.attention_bench", ["matmul_n=100000000"], "matmul_n=100000000"),
    "attention bandwidth_mb huge": ("specbench.attention_bench", ["bandwidth_mb=1000000000"], "bandwidth_mb="),
    "attention max_seconds inf": ("specbench.attention_bench", ["max_seconds=inf"], "max_seconds=inf"),
    "attention steady_iqr inf": ("specbench.attention_bench", ["steady_iqr=inf"], "steady_iqr=inf"),
    "attention repeats abc": ("specbench.attention_bench", ["repeats=abc"], "repeats='abc'"),
    "attention repeats 1e9": ("specbench.attention_bench", ["repeats=1000000000"], "repeats=1000000000"),
    # python -m specbench.study.tools.budget plan
    "budget minutes inf": ("specbench.study.tools.budget", ["plan", "--minutes", "inf"], "--minutes"),
    "budget minutes nan": ("specbench.study.tools.budget", ["plan", "--minutes", "nan"], "--minutes"),
    "budget minutes abc": ("specbench.study.tools.budget", ["plan", "--minutes", "abc"], "--minutes"),
    "budget minutes 1e9": ("specbench.study.tools.budget", ["plan", "--minutes", "1e9"], "--minutes"),
    "budget spent -5": ("specbench.study.tools.budget", ["plan", "--spent", "-5"], "--spent"),
    "budget spent inf": ("specbench.study.tools.budget", ["plan", "--spent", "inf"], "--spent"),
    "budget out a folder": ("specbench.study.tools.budget", ["plan", "--out", "{tmp}"], "--out="),
    # python -m specbench.study.tools.lossless
    "lossless draws abc": ("specbench.study.tools.lossless", ["--draws", "abc"], "--draws"),
    "lossless draws 0": ("specbench.study.tools.lossless", ["--draws", "0"], "--draws"),
    "lossless draws 1e12": ("specbench.study.tools.lossless", ["--draws", "1000000000000"], "--draws"),
    "lossless batch 1e9": ("specbench.study.tools.lossless", ["--batch", "1000000000"], "--batch"),
    "lossless tv nan": ("specbench.study.tools.lossless", ["--tv", "nan"], "--tv"),
    "lossless temperature inf": ("specbench.study.tools.lossless", ["--temperature", "inf"], "--temperature"),
    "lossless max-bins abc": ("specbench.study.tools.lossless", ["--max-bins", "abc"], "--max-bins"),
    # #86: a flag's whole range is its parser type's (no second check after parsing)
    "lossless tv 1": ("specbench.study.tools.lossless", ["--tv", "1"], "--tv: '1' is not a finite number > 0 and < 1"),
    "lossless max-bins 1": ("specbench.study.tools.lossless", ["--max-bins", "1"], "--max-bins: '1'"),
    "validate top -1": ("specbench.study.tools.validate", ["--speedup", SPEEDUP, "--top", "-1"], "--top: '-1'"),
    "calibrate ranks 0": ("specbench.study.tools.calibrate", ["--ranks", "0"], "--ranks: '0'"),
    # python -m specbench.inputs.machine
    "machine device bogus": ("specbench.inputs.machine", ["--device", "bogus"], "--device"),
    "machine device cuda": ("specbench.inputs.machine", ["--device", "cuda:99"], "--device"),
    "machine out a folder": ("specbench.inputs.machine", ["--out", "{tmp}"], "--out"),
    # python -m specbench.study.tools.costs and calibrate
    "costs repeats 1e9": ("specbench.study.tools.costs", ["+costs_repeats=1000000000"], "costs_repeats="),
    "costs kv_lens empty": ("specbench.study.tools.costs", ["+costs_kv_lens=[]"], "costs_kv_lens=[]"),
    "calibrate ranks 1e9": ("specbench.study.tools.calibrate", ["--ranks", "1000000000"], "--ranks"),
    "speed candidates twice": ("specbench.study.tools.speed", ["+speed_candidates=[chain/2,chain/2]"], "listed twice"),
    # python -m specbench.export
    "export nearest maybe": (
        "specbench.export",
        ["tree=binary", "tree.budget=4", "format=vllm", "nearest=maybe"],
        "nearest=",
    ),
    "export recommend 1": (
        "specbench.export",
        ["tree=binary", "tree.budget=4", "format=vllm", "recommend=1"],
        "recommend=",
    ),
    "export out quoted empty": ("specbench.export", ["tree=binary", "tree.budget=4", "format=paths", "out=''"], "out="),
    "export eagle_head missing folder": (
        "specbench.export",
        ["tree=binary", "tree.budget=4", "format=trtllm", "eagle_head={tmp}/no_head"],
        "eagle_head=",
    ),
    # python -m specbench.study.tools.eta
    "eta times missing": ("specbench.study.tools.eta", ["--times", "{tmp}/nope.csv"], "--times="),
    "eta out missing": ("specbench.study.tools.eta", ["--out", "{tmp}/nope"], "--out="),
    "eta costs of another kind": ("specbench.study.tools.eta", ["--costs", "{tmp}/speed.csv"], "not a costs.csv"),
    # study.tools.stale and study.tools.recheck: a binary summary.csv
    "stale references binary summary": (
        "specbench.study.tools.stale",
        ["references", "--results", "{tmp}/bin"],
        "not UTF-8",
    ),
    # python -m specbench.run
    "run plugins a path": ("specbench.run", ["plugins=[../../evil]"], "plugins="),
    "run plugins twice": ("specbench.run", ["plugins=[os,os]"], "plugins="),
    "run tree.paths twice": ("specbench.run", ["tree=paths", "tree.paths=[[0],[1],[0]]"], "tree.paths[2]=[0]"),
    "run budget abc": ("specbench.run", ["tree.budget=abc"], "tree.budget"),
    "run budget 1e9": ("specbench.run", ["tree.budget=1000000000"], "tree.budget"),
    "run max_new_tokens 1e12": ("specbench.run", ["max_new_tokens=1000000000000"], "max_new_tokens="),
    "run batch_size 1e9": ("specbench.run", ["batch_size=1000000000"], "batch_size="),
    "run dataset.limit 1e12": ("specbench.run", ["dataset.limit=1000000000000"], "dataset.limit="),
    "run kary width 1e9": ("specbench.run", ["tree=kary", "tree.width=1000000000"], "tree.width"),
    "run device bogus": ("specbench.run", ["device=bogus"], "device 'bogus'"),
    "run device cuda:7": ("specbench.run", ["device=cuda:7"], "device=cuda:7"),
    "run replay_cache a file": (
        "specbench.run",
        ["+replay_cache=/dev/null", "engine=replay"],
        "replay_cache=/dev/null",
    ),
    "run sweep subdir leaves": ("specbench.run", ["-m", "hydra.sweep.subdir=../../escape"], "hydra.sweep.subdir"),
    "run sweep subdir absolute": ("specbench.run", ["-m", "hydra.sweep.subdir=/tmp/escape"], "hydra.sweep.subdir"),
    # output paths (a path under a file, a folder where a file goes, a place no file can be made), each command's:
    # resolved and refused before any work ({tmp}/speed.csv is a file). What "leaves the output root" means per
    # command: docs/commands.md (hydra.sweep.subdir inside hydra.sweep.dir; names that key rows are never paths)
    "run out_root under a file": ("specbench.run", ["out_root={tmp}/speed.csv/o"], "out_root="),
    "run hydra.run.dir a file": ("specbench.run", ["hydra.run.dir={tmp}/speed.csv"], "hydra.run.dir="),
    "run sweep subdir under a file": (
        "specbench.run",
        ["-m", "hydra.sweep.dir={tmp}", "hydra.sweep.subdir=speed.csv/x"],
        "hydra.sweep.subdir=",
    ),
    "run replay_cache under a file": (
        "specbench.run",
        ["+replay_cache={tmp}/speed.csv/c", "engine=replay"],
        "replay_cache=",
    ),
    "collect out under a file": ("specbench.collect", ["{tmp}/bin", "--out", "{tmp}/speed.csv/res"], "--out="),
    "collect out a file": ("specbench.collect", ["{tmp}/bin", "--out", "{tmp}/speed.csv"], "--out="),
    "collect out where no file can be made": ("specbench.collect", ["{tmp}/bin", "--out", "/proc/specbench"], "--out="),
    "export out under a file": (
        "specbench.export",
        ["tree=binary", "tree.budget=4", "format=paths", "out={tmp}/speed.csv/x.json"],
        "out=",
    ),
    "import_metrics out under a file": (
        "specbench.import_metrics",
        ["{tmp}/speed.csv", "--engine", "vllm", "--pair", "p", "--dataset", "d", "--out", "{tmp}/speed.csv/s.csv"],
        "--out=",
    ),
    "import_metrics pair a path": (
        "specbench.import_metrics",
        ["{tmp}/speed.csv", "--engine", "vllm", "--pair", "../../etc", "--dataset", "d", "--out", "{tmp}/out/s.csv"],
        "--pair=",
    ),
    "ceiling out a folder": (
        "specbench.study.tools.ceiling",
        ["--times", "{tmp}/speed.csv", "--forwards", "{tmp}/speed.csv", "--out", "{tmp}"],
        "--out=",
    ),
    "ceiling out under a file": (
        "specbench.study.tools.ceiling",
        ["--times", "{tmp}/speed.csv", "--forwards", "{tmp}/speed.csv", "--out", "{tmp}/speed.csv/r.csv"],
        "--out=",
    ),
    "recheck out a folder": (
        "specbench.study.tools.recheck",
        ["compare", "--results", os.path.join(ROOT, "results"), "--runs", "{tmp}/bin", "--out", "{tmp}"],
        "--out=",
    ),
    "lossless out under a file": ("specbench.study.tools.lossless", ["--out", "{tmp}/speed.csv/l.csv"], "--out="),
    "calibrate out under a file": ("specbench.study.tools.calibrate", ["--out", "{tmp}/speed.csv/v.csv"], "--out="),
    "attention out_csv under a file": ("specbench.attention_bench", ["out_csv={tmp}/speed.csv/a.csv"], "out_csv="),
    "attention fig_dir a file": ("specbench.attention_bench", ["fig_dir={tmp}/speed.csv"], "fig_dir="),
    "machine out under a file": ("specbench.inputs.machine", ["--out", "{tmp}/speed.csv/m.json"], "--out="),
    "costs results_dir a file": ("specbench.study.tools.costs", ["+results_dir={tmp}/speed.csv"], "results_dir="),
    "speed results_dir under a file": (
        "specbench.study.tools.speed",
        ["+results_dir={tmp}/speed.csv/r"],
        "results_dir=",
    ),
    # found by the helper's probe (#85 item 4): names a file does not hold, an unbounded count, a node given a word
    "validate pairs unknown": (
        "specbench.study.tools.validate",
        ["--speedup", SPEEDUP, "--pairs", "nope"],
        "--pairs=nope",
    ),
    "validate datasets none": (
        "specbench.study.tools.validate",
        ["--speedup", SPEEDUP, "--datasets", ","],
        "--datasets=,",
    ),
    "import_metrics budget 1e9": (
        "specbench.import_metrics",
        ["{tmp}/speed.csv", "--engine", "vllm", "--pair", "p", "--dataset", "d", "--budget", "1000000000"],
        "--budget",
    ),
    "attention figures a word": ("specbench.attention_bench", ["figures=maybe"], "figures.kv_len="),
    "attention figures batch 0": ("specbench.attention_bench", ["figures.batch=0"], "figures.batch=0"),
    "costs dtypes empty": ("specbench.study.tools.costs", ["+costs_dtypes=[]"], "costs_dtypes=[]"),
    "costs pairs empty": ("specbench.study.tools.costs", ["+costs_pairs=[]"], "costs_pairs=[]"),
    "speed rounds 1e9": ("specbench.study.tools.speed", ["+speed_rounds=1000000000"], "speed_rounds=1000000000"),
    "run verify.eps -1": ("specbench.run", ["verify=epsilon", "verify.eps=-1"], "verify.eps=-1"),
    "run verify.factor inf": ("specbench.run", ["verify=ratio", "verify.factor=inf"], "verify.factor="),
    "attention hydra.run.dir a file": (
        "specbench.attention_bench",
        ["hydra.run.dir={tmp}/speed.csv"],
        "hydra.run.dir=",
    ),
    "report out a folder": ("specbench.report", ["--out", "{tmp}"], "--out="),
    "report results a file": ("specbench.report", ["--results", "{tmp}/speed.csv"], "--results="),
    "report figures under a file": ("specbench.report", ["--figures", "{tmp}/speed.csv/f"], "--figures="),
    "lossless modes none": ("specbench.study.tools.lossless", ["--modes", ","], "--modes="),
    "export results_dir a file": (
        "specbench.export",
        ["tree=chain", "tree.budget=2", "format=vllm", "results_dir={tmp}/speed.csv"],
        "results_dir=",
    ),
}


def said(r) -> list[str]:
    """stderr's lines, less runpy's warning for a module the test's fork server had imported already."""
    return [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("<frozen runpy>")]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_option_is_one_line_before_any_work(tmp_path, case):
    module, args, names = CASES[case]
    out = tmp_path / "out"
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    given = {a.lstrip("+").partition("=")[0] for a in args} | set(args)
    if module == "specbench.study.tools.budget":
        args += ["--machine", str(tmp_path / "m.json")] + ([] if "--out" in args else ["--out", str(out / "plan.json")])
    elif module == "specbench.study.tools.lossless" and "--out" not in given:
        args += ["--out", str(out / "lossless_check.csv")]
    elif module == "specbench.study.tools.calibrate" and "--out" not in given:
        args += ["--out", str(out / "acceptance_vector.csv")]
    defaults = {  # each Hydra command's output keys, unless the case gives its own
        "specbench.study.tools.costs": {"+results_dir": out, "hydra.run.dir": tmp_path / "h"},
        "specbench.study.tools.speed": {"+results_dir": out, "hydra.run.dir": tmp_path / "h"},
        "specbench.attention_bench": {
            "out_csv": out / "attention.csv",
            "fig_dir": out / "figs",
            "hydra.run.dir": tmp_path / "h",
        },
        "specbench.run": {"out_root": out, "hydra.run.dir": tmp_path / "h", "hydra.sweep.dir": tmp_path / "s"},
    }.get(module, {})
    args += [f"{k}={v}" for k, v in defaults.items() if k.lstrip("+") not in given]
    (tmp_path / "speed.csv").write_text("run_id,machine_id,pair\nr,m,p\n")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "summary.csv").write_bytes(b"\x00\x01\x02\xff\n")
    r = specbench(module, *args, cwd=str(tmp_path))
    lines = said(r)
    assert r.returncode != 0 and len(lines) == 1, (r.returncode, r.stderr[-3000:])
    assert names in lines[0], lines[0]
    assert not any(w in r.stdout + r.stderr for w in NO_WORK), r.stdout[-2000:]
    assert not [p for p in out.rglob("*") if p.is_file()] if out.exists() else True  # nothing written


def test_machine_out_on_a_read_only_folder_is_refused_before_measuring(ro_mount):  # noqa: F811
    r = specbench("specbench.inputs.machine", "--out", str(ro_mount / "machine.json"))
    lines = said(r)
    assert r.returncode == 2 and len(lines) == 1 and "--out=" in lines[0] and "not writable" in lines[0], r.stderr
    assert "GFLOP/s" not in r.stdout


@pytest.mark.parametrize(
    "env, names",
    [
        ({"SPECBENCH_OUT": "{tmp}/a b"}, "SPECBENCH_OUT="),
        ({"SPECBENCH_OUT": "/etc/hostname/out"}, "SPECBENCH_OUT="),  # under a file
        ({"SPECBENCH_OUT": "/proc/specbench-out"}, "SPECBENCH_OUT="),  # where no file can be made
        ({"SPECBENCH_DTYPE": "int8"}, "SPECBENCH_DTYPE=int8"),
        ({"SPECBENCH_DTYPE": "bfloat16", "SPECBENCH_PROFILE": "tiny", "SPECBENCH_TINY_PAIR": "a:b"}, "tiny profile"),
    ],
)
def test_run_all_refuses_its_variables_before_set_up(tmp_path, env, names):
    import subprocess

    env = {k: v.replace("{tmp}", str(tmp_path)) for k, v in env.items()}
    r = subprocess.run(
        ["bash", "run_all.sh"], cwd=ROOT, env=dict(os.environ, **env), capture_output=True, text=True, timeout=60
    )
    lines = said(r)
    assert r.returncode == 2 and len(lines) == 1 and names in lines[0], r.stderr
    assert "set-up" not in r.stdout and not list(tmp_path.iterdir())
