"""The default run's plan (study.tools.budget) on hand-made machine rates: more minutes never cover less,
nothing planned exceeds the budget, a slower machine covers less; the shell's view of a plan."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pandas as pd
import pytest

from conftest import ROOT
from specbench.study.tools import budget, llamaplan

FAST = {"bfloat16": {"1": 13.0, "64": 80.0}, "float32": {"1": 2.3, "64": 24.0}}  # AVX-512 BF16
AVX2 = {"bfloat16": {"1": 0.5, "64": 0.9}, "float32": {"1": 8.0, "64": 60.0}}  # bf16 emulated
UNITS = [
    ("qwen_coder", "humaneval", ["chain/3", "binary/3", "chain/4", "specinfer/6"]),
    ("ngram_qwen", "humaneval", ["ngram_trie/3", "chain/3"]),
    ("qwen_coder", "mt_bench", ["binary/3", "kary/3"]),
    ("smollm_qwen", "humaneval", ["binary/3"]),
]


def _row(pair, tree, dataset, batch, engine="replay", tokens=128):
    return dict(
        config_hash=f"{pair}-{tree}-{dataset}-{batch}", pair=pair, tree=tree, budget=4, dataset=dataset,
        frontier_rule="topk", dtype="bfloat16", max_new_tokens=tokens, batch_size=batch, engine=engine,
    )  # fmt: skip


SAMPLE = [  # a committed sample: 1.5B rows at batch 64 and 32, 0.5B rows at 32, a live batch-1 row
    _row("qwen_coder", "medusa63", "stdlib_code", 64),
    _row("qwen_coder", "kary", "stdlib_code", 64),
    _row("ngram_qwen", "ngram_trie", "humaneval", 32),
    _row("ngram_qwen05", "sequoia", "mt_bench", 32),
    _row("smollm_qwen05", "binary", "mt_bench", 32),
    _row("smollm_qwen", "none", "humaneval", 1, "live", 64),
]


def plan(minutes: float, rates=FAST, dtype="bfloat16"):
    return budget.plan(budget.PROFILES["real"], rates, dtype, minutes * 60, UNITS, SAMPLE)


def test_more_minutes_never_cover_less_and_nothing_planned_exceeds_the_budget():
    last, width = (0, 0, 0, 0), None
    seen = set()
    for minutes in range(15, 400, 5):
        p = plan(minutes)
        assert not p["over_budget"] and p["planned_s"] <= minutes * 60, minutes
        got = budget.covered(p)
        assert got >= last, (minutes, got, last)  # in priority order: speed units, prompts, candidates, grid, sample
        now = {s["step"]: s for s in p["steps"]}["costs"]["max_tokens"]
        # the grid gives way to speed only where a speed unit first fits, and the rest to the whole cost grid
        if not last[0] == 0 < got[0] and now == width:
            assert all(a >= b for a, b in zip(got, last)), (minutes, got, last)
        last, width = got, now
        seen.add(got)
    assert len(seen) > 5  # the budget does decide
    full = plan(10_000)
    everything = (len(UNITS), 16 * len(UNITS), sum(len(u[2]) for u in UNITS), budget.GRIDS.index("default"))
    assert budget.covered(full) == (*everything, len(SAMPLE))


def test_the_first_unit_takes_fewer_prompts_before_a_second_unit_is_planned():
    units = [budget.covered(plan(m))[:2] for m in range(15, 120, 5)]
    partial = [u for u in units if u[0] == 1 and u[1] < 16]
    assert partial, units  # some budgets run the first pair x dataset on fewer than 16 prompts
    assert all(n >= 16 + budget.PROFILES["real"].prompts[1] for k, n in units if k == 2)  # then the next, whole


def test_a_slower_machine_covers_less_and_the_sample_runs_in_its_own_dtype():
    fast, slow = plan(60), plan(60, AVX2, "float32")
    assert budget.covered(slow) <= budget.covered(fast)
    # the sample stays bf16 (the committed rows' dtype) even where float32 runs the rest: dearer, so fewer rows
    prof = budget.PROFILES["real"]
    assert budget.recheck_s(SAMPLE, AVX2, prof) > 5 * budget.recheck_s(SAMPLE, FAST, prof)
    by = {s["step"]: s for s in slow["steps"]}
    assert by["recheck"]["configurations"] < {s["step"]: s for s in fast["steps"]}["recheck"]["configurations"]


def test_a_machine_too_slow_for_every_candidate_times_the_projected_top_before_it_drops_the_step():
    # the AVX2 machine of this session (2026-12-02: float32 6.6 / 60.4 GFLOP/s at 1 / 64 rows; bf16 13.8 / 18.5),
    # 35 min left after set-up: every candidate at 4 prompts did not fit and the plan ran no speed benchmark;
    # 31 here, the 4 min of the collect step it then ran (and no longer runs) taken off
    rates = {"bfloat16": {"1": 13.8, "64": 18.5}, "float32": {"1": 6.6, "64": 60.4}}
    p = budget.plan(budget.PROFILES["real"], rates, "float32", 31 * 60, UNITS, SAMPLE, python_s=0.13)
    steps = {s["step"]: s for s in p["steps"]}
    unit = steps["speed"]["units"][0]
    # that host's Python work took 0.13 s and its report 355 s: the plan counts that, and the speed step's
    # deadline leaves the record, ceiling and report their time (the attention grid runs before it)
    assert steps["report"]["eta_s"] >= 355 and [s["step"] for s in p["steps"]][3:] == [
        "speed", "record", "ceiling", "report"]  # fmt: skip
    assert steps["speed"]["after_s"] == sum(steps[k]["eta_s"] for k in ("record", "ceiling", "report"))
    quick = budget.fixed_steps(budget.PROFILES["real"], 0.03)  # a host 4x quicker keeps the fixed estimates
    assert quick == budget.PROFILES["real"].fixed_s
    assert 0 < len(unit["candidates"]) < len(UNITS[0][2]) and unit["prompts"] == budget.PROFILES["real"].prompts[0]
    assert unit["candidates"] + unit["dropped"] == UNITS[0][2]  # the projected top kept, the last dropped first
    assert "dropped to fit" in budget.sentence(p) and not p["over_budget"]
    planned = budget.get(p, "speed").split("\t")[4]
    assert planned == "[" + ",".join(unit["candidates"]) + "]"  # the shell runs only the kept ones


SLOW = {"bfloat16": {"1": 8.7, "64": 14.4}, "float32": {"1": 4.8, "64": 38.9}}  # that host later, float32 picked


def test_where_no_speed_unit_fits_the_small_attention_grid_still_runs():
    # that host (Python work 0.123 s) with 31 min left after set-up less its 4 min collect (no longer run), on a
    # machine whose narrow cost grid saves nothing
    prof = dataclasses.replace(budget.PROFILES["real"], narrow_tokens=128)
    p = budget.plan(prof, SLOW, "float32", 27 * 60, UNITS[:1], SAMPLE, python_s=0.123)
    steps = {s["step"]: s for s in p["steps"]}
    assert not steps["speed"]["units"] and steps["attention"]["grid"] == "key" and not p["over_budget"]


def test_where_four_prompts_do_not_fit_the_projected_top_runs_on_fewer_before_the_grid():
    # 33 min left: not even the projected top fits 4 prompts (that host ran no speed benchmark); its least set (the
    # top and its twin, plain decoding and its A/A copy) fits 2, taken before the grid; the budget closes behind it
    prof = dataclasses.replace(budget.PROFILES["real"], narrow_tokens=128)
    p = budget.plan(prof, SLOW, "float32", 33 * 60, UNITS[:1], SAMPLE, python_s=0.123)
    steps = {s["step"]: s for s in p["steps"]}
    unit = steps["speed"]["units"][0]
    assert prof.least <= unit["prompts"] < prof.prompts[0] and unit["candidates"] == UNITS[0][2][:1]
    assert unit["dropped"] == UNITS[0][2][1:] and steps["attention"]["grid"] == "none" and not p["over_budget"]
    assert budget.speed_s("qwen_coder", 1, prof.prompts[0], prof, SLOW["float32"]) > unit["eta_s"]
    assert f"{unit['prompts']} prompt{'s' * (unit['prompts'] != 1)} x 64 tokens" in budget.sentence(p)
    assert budget.get(p, "speed").split("\t")[2] == str(unit["prompts"])  # the shell's dataset.limit


def test_where_the_whole_cost_grid_crowds_out_the_answer_the_costs_measure_the_batch_1_widths():
    # 42 min left: the whole grid (1..128 tokens) leaves the projected top alone on 4 prompts; the batch-1 trees'
    # widths (1..17) leave it 3 of its 4 candidates.  Where the whole grid leaves room, it is measured
    prof = budget.PROFILES["real"]
    whole = budget.plan(
        dataclasses.replace(prof, narrow_tokens=128), SLOW, "float32", 42 * 60, UNITS[:1], SAMPLE, 0.123
    )
    p = budget.plan(prof, SLOW, "float32", 42 * 60, UNITS[:1], SAMPLE, python_s=0.123)
    assert budget.covered(p)[:3] > budget.covered(whole)[:3] and not p["over_budget"]
    costs = {s["step"]: s for s in p["steps"]}["costs"]
    assert costs["max_tokens"] == prof.narrow_tokens and budget.get(p, "costs_max_tokens") == "17"
    assert costs["eta_s"] < {s["step"]: s for s in whole["steps"]}["costs"]["eta_s"] / 2
    assert "forwards of 1-17 tokens" in budget.sentence(p)
    roomy = plan(60)
    assert {s["step"]: s for s in roomy["steps"]}["costs"]["max_tokens"] is None
    assert budget.get(roomy, "costs_max_tokens") == "null" and "1-17" not in budget.sentence(roomy)


def test_a_whole_cost_grid_that_overruns_the_budget_gives_way_to_the_narrow_one():
    # the AVX2 EPYC's fresh clone of 2026-12-05 (4.3 / 25.0 GFLOP/s fp32): with no speed unit in reach the whole grid
    # (1..128 tokens, ETA 17 min) was planned although it put the mandatory steps over the budget (27 min left here:
    # with the costs step costed at the rounds it times, not one more, 31 min fit the whole grid)
    prof, rates = budget.PROFILES["real"], {"bfloat16": {"1": 5.8, "64": 6.5}, "float32": {"1": 4.3, "64": 25.0}}
    fixed = budget.fixed_steps(prof, 0.217)
    whole = budget.plan(
        dataclasses.replace(prof, narrow_tokens=128), rates, "float32", 27 * 60, UNITS[:1], SAMPLE, 0.217
    )
    p = budget.plan(prof, rates, "float32", 27 * 60, UNITS[:1], SAMPLE, python_s=0.217)
    assert whole["over_budget"] and p["planned_s"] < whole["planned_s"]
    costs = {s["step"]: s for s in p["steps"]}["costs"]
    assert costs["max_tokens"] == prof.narrow_tokens and "the whole grid overran the budget" in budget.sentence(p)
    assert {s["step"]: s["eta_s"] for s in p["steps"] if s["step"] in fixed} == fixed


def test_the_fixed_steps_are_sized_by_this_machines_recorded_collect_over_its_python_work(tmp_path):
    prof = budget.PROFILES["real"]
    by_python = budget.fixed_steps(prof, 0.217)  # the python_s scaling: 1.67x the slow host's
    mine = budget.fixed_steps(prof, 0.217, collect_s=249.0)
    assert mine["report"] == pytest.approx(prof.slow_fixed_s["report"] * 249.0 / prof.slow_collect_s)
    assert by_python["report"] > 600  # the linear rule's 1.67x
    quick = budget.fixed_steps(prof, 0.2, collect_s=76.0)  # a host that collects faster than the slow one
    assert quick["report"] == pytest.approx(360.0 * 76.0 / 230.0) and quick["report"] < prof.fixed_s["report"]
    step = "collect and the run's record (default_run.json)"
    (tmp_path / "run_times.csv").write_text(
        "run,step,seconds,machine_id\n"
        f'1,"{step}",181,0042\n2,"{step}",249,0042\n3,"{step}",204,0042\n4,"{step}",0,0042\n'
        f'5,"{step}",76,abc\n6,set-up,777,0042\n'
    )
    both = (budget.COLLECT_STEP, budget.REPORT_STEP)
    # its runs' median (a skipped step's 0 left out); no report step recorded
    assert budget.recorded_steps(str(tmp_path), "0042", both) == (204.0, None)
    assert budget.recorded_steps(str(tmp_path), "other", both) == (None, None)
    assert budget.recorded_steps(str(tmp_path / "none"), "0042", both) == (None, None)
    run_all = (ROOT / "scripts" / "default_run.sh").read_text()
    assert run_all.count("specbench.collect") == 1 and "tiny_seed_collect" in run_all  # the tiny pair's seed alone


def test_the_report_is_sized_by_this_machines_recorded_report_step(tmp_path):
    prof = budget.PROFILES["real"]
    step = "the report (REPORT.md; its own time into run_times.csv after it)"
    (tmp_path / "run_times.csv").write_text(
        f'run,step,seconds,machine_id\n1,"{step}",212,0042\n2,"{step}",240,0042\n3,"{step}",0,0042\n4,"{step}",90,abc\n'
    )
    (report,) = budget.recorded_steps(str(tmp_path), "0042", (budget.REPORT_STEP,))
    assert report == 226.0  # the median of its two runs; the skipped one's 0 and another machine's left out
    assert (
        budget.REPORT_STEP in step
        and (ROOT / "scripts" / "default_run.sh").read_text().count('step "the report (') == 1
    )
    mine = budget.fixed_steps(prof, 0.217, collect_s=249.0, report_s=report)
    assert mine["report"] == 226.0  # its own report, not the collect-scaled one
    assert mine["ceiling"] == budget.fixed_steps(prof, 0.217, collect_s=249.0)["ceiling"]  # the rest as before
    p = budget.plan(prof, FAST, "bfloat16", 45 * 60, UNITS, SAMPLE, 0.217, report_s=report)
    assert {s["step"]: s["eta_s"] for s in p["steps"]}["report"] == 226.0


def test_the_sample_is_costed_at_its_committed_batch_and_shrinks_to_fit_dropping_the_dearest():
    prof = budget.PROFILES["real"]
    cost = {r["config_hash"]: sum(budget.sample_cost(r, FAST, prof)) for r in SAMPLE}
    # rows x tokens at the batch and the target's size: a 1.5B batch-64 row costs most, the live batch-1 row least
    assert max(cost, key=cost.get).startswith("qwen_coder") and min(cost, key=cost.get).endswith("-1")
    assert cost["ngram_qwen05-sequoia-mt_bench-32"] < cost["ngram_qwen-ngram_trie-humaneval-32"]
    # one continuation per target x dataset x batch: two rows sharing one cost less than twice one
    both = budget.recheck_s(SAMPLE[:2], FAST, prof)
    assert both < 2 * budget.recheck_s(SAMPLE[:1], FAST, prof)
    shrunk = seen = None
    for minutes in range(15, 200, 5):
        by = {s["step"]: s for s in plan(minutes)["steps"]}
        rc = by["recheck"]
        assert rc["configurations"] >= 1 and rc["sampled"] == len(SAMPLE) and rc["eta_s"] > 0
        assert SAMPLE[-1]["config_hash"] in rc["configs"]  # the cheapest row: always kept
        kept = [cost[h] for h in rc["configs"]]
        assert all(d["eta_s"] >= max(kept) - 1e-9 for d in rc["dropped"])  # the dearest go first
        if rc["dropped"] and 1 < rc["configurations"]:
            shrunk = rc
        seen = rc
    assert shrunk is not None and seen["dropped"] == [] and seen["configurations"] == len(SAMPLE)
    assert all("(batch " in d["name"] for d in shrunk["dropped"]) and shrunk["unrepresented"]
    line = budget.printout({**plan(200), "minutes": 200, "machine": {"machine": "x"}}, 0)
    assert f"{len(SAMPLE)} of {len(SAMPLE)} sampled configurations" in line and "batch (1/32/64)" in line


def test_a_wide_forward_is_priced_from_the_measured_rates_alone():
    r = {"1": 10.0, "64": 100.0}
    one, wide = budget.forward_s("qwen1.5b", 1, r), budget.forward_s("qwen1.5b", 65, r)
    assert one == pytest.approx(2 * 1.54 / 10 + 0.002)
    assert wide - one == pytest.approx(2 * 1.54 * 64 / 100)  # the 64-row rate, no hand-set gain
    assert not hasattr(budget, "WIDE_GAIN")


def test_a_narrow_forward_is_priced_at_the_narrow_widths_measured():
    """The AVX2 EPYC in fp32 (2026-12-05, results/default_run.json): the layer ran 6.6 / 6.4 / 19.5 / 40.1 GFLOP/s at
    1 / 4 / 16 / 64 rows, and the 1.5B target's forward took 0.54, 1.90, 2.85 and 2.91 s at 1, 4, 16 and 17 tokens
    (results/costs.csv); charging every token after the first at the 64-row rate priced 4 tokens at 0.70 s."""
    measured = {"1": 6.558, "4": 6.423, "16": 19.51, "64": 40.13}
    two = {k: measured[k] for k in ("1", "64")}
    flop = 2 * 1.54
    assert budget.forward_s("qwen1.5b", 4, measured) == pytest.approx(flop * 4 / 6.423 + 0.002)  # a measured width
    assert budget.forward_s("qwen1.5b", 16, measured) == pytest.approx(flop * 16 / 19.51 + 0.002)
    between = budget.forward_s("qwen1.5b", 10, measured)
    assert between == pytest.approx(flop * (4 / 6.423 + (16 / 19.51 - 4 / 6.423) / 2) + 0.002)  # linear between them
    beyond = budget.forward_s("qwen1.5b", 17, measured) - budget.forward_s("qwen1.5b", 16, measured)
    assert beyond == pytest.approx(flop / 40.13)  # each token past the narrow widths at the 64-row rate
    for n, seconds in ((1, 0.538), (4, 1.898), (16, 2.85), (17, 2.912)):  # within 15% of what the forward took
        assert 0.85 < budget.forward_s("qwen1.5b", n, measured) / seconds < 1.15
    assert budget.forward_s("qwen1.5b", 4, two) / 1.898 < 0.4  # a record of 1 and 64 rows: the old estimate
    odd = {"1": 10.0, "4": 40.0, "16": 200.0, "64": 100.0}  # 16 rows timed faster than 4: never priced below them
    for r in (measured, odd):
        assert all(budget.forward_s("qwen1.5b", a, r) <= budget.forward_s("qwen1.5b", a + 1, r) for a in range(1, 130))


def test_a_budget_below_the_mandatory_steps_is_planned_and_marked_over():
    p = plan(1)
    assert p["over_budget"] and budget.covered(p)[:4] == (0, 0, 0, 0)
    assert "no pair" in budget.sentence(p)


def test_the_shell_reads_the_plan_and_the_record_states_it(tmp_path):
    p = {**plan(90), "minutes": 90, "spent_s": 30, "machine": {"machine": "cpu X", "dtype": "bfloat16"}}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(p))
    lines = budget.get(p, "speed").splitlines()
    assert lines and all(len(ln.split("\t")) == 6 for ln in lines)
    pair, ds, n, tok, cands, after = lines[0].split("\t")
    assert (pair, ds, tok) == ("qwen_coder", "humaneval", "64") and cands.startswith("[chain/3,")
    # each pair x dataset's deadline leaves the steps after the speed step, and the units after it, their ETAs
    by = {s["step"]: s for s in p["steps"]}
    at = [s["step"] for s in p["steps"]].index("speed")
    later = sum(s["eta_s"] for s in p["steps"][at + 1 :])
    assert int(after) == int(later + sum(u["eta_s"] for u in by["speed"]["units"][1:]))
    assert int(lines[-1].split("\t")[-1]) == int(later)
    assert budget.get(p, "costs_pairs").startswith("[") and budget.get(p, "kv_lens") == "[128,512]"
    assert set(budget.get(p, "recheck_configs").split(",")) <= {r["config_hash"] for r in SAMPLE}
    rec = budget.record({**p, "covered": budget.sentence(p)}, str(tmp_path / "none.csv"))
    assert rec["machine"] == "cpu X" and rec["planned_s"] == round(30 + p["planned_s"])
    assert rec["acceptance_check"].endswith("not run")


def test_the_record_states_what_the_speed_benchmark_ran_of_the_plan(tmp_path):
    """A unit takes no prompt it cannot end before its deadline: the record says how many of the planned ran, from
    this machine's speed rows of runs after the plan (another machine's and an earlier run's are not counted)."""
    p = {**plan(90), "minutes": 90, "spent_s": 30, "machine": {"machine": "cpu X", "machine_id": "0042"}}
    units = {s["step"]: s for s in p["steps"]}["speed"]["units"]
    first = units[0]
    assert first["prompts"] >= 2
    since = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    rows = ["run_id,machine_id,pair,dataset,prompt_ids,candidate"]
    rows += [f"20270115T090000-aa,0042,{first['pair']},{first['dataset']},P/{i},{c}" for i in (0, 1) for c in "ab"]
    rows += [f"20270115T090000-bb,9999,{first['pair']},{first['dataset']},P/{i},a" for i in range(9)]  # another machine
    rows += [f"20270101T090000-cc,0042,{first['pair']},{first['dataset']},P/{i},a" for i in range(9)]  # an earlier run
    (tmp_path / "speed.csv").write_text("\n".join(rows) + "\n")
    rec = budget.record(p, str(tmp_path / "none.csv"), str(tmp_path / "speed.csv"), since)
    assert rec["covered"].startswith(budget.sentence(p))
    assert (
        f"of these the speed benchmark ran {first['pair']} on {first['dataset']}: 2 of {first['prompts']} prompts"
        in rec["covered"]
    )
    assert "could not end before its deadline" in rec["covered"]
    whole = [f"20270115T090000-aa,0042,{u['pair']},{u['dataset']},P/{i},a" for u in units for i in range(u["prompts"])]
    (tmp_path / "speed.csv").write_text("\n".join(rows[:1] + whole) + "\n")
    done = budget.record(p, str(tmp_path / "none.csv"), str(tmp_path / "speed.csv"), since)["covered"]
    assert done.endswith("; every planned prompt of the speed benchmark ran")
    none = budget.record(p, str(tmp_path / "none.csv"), str(tmp_path / "missing.csv"), since)["covered"]
    assert f"{first['pair']} on {first['dataset']}: 0 of" in none


@pytest.mark.parametrize(
    "args, key",
    [
        (["plan", "--machine", "MISSING", "--out", "p.json"], "--machine"),
        (["plan", "--machine", "m.json", "--minutes", "0", "--out", "p.json"], "--minutes"),
        (["plan", "--machine", "m.json", "--dtype", "float16", "--out", "p.json"], "--dtype"),
        (["get", "p0.json", "nope"], "get"),
        (["get", "old.json", "speed"], "not a plan of this version"),  # a kept plan of another version
        (["record", "old.json", "--out", "p.json"], "not a plan of this version"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, key):
    args = [str(tmp_path / a) if a.endswith(".json") or a == "MISSING" else a for a in args]
    (tmp_path / "m.json").write_text(json.dumps({"machine": "x", "dtype": "bfloat16", "rates_gflops": FAST}))
    (tmp_path / "p0.json").write_text(json.dumps({**plan(45), "machine": {}}))
    (tmp_path / "old.json").write_text(json.dumps({"minutes": 45, "dtype": "float32"}))
    r = subprocess.run(
        [sys.executable, "-m", "specbench.study.tools.budget", *args, "--results", str(tmp_path)][
            : len(args) + 3 + 2 * (args[0] == "plan")
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and key in r.stderr
    assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize(
    "rates, seconds",
    [  # the 'key' grid's recorded seconds (results/run_times.csv) and the 64-row rates of the host that ran it
        ({"bfloat16": {"64": 282.6}, "float32": {"64": 61.4}}, 43),  # AVX-512 EPYC
        ({"bfloat16": {"64": 797.7}, "float32": {"64": 235.9}}, 23),  # Xeon with AMX
        ({"bfloat16": {"64": 20.9}, "float32": {"64": 79.9}}, 263),  # AVX2-only EPYC: bf16 emulated
    ],
)
def test_the_attention_grid_is_planned_at_both_dtypes_rates(rates, seconds):
    """The grid times bf16 and fp32: on the AVX2-only host its slow bf16 sets its time, which the best
    rate alone put at 160 s (1.6x short); the fit is within 10% of each host's recorded run."""
    prof = budget.PROFILES["real"]
    assert budget.grid_s("key", rates, prof) == pytest.approx(seconds, rel=0.1)
    assert budget.grid_s("default", rates, prof) / budget.grid_s("key", rates, prof) == pytest.approx(660 / 40)


# llama.cpp's stage (study.tools.llamaplan): measured rates of the AVX-512 EPYC (plain 0.041 s, drafting 0.07 s a token)
LLAMA = budget.Llama("qwen_coder", "humaneval", plain_s=0.041, draft_s=0.07, points_s=8.4, rate_by="measured")


def _llama(p: dict) -> dict:
    return {s["step"]: s for s in p["steps"]}["llamacpp"]


def test_llamacpp_is_planned_after_the_first_unit_when_the_minutes_fit_it_and_never_crowds_out_the_mandatory():
    last = (0, 0)
    for minutes in range(15, 400, 5):
        p = budget.plan(budget.PROFILES["real"], FAST, "bfloat16", minutes * 60, UNITS, SAMPLE, llama=LLAMA)
        without = plan(minutes)
        ll, units = _llama(p), {s["step"]: s for s in p["steps"]}["speed"]["units"]
        got = (ll["prompts"], len(ll["candidates"]))
        assert got >= last, (minutes, got, last)  # more minutes never cover less of it
        assert p["planned_s"] <= minutes * 60 and not p["over_budget"], minutes
        assert budget.covered(p) <= budget.covered(without)  # it takes only what the stages after it would
        if got[0]:  # after this machine's answer's first unit on its fewest prompts with all its candidates
            assert units[0]["prompts"] >= 4 and units[0]["candidates"] == UNITS[0][2], minutes
            assert ll["eta_s"] == pytest.approx(
                llamaplan.costs_s(LLAMA, budget.PROFILES["real"])
                + llamaplan.bench_s(LLAMA, got[1], got[0], budget.PROFILES["real"])
            )
        else:
            assert ll["eta_s"] == 0 and ll["skipped"].startswith("the budget left it none"), minutes
        last = got
    assert last == (16, 4)  # at most: every prompt and candidate
    small = budget.plan(budget.PROFILES["real"], FAST, "bfloat16", 15 * 60, UNITS, SAMPLE, llama=LLAMA)
    assert _llama(small)["prompts"] == 0 and budget.get(small, "llamacpp") == ""
    assert "llama.cpp's benchmark not run: the budget left it none" in budget.sentence(small)
    # the mandatory steps alone over the budget: planned over it, llama.cpp not at all
    over = budget.plan(budget.PROFILES["real"], FAST, "bfloat16", 60, UNITS, SAMPLE, llama=LLAMA)
    assert over["over_budget"] and _llama(over)["eta_s"] == 0


def test_llamacpp_eta_model_servers_times_start_plus_requests_at_its_rates():
    prof = budget.PROFILES["real"]
    # 4 candidates: 7 servers; 16 prompts x 64 tokens + a 16-token warm-up each; 2 plain and 5 drafting servers
    want = 7 * prof.llama_start_s + (16 * 64 + 16) * (2 * 0.041 + 5 * 0.07)
    assert llamaplan.bench_s(LLAMA, 4, 16, prof) == pytest.approx(want)
    assert llamaplan.costs_s(LLAMA, prof) == pytest.approx(2 * prof.llama_start_s + 4 * 8.4)  # 3 repeats + warm-up
    p = budget.plan(prof, FAST, "bfloat16", 300 * 60, UNITS, SAMPLE, llama=LLAMA)
    speed, ll = ({s["step"]: s for s in p["steps"]}[k] for k in ("speed", "llamacpp"))
    # the specbench units stop early enough to leave it its time; it leaves the fixed steps theirs
    assert speed["after_s"] == pytest.approx(ll["eta_s"] + ll["after_s"])
    pair, ds, n, tok, cands, after = budget.get(p, "llamacpp").split("\t")
    assert (pair, ds, n, tok, cands) == ("qwen_coder", "humaneval", "16", "64", "[2/0.75,4/0.75,8/0.75,4/0]")
    assert budget.get(p, "llamacpp_costs") == (
        "--pair qwen_coder --repeats 3 --tokens " + ",".join(map(str, range(1, 18))) + " --kv 128,512"
    )
    assert "llamacpp   ETA" in budget.printout({**p, "minutes": 300, "machine": {"machine": "m"}}, 0)


MACHINE = {"machine_id": "m0", "rates_gflops": FAST, "dtype": "bfloat16"}


def _inputs(tmp_path, monkeypatch, why=None, gguf=None, profile="real"):
    from specbench.inputs import llamacpp

    monkeypatch.setattr(llamacpp, "unavailable", lambda: why)
    return llamaplan.inputs(budget.PROFILES[profile], MACHINE, "bfloat16", str(tmp_path), UNITS, gguf)


def test_llamacpp_unavailable_is_one_line_and_the_stage_is_skipped(tmp_path, monkeypatch):
    why = "llama.cpp 0.3.36 is not built for this CPU (/cache/llama.cpp/x): run bash scripts/setup.sh"
    ll = _inputs(tmp_path, monkeypatch, why)
    assert ll.skipped == why
    p = budget.plan(budget.PROFILES["real"], FAST, "bfloat16", 300 * 60, UNITS, SAMPLE, llama=ll)
    assert budget.covered(p) == budget.covered(plan(300))  # its minutes go to the stages after it
    assert _llama(p)["eta_s"] == 0 and budget.get(p, "llamacpp") == ""
    assert budget.get(p, "llamacpp_why") == f"llama.cpp's benchmark: skipped: {why}"
    lines = [ln for ln in budget.printout({**p, "minutes": 300, "machine": {"machine": "m"}}, 0).splitlines()]
    assert [ln.strip() for ln in lines if "llamacpp" in ln] == [f"llamacpp   ETA    0:00  skipped: {why}"]
    # the tiny profile without its GGUF files: the same one line, naming the variable
    tiny = _inputs(tmp_path, monkeypatch, profile="tiny")
    assert "SPECBENCH_TINY_GGUF=DRAFT:TARGET" in tiny.skipped


def test_llamacpp_eta_uses_this_machines_measured_rows_first(tmp_path, monkeypatch):
    bound = _inputs(tmp_path, monkeypatch)  # nothing measured: specbench's plain decoding here, a bound
    assert "a bound" in bound.rate_by and bound.plain_s == bound.draft_s > 0.1
    costs = [
        dict(engine="llamacpp", machine_id=m, pair="qwen_coder", role=r, kv_len=kv, n_tokens=n, seconds=s * n * f)
        for m, f in (("m0", 1.0), ("other", 9.0))
        for r, s in (("target", 0.03), ("draft", 0.02))
        for kv in (128, 512)
        for n in range(1, 18)
    ]
    pd.DataFrame(costs).to_csv(tmp_path / "costs.csv", index=False)
    curve = _inputs(tmp_path, monkeypatch)
    assert "costs.csv" in curve.rate_by and curve.plain_s == pytest.approx(0.03)  # the other machine's left out
    assert curve.draft_s == pytest.approx(llamaplan.CURVE_MARGIN * 0.05)
    assert curve.points_s == pytest.approx(sum(0.05 * n for n in range(1, 18)) * 2)
    speed = [
        dict(
            engine=e, machine_id=m, pair="qwen_coder", candidate=c, tokens=64, max_new_tokens=64, wall_s=1.0, client_s=s
        )
        for e, m in (("llamacpp", "m0"), ("llamacpp", "other"), ("specbench", "m0"))
        for c, s in (("plain", 2.0), ("plain (A/A)", 2.0), ("draft n_max=4 p_min=0.75", 4.0))
    ]
    pd.DataFrame(speed).to_csv(tmp_path / "speed.csv", index=False)
    rows = _inputs(tmp_path, monkeypatch)
    assert "speed.csv" in rows.rate_by and rows.prompt_s == 0.0
    assert (rows.plain_s, rows.draft_s) == (pytest.approx(2.0 / 64), pytest.approx(4.0 / 64))
    assert rows.points_s == curve.points_s  # its cost curve still timed from the curve
