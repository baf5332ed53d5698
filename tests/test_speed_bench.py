"""The interleaved speed benchmark's statistics on hand-made timing tables (results.speedstats), its
candidate picks (study.tools.validate.speed_picks), and the report's answer from them."""

import random
import re
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from specbench.report import measured, tables
from specbench.report.context import Ctx, Inputs, Tables
from specbench.results import runcontrols as rc
from specbench.results import speedstats as ss
from specbench.study.tools.speed import unit_orders
from specbench.study.tools.validate import speed_picks

KEYS = dict(
    pair="p",
    dataset="d",
    dtype="float32",
    device="cpu",
    batch_size=1,
    max_new_tokens=64,
    machine="cpu A",
    machine_id="m1",
    tree_params="{}",
    config_hash="h",
    tree_depth=1,
)


def on(t: Tables, costs: pd.DataFrame) -> Tables:
    """``t`` with the cost curves' machines (``report.tables`` puts ``costcurve.machines`` there)."""
    from specbench.results import costcurve

    return replace(
        t, cost_machines=costcurve.machines(costs), cost_study=costcurve.machines(costcurve.one_per_curve(costs))
    )


def table(walls: dict, units: int = 16, rounds: int = 1, noise: float = 0.03, seed: int = 0, run="r1", abba=True, **kw):
    """A run where candidate c's decode of a unit takes walls[c] × the unit's length × noise,
    64 tokens each (so plain's tokens/s differ per unit, as prompts do), in the speed benchmark's ABBA
    orders (``abba``; else each unit in a fresh random order)."""
    rng = np.random.default_rng(seed)
    length = rng.uniform(0.5, 2.0, units)
    draw = random.Random(seed)
    orders = unit_orders(draw, list(walls)) if abba else iter(lambda: draw.sample(list(walls), len(walls)), None)
    rows = []
    for r in range(rounds):
        for u in range(units):
            order = next(orders)
            for c, w in walls.items():
                tree, budget = ("none", 0) if c.startswith("plain") else (c.split(" N=")[0], 3)
                rows.append(
                    dict(
                        KEYS,
                        **kw,
                        run_id=run,
                        candidate=c,
                        tree=tree,
                        budget=int(c.split("N=")[1].split()[0]) if "N=" in c else budget,
                        round=r,
                        unit=u,
                        order=order.index(c),
                        prompt_ids=f"q{u}",
                        wall_s=w * length[u] * (1 + noise * rng.standard_normal()),
                        tokens=64,
                        steps=64 if tree == "none" else 30,
                        accepted=0 if tree == "none" else 34,
                        drafted=0 if tree == "none" else 30 * int(c.split("N=")[1].split()[0]),
                    )
                )
    return pd.DataFrame(rows)


def test_paired_speedup_is_the_throughput_ratio_with_an_interval_around_it():
    df = table({"plain": 2.0, "chain N=3": 1.0})
    w = ss.unit_sums(df)
    s, lo, hi = ss.speedup(w, "chain N=3")
    assert s == pytest.approx(w.wall_s["plain"].sum() / w.wall_s["chain N=3"].sum())
    assert 1.9 < lo < s < hi < 2.1


def test_pairing_removes_the_spread_between_prompts():
    """Units differ 4× in length; paired on the same units the interval stays narrow."""
    df = table({"plain": 2.0, "chain N=3": 1.6}, noise=0.01)
    s, lo, hi = ss.speedup(ss.unit_sums(df), "chain N=3")
    assert hi - lo < 0.03 and s == pytest.approx(1.25, abs=0.02)


def test_the_interval_is_a_jackknife_t_on_the_log_ratio_none_below_min_units_never_below_0():
    """Units below ``MIN_UNITS`` claim no interval (3 units give none) and rank nothing; from there the
    interval is exp(log s ± t(n - 1) · jackknife se): wide for few units, asymmetric, never below 0,
    even where the units disagree 10× (a percentile bootstrap over 3 units has almost no width)."""
    from scipy import stats

    few = ss.unit_sums(table({"plain": 2.0, "chain N=3": 1.6}, units=ss.MIN_UNITS - 1, noise=0.05))
    assert np.isnan(ss.speedup(few, "chain N=3")[1:]).all()
    r = ss.ranked(table({"plain": 2.0, "chain N=3": 1.6}, units=3, noise=0.05))
    assert not r.tie.any() and not r.pays.any() and not r.interval.any()
    for units in (ss.MIN_UNITS, 16):
        w = ss.unit_sums(table({"plain": 2.0, "chain N=3": 1.6}, units=units, noise=0.05))
        s, lo, hi = ss.speedup(w, "chain N=3")
        each = np.log([ss._ratio(*(np.delete(x, i) for x in (*ss._cols(w, "plain"), *ss._cols(w, "chain N=3"))))
                       for i in range(units)])  # fmt: skip
        se = np.sqrt((units - 1) / units * np.sum((each - each.mean()) ** 2))
        half = stats.t.ppf(0.975, units - 1) * se
        assert (lo, hi) == pytest.approx((s * np.exp(-half), s * np.exp(half)))
    wild = table({"plain": 2.0, "chain N=3": 1.0}, units=ss.MIN_UNITS, noise=0.0)
    wild.loc[wild.candidate == "chain N=3", "wall_s"] *= np.repeat([0.1, 10, 0.1, 10, 1.0], 1)
    s, lo, hi = ss.speedup(ss.unit_sums(wild), "chain N=3")
    assert 0 < lo < s < hi


def test_a_rerun_adds_a_run_not_prompts_and_the_run_effect_widens_every_interval():
    """Four reruns of the same 16 prompts whose tree speedup moves 6% between runs (each run's own interval
    is ±2%): their units stay apart by run, the machine's run effect is estimated from the reruns (τ near
    6%), and the pooled interval carries τ²/R, where pooling the runs as more rounds of the same units
    would have claimed the narrow one."""
    rng = np.random.default_rng(3)
    runs = [table({"plain": 2.0, ss.PLAIN_AA: 2.0, "chain N=3": 1.6 * np.exp(0.06 * rng.standard_normal()),
                   "chain N=3 (twin)": 1.6}, noise=0.01, seed=i, run=f"r{i}") for i in range(4)]  # fmt: skip
    bench = pd.concat(runs, ignore_index=True)
    spread = ss.spreads(bench)["m1"]
    assert spread.df >= 4 and 0.02 < spread.tau < 0.15 and not spread.pooled
    pooled = ss.latest_runs(bench)
    w = ss.unit_sums(pooled)
    assert len(w) == 64 and ss.runs_in(w) == 4  # 4 runs x 16 units, not 16 units of 4 rounds
    s, lo, hi = ss.speedup(w, "chain N=3", spread=spread)
    _s, lo0, hi0 = ss.speedup(w, "chain N=3")
    assert hi - lo > 2 * (hi0 - lo0) and lo > 0
    assert np.log(hi / lo) / 2 == pytest.approx(
        stats_t(63) * np.sqrt((np.log(hi0 / lo0) / 2 / stats_t(63)) ** 2 + spread.tau**2 / 4), rel=1e-6
    )
    one = ss.ranked(runs[0], spread=spread).set_index("candidate")
    four = ss.ranked(pooled, spread=spread).set_index("candidate")
    assert (four.hi - four.lo).iloc[0] < (one.hi - one.lo).iloc[0]  # τ² divides among the runs pooled
    assert (four.n_runs == 4).all()


def stats_t(df: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


def test_a_machine_without_reruns_takes_the_run_effect_pooled_over_machines():
    rng = np.random.default_rng(5)
    runs = [table({"plain": 2.0, "chain N=3": 1.6 * np.exp(0.05 * rng.standard_normal())}, noise=0.01, seed=i,
                  run=f"r{i}") for i in range(6)]  # fmt: skip
    alone = table({"plain": 2.0, "chain N=3": 1.5}, seed=9, run="x1", machine="cpu B", machine_id="m2")
    spread = ss.spreads(pd.concat([*runs, alone], ignore_index=True))
    assert "m2" not in spread and spread["m1"].df == 5
    mine = ss.judged_by(spread, ss.latest_runs(alone))
    assert mine.pooled and mine.tau == spread[ss.harness.POOLED].tau > 0


def test_a_unit_missing_for_one_candidate_is_left_out_of_its_comparisons_only():
    """Compared only on the prompts both ran: chain's missing unit leaves chain's speedup and its difference
    to binary on 15 units, binary's speedup on all 16."""
    df = table({"plain": 2.0, "chain N=3": 1.0, "binary N=3": 1.1})
    df = df[~((df.unit == 3) & (df.candidate == "chain N=3"))]
    w = ss.unit_sums(df)
    assert len(w) == 16 and len(ss.paired(w, "plain", "chain N=3")) == 15
    r = ss.ranked(df).set_index("candidate")
    assert r.n_units.to_dict() == {"chain N=3": 15, "binary N=3": 16}


def test_the_controls_hold_on_identical_timings_and_fail_on_a_biased_one():
    same = table({"plain": 2.0, ss.PLAIN_AA: 2.0, "binary N=3": 1.2, "binary N=3 (twin)": 1.2})
    cs = ss.controls(ss.unit_sums(same))
    assert [c["control"] for c in cs] == ["A/A: plain vs plain", "binary N=3 vs binary N=3 (twin)"]
    assert all(c["holds"] for c in cs)
    assert cs[0]["lo"] <= 1 <= cs[0]["hi"] and cs[1]["lo"] <= 0 <= cs[1]["hi"]
    biased = table({"plain": 2.0, ss.PLAIN_AA: 2.3, "binary N=3": 1.2, "binary N=3 (twin)": 1.2})
    aa = ss.controls(ss.unit_sums(biased))[0]
    assert not aa["holds"] and aa["hi"] < 1
    r = ss.ranked(biased)
    assert not r.controls_hold.any()


def test_pooled_controls_show_a_lean_too_small_for_one_run_and_the_report_says_so():
    """Eight runs whose first-named twin takes 2% longer: pooled, the twin lean's interval excludes 0 (and the
    binomial test rejects an even split) while the A/A's includes it; speed.md states both, per machine."""
    from specbench.report import controls

    walls = {"plain": 2.0, ss.PLAIN_AA: 2.0, "binary N=3": 1.2 * 1.02, "binary N=3 (twin)": 1.2}
    runs = pd.concat([table(walls, noise=0.02, seed=i, run=f"r{i}") for i in range(8)], ignore_index=True)
    other = table(walls, seed=9, run="g1", machine="gpu B", machine_id="m2", weights="random")
    p = rc.pooled_controls(pd.concat([runs, other], ignore_index=True)).set_index("control")
    assert list(p.machine.unique()) == ["cpu A"]  # a random-weight run pools with nothing
    assert (p.runs == 8).all() and (p.units == 128).all()
    assert p.lo["twin"] > 0 and p.lean["twin"] == pytest.approx(0.02, abs=0.006) and p.p["twin"] < 0.01
    assert p.lo["A/A"] <= 0 <= p.hi["A/A"]
    (said,) = controls.pooled_sentences(Tables(pooled_controls=p.reset_index()))
    assert "Pooled over the 8 runs timed on cpu A" in said
    assert f"twin in {p.slower['twin']} of 128 units (p = {p.p['twin']:.2g}) and in 8 of 8 runs" in said
    assert "The A/A lean's interval includes 0; the twin lean's interval excludes 0" in said
    assert controls.pooled_sentences(Tables(pooled_controls=rc.pooled_controls(runs[runs.run_id == "r0"]))) == []


def test_twin_controls_failing_in_more_runs_than_their_level_allows_are_counted_and_said():
    """Twelve runs, each whose first-named twin is off by its own process offset (±4%, either sign: no lean
    over runs) under 1% unit noise: many runs' own twin intervals miss 0, far more than the 5% a 95%
    interval allows, and both the pooled sentence and the main page's controls line say so; the A/A's do not."""
    from specbench.report import controls

    same = {"plain": 2.0, ss.PLAIN_AA: 2.0, "binary N=3": 1.2, "binary N=3 (twin)": 1.2}
    runs = [
        table({**same, "binary N=3": 1.2 * (1 + 0.04 * (-1) ** i)}, noise=0.01, seed=i, run=f"r{i}") for i in range(12)
    ]
    t = Tables(**rc.tables(pd.concat(runs, ignore_index=True)))
    p = t.pooled_controls.set_index("control")
    assert p.runs_judged["twin"] == 12 and p.runs_failed["twin"] >= 8 and p.fail_p["twin"] < 0.001
    assert p.runs_failed["A/A"] <= 2 and p.fail_p["A/A"] > 0.05 and p.failed_max["twin"] > 0.05
    (said,) = controls.pooled_sentences(t)
    assert f"excluded 0 in {p.runs_failed['twin']} of 12 runs" in said
    assert "the twin control's own interval (its units alone) failed in more runs" in said
    assert "the A/A control's own" not in said
    brief = controls.sentence(t, brief=True)
    assert f"the twin control's own interval (its units alone) failed in {p.runs_failed['twin']} of 12" in brief
    assert "A/A control's own" not in brief
    quiet = Tables(
        **rc.tables(pd.concat([table(same, noise=0.01, seed=i, run=f"q{i}") for i in range(6)], ignore_index=True))
    )
    assert "unwidened interval failed in" not in controls.sentence(quiet, brief=True)


def test_a_control_that_misses_too_often_on_two_machines_is_one_clause_naming_both():
    from specbench.report import controls

    pooled = pd.DataFrame(
        [
            ("ABBA", "twin", "AMD EPYC (AVX2), 2 cores", 2, 5, 0.023),
            ("ABBA", "twin", "AMD EPYC (AVX512), 2 cores", 6, 35, 0.0073),
            ("ABBA", "A/A", "AMD EPYC (AVX512), 2 cores", 2, 35, 0.55),  # within its 95%: no clause
        ],
        columns=["orders", "control", "machine", "runs_failed", "runs_judged", "fail_p"],
    )
    (said,) = controls.too_many_misses(Tables(pooled_controls=pooled))
    assert said == (
        "over every ABBA run, the twin control's own interval (its units alone) failed in 2 of 5 on AMD EPYC (AVX2) "
        "(p = 0.023) and 6 of 35 on AMD EPYC (AVX512) (p = 0.0073), 5% allowed: the intervals here add the run effect"
    )


def test_runs_whose_orders_let_an_order_effect_stand_are_pooled_apart():
    """Six ABBA runs without a lean, six earlier ones (each unit in one random order) whose first-named twin
    takes 2% longer: pooled apart, the ABBA runs' interval includes 0 and speed.md says so first; the earlier
    runs' lean is beyond chance and said to be theirs, not the harness's."""
    from specbench.report import controls

    same = {"plain": 2.0, ss.PLAIN_AA: 2.0, "binary N=3": 1.2, "binary N=3 (twin)": 1.2}
    abba = [table(same, noise=0.01, seed=i, run=f"a{i}") for i in range(6)]
    old = [table({**same, "binary N=3": 1.2 * 1.02}, noise=0.01, seed=i, run=f"o{i}", abba=False) for i in range(6)]
    assert {rc.order_design(r) for r in abba} == {ss.ABBA} and {rc.order_design(r) for r in old} == {ss.UNBALANCED}
    p = rc.pooled_controls(pd.concat(abba + old, ignore_index=True)).set_index(["orders", "control"])
    assert p.lo[ss.ABBA, "twin"] < 0 < p.hi[ss.ABBA, "twin"] and p.lo[ss.UNBALANCED, "twin"] > 0
    first, earlier = controls.pooled_sentences(Tables(pooled_controls=p.reset_index()))
    assert "runs timed on cpu A in ABBA orders" in first and "the twin lean's interval includes 0" in first
    assert "before ABBA orders" in earlier and "the twin lean is beyond chance in these runs" in earlier


def test_one_runs_lean_is_not_taken_for_the_harnesss():
    """Three runs, one whose first-named twin takes 6% longer throughout (a lean of that process): over
    units the lean looks beyond chance, over runs it is one run in three, so its interval includes 0."""
    same = {"plain": 2.0, ss.PLAIN_AA: 2.0, "binary N=3": 1.2, "binary N=3 (twin)": 1.2}
    runs = [table({**same, "binary N=3": 1.2 * 1.06}, noise=0.01, run="r0")]
    runs += [table(same, noise=0.01, seed=i, run=f"r{i}") for i in (1, 2)]
    twin = rc.pooled_controls(pd.concat(runs, ignore_index=True)).set_index("control").loc["twin"]
    assert twin.p < 0.01 and twin.runs_p > 0.2  # beyond chance over units, not over three runs
    assert twin.lo < 0 < 0.05 < twin.hi  # over runs: one in three


def test_ties_are_the_candidates_whose_paired_difference_to_the_fastest_includes_zero():
    walls = {"plain": 2.0, ss.PLAIN_AA: 2.0, "chain N=3": 1.20, "chain N=4": 1.21, "binary N=3": 1.6}
    r = ss.ranked(table(walls, noise=0.03)).set_index("candidate")
    assert list(r.index)[0] in ("chain N=3", "chain N=4")
    assert r.loc["chain N=3", "tie"] and r.loc["chain N=4", "tie"]
    assert not r.loc["binary N=3", "tie"]
    assert r.loc["binary N=3", "diff_lo"] > 0
    assert r.pays.all()
    assert ss.PLAIN_AA not in r.index  # a control is never ranked


def test_ties_are_bonferroni_adjusted_for_the_number_of_comparisons():
    walls = {"plain": 2.0, "chain N=3": 1.20, "chain N=4": 1.232}
    base = table(walls, noise=0.04)
    extra = table({"plain": 2.0, **{f"binary N={n}": 1.9 for n in range(5, 12)}}, noise=0.04, seed=1)
    few = ss.ranked(base).set_index("candidate")
    many = ss.ranked(pd.concat([base, extra[extra.candidate != "plain"]])).set_index("candidate")

    def width(r):
        other = "chain N=4" if r.index[0] == "chain N=3" else "chain N=3"
        return r.loc[other, "diff_hi"] - r.loc[other, "diff_lo"]

    assert r_best(few) == r_best(many)  # the same data for the two chains
    assert width(many) > width(few)


def r_best(r):
    return r.index[0]


def test_speculation_pays_only_where_the_interval_is_above_one():
    r = ss.ranked(table({"plain": 2.0, "chain N=3": 1.98}, noise=0.05)).iloc[0]
    assert r.lo <= 1 <= r.hi and not r.pays


def test_the_answer_shows_the_cheapest_tie_and_keeps_runs_and_machines_apart():
    walls = {"plain": 2.0, ss.PLAIN_AA: 2.0, "chain N=3": 1.20, "chain N=4": 1.20, "chain N=2": 1.5}
    old = table(walls, run="20260101T000000-a")
    new = table(walls, run="20260102T000000-b", seed=1)
    other = table({"plain": 2.0, "chain N=4": 0.5}, run="20260103T000000-c", machine="gpu B", machine_id="m2")
    a = ss.answers(pd.concat([old, new, other]))
    assert set(a.run_id) == {"20260102T000000-b", "20260103T000000-c"}  # the newest per machine
    here = a[a.machine_id == "m1"]
    shown = here[here.shown].iloc[0]
    assert shown.candidate == "chain N=3"  # ties chain N=4, drafts fewer tokens per step
    assert shown.drafted_per_step == pytest.approx(3) and shown.timed_acceptance_length == pytest.approx(34 / 30)
    assert a[a.machine_id == "m2"].speedup.iloc[0] == pytest.approx(4, rel=0.05)


def test_the_tie_shown_is_not_one_resolved_slower_than_plain_decoding_where_another_is_not():
    def r(name, speedup, hi, drafted, tie=True):
        lo = speedup - (hi - speedup)
        return dict(candidate=name, speedup=speedup, lo=lo, hi=hi, drafted_per_step=drafted, tie=tie, controls_hold=True,
                    pays=lo > 1, slower=hi < 1)  # fmt: skip

    # the fastest includes 1x, the cheaper tie is resolved slower: the fastest is shown, not the cheaper
    run = pd.DataFrame(
        [r("chain N=4", 0.81, 1.10, 4), r("chain N=2", 0.65, 0.80, 2), r("chain N=1", 0.5, 0.6, 1, False)]
    )
    assert ss.pick(run).candidate == "chain N=4"
    # one predicate: the tie passed over is the one the report calls slower (measured.verdict), the shown one is not
    said = {c: measured.verdict(row) for c, row in zip(run.candidate, run.to_dict("records"))}
    assert said == {
        "chain N=4": "includes 1×",
        "chain N=2": "slower than plain decoding",
        "chain N=1": "slower than plain decoding",
    }
    # every tie below 1x (a loss everywhere): the cheapest tie, as before
    run = pd.DataFrame([r("chain N=4", 0.81, 0.95, 4), r("chain N=2", 0.75, 0.90, 2)])
    assert ss.pick(run).candidate == "chain N=2"
    # every tie at or above 1x: the cheapest tie
    run = pd.DataFrame([r("chain N=4", 1.5, 1.7, 4), r("chain N=2", 1.4, 1.6, 2)])
    assert ss.pick(run).candidate == "chain N=2"


def speedup_csv(rows):
    base = dict(pair="p", dataset="d", engine="replay", verify="greedy", temperature=0, max_new_tokens=128)
    return pd.DataFrame([{**base, "cost_basis": "scored", **r} for r in rows])


def test_speed_picks_bracket_the_top_budget_dedupe_identical_trees_and_skip_derived_costs():
    rows = [
        dict(tree="chain", budget=b, projected=p, projected_lo=p - 0.1, projected_hi=p + 0.1, tokens_per_step=t)
        for b, p, t in [(2, 1.5, 2.0), (3, 1.7, 2.5), (4, 1.6, 2.8), (5, 1.4, 3.0)]
    ]
    rows += [
        dict(tree="binary", budget=3, projected=1.65, projected_lo=1.55, projected_hi=1.75, tokens_per_step=2.3),
        dict(tree="medusa63", budget=3, projected=1.65, projected_lo=1.55, projected_hi=1.75, tokens_per_step=2.3),
        dict(tree="merged", budget=8, projected=1.9, projected_lo=1.8, projected_hi=2.0, tokens_per_step=3),
        dict(tree="specinfer", budget=8, projected=1.0, projected_lo=0.9, projected_hi=1.1, tokens_per_step=3.1),
    ]
    df = speedup_csv(rows)
    df.loc[df.tree == "merged", "cost_basis"] = "derived"
    picks = speed_picks(df, "p", "d")
    assert picks[0] == ("chain", 3)
    assert ("chain", 2) in picks and ("chain", 4) in picks  # either side of the top's budget
    assert ("merged", 8) not in picks  # derived cost basis, where the pair has scored rows
    assert ("binary", 3) in picks and ("medusa63", 3) not in picks  # the same trees, once
    assert ("specinfer", 8) not in picks  # its interval does not reach the top's
    assert len(picks) <= 6


def test_a_merged_drafters_candidates_keep_their_inner_shape():
    """merged:binary N=4 and merged:chain N=4 are different trees: the picks name the inner shape (the
    report's label), and the candidate composes it (a pick of bare 'merged' built merged:chain)."""
    from specbench.study.job import launch

    rows = [
        dict(tree="merged", budget=b, tree_params=f'{{"ngram_share": 0.5, "shape": "{sh}"}}', projected=p)
        | dict(projected_lo=p - 0.2, projected_hi=p + 0.2, tokens_per_step=t)
        for sh, b, p, t in [("binary", 4, 1.82, 2.7), ("specinfer", 4, 1.78, 3.4), ("chain", 4, 1.76, 3.6)]
        + [("binary", 2, 1.6, 2.0), ("binary", 8, 1.75, 3.7)]
    ]
    picks = speed_picks(speedup_csv(rows), "p", "d")
    assert picks[:3] == [("merged:binary", 4), ("merged:specinfer", 4), ("merged:chain", 4)]
    assert ("merged:binary", 2) in picks and ("merged:binary", 8) in picks  # bracketed in its own shape's grid
    cfg = launch.compose(["pair=merged_qwen"])
    assert launch.compose_tree(cfg, "merged:binary", 4).params["shape"] == "binary"
    assert launch.compose_tree(cfg, "merged", 4).params.get("shape", "chain") == "chain"


# --------------------------------------------------------------------------
# the command, on the tiny pair
# --------------------------------------------------------------------------
def speed_cmd(tmp_path, dirs, *extra):
    """``python -m specbench.study.tools.speed`` on the tiny pair, forked from an interpreter that has
    imported what it imports (forkserver.py: the imports are most of a small benchmark's time)."""
    import os

    import forkserver
    from conftest import tiny_pair_overrides
    from test_hydra import JOB_MODULES

    args = ["specbench.study.tools.speed", *tiny_pair_overrides(dirs), "dataset=smoke", "dataset.limit=3"]
    args += ["max_new_tokens=6", f"+results_dir={tmp_path}", f"hydra.run.dir={tmp_path}/h", *extra]
    preload = (*JOB_MODULES, "specbench.study.tools.speedloop", "specbench.study.tools.validate")  # speed's own
    return forkserver.run(args, cwd=os.getcwd(), env=dict(os.environ), timeout=300, preload=preload)


def test_the_benchmark_times_every_candidate_interleaved_with_its_controls(tmp_path, tiny_pair_dirs):
    p = speed_cmd(tmp_path, tiny_pair_dirs, "+speed_candidates=[chain/2,binary/3]", "+speed_rounds=2")
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(tmp_path / "speed.csv")
    names = ["plain", ss.PLAIN_AA, "chain N=2", "binary N=3", "chain N=2 (twin)"]
    assert sorted(set(df.candidate)) == sorted(names)
    assert len(df) == 2 * 3 * len(names)  # rounds x units x candidates
    assert df.same_tokens.all()  # greedy: every tree decodes plain decoding's tokens
    orders = df.sort_values("order").groupby(["round", "unit"]).candidate.agg(tuple)
    assert orders.nunique() > 1  # a fresh random order per unit and round...
    assert all(orders.iloc[k + 1] == orders.iloc[k][::-1] for k in range(0, len(orders), 2))  # ...then its reverse
    assert df.machine.nunique() == 1 and df.machine_id.notna().all() and df.run_id.nunique() == 1
    assert (df[df.tree == "none"].drafted == 0).all() and (df[df.tree == "chain"].tree_depth <= 2).all()
    steps = pd.read_csv(tmp_path / "speed_steps.csv.gz")
    assert set(steps.candidate) == set(names) and steps.groupby("candidate").emitted.sum().nunique() == 1
    assert p.stdout.strip().splitlines()[-1].startswith("tokens equal to plain decoding's: all")
    assert "control A/A: plain vs plain" in p.stdout
    again = speed_cmd(
        tmp_path, tiny_pair_dirs, "+speed_candidates=[chain/2]", "+speed_rounds=auto", "+speed_max_rounds=2"
    )
    assert again.returncode == 0, again.stderr
    added = pd.read_csv(tmp_path / "speed.csv").iloc[len(df) :]  # appended: nothing lost
    w = ss.unit_sums(added[added["round"] == 0])
    assert added["round"].nunique() == (1 if ss.settled(w) else 2) and len(added) == added["round"].nunique() * 3 * 4
    home = tmp_path / "home"  # another machine's runs come home with +speed_merge (a GPU's), once
    for n in (2, 0):
        m = speed_cmd(home, tiny_pair_dirs, f"+speed_merge={tmp_path / 'speed.csv'}")
        assert m.returncode == 0 and f"merged {n} runs" in m.stdout, m.stderr
    assert pd.read_csv(home / "speed.csv").equals(pd.read_csv(tmp_path / "speed.csv"))
    assert len(pd.read_csv(home / "speed_steps.csv.gz")) == len(pd.read_csv(tmp_path / "speed_steps.csv.gz"))
    bad = speed_cmd(home, tiny_pair_dirs, f"+speed_merge={tmp_path / 'nope.csv'}")
    assert bad.returncode == 2 and bad.stderr.strip().startswith("specbench.study.tools.speed: speed_merge")


def test_a_destination_speed_csv_that_is_not_one_is_refused_before_the_benchmark_and_kept(tmp_path, tiny_pair_dirs):
    """The folder's speed.csv is read as strictly as the append will read it, before any model loads: a file
    that is not the benchmark's table exits 2 in one line naming the key, and stays as it was."""
    (tmp_path / "speed.csv").write_text("run_id,speedup\nr1,1.5\n")
    before = (tmp_path / "speed.csv").read_bytes()
    p = speed_cmd(tmp_path, tiny_pair_dirs, "+speed_candidates=[chain/2]", "+speed_rounds=1")
    assert p.returncode == 2, p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("specbench.study.tools.speed: ") and "results_dir" in line and "speed.csv" in line, line
    assert (tmp_path / "speed.csv").read_bytes() == before and not (tmp_path / "speed_steps.csv.gz").exists()


def test_the_warm_up_decodes_a_few_tokens_of_each_candidate_not_a_whole_decode():
    from specbench.study.tools import budget, speed
    from specbench.study.tools.sizes import WARM_TOKENS

    job = SimpleNamespace(tree=None, verify=None, max_new_tokens=64, seed=0, batch_size=1)
    c = speed.Candidate("chain N=2", job, None, speed.DecodePlan.of(job))
    assert speed.warm(c).plan.max_new_tokens == WARM_TOKENS < 64 and speed.warm(c).name == c.name
    short = replace(c, plan=replace(c.plan, max_new_tokens=6))
    assert speed.warm(short).plan.max_new_tokens == 6  # a shorter decode warms up whole
    prof, rate = budget.PROFILES["real"], {"1": 10.0, "64": 100.0}
    # the plan prices it: each candidate's warm-up is WARM_TOKENS steps, not a 64-token decode
    per_decoder = (budget.speed_s("qwen_coder", 1, 4, prof, rate) - prof.load_s) / 4
    whole = 5 * (budget.forward_s("qwen1.5b", budget.PROMPT_TOKENS, rate) + 64 * budget.forward_s("qwen1.5b", 1, rate))
    assert per_decoder < whole - (64 - WARM_TOKENS) * budget.forward_s("qwen1.5b", 1, rate) * 0.99


def test_unit_orders_counterbalance_position_and_precedence_and_differ_by_seed():
    """ABBA: over each pair of units every candidate's mean position is the middle and of any two
    candidates each goes first once, so a drift within a unit cancels (module ``speed.unit_orders``)."""
    import itertools
    import random

    from specbench.study.tools import speed

    cands = list("ABCDEFGHI")
    gen = speed.unit_orders(random.Random("0:run-1"), cands)
    orders = [next(gen) for _ in range(8)]
    for first, second in zip(orders[::2], orders[1::2]):
        assert sorted(first) == cands and all(first.index(c) + second.index(c) == len(cands) - 1 for c in cands)
        for a, b in itertools.combinations(cands, 2):
            assert (first.index(a) < first.index(b)) != (second.index(a) < second.index(b))
    assert len({tuple(o) for o in orders[::2]}) == 4  # a fresh permutation for each pair
    other = speed.unit_orders(random.Random("0:run-2"), cands)
    assert next(other) != orders[0]  # another run (pooled as another round) draws other orders


def test_a_named_tree_is_timed_as_the_study_composes_it(tmp_path, tiny_pair_dirs):
    """medusa63 carries its path list in conf/tree/medusa63.yaml and sequoia its calibration keys:
    a candidate gets its option's file, resolved against the run (the fresh-clone run once failed on
    medusa63/6, and sequoia matched the first vector in the CSV, whatever its pair or dataset)."""
    from specbench.study.job import launch

    cfg = launch.compose(["dataset=mt_bench", "verify=greedy"])
    seq = launch.compose_tree(cfg, "sequoia", 8)
    assert seq.params["calib_dataset"] == "mt_bench" and seq.params["max_children"] == 16
    assert seq.params["calib_verify"] == "greedy" and seq.params["calib_pair_id"] == "auto"
    assert launch.compose_tree(cfg, "medusa63", 6).params["paths"][:3] == [[0], [0, 0], [1]]
    p = speed_cmd(tmp_path, tiny_pair_dirs, "+speed_candidates=[binary/3,medusa63/3]")
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(tmp_path / "speed.csv")
    assert "paths" in df[df.candidate == "medusa63 N=3"].tree_params.iloc[0]
    cols = ["unit", "steps", "accepted", "drafted", "tree_depth"]
    same = [df[df.candidate == c][cols].sort_values("unit").to_numpy().tolist() for c in ("binary N=3", "medusa63 N=3")]
    assert same[0] == same[1]  # the identical-tree control: the same tree, step for step


def test_a_deadline_stops_taking_units_once_the_mean_unit_would_overrun_it(tmp_path, tiny_pair_dirs):
    from specbench.study.tools import speed

    assert speed.more([5.0] * 9, None, now=1e9)  # no deadline: every unit
    assert speed.more([], 1.0, now=100.0) and speed.more([50.0], 1.0, now=100.0)  # the first MIN_UNITS always
    assert speed.more([10.0, 20.0], 120.0, now=100.0) and not speed.more([10.0, 20.0], 114.0, now=100.0)
    p = speed_cmd(tmp_path, tiny_pair_dirs, "+speed_candidates=[chain/2]", "+speed_until=1")  # long past
    assert p.returncode == 0 and "stopped after 2 units" in p.stderr, p.stderr
    df = pd.read_csv(tmp_path / "speed.csv")
    assert df.unit.nunique() == speed.MIN_UNITS and len(df) == speed.MIN_UNITS * 4


def test_auto_rounds_stop_once_the_a_a_interval_is_within_3_percent():
    """speed_rounds=auto: one more round while plain vs plain spreads wider than 1 +- 3%."""
    walls = {"plain": 2.0, ss.PLAIN_AA: 2.0, "chain N=3": 1.2}
    assert ss.settled(ss.unit_sums(table(walls, noise=0.002)))
    assert not ss.settled(ss.unit_sums(table(walls, noise=0.2)))
    assert ss.settled(ss.unit_sums(table({"plain": 2.0, "chain N=3": 1.2}, noise=0.2)))  # no A/A: nothing to wait for


@pytest.mark.parametrize(
    "arg, needle",
    [
        ("+speed_candidates=[chain]", "speed_candidates: 'chain' is not TREE/BUDGET"),
        ("+speed_rounds=0", "speed_rounds=0: must be an integer >= 1"),
        ("+speed_max_rounds=0", "speed_max_rounds=0: must be an integer >= 1"),
        ("+speed_until=-5", "speed_until=-5: must be a Unix time"),
        ("+speed_candidates=auto", "speedup.csv not found"),
        ("+speed_candidates=[nosuch/3]", "nosuch"),
    ],
)
def test_bad_keys_are_one_line_before_any_model_loads(tmp_path, tiny_pair_dirs, arg, needle):
    p = speed_cmd(tmp_path, tiny_pair_dirs, arg)
    assert p.returncode == 2 and needle in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "speed.csv").exists()


# --------------------------------------------------------------------------
# the TL;DR from the benchmark's rows
# --------------------------------------------------------------------------
def tldr_of(bench, answer):
    from specbench.report import tldr

    t = Tables(answer=answer, **rc.tables(bench))
    return tldr.section(Ctx(t=t, data=Inputs(env={"cpu": "X", "cores": 2})))


def measured_page(bench, answer) -> list[str]:
    """speed.md's full measured table of ``bench`` (``measured.section(every=True)``)."""
    return measured.section(Tables(answer=answer, **rc.tables(bench)), every=True)


def answer_row(**kw):
    base = dict(
        pair="p",
        dataset="d",
        dtype="float32",
        max_new_tokens=128,
        engine="replay",
        budget=5,
        tokens_per_step=3.0,
        acceptance_rate=0.5,
        acceptance_rate_lo=0.4,
        acceptance_rate_hi=0.6,
        acceptance_length=2.0,
        acceptance_length_lo=1.8,
        acceptance_length_hi=2.2,
        n_prompts=64,
        projected=2.5,
        projected_lo=2.3,
        projected_hi=2.7,
        speed=2.5,
        speed_basis="projected",
        claim="ranked",
        shape="chain",
        bracket="interior",  # every answer row has its bracket (tables.answer)
        cost_basis="scored",
    )
    return {**base, **kw}


def test_a_projection_never_outranks_a_measurement_and_each_table_says_its_evidence():
    walls = {"plain": 2.0, ss.PLAIN_AA: 2.0, "chain N=3": 1.2, "chain N=3 (twin)": 1.2, "chain N=4": 1.22}
    bench = table(walls, run="r9")
    derived = tables.claim(64, 0.0, None, "derived")  # never ranked: the row says why
    answer = pd.DataFrame([answer_row(), answer_row(dataset="other", cost_basis="derived", budget=4, claim=derived)])
    text = tldr_of(bench, answer)
    measured, projected = text.split("Not benchmarked, projected:")
    assert "| p/d | chain N=3 +1 | 1.6" in measured  # not the projected 2.5×; the tie counted (named: speed.md)
    assert "Controls (A/A, twins): 2 of 2 hold." in measured
    assert "p/d" not in projected  # measured pairs and datasets are not ranked again by projection
    assert "p/other chain N=4 (not ranked: costed on a derived basis) 2.50× [2.30, 2.70]" in projected
    full = "\n".join(measured_page(bench, answer))
    assert "| chain N=4 1.6" in full and re.search(
        r"A/A [01]\.\d{3}× \[[01]\.\d{3}, [01]\.\d{3}\], twin chain N=3", full
    )


def test_the_measured_row_is_labelled_by_the_tree_it_built():
    walls = {"plain": 2.0, ss.PLAIN_AA: 2.0, "sequoia N=64": 1.2}
    bench = table(walls)  # 30 steps drafting 30 * 64 tokens: relabel to a 3-node tree
    bench.loc[bench.candidate == "sequoia N=64", "drafted"] = 90
    bench.loc[bench.candidate == "sequoia N=64", "tree_depth"] = 2
    assert "| sequoia N=64 (builds 3.0 nodes, depth 2) |" in "\n".join(measured_page(bench, pd.DataFrame()))
    assert "| p/d | sequoia N=64 +0 |" in tldr_of(bench, pd.DataFrame())  # the TL;DR's short row


def test_a_failed_control_unranks_the_run():
    walls = {"plain": 2.0, ss.PLAIN_AA: 2.4, "chain N=3": 1.2}
    text = tldr_of(table(walls), pd.DataFrame())
    assert ", a control failed |" in text and "0 of 1 hold" in text
    full = "\n".join(measured_page(table(walls), pd.DataFrame()))
    assert "a control failed: not ranked" in full and "FAILS" in full


def test_a_measured_speedup_is_never_set_against_costs_from_another_machine():
    from specbench.report import measured

    walls = {"plain": 2.0, ss.PLAIN_AA: 2.0, "chain N=3": 1.0}
    t = Tables(**rc.tables(table(walls)), speed=pd.DataFrame([answer_row(tree="chain", budget=3, projected=2.2)]))
    t.speed["max_new_tokens"] = 128
    costs = pd.DataFrame({"pair": ["p", "p"], "device": "cpu", "dtype": "float32", "machine_id": ["elsewhere"] * 2})
    other = measured.projection_check(on(t, costs))
    assert "not set against the projection" in other and "error" not in other
    unnamed = costs.assign(machine_id=None)  # cost rows from before they named their machine: not compared
    assert "not set against" in measured.projection_check(on(t, unnamed))
    gpu = pd.DataFrame({"pair": ["p"], "device": "cuda", "dtype": "float32", "machine_id": [None]})  # another device's
    same = measured.projection_check(on(t, pd.concat([costs.assign(machine_id="m1"), gpu])))
    assert "median absolute 1" in same and "over 1 configurations" in same  # 2.2 projected vs ~2.0 measured
    # two machines measured the curve in one dtype: each keeps its own; the replay's projection reads the study's
    # curve (the machine with the most pairs, then points), so it is set against m1's run only where m1 is that machine
    assert measured.projection_check(on(t, costs.assign(machine_id=["m1", "m2"]))) == same
    study_elsewhere = pd.concat([costs.assign(machine_id="m1"), costs.assign(machine_id="m2", pair=["p", "q"])])
    assert "error" not in measured.projection_check(on(t, study_elsewhere))
    # a default run on an AVX2 machine adds its float32 curve beside the bf16 one: the bf16 curve's machine stays
    avx2 = costs.assign(machine_id="avx2", dtype="bfloat16")
    assert measured.projection_check(on(t, pd.concat([costs.assign(machine_id="m1"), avx2]))) == same


def test_runs_on_one_prompt_set_pool_as_runs_and_candidates_of_other_runs_are_not_compared():
    """Two runs of one candidate set pool under the newest id (two runs, not two rounds of the same units); a
    third run of another candidate on the same prompts joins the pool, its candidate compared with plain
    decoding of its own run only and with no candidate it never shared a unit with (no tie claimed)."""
    walls = {"plain": 2.0, ss.PLAIN_AA: 2.0, "chain N=3": 1.2}
    first, second = table(walls, run="20260101-a"), table(walls, run="20260102-b", seed=3)
    a = ss.answers(pd.concat([first, second]))
    assert set(a.run_id) == {"20260102-b"} and (a.n_rounds == 2).all() and (a.n_runs == 2).all()
    other = table({"plain": 2.0, "chain N=4": 1.0}, run="20260103-c")
    b = ss.answers(pd.concat([first, second, other])).set_index("candidate")
    assert b.n_runs.to_dict() == {"chain N=4": 1, "chain N=3": 2} and b.loc["chain N=4"].tie
    assert not b.loc["chain N=3"].compared and not b.loc["chain N=3"].tie


def test_a_later_smaller_run_pools_into_its_keys_benchmark_and_never_replaces_it():
    """A default run's few prompts (a later run id) join the full benchmark of the same key (one estimate per
    key, runs as a level): the full run's candidates keep their units, the small run adds its own."""
    full = table({"plain": 2.0, ss.PLAIN_AA: 2.0, "chain N=3": 1.2}, units=16, run="20260101T000000-a")
    small = table({"plain": 2.0, ss.PLAIN_AA: 2.0, "binary N=3": 1.9}, units=5, run="20260102T000000-b")
    text = tldr_of(pd.concat([full, small]), pd.DataFrame())
    assert "| p/d | chain N=3 +0 |" in text and "| p/d | binary N=3" not in text
    ranked = ss.answers(pd.concat([small, full])).set_index("candidate")
    assert set(ranked.run_id) == {"20260102T000000-b"} and ranked.n_runs.to_dict() == {"chain N=3": 1, "binary N=3": 1}
    assert ranked.loc["binary N=3"].speedup < ranked.loc["chain N=3"].lo


def test_the_tldr_prefers_the_run_on_the_machine_that_measured_the_pairs_costs():
    """A larger run timed elsewhere does not displace the run the projection is checked against."""
    from specbench.report import measured
    from specbench.results import costcurve

    here = table({"plain": 2.0, ss.PLAIN_AA: 2.0, "chain N=3": 1.2}, units=8, run="20260101T000000-a")
    there = table({"plain": 2.0, ss.PLAIN_AA: 2.0, "binary N=3": 1.0}, units=16, run="20260102T000000-b")
    there = there.assign(machine="other", machine_id="m2")
    t = Tables(**rc.tables(pd.concat([here, there])))
    assert list(measured.shown(replace(t, cost_machines={("p", "cpu", "float32"): "m1"})).candidate) == ["chain N=3"]
    assert list(measured.shown(t).candidate) == ["binary N=3"]  # no costs machine named: the larger run
    # a later default run on a third machine costs the pair in its own dtype: the shown run stays m1's
    homes = costcurve.machines(pd.DataFrame({"pair": "p", "device": "cpu", "dtype": ["float32", "bfloat16"],
                                             "machine_id": ["m1", "m3"]}))  # fmt: skip
    assert list(measured.shown(replace(t, cost_machines=homes)).candidate) == ["chain N=3"]
    # m2 measures its own float32 curve beside m1's: both runs are at home, the study's machine (m1: more pairs) shows
    two = pd.DataFrame({"pair": ["p", "q", "p"], "device": "cpu", "dtype": "float32", "machine_id": ["m1", "m1", "m2"]})
    assert list(measured.shown(on(t, two)).candidate) == ["chain N=3"]
    assert list(measured.shown(on(t, two), every=True).candidate) == ["chain N=3", "binary N=3"]
