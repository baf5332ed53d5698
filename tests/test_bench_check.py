"""The cost model against the interleaved benchmark (report.benchcheck) on hand-made timing tables: each
candidate projected from its own timed steps with each decode's prefill counted as the benchmark's wall
seconds count it, the per-term ratios, and the replay-based comparison it replaces."""

from dataclasses import replace

import numpy as np
import pandas as pd

from specbench.report import benchcheck, measured, speedup
from specbench.report.context import Tables
from specbench.results import runcontrols as rc
from specbench.results import speedstats as ss

PREFILL, TOKENS, PROMPTS = 1.0, 12, 8


def on(t: Tables, costs: pd.DataFrame) -> Tables:
    """``t`` with the cost curves' machines (``report.tables`` puts ``costcurve.machines`` there)."""
    from specbench.results import costcurve

    return replace(
        t, cost_machines=costcurve.machines(costs), cost_study=costcurve.machines(costcurve.one_per_curve(costs))
    )


def t_target(n):  # the target's seconds for n query tokens: t(1) = 0.2, +0.01 per token
    return 0.2 + 0.01 * (np.asarray(n, float) - 1)


def t_draft(n):
    return 0.05 + 0.005 * (np.asarray(n, float) - 1)


def costs(draft: bool) -> pd.DataFrame:
    rows = []
    for role, f in [("target", t_target)] + [("draft", t_draft)] * draft:
        for kv in (128, 512):
            for n in (1, 2, 3, 4, 8, 128):
                s = float(f(n))
                rows.append(dict(role=role, pair="p", dtype="float32", device="cpu", kv_len=kv, n_tokens=n, seconds=s,
                                 machine_id="m1"))  # fmt: skip
                rows[-1]["samples"] = f"{s} {s} {s}"
    return pd.DataFrame(rows)


def decode(name: str, budget: int, prompt: str, scale: float, draft: bool):
    """One timed decode's step rows: plain emits 1 token a step, a chain of ``budget`` emits budget + 1;
    every forward takes ``scale`` x the curve's seconds, the first step adds the prompt's prefill
    (the target's PREFILL, the draft's in the ratio of the curves at 128 tokens)."""
    n = max(1, TOKENS // (budget + 1))
    rows = []
    for i in range(n):
        verify = scale * float(t_target(budget + 1)) + (PREFILL if i == 0 else 0)
        ds = scale * budget * float(t_draft(1)) if (budget and draft) else 1e-4 * bool(budget)
        if i == 0 and budget and draft:
            ds += PREFILL * float(t_draft(128) / t_target(128))
        rows.append(
            dict(prompt_id=prompt, step=i, tree_size=budget, tree_depth=budget, emitted=budget + 1,
                 accepted=budget, scored=".".join(["1"] * budget) if draft else "", draft_s=ds, verify_s=verify)
        )  # fmt: skip
    return rows


def bench(walls: dict, draft: bool = False, machine="m1"):
    """speed.csv and speed_steps rows of one run: candidate -> its forwards' scale."""
    rows, steps = [], []
    for u in range(PROMPTS):
        for c, scale in walls.items():
            budget = 0 if c.startswith("plain") else int(c.split("N=")[1].split()[0])
            st = decode(c, budget, f"q{u}", scale, draft)
            wall = sum(r["draft_s"] + r["verify_s"] for r in st)
            common = dict(run_id="r1", candidate=c, config_hash=f"h{budget}", pair="p", dataset="d", dtype="float32")
            steps += [dict(common, round=0, unit=u, **r) for r in st]
            rows.append(
                dict(common, device="cpu", batch_size=1, max_new_tokens=TOKENS, machine="cpu A", machine_id=machine,
                     tree="none" if not budget else "chain", budget=budget, tree_params="{}", round=0, unit=u,
                     prompt_ids=f"q{u}", wall_s=wall, draft_s=sum(r["draft_s"] for r in st),
                     verify_s=sum(r["verify_s"] for r in st), steps=len(st), tokens=TOKENS, accepted=0,
                     drafted=budget * len(st), tree_depth=budget)
            )  # fmt: skip
    return pd.DataFrame(rows), pd.DataFrame(steps)


WALLS = {"plain": 1.0, ss.PLAIN_AA: 1.0, "chain N=2": 1.0, "chain N=2 (twin)": 1.0, "chain N=3": 1.0}


def test_prefill_is_counted_on_both_sides_and_the_drafts_in_the_curves_ratio():
    # 10 s of plain decoding, 5 s projected (2x), 4 prompts of 1 s prefill, draft prefill 0.5x the target's
    assert speedup.with_prompts(2.0, 4, 1.0, 0.0, 10.0) == (4 + 10) / (4 + 5)
    assert speedup.with_prompts(2.0, 4, 1.0, 0.5, 10.0) == (4 + 10) / (4 * 1.5 + 5)


def test_a_run_timed_exactly_at_the_curve_is_projected_without_error():
    for draft in (False, True):
        rows, steps = bench(WALLS, draft=draft)
        df = benchcheck.table(rc.tables(rows)["measured"], rows, steps, costs(draft))
        assert set(df.candidate) == {"chain N=2", "chain N=3"}  # ranked candidates: no plain, A/A or twin
        assert np.allclose(df.error, 0, atol=1e-9), df[["candidate", "measured", "projected_request"]]
        assert (df.error_decode > 0).all()  # decoding alone overstates: the prefill is a share both sides pay
        assert np.allclose(df.prefill_s, PREFILL) and (df.decodes == PROMPTS).all()
        assert np.allclose(df.verify_ratio, 1) and np.allclose(df.plain_ratio, 1)
        assert df.draft_ratio.isna().all() if not draft else np.allclose(df.draft_ratio, 1)
        assert (df.cost_basis == ("scored" if draft else "lookup")).all()


def test_slower_speculative_verifies_show_in_the_error_and_in_the_verify_term():
    rows, steps = bench({**WALLS, "chain N=3": 1.2})  # its target forwards 20% slower than the curve
    df = benchcheck.table(rc.tables(rows)["measured"], rows, steps, costs(False)).set_index("candidate")
    assert np.isclose(df.verify_ratio["chain N=3"], 1.2) and np.isclose(df.verify_ratio["chain N=2"], 1)
    assert df.error["chain N=3"] > 0.05 and abs(df.error["chain N=2"]) < 1e-9


def test_the_replay_projection_is_set_beside_with_its_tokens_per_step():
    rows, steps = bench(WALLS)
    replay = pd.DataFrame(
        [dict(pair="p", dataset="d", tree="chain", budget=b, dtype="float32", engine="replay", max_new_tokens=128,
              projected=p, tokens_per_step=tps) for b, p, tps in ((2, 9.0, 3.6), (3, 9.0, 4.8))]
    )  # fmt: skip
    df = benchcheck.table(rc.tables(rows)["measured"], rows, steps, costs(False), replay)
    assert np.allclose(df.replay_tokens_per_step / df.tokens_per_step, 1.2)
    text = " ".join(benchcheck.sentences(df))
    assert "over 2 configurations" in text and "tokens per step are 20% above" in text
    assert "target verify 1.00, plain decoding's step ÷ t(1) 1.00" in text


def test_projection_check_uses_the_own_steps_and_counts_the_live_runs_with_them():
    rows, steps = bench(WALLS)
    t = Tables(**rc.tables(rows))
    t = replace(t, bench_check=benchcheck.table(t.measured, rows, steps, costs(False)))
    live = pd.DataFrame([dict(engine="live", batch_size=1, error=e, pair="p") for e in (0.05, -0.15, 0.02)])
    t = replace(t, speed=live)
    text = measured.projection_check(on(t, costs(False).assign(machine_id="m1")))  # the main page: one sentence
    assert "costed on its own timed steps" in text and "median absolute 0%, worst +0%, over 2 configurations" in text
    assert "all 5 live batch-1 ones: median absolute 2%, worst -15%; by term: speed.md" in text
    detail = " ".join(measured.bench_detail(on(t, costs(False).assign(machine_id="m1"))))  # speed.md: the whole account
    assert "from its own timed steps" in detail and "target verify 1.00" in detail
    assert "(3 live runs and 2 benchmark candidates), prefill counted: median absolute 2%, worst -15%" in detail
    assert "not set against" in measured.projection_check(on(t, costs(False).assign(machine_id="elsewhere")))
    assert measured.bench_detail(on(t, costs(False).assign(machine_id="elsewhere"))) == []  # never across machines


def test_the_projection_error_is_stated_apart_for_the_host_that_measured_the_costs():
    """Hosts of one machine id differ 10-25% in rate: the rows timed on the very host (``machine.host``)
    that measured the curve get their own error; rows from before the column say none is known."""
    rows, steps = bench(WALLS)
    t = Tables(**rc.tables(rows.assign(host="h1")))
    t = replace(t, bench_check=benchcheck.table(t.measured, rows, steps, costs(False)))
    assert set(t.bench_check.host) == {"h1"}
    t = replace(t, speed=pd.DataFrame([dict(engine="live", batch_size=1, error=0.05, pair="p")]))
    from specbench.results import costcurve

    for host, says in (("h1", "(2 timed on the host that measured the costs: median absolute 0%"),
                       ("h2", "(none both timed and costed on one recorded host")):  # fmt: skip
        c = costs(False).assign(machine_id="m1", host=host)
        assert says in measured.projection_check(replace(on(t, c), cost_hosts=costcurve.machines(c, "host")))
    old = rc.tables(rows)["measured"]  # rows without the column
    assert set(old.host) == {""}


def test_a_host_is_recorded_beside_the_machine_id_and_is_not_part_of_it(monkeypatch):
    from specbench.inputs import machine

    me = machine.identity("cpu")
    assert me["host"] == machine.host() and len(me["host"]) == 10
    monkeypatch.setattr(machine, "host", lambda: "another")
    other = machine.identity("cpu")
    assert other["host"] == "another" and other["machine_id"] == me["machine_id"]  # one kind, two hosts


def test_a_report_without_the_steps_file_keeps_the_replay_comparison():
    rows, _ = bench(WALLS)
    assert benchcheck.table(rc.tables(rows)["measured"], rows, None, costs(False)).empty


def test_a_random_weight_run_times_steps_against_the_model_and_answers_nothing():
    """A GPU's run on the pairs' architectures with random weights (``weights=random``): speed.md gives
    its per-term ratios, plain decoding's step per decode beside t(1) and its A/A control; it never
    answers (``answer_first``: TL;DR, export) and stays out of the headline projection error."""
    rows, steps = bench(WALLS)
    gpu_rows, gpu_steps = bench({**WALLS, ss.PLAIN_AA: 1.3}, machine="g1")
    gpu_rows = gpu_rows.assign(run_id="r2", weights="random", device="cuda", machine="GPU X")
    gpu_steps = gpu_steps.assign(run_id="r2")
    all_rows, all_steps = pd.concat([rows, gpu_rows]), pd.concat([steps, gpu_steps])
    gpu_costs = costs(False).assign(device="cuda", machine_id="g1")
    cpu_and_gpu = pd.concat([costs(False).assign(machine_id="m1"), gpu_costs])
    t = Tables(**rc.tables(all_rows))
    assert set(t.measured.weights) == {"pretrained", "random"}
    assert set(ss.answer_first(t.measured).run_id) == {"r1"}
    t = replace(t, bench_check=benchcheck.table(t.measured, all_rows, all_steps, cpu_and_gpu))
    assert set(t.bench_check.run_id) == {"r1", "r2"}
    t = replace(t, speed=pd.DataFrame([dict(engine="live", batch_size=1, error=0.05, pair="p")]))
    assert "over 2 configurations" in measured.projection_check(on(t, cpu_and_gpu))  # r1's two candidates alone
    detail = " ".join(measured.bench_detail(on(t, cpu_and_gpu)))
    assert "On cuda (GPU X), the speed benchmark on the pairs' architectures with random weights" in detail
    assert "target verify 1.00, plain decoding's step ÷ t(1) 1.00" in detail
    assert "plain decoding's step 200 ms per decode, t(1) 200 ms" in detail and "its A/A control" in detail
    brief = benchcheck.timing_only_sentences(benchcheck.timing_only(t.bench_check), t.controls, brief=True)
    assert brief[0].startswith("A speed benchmark there (random weights) measured plain decoding's step 200 ms")


def test_each_run_is_costed_on_its_own_machines_curve_never_anothers():
    """A default run on another CPU keeps its cost curve beside the study's (same pair and dtype): its
    candidates are projected on that curve (forwards 3x slower there: measured ÷ modelled 1.00, not 3.00),
    the replay's projection (the study's curve) is not set against it, and the error is given per machine."""
    rows, steps = bench(WALLS)
    slow_rows, slow_steps = bench(dict.fromkeys(WALLS, 3.0), machine="m2")
    slow_rows = slow_rows.assign(run_id="r2", machine="CPU B, 2 cores")
    slow_steps = slow_steps.assign(run_id="r2")
    slow = costs(False).assign(machine_id="m2", seconds=lambda c: 3 * c.seconds)
    slow["samples"] = [f"{s} {s} {s}" for s in slow.seconds]
    all_rows = pd.concat([rows, slow_rows], ignore_index=True)
    t = Tables(**rc.tables(all_rows))
    replay = pd.DataFrame([dict(pair="p", dataset="d", tree="chain", budget=2, dtype="float32", engine="replay",
                                projected=9.9, tokens_per_step=3.0, max_new_tokens=TOKENS)])  # fmt: skip
    df = benchcheck.table(t.measured, all_rows, pd.concat([steps, slow_steps]), pd.concat([costs(False), slow]), replay)
    assert set(df.run_id) == {"r1", "r2"}
    assert np.allclose(df.verify_ratio, 1.0) and np.allclose(df.plain_ratio, 1.0)
    assert df[df.run_id == "r2"].replay_projected.isna().all() and df[df.run_id == "r1"].replay_projected.notna().any()
    text = " ".join(benchcheck.sentences(df))
    assert "By machine, each run on the cost curve its own machine measured: CPU B: median absolute" in text
    assert "p/d on CPU B: target verify 1.00" in text
