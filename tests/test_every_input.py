"""Issue 55, the blanket case: every command that reads a results file, fed a missing, empty, cut,
binary, non-numeric and wrong-columns version of each file it reads, answers one line naming the
file (or its key) and the fix, exits 2, and writes nothing.  (study.tools.ceiling's three inputs:
test_ceiling.py; costs_merge, the Sequoia vector and tree.vector: test_bad_files.py.)

Each case runs the command's ``main`` in this process (no model loads before these checks)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os

import pandas as pd
import pytest

from mounts import ro_mount  # noqa: F401  (fixture)
from test_reliability import snapshot

HASH = "abcabcabcabc"
SUMMARY = {
    "config_hash": HASH, "run_id": "20260101T000000-aaaa", "pair": "p", "dataset": "d", "tree": "chain",
    "tree_params": "{}", "budget": 2, "verify": "greedy", "temperature": 0.0, "dtype": "float32",
    "max_new_tokens": 8, "n_steps": 3, "new_tokens": 6, "acceptance_rate": 0.5, "acceptance_length": 1.0,
    "tokens_per_step": 2.0,
}  # fmt: skip
STEP = {
    "config_hash": HASH,
    "run_id": SUMMARY["run_id"],
    "prompt_id": "a",
    "emitted": 2,
    "accepted": 1,
    "tree_depth": 2,
}
SPEEDUP = (
    "config_hash,pair,dataset,dtype,engine,batch_size,n_prompts,max_new_tokens,tree,tree_params,budget,verify,"
    "temperature,tokens_per_step,projected,projected_lo,projected_hi,measured\n"
    f"{HASH},p,d,float32,replay,1,32,8,chain,{{}},2,greedy,0,2.0,1.3,1.2,1.4,\n"
)
VLLM = "".join(
    f"vllm:spec_decode_num_{k}_total {v}\n"
    for k, v in (("drafts", 100), ("draft_tokens", 300), ("accepted_tokens", 180))
) + "".join(
    f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}\n' for i, v in enumerate((80, 60, 40))
)
SERVED = "engine,config_hash,pair,dataset,tree,budget,n_requests,n_steps,acceptance_rate,acceptance_length,"
SERVED += (
    "tokens_per_step,tokens_per_step_per_request,marginal_acceptance,source\nvllm,,p,d,chain,3,,100,0.6,1.8,2.8,,,x\n"
)
VECTOR = "pair,pair_id,dataset,verify,temperature,rank,p_accept,n,prompt_ids\np,abc,d,greedy,0.0,0,0.6,64,\n"
ATTENTION = "level,batch,kv_len,tree_size,shape,dtype,impl,median_s\nkernel,1,8,4,chain,float32,fused,0.002\n"


def csv_text(rows: list[dict]) -> str:
    return pd.DataFrame(rows).to_csv(index=False, lineterminator="\n")


def put(path, text: str) -> None:
    """``text`` at ``path`` (gzipped where the name ends in .gz)."""
    data = text.encode()
    path.write_bytes(gzip.compress(data, mtime=0) if str(path).endswith(".gz") else data)


def collected(res) -> None:
    """A collected results folder of one configuration."""
    res.mkdir(parents=True, exist_ok=True)
    put(res / "summary.csv", csv_text([SUMMARY]))
    put(res / "steps.csv.gz", csv_text([dict(STEP, step=i) for i in range(3)]))
    put(res / "outputs.jsonl.gz", json.dumps({"config_hash": HASH, "prompt_id": "a", "token_ids": [1] * 6}) + "\n")
    put(res / "speedup.csv", SPEEDUP)


def job(d) -> None:
    """A finished job folder (another configuration)."""
    d.mkdir(parents=True)
    put(d / "summary.csv", csv_text([dict(SUMMARY, config_hash="defdefdefdef")]))
    put(d / "steps.csv", csv_text([dict(STEP, config_hash="defdefdefdef", step=i) for i in range(3)]))
    put(d / "outputs.jsonl", json.dumps({"prompt_id": "a", "token_ids": [1] * 6}) + "\n")


def non_numeric(column: str):
    """The text with ``column``'s first cell replaced by 'abc'."""

    def damage(text: str) -> str:
        rows = list(csv.reader(io.StringIO(text)))
        rows[1][rows[0].index(column)] = "abc"
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(rows)
        return out.getvalue()

    return damage


DAMAGES = ("missing", "empty", "truncated", "binary", "non-numeric", "wrong columns")


def damaged(path, how: str, numeric=None) -> None:
    """Replace the file at ``path`` by its ``how`` version."""
    text = gzip.decompress(path.read_bytes()).decode() if str(path).endswith(".gz") else path.read_text()
    if how == "missing":
        path.unlink()
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "truncated":  # cut mid-row (a gzip stream cut short)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) * 2 // 3] if str(path).endswith(".gz") else data[:-3])
    elif how == "binary":
        path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\n")
    elif how == "non-numeric":
        put(path, numeric(text))
    else:
        put(path, "a,b\n1,2\n" if not str(path).endswith(".jsonl.gz") else "[1, 2]\n")


# --------------------------------------------------------------------------
# command -> (the file it reads, its argv, the folders it must leave as they were, the damages
# that apply, the non-numeric damage)
# --------------------------------------------------------------------------
def _main(module: str):
    """``module``'s ``main``, imported when the case runs."""
    import importlib

    return lambda argv: importlib.import_module(module).main(argv)


_collect, _margins, _export = (
    _main(f"specbench.study.{m}") for m in ("job.collect", "tools.margins", "serving.export")
)
_import, _validate, _calibrate = (
    _main(f"specbench.study.{m}") for m in ("serving.import_metrics", "tools.validate", "tools.calibrate")
)
_report = _main("specbench.report.build")


ALL = DAMAGES
NO_MISSING = tuple(d for d in DAMAGES if d != "missing")  # a missing one is no rows yet (or an unfinished job)
CASES = {
    # collect: the rows already in --out, and a job folder's files
    "collect --out summary.csv": (_collect, "res/summary.csv", ["jobs", "--out", "res"], NO_MISSING, "budget"),
    "collect --out steps.csv.gz": (_collect, "res/steps.csv.gz", ["jobs", "--out", "res"], NO_MISSING, None),
    "collect --out outputs.jsonl.gz": (_collect, "res/outputs.jsonl.gz", ["jobs", "--out", "res"], NO_MISSING, None),
    "collect job summary.csv": (_collect, "jobs/j/summary.csv", ["jobs", "--out", "res"], NO_MISSING, "n_steps"),
    "collect job steps.csv": (_collect, "jobs/j/steps.csv", ["jobs", "--out", "res"], ALL, "emitted"),
    # study.tools.margins
    "margins summary.csv": (_margins, "res/summary.csv", ["--results", "res"], ALL, "temperature"),
    "margins outputs.jsonl.gz": (_margins, "res/outputs.jsonl.gz", ["--results", "res"], NO_MISSING, None),
    # export: a configuration's committed rows, and recommend=true's speedup.csv
    "export summary.csv": (
        _export,
        "res/summary.csv",
        ["format=profile", f"config_hash={HASH}", "results_dir=res", "out=x/p.json"],
        ALL,
        "budget",
    ),  # fmt: skip
    "export steps.csv.gz": (
        _export,
        "res/steps.csv.gz",
        ["format=profile", f"config_hash={HASH}", "results_dir=res", "out=x/p.json"],
        ALL,
        "accepted",
    ),  # fmt: skip
    "export speedup.csv": (
        _export,
        "res/speedup.csv",
        ["format=paths", "recommend=true", "pair=p", "dataset=d", "results_dir=res", "out=x/p.json"],
        ALL,
        "budget",
    ),  # fmt: skip
    # import_metrics: the server's dump, and the served.csv it merges into
    "import_metrics dump": (
        _import,
        "m.txt",
        ["m.txt", "--engine", "vllm", "--pair", "p", "--dataset", "d", "--out", "x/served.csv"],
        ALL,
        None,
    ),  # fmt: skip
    "import_metrics --out served.csv": (
        _import,
        "x/served.csv",
        ["m.txt", "--engine", "vllm", "--pair", "p", "--dataset", "d", "--out", "x/served.csv"],
        NO_MISSING,
        None,
    ),  # fmt: skip
    # study.tools.validate, report, calibrate's --out
    "validate speedup.csv": (
        _validate,
        "res/speedup.csv",
        ["--speedup", "res/speedup.csv", "--pairs", "p", "--datasets", "d"],
        ALL,
        "projected",
    ),  # fmt: skip
    "report summary.csv": (_report, "res/summary.csv", ["--results", "res", "--out", "x/R.md"], ALL, "acceptance_rate"),
    "calibrate --out vector": (_calibrate, "x/v.csv", ["--out=@/x/v.csv", "dataset=smoke"], NO_MISSING, "p_accept"),
}
IMPORT_NON_NUMERIC = VLLM.replace(" 300\n", " abc\n")


def _setup(tmp_path) -> None:
    collected(tmp_path / "res")
    job(tmp_path / "jobs" / "j")
    (tmp_path / "x").mkdir()
    (tmp_path / "m.txt").write_text(VLLM)
    (tmp_path / "x" / "served.csv").write_text(SERVED)
    (tmp_path / "x" / "v.csv").write_text(VECTOR)


PARAMS = [(case, how) for case, spec in CASES.items() for how in spec[3] if how != "non-numeric" or spec[4] or
          case.startswith("import_metrics dump")]  # fmt: skip


@pytest.mark.parametrize("case,how", PARAMS, ids=[f"{c}: {h}" for c, h in PARAMS])
def test_every_command_refuses_every_bad_file_in_one_line(tmp_path, monkeypatch, capsys, case, how):
    fn, rel, argv, _, column = CASES[case]
    _setup(tmp_path)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / rel
    if how == "non-numeric" and column is None:
        path.write_text(IMPORT_NON_NUMERIC)
    else:
        damaged(path, how, non_numeric(column) if column else None)
    before = snapshot(tmp_path)
    code = 0
    try:
        code = fn([a.replace("@", str(tmp_path)) for a in argv]) or 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    got = capsys.readouterr()
    lines = [ln for ln in got.err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in got.err, (code, got.err[-1500:])
    assert os.path.basename(rel) in lines[0] or str(path) in lines[0], lines[0]
    assert snapshot(tmp_path) == before  # nothing written, nothing removed


@pytest.mark.parametrize("how", DAMAGES)
def test_attention_bench_refuses_a_bad_csv_to_merge_or_redraw_before_timing(tmp_path, how):
    """``grid=none model_view=false`` redraws from out_csv (``merge=true`` merges into it): the CSV is
    checked before anything is measured."""
    from test_hydra import specbench

    out = tmp_path / "attention.csv"
    out.write_text(ATTENTION)
    damaged(out, how, non_numeric("median_s"))
    before = snapshot(tmp_path)
    r = specbench("specbench.attention_bench", "grid=none", "model_view=false", f"out_csv={out}",
                  f"fig_dir={tmp_path / 'figures'}", f"hydra.run.dir={tmp_path / 'h'}")  # fmt: skip
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-1500:]
    assert f"out_csv={out}" in lines[0] or str(out) in lines[0], lines[0]
    after = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("h" + os.sep)}
    assert after == before


@pytest.mark.parametrize(
    "value",
    ["verify.temperature=abc", "verify.draft_temperature=x", "verify.top_p=abc", "seed=abc", "tree.budget=abc",
     "max_new_tokens=abc", "dataset.limit=abc", "batch_size=abc"],
)  # fmt: skip
def test_a_value_that_is_not_a_number_is_one_line_naming_its_key_before_any_load(tiny_pair_dirs, tmp_path, value):
    from test_hydra import job_args, specbench

    key = value.split("=")[0]
    args = [a for a in job_args(tiny_pair_dirs, tmp_path / "out", "tree=chain") if not a.startswith(key + "=")]
    r = specbench(*args, value, f"hydra.run.dir={tmp_path / 'job'}")
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"specbench: error: {key}="), r.stderr[-1500:]
    assert "Loading weights" not in r.stdout + r.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "value",
    ["seed=99999999999999999999999", "seed=9223372036854775807", "tree.budget=99999999999999999999",
     "tree.budget=5000", "max_new_tokens=99999999999999999999"],
)  # fmt: skip
def test_a_value_out_of_range_is_one_line_naming_its_key_before_any_load(tiny_pair_dirs, tmp_path, value):
    """A seed torch cannot take, a tree no memory holds, more tokens than the models' positions (a
    batch_size or dataset.limit above the prompts there are is no error: it takes them all)."""
    from test_hydra import job_args, specbench

    key = value.split("=")[0]
    args = [a for a in job_args(tiny_pair_dirs, tmp_path / "out", "tree=chain") if not a.startswith(key + "=")]
    r = specbench(*args, value, f"hydra.run.dir={tmp_path / 'job'}")
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and f"{key}=" in lines[0], r.stderr[-1500:]
    assert "Loading weights" not in r.stdout + r.stderr and not (tmp_path / "out").exists()


# --------------------------------------------------------------------------
# export out= and import_metrics --out: an existing file, a folder, a folder it cannot write
# --------------------------------------------------------------------------
def _export_out(out) -> list[str]:
    return ["format=paths", "tree=chain", "tree.budget=3", f"out={out}"]


def _import_out(out) -> list[str]:
    return ["m.txt", "--engine", "vllm", "--pair", "p", "--dataset", "d", "--out", str(out)]


OUTS = {"export": (_export, _export_out, "out="), "import_metrics": (_import, _import_out, "--out=")}


def _call(fn, argv) -> int:
    try:
        return fn(argv) or 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1


@pytest.mark.parametrize("command", sorted(OUTS))
def test_out_an_existing_file_is_replaced_and_a_folder_is_one_line(tmp_path, monkeypatch, capsys, command):
    fn, argv, key = OUTS[command]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.txt").write_text(VLLM)
    out = tmp_path / "o.csv"
    out.write_text(SERVED.replace(",chain,3,", ",chain,5,") if command == "import_metrics" else "old\n")
    assert _call(fn, argv(out)) == 0 and out.read_text() != "old\n"
    if command == "import_metrics":  # merged: the old row of another key kept, this one's added
        assert len(pd.read_csv(out)) == 2
    capsys.readouterr()
    folder = tmp_path / "d"
    folder.mkdir()
    assert _call(fn, argv(folder)) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"{key}{folder}: is a folder; give a file path" in lines[0], lines
    assert not any(folder.iterdir())


@pytest.mark.parametrize("command", sorted(OUTS))
def test_out_in_a_folder_it_cannot_write_is_one_line_before_the_work(tmp_path, monkeypatch, capsys, command, ro_mount):
    fn, argv, key = OUTS[command]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.txt").write_text(VLLM)
    assert _call(fn, argv(ro_mount / "o.csv")) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"{key}{ro_mount / 'o.csv'}" in lines[0] and "writable" in lines[0], lines
    assert not any(ro_mount.iterdir())
