"""Every benchmark script in scripts/ runs end to end on the tiny local pair (seconds each): its
``main(argv)`` with its smallest settings, float32, the ``smoke`` dataset, output files in tmp_path."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from specbench.inputs import models
from specbench.study.job import scriptargs

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
MODEL_SCRIPTS = ("bench_batch", "bench_bf16_replay", "bench_ceiling", "bench_engine", "bench_live", "trace_step")
ENGINE_SCRIPTS = ("bench_llamacpp",)  # its smoke test serves a tiny GGUF: tests/test_llamacpp.py


def test_every_python_script_has_a_smoke_test():
    assert {p.stem for p in SCRIPTS.glob("*.py")} == set(MODEL_SCRIPTS) | set(ENGINE_SCRIPTS)


@pytest.fixture
def run(tiny_pair_dirs, capsys):
    """run(name, *options) -> stdout of scripts/NAME.py's main on the tiny pair; the model cache is
    cleared after (bench_live sets generation options on the draft it loads)."""

    def go(name: str, *options: str) -> str:
        spec = importlib.util.spec_from_file_location(f"script_{name}", SCRIPTS / f"{name}.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        pair = ["--pair", "local", "--pair-override", f"draft.path={tiny_pair_dirs[0]}"]
        module.main([*pair, "--pair-override", f"target.path={tiny_pair_dirs[1]}", "--dataset", "smoke", *options])
        return capsys.readouterr().out

    yield go
    models.clear_cache()


def test_bench_ceiling(run):
    out = run("bench_ceiling", "--dtype", "float32", "--new-tokens", "4", "--batches", "2", "--live-tokens", "4")
    ratios = out[out.index("ratios (goal):") :].splitlines()[1:]
    assert len(ratios) == 3 and all("(>= " in line for line in ratios), out


def test_bench_live(run):
    options = ["--dtype", "float32", "--prompts", "1", "--tokens", "4", "--search-prompts", "1"]
    out = run("bench_live", *options, "--candidates", "[{name: chain, budget: 2}]")
    assert "(d) specbench live chain,budget=2" in out
    assert out.splitlines()[-1].startswith("(c)/(b) = "), out


def test_bench_batch(run, tmp_path):
    csv = tmp_path / "divergence.csv"
    out = run(
        "bench_batch",
        *("--dtype", "float32", "--prompts", "4", "--tokens", "4", "--batches", "1,4", "--trees", "chain/4"),
        *("--cont-prompts", "2", "--cont-tokens", "4", "--divergence-out", str(csv)),
    )
    last = out.splitlines()[-2:]
    assert last[0].startswith("live chain/4 float32 tokens/s, B=4 over B=1: ") and "not run" not in last[0], out
    assert last[1].startswith("batched continuations fp32 (2 x 4) over batch-1: "), out
    row = pd.read_csv(csv).iloc[0]
    assert (row.dataset, row.n_prompts, row.max_new_tokens, row.batch_size) == ("smoke", 2, 4, 2)
    assert row.pair.startswith("local:")


def test_bench_bf16_replay(run, tmp_path):
    csv = tmp_path / "replay.csv"
    run(
        "bench_bf16_replay",
        *("--dtype", "float32", "--prompts", "2", "--tokens", "4", "--batch", "2", "--trees", "chain/2"),
        *("--out", str(csv)),
    )
    row = pd.read_csv(csv).iloc[0]
    assert (row["dtype"], row.tree, row.budget, row.prompts, row.live_batch) == ("float32", "chain", 2, 2, 2)
    assert row.diverged == 0  # float32: live equals the batched continuation
    assert row.tokens_per_step_live == row.tokens_per_step_replay == row.tokens_per_step_rank_replay
    run(  # a second tree joins the file; the first tree's row stays
        "bench_bf16_replay",
        *("--dtype", "float32", "--prompts", "2", "--tokens", "4", "--batch", "2", "--trees", "binary/3"),
        *("--out", str(csv)),
    )
    assert sorted(pd.read_csv(csv).tree) == ["binary", "chain"]


def test_bench_engine(run, tmp_path):
    options = ["--prompts", "1", "--tokens", "4", "--shapes", "chain", "--budgets", "2", "--out", str(tmp_path)]
    out = run("bench_engine", *options)
    assert "acceptance columns identical: 1 configurations" in out, out
    assert out.splitlines()[-1].startswith("live/replay time ratio: "), out


def test_pair_option_errors_are_one_line(tiny_pair_dirs, tmp_path):
    cases = [
        (("local", []), "pair.draft.path, pair.target.path not set; add --pair-override draft.path="),
        (("local", ["target.path"]), "use KEY=VALUE"),
        (("nope", []), "no pair 'nope' in conf/pair/"),
        ((str(tmp_path / "none.yaml"), []), "no such file"),
    ]
    for args, needle in cases:
        with pytest.raises(ValueError, match=needle) as e:
            scriptargs.pair_spec(*args)
        assert "\n" not in str(e.value)
    spec = scriptargs.pair_spec("local", [f"pair.draft.path={tiny_pair_dirs[0]}", f"target.path={tiny_pair_dirs[1]}"])
    assert spec["name"] == f"local:{tiny_pair_dirs[0]}->{tiny_pair_dirs[1]}"


def test_trace_step(tiny_pair_dirs, capsys):
    """scripts/trace_step.py follows one live step of the tiny pair: the loop calls each part
    once, in order (drafter, verifier, mode, commit, record, analysis)."""
    from conftest import tiny_pair_overrides

    spec = importlib.util.spec_from_file_location("script_trace_step", SCRIPTS / "trace_step.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    counts = module.main([*tiny_pair_overrides(tiny_pair_dirs), "dataset=smoke"])
    out = capsys.readouterr().out
    assert len(counts) == 2 and all("modules" in c and "returns" in c for c in counts)
    calls = [line for line in out.splitlines() if " loop calls: " in line][0].split(": ", 1)[1].split(", ")
    order = ["drafters.draft", "verifiers.score", "modespec.checked_verdict", "verifiers.commit", "records.step_record"]
    at = [next(i for i, c in enumerate(calls) if c.endswith(name)) for name in order]
    assert at == sorted(at), calls
    models.clear_cache()
