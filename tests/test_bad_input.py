"""Every bad input of issue #14: exit status != 0, ONE line naming the key and the fix,
no result file written, and no model loaded where the check needs none."""

import glob
import json
import os
import shutil

import pytest
import torch

from test_hydra import job_args, specbench

RESULT_FILES = ("summary.csv", "steps.csv", "outputs.jsonl", "config.yaml")


def written(out) -> list[str]:
    """Result files under out (Hydra's own .hydra/config.yaml aside)."""
    return [
        p
        for name in RESULT_FILES
        for p in glob.glob(os.path.join(str(out), "**", name), recursive=True)
        if os.sep + ".hydra" + os.sep not in p
    ]


def one_line_error(r) -> str:
    assert r.returncode != 0, r.stdout[-1000:]
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("specbench: error:"), r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    return lines[-1]


@pytest.fixture(scope="module")
def bad_files(tiny_pair_dirs, tmp_path_factory):
    """A truncated-weights target, a 16-position target and a non-UTF-8 jsonl."""
    root = tmp_path_factory.mktemp("bad")
    trunc = root / "truncated"
    shutil.copytree(tiny_pair_dirs[1], trunc)
    data = (trunc / "model.safetensors").read_bytes()
    (trunc / "model.safetensors").write_bytes(data[: len(data) // 2])
    short = root / "short"
    shutil.copytree(tiny_pair_dirs[1], short)
    cfg = json.loads((short / "config.json").read_text())
    (short / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": 16}))
    latin = root / "latin1.jsonl"
    latin.write_bytes('{"id": "a", "text": "caf\u00e9 cr\u00e8me"}\n'.encode("latin-1"))
    long_prompt = root / "long.jsonl"
    long_prompt.write_text(json.dumps({"id": "long/0", "text": "def add(a, b): " * 40}) + "\n")
    blank = root / "blank.jsonl"
    blank.write_text(
        json.dumps({"id": "ok", "text": "def f(x):"}) + "\n" + json.dumps({"id": "ws", "text": " \n\t"}) + "\n"
    )
    return {
        "truncated": str(trunc),
        "short": str(short),
        "latin": str(latin),
        "long": str(long_prompt),
        "blank": str(blank),
    }


# case -> (overrides, text the one line must contain, needs a loaded model: none does, the context
# length is read from the models' configs)
CASES = {
    "local pair without paths": (["pair.draft.path=???", "pair.target.path=???"], "pair.draft.path is not set", False),
    "budget not a number": (["tree.budget=abc"], "tree.budget='abc'", False),
    "budget not an integer": (["tree.budget=2.5"], "tree.budget=2.5", False),
    "eagle2 width 0": (["tree=eagle2", "tree.width=0"], "tree.width=0", False),
    "negative rank path": (["tree=paths", "tree.paths=[[0],[-1]]"], "tree.paths[1]=[-1]", False),
    "top_p above 1": (["verify=mss", "verify.top_p=1.5"], "verify.top_p=1.5", False),
    "unknown dtype": (["dtype=float8"], "dtype='float8'", False),
    "replay with a sampling mode": (["engine=replay", "verify=mss"], "engine=replay", False),
    "batch size 0": (["batch_size=0"], "batch_size=0", False),
    "out_root under a file": (["out_root=/dev/null/x"], "out_root=/dev/null/x", False),
    "truncated safetensors": (["pair.target.path={truncated}"], "truncated", False),
    "non-UTF-8 jsonl": (["dataset=jsonl", "dataset.path={latin}"], "not UTF-8", False),
    "prompt past the context": (["pair.target.path={short}"], "positions > the target's 16", False),
    "max_new_tokens past the context": (["max_new_tokens=2000"], "positions > the target's 1024", False),
    "prompt past the draft's context": (["pair.draft.path={short}"], "positions > the draft's 16", False),
    "long jsonl prompt past the context": (
        ["pair.target.path={short}", "dataset=jsonl", "dataset.path={long}"],
        "prompt 'long/0'",
        False,
    ),
    # issue 24: contradictory rows, unknown keys, the real fix, model-free checks first
    "greedy at T > 0": (["verify=greedy", "verify.temperature=0.7"], "verify.temperature=0.7 with greedy", False),
    "unknown top-level key": (["foo=1"], "foo: no such key", False),
    "unknown top-level key with +": (["+foo=1"], "foo: no such key", False),
    "misspelt key with +": (["+max_new_token=3"], "did you mean max_new_tokens?", False),
    "tree parameter the tree does not use": (["+tree.width=3"], "tree.width: not a parameter of tree=chain", False),
    "unknown dataset key": (["+dataset.foo=1"], "dataset.foo: not a parameter of dataset=smoke", False),
    # a dataset option is its loader's schema, a pair's its drafter's (core.options): + or not, one line
    "misspelt dataset key": (
        ["dataset.limt=3"],
        "dataset.limt: not a parameter of dataset=smoke (did you mean limit?); remove it "
        "(valid: kind, limit, max_prompt_tokens, name, prompts)",
        False,
    ),
    "pair key its drafter lacks": (["pair.layers=3"], "pair.layers: not a parameter of pair.drafter=model", False),
    "pair key with +": (["+pair.foo=1"], "pair.foo: not a parameter of pair.drafter=model; remove it", False),
    # a pair's draft and target are typed model specs: a key one lacks is refused, + or not
    "model spec key with +": (
        ["+pair.draft.foo=1"],
        "pair.draft.foo: not a parameter of a model spec; remove it",
        False,
    ),
    "misspelt model spec key": (
        ["pair.target.idd=x"],
        "pair.target.idd: not a parameter of a model spec (did you mean id?); remove it (valid: id, path, source, weights)",
        False,
    ),
    # issue 37: a tree or verify option is its registry entry's schema; + or not, a key it lacks is refused
    "misspelt tree key": (
        ["tree=kary", "tree.widht=3"],
        "tree.widht: not a parameter of tree=kary (did you mean width?); remove it (valid: budget, name, width)",
        False,
    ),
    "misspelt verify key with +": (
        ["verify=mss", "+verify.ordr=storage"],
        "verify.ordr: not a parameter of verify=mss (did you mean order?)",
        False,
    ),
    "whitespace-only prompt": (["dataset=jsonl", "dataset.path={blank}"], "prompt 'ws' has empty text", False),
    # issue 25: a plugins module that cannot be imported (study/job/plugins.py)
    "plugin module not importable": (
        ["plugins=[no_such_plugin]"],
        "plugins=[no_such_plugin]: cannot import "
        "no_such_plugin (No module named 'no_such_plugin'); put its folder on PYTHONPATH",
        False,
    ),
    "budget past the context": (
        ["pair.target.path={short}", "tree.budget=14", "max_new_tokens=2", "dataset.prompts=[hello]"],
        "lower tree.budget to",
        False,
    ),
}
# no message may suggest a limit that refuses every prompt
NEVER = "max_prompt_tokens=0"
if not torch.cuda.is_available():
    CASES["cuda without CUDA"] = (["device=cuda"], "device=cuda", False)


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_one_line_nothing_written(tiny_pair_dirs, bad_files, tmp_path, case):
    extra, needle, loads = CASES[case]
    extra = [e.format(**bad_files) for e in extra]
    out = tmp_path / "outputs"
    keys = {e.partition("=")[0] for e in extra}
    args = [a for a in job_args(tiny_pair_dirs, out) if a.partition("=")[0] not in keys] + extra
    r = specbench(*args)
    line = one_line_error(r)
    assert needle in line and NEVER not in line, line
    assert not written(out)
    assert ("loaded local model" in r.stdout + r.stderr) == loads, "a model was loaded for a config check"


def test_a_failed_job_leaves_error_txt_with_reason_and_traceback(tiny_pair_dirs, tmp_path):
    out = tmp_path / "outputs"
    r = specbench(*job_args(tiny_pair_dirs, out, "tree.budget=abc"))
    line = one_line_error(r)
    errors = glob.glob(str(out / "**" / "error.txt"), recursive=True)
    assert len(errors) == 1
    text = open(errors[0]).read()
    assert text.splitlines()[0] == line.removeprefix("specbench: error: ")
    assert "Traceback" in text


def test_multirun_with_failing_jobs_exits_nonzero_and_counts_them(tiny_pair_dirs, tmp_path):
    """The issue's repro: speculative verifies chains only, so both jobs fail."""
    out = tmp_path / "outputs"
    r = specbench(*job_args(tiny_pair_dirs, out, "-m", "verify=speculative", "tree=binary,kary"))
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("specbench: 2 of 2 jobs failed"), r.stderr[-2000:]
    errors = sorted(glob.glob(str(out / "**" / "error.txt"), recursive=True))
    assert len(errors) == 2 and all(os.path.dirname(e) in last for e in errors)
    assert not written(out)


def test_long_override_values_give_short_job_folders(tiny_pair_dirs, tmp_path):
    """A 60-entry tree.paths sweep runs; its folder name holds a hash, not the list."""
    paths = "[" + ",".join(["[0]"] + [f"[0,{'0,' * (i // 10)}{i % 10}]" for i in range(59)]) + "]"
    out = tmp_path / "outputs"
    r = specbench(
        *job_args(
            tiny_pair_dirs,
            out,
            "-m",
            "tree=paths",
            "tree.budget=2,3",
            f"tree.paths={paths}",
            "max_new_tokens=4",
            "dataset.limit=1",
        )
    )
    assert r.returncode == 0, r.stderr[-2000:]
    summaries = glob.glob(str(out / "**" / "summary.csv"), recursive=True)
    assert len(summaries) == 2
    assert all(len(os.path.basename(os.path.dirname(s))) < 200 for s in summaries)
    assert not any("[0," in s for s in summaries)
