"""Issue 55: every input file checked where it is read (``core.readers``), every value range before
any model loads, every command's --help.  A refusal is one line naming the key or file and the fix,
exit 2, nothing written; study.tools.ceiling's cases are in test_ceiling.py, the locks' in test_collect.py."""

from __future__ import annotations

import contextlib
import io
import os

import pandas as pd
import pytest

from conftest import tiny_pair_overrides
from test_hydra import specbench

ROW = "target,p,bfloat16,{device},128,1,{seconds},0.2 0.21\n"
HEADER = "role,pair,dtype,device,kv_len,n_tokens,seconds,samples\n"
GPU = HEADER + ROW.format(device="cuda", seconds="0.02")


def one_line(r, code: int = 2) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == code and len(lines) == 1 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-2000:])
    return lines[0]


def tmp_names(folder) -> list[str]:
    return [n for n in os.listdir(folder) if n.startswith(".tmp-")]


# --------------------------------------------------------------------------
# study.tools.costs +costs_merge=
# --------------------------------------------------------------------------
MERGE = {  # case -> (the file merged: text, bytes or None for missing; what its one line names)
    "seconds abc": (HEADER + ROW.format(device="cuda", seconds="abc"), "line 2: seconds='abc'"),
    "seconds nan": (HEADER + ROW.format(device="cuda", seconds="nan"), "seconds='nan'"),
    "seconds negative": (HEADER + ROW.format(device="cuda", seconds="-0.5"), "seconds='-0.5'"),
    "seconds zero": (HEADER + ROW.format(device="cuda", seconds="0"), "is not a finite number > 0"),
    "cut mid-row": (GPU + "target,p,bfloat16,cuda,128,2,0.0", "truncated"),
    "a row too short": (GPU + "target,p,bfloat16\n", "line 3 has 3 fields"),
    "binary": (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", "not UTF-8 text"),
    "missing": (None, "no such file"),
    "wrong columns": ("a,b\n1,2\n", "lacks the column(s) role, pair, dtype, device, n_tokens, seconds, samples"),
    "header only": (HEADER, "holds no rows"),
    "cpu rows": (HEADER + ROW.format(device="cpu", seconds="0.2"), "holds cpu rows"),
}


@pytest.mark.parametrize("case", sorted(MERGE))
def test_costs_merge_refuses_a_bad_file_in_one_line_and_keeps_costs_csv(tmp_path, case):
    text, needle = MERGE[case]
    res, src = tmp_path / "results", tmp_path / "gpu" / "costs.csv"
    res.mkdir(), src.parent.mkdir()
    (res / "costs.csv").write_text(HEADER + ROW.format(device="cpu", seconds="0.2"))
    before = (res / "costs.csv").read_bytes()
    if isinstance(text, bytes):
        src.write_bytes(text)
    elif text is not None:
        src.write_text(text)
    r = specbench(
        "specbench.study.tools.costs", f"+costs_merge={src}", f"+results_dir={res}", f"hydra.run.dir={tmp_path}/r"
    )
    line = one_line(r)
    assert f"costs_merge={src}" in line and needle in line, line
    assert (res / "costs.csv").read_bytes() == before and not tmp_names(res)


def test_costs_merge_into_a_cut_costs_csv_is_refused(tmp_path):
    res, src = tmp_path / "results", tmp_path / "gpu.csv"
    res.mkdir()
    (res / "costs.csv").write_text(HEADER + "target,p,bfloat16,cpu,128,1,0.2,0.2 0.")
    src.write_text(GPU)
    before = (res / "costs.csv").read_bytes()
    r = specbench(
        "specbench.study.tools.costs", f"+costs_merge={src}", f"+results_dir={res}", f"hydra.run.dir={tmp_path}/r"
    )
    line = one_line(r)
    assert str(res / "costs.csv") in line and "truncated" in line and "git checkout" in line, line
    assert (res / "costs.csv").read_bytes() == before


def test_costs_merge_of_good_rows_still_merges(tmp_path):
    res, src = tmp_path / "results", tmp_path / "gpu.csv"
    res.mkdir()
    (res / "costs.csv").write_text(HEADER + ROW.format(device="cpu", seconds="0.2"))
    src.write_text(GPU)
    r = specbench(
        "specbench.study.tools.costs", f"+costs_merge={src}", f"+results_dir={res}", f"hydra.run.dir={tmp_path}/r"
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(pd.read_csv(res / "costs.csv").device) == ["cpu", "cuda"]


# --------------------------------------------------------------------------
# study.tools.costs: KV lengths past the models' positions (read from their configs)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("kv", ["1000", "100000"])
def test_costs_kv_lens_past_the_models_positions_is_one_line_before_any_load(tiny_pair_dirs, tmp_path, kv):
    r = specbench(
        "specbench.study.tools.costs",
        *tiny_pair_overrides(tiny_pair_dirs),
        f"+costs_kv_lens=[128,{kv}]",
        f"+results_dir={tmp_path / 'res'}",
        f"hydra.run.dir={tmp_path}/r",
    )
    line = one_line(r)
    assert f"costs_kv_lens=[128, {kv}]" in line and "positions > the" in line and "1024" in line, line
    assert "lower it to 895 or less" in line  # 1024 positions - 1 prefill token - a 128-token forward
    assert "loaded local model" not in r.stdout + r.stderr and not (tmp_path / "res" / "costs.csv").exists()


# --------------------------------------------------------------------------
# study.tools.validate: speedup.csv
# --------------------------------------------------------------------------
SPEEDUP_HEAD = "pair,dataset,engine,verify,temperature,tree,budget,projected,max_new_tokens\n"
SPEEDUP_ROW = "p,d,replay,greedy,0,chain,2,1.3,128\n"
SPEEDUP = {
    "missing": (None, "no such file"),
    "truncated": (SPEEDUP_HEAD + SPEEDUP_ROW + "p,d,replay,greedy,0,binary,4,1.", "truncated"),
    "a row cut short": (SPEEDUP_HEAD + SPEEDUP_ROW + "p,d,replay\n", "line 3 has 3 fields"),
    "projected abc": (SPEEDUP_HEAD + SPEEDUP_ROW.replace("1.3", "abc"), "projected='abc'"),
    "budget 2.5": (SPEEDUP_HEAD + SPEEDUP_ROW.replace(",2,", ",2.5,"), "budget='2.5' is not an integer"),
    "binary": (b"PK\x03\x04\x14\x00\x00\x00\x08\x00", "not UTF-8 text"),
    "wrong columns": ("pair,dataset\np,d\n", "lacks the column(s) engine, verify"),
}


@pytest.mark.parametrize("case", sorted(SPEEDUP))
def test_validate_refuses_a_bad_speedup_csv_in_one_line(tmp_path, case):
    from specbench.study.tools.validate import main

    text, needle = SPEEDUP[case]
    path = tmp_path / "speedup.csv"
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--speedup", str(path), "--pairs", "p", "--datasets", "d"])
    lines = err.getvalue().strip().splitlines()
    assert code == 2 and len(lines) == 1 and f"--speedup={path}" in lines[0] and needle in lines[0], lines
    assert out.getvalue() == ""  # no configuration printed from a bad table


def test_validate_reads_a_good_speedup_csv(tmp_path):
    from specbench.study.tools.validate import main

    (tmp_path / "speedup.csv").write_text(SPEEDUP_HEAD + SPEEDUP_ROW)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--speedup", str(tmp_path / "speedup.csv"), "--pairs", "p", "--datasets", "d"]) == 0
    assert "pair=p dataset=d tree=chain tree.budget=2" in out.getvalue()


# --------------------------------------------------------------------------
# acceptance vectors (tree=sequoia, collect, calibrate)
# --------------------------------------------------------------------------
VEC_HEAD = "pair,pair_id,dataset,verify,temperature,rank,p_accept,n,prompt_ids\n"
VEC = VEC_HEAD + "".join(f"p,abc,d,greedy,0.0,{k},{p},64,\n" for k, p in enumerate((0.6, 0.2, 0.1, 0.05)))
VECTORS = {
    "cut in the last row": (VEC[:-12], "truncated"),
    "cut mid-row, a field lost": (VEC[:-5] + "\n", "line 5 has 7 fields"),
    "p_accept above 1": (VEC.replace("0.6,", "1.6,"), "p_accept='1.6' is not a finite number >= 0 and <= 1"),
    "rank abc": (VEC.replace(",0,0.6", ",abc,0.6"), "rank='abc'"),
    "binary": (VEC.encode()[:40] + b"\x00\x00\xff", "not UTF-8 text"),
}


@pytest.mark.parametrize("case", sorted(VECTORS))
def test_a_bad_acceptance_vector_is_one_error_naming_it(tmp_path, case):
    from specbench.trees.sequoia import load_vector

    text, needle = VECTORS[case]
    path = tmp_path / "acceptance_vector.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError) as e:
        load_vector(str(path), "abc", "d", "greedy", 0.0)
    assert f"tree.vector={path}" in str(e.value) and needle in str(e.value) and "\n" not in str(e.value)


def test_a_whole_acceptance_vector_gives_all_its_ranks(tmp_path):
    from specbench.trees.sequoia import load_vector

    (tmp_path / "v.csv").write_text(VEC)
    assert load_vector(str(tmp_path / "v.csv"), "abc", "d", "greedy", 0.0) == [0.6, 0.2, 0.1, 0.05]


def test_a_sequoia_job_on_a_cut_vector_is_one_line_and_writes_nothing(tiny_pair_dirs, tmp_path):
    from test_bad_input import written
    from test_hydra import job_args

    vec = tmp_path / "acceptance_vector.csv"
    vec.write_text(VEC[:-12])
    out = tmp_path / "outputs"
    r = specbench(*job_args(tiny_pair_dirs, out, "tree=sequoia", "tree.budget=4", f"tree.vector={vec}"))
    line = one_line(r)
    assert f"tree.vector={vec}" in line and "truncated" in line, line
    assert not written(out) and "loaded local model" not in r.stdout + r.stderr


# --------------------------------------------------------------------------
# every command's --help
# --------------------------------------------------------------------------
COMMANDS = [
    "specbench.run",
    "specbench.collect",
    "specbench.report",
    "specbench.export",
    "specbench.import_metrics",
    "specbench.attention_bench",
    "specbench.inputs.embedded",
    "specbench.study.tools.calibrate",
    "specbench.study.tools.ceiling",
    "specbench.study.tools.costs",
    "specbench.study.tools.lossless",
    "specbench.study.tools.margins",
    "specbench.study.tools.plan",
    "specbench.study.tools.speed",
    "specbench.study.tools.validate",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_prints_its_usage_on_help(command):
    r = specbench(command, "--help")
    said = [ln for ln in r.stderr.splitlines() if ln.strip() and "RuntimeWarning" not in ln]  # a forked runpy's
    assert r.returncode == 0 and not said, r.stderr[-2000:]
    head = r.stdout.lstrip()
    assert head.startswith("usage:") or "powered by Hydra" in head.splitlines()[0], head[:300]


def test_a_writers_staged_names_are_git_ignored():
    """core.atomic stages as .tmp-<name>, .tmp-new-*, .tmp-old-<name>: a kill leaves none to commit."""
    import shutil
    import subprocess

    from test_hydra import ROOT

    if shutil.which("git") is None or not os.path.isdir(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    names = ["results/.tmp-k2j3summary.csv", "results/.tmp-new-ab12/x.csv", "results/figures/.tmp-old-figures/a.png"]
    r = subprocess.run(["git", "check-ignore", *names], cwd=ROOT, capture_output=True, text=True)
    assert r.stdout.split() == names, r.stderr
