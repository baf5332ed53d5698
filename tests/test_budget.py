"""The default run's plan (study.budget) on hand-made machine rates: more minutes never cover less,
nothing planned exceeds the budget, a slower machine covers less; the shell's view of a plan."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from specbench.study import budget

FAST = {"bfloat16": {"1": 13.0, "64": 80.0}, "float32": {"1": 2.3, "64": 24.0}}  # AVX-512 BF16
AVX2 = {"bfloat16": {"1": 0.5, "64": 0.9}, "float32": {"1": 8.0, "64": 60.0}}  # bf16 emulated
UNITS = [
    ("qwen_coder", "humaneval", ["chain/3", "binary/3", "chain/4", "specinfer/6"]),
    ("ngram_qwen", "humaneval", ["ngram_trie/3", "chain/3"]),
    ("qwen_coder", "mt_bench", ["binary/3", "kary/3"]),
    ("smollm_qwen", "humaneval", ["binary/3"]),
]
SAMPLE = [
    {"pair": "qwen_coder", "dataset": "humaneval", "dtype": "bfloat16", "max_new_tokens": 128},
    {"pair": "ngram_qwen05", "dataset": "mt_bench", "dtype": "bfloat16", "max_new_tokens": 128},
]


def plan(minutes: float, rates=FAST, dtype="bfloat16"):
    return budget.plan(budget.PROFILES["real"], rates, dtype, minutes * 60, UNITS, SAMPLE)


def test_more_minutes_never_cover_less_and_nothing_planned_exceeds_the_budget():
    last = (0, 0, 0, 0)
    seen = set()
    for minutes in range(15, 400, 5):
        p = plan(minutes)
        assert not p["over_budget"] and p["planned_s"] <= minutes * 60, minutes
        got = budget.covered(p)
        assert all(a >= b for a, b in zip(got, last)), (minutes, got, last)
        last = got
        seen.add(got)
    assert len(seen) > 5  # the budget does decide
    full = plan(10_000)
    assert budget.covered(full) == (len(UNITS), 16 * len(UNITS), budget.GRIDS.index("default"), 2)


def test_the_first_unit_takes_fewer_prompts_before_a_second_unit_is_planned():
    units = [budget.covered(plan(m))[:2] for m in range(15, 120, 5)]
    partial = [u for u in units if u[0] == 1 and u[1] < 16]
    assert partial, units  # some budgets run the first pair x dataset on fewer than 16 prompts
    assert all(n >= 16 + budget.PROFILES["real"].prompts[1] for k, n in units if k == 2)  # then the next, whole


def test_a_slower_machine_covers_less_and_the_sample_runs_in_its_own_dtype():
    fast, slow = plan(60), plan(60, AVX2, "float32")
    assert budget.covered(slow) <= budget.covered(fast)
    by = {s["step"]: s for s in slow["steps"]}
    # the sample stays bf16 (the committed rows' dtype) even where float32 runs the rest
    assert by["recheck"]["eta_s"] > {s["step"]: s for s in fast["steps"]}["recheck"]["eta_s"] * 5


def test_a_budget_below_the_mandatory_steps_is_planned_and_marked_over():
    p = plan(1)
    assert p["over_budget"] and budget.covered(p)[:3] == (0, 0, 0)
    assert "no pair" in budget.sentence(p)


def test_the_shell_reads_the_plan_and_the_record_states_it(tmp_path):
    p = {**plan(90), "minutes": 90, "spent_s": 30, "machine": {"machine": "cpu X", "dtype": "bfloat16"}}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(p))
    lines = budget.get(p, "speed").splitlines()
    assert lines and all(len(ln.split("\t")) == 5 for ln in lines)
    pair, ds, n, tok, cands = lines[0].split("\t")
    assert (pair, ds, tok) == ("qwen_coder", "humaneval", "64") and cands.startswith("[chain/3,")
    assert budget.get(p, "costs_pairs").startswith("[") and budget.get(p, "kv_lens") == "[128,512]"
    rec = budget.record({**p, "covered": budget.sentence(p)}, str(tmp_path / "none.csv"))
    assert rec["machine"] == "cpu X" and rec["planned_s"] == round(30 + p["planned_s"])
    assert rec["acceptance_check"].endswith("not run")


@pytest.mark.parametrize(
    "args, key",
    [
        (["plan", "--machine", "MISSING", "--out", "p.json"], "--machine"),
        (["plan", "--machine", "m.json", "--minutes", "0", "--out", "p.json"], "--minutes"),
        (["plan", "--machine", "m.json", "--dtype", "float16", "--out", "p.json"], "--dtype"),
        (["get", "p0.json", "nope"], "get"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, key):
    args = [str(tmp_path / a) if a.endswith(".json") or a == "MISSING" else a for a in args]
    (tmp_path / "m.json").write_text(json.dumps({"machine": "x", "dtype": "bfloat16", "rates_gflops": FAST}))
    (tmp_path / "p0.json").write_text(json.dumps({**plan(45), "machine": {}}))
    r = subprocess.run(
        [sys.executable, "-m", "specbench.study.budget", *args, "--results", str(tmp_path)][
            : len(args) + 3 + 2 * (args[0] == "plan")
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and key in r.stderr
    assert not (tmp_path / "p.json").exists()
