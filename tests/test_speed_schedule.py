"""The batch-size schedule from the interleaved speed benchmark (#51 item 6; results.schedule, its words report.batch) on
hand-made speed.csv tables at several batch sizes: each B's best with its ties, "stops paying" only
where the intervals say so (a loss and an unresolved gain stated apart), a B whose controls fail left
unranked, export's draft lengths from it, the batch-1 answer kept apart from the schedule's runs; and
the command at batch_size=2 on the tiny pair."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from specbench.report import batch
from specbench.report.context import Tables
from specbench.results import runcontrols as rc
from specbench.results import schedule as sch
from specbench.results import speedstats as ss
from specbench.study.tools import validate
from test_speed_bench import KEYS as BENCH_KEYS

KEYS = {k: v for k, v in BENCH_KEYS.items() if k != "batch_size"} | {"dtype": "bfloat16"}  # a run's keys


def run(b: int, walls: dict, units: int = 12, noise: float = 0.02, seed: int = 0, roster=sch.ROSTER, **kw):
    """One benchmark run at batch size ``b``: candidate c's decode of a unit takes walls[c] × the unit's
    length × (1 + noise × a normal draw, shared by the unit's candidates of equal walls), 64 tokens per prompt."""
    rng = np.random.default_rng([seed, b, 7])
    length = rng.uniform(0.5, 2.0, units)
    run_id = kw.pop("run_id", None) or f"2026010{b % 10}T{b:02d}-{roster}"
    rows, draws = [], {}  # equal walls in one unit draw equal noise: a control's copy times as its original
    for u in range(units):
        for c, w in walls.items():
            z = draws.setdefault((u, w), rng.standard_normal())
            tree = "none" if c.startswith("plain") else c.split(" N=")[0]
            n = int(c.split("N=")[1].split()[0]) if "N=" in c else 0
            rows.append(
                dict(
                    KEYS,
                    run_id=run_id,
                    roster=roster,
                    batch_size=b,
                    candidate=c,
                    tree=tree,
                    budget=n,
                    round=0,
                    unit=u,
                    prompt_ids="|".join(f"q{u * b + i}" for i in range(b)),
                    wall_s=w * length[u] * (1 + noise * z),
                    tokens=64 * b,
                    steps=64 if tree == "none" else 30,
                    accepted=0 if tree == "none" else 34,
                    drafted=30 * n,
                    **kw,
                )
            )
    return pd.DataFrame(rows)


def controls(**walls) -> dict:
    """plain, its A/A copy, and a twinned chain N=1 (both controls hold unless a wall says otherwise)."""
    return {"plain": 2.0, ss.PLAIN_AA: 2.0, "chain N=1": walls.get("c1", 1.5), "chain N=1 (twin)": walls.get("c1", 1.5)}


def schedule_of(*runs) -> pd.DataFrame:
    return sch.schedule(ss.answers(pd.concat(runs, ignore_index=True)), sch.BENCHMARK)


def verdict(*runs) -> tuple:
    return sch.stop(sch.per_b(schedule_of(*runs)))


def test_each_b_has_its_fastest_shown_by_the_pick_rule_with_its_ties():
    b1 = run(1, {**controls(c1=1.30), "chain N=2": 1.30, "binary N=3": 1.9})  # N=2 times as N=1
    b2 = run(2, {**controls(c1=1.90), "chain N=2": 1.6, "binary N=3": 2.4})
    rows = sch.per_b(schedule_of(b1, b2)).set_index("batch_size")
    assert rows.loc[1, "shown"] == "chain N=1" and "chain N=2" in rows.loc[1, "ties"]  # ties; fewer drafted
    assert "binary" not in rows.loc[1, "ties"] and rows.loc[1, "lo"] > 1
    assert rows.loc[2, "shown"] == "chain N=2" and rows.loc[2, "ties"] == ""
    assert rows.ranked.all() and rows.n_units.tolist() == [12, 12] and rows.n_prompts.tolist() == [12, 24]
    assert "binary N=3" in rows.loc[2, "every"] and "[" in rows.loc[2, "every"]


def test_a_single_batch_size_is_no_schedule_and_answer_runs_are_not_in_it():
    only = run(1, controls(c1=1.3))
    assert schedule_of(only).empty
    answer = run(2, controls(c1=1.3), roster="answer")
    assert schedule_of(only, answer).empty


def test_an_interval_that_includes_one_at_b2_is_not_where_speculation_stops_paying():
    pays, flat, loses = controls(c1=1.3), controls(c1=2.0), controls(c1=2.6)
    kind, at, _ = verdict(run(1, pays), run(2, flat, noise=0.05), run(4, pays), run(8, loses))
    assert (kind, at) == ("loses", 8)  # B=2 includes 1×, but B=4 gains again
    sched = schedule_of(run(1, pays), run(2, flat, noise=0.05), run(4, pays), run(8, loses))
    text = batch.sentences(sched)[0]
    assert "stops paying at B = 8" in text and "stops paying at B = 2" not in text and ", loses." in text
    kind, at, first = verdict(run(1, pays), run(2, flat, noise=0.05), run(4, flat, noise=0.05))
    assert (kind, at, first) == ("no gain", 2, False)
    text = batch.sentences(schedule_of(run(1, pays), run(2, flat, noise=0.05), run(4, flat, noise=0.05)))[0]
    assert "stops paying" not in text and "no gain is resolved from B = 2 on (not a loss: " in text
    assert "includes 1×" in text and "loses" not in text
    runs = run(1, pays), run(2, pays), run(4, flat, noise=0.05), run(8, loses), run(16, loses)  # gains, none, loses
    text = batch.sentences(schedule_of(*runs))[0]
    assert verdict(*runs)[:2] == ("no gain", 4) and "stops paying" not in text
    assert "no gain is resolved from B = 4 on (not a loss: " in text
    assert text.endswith("; it loses from B = 8 on (the fastest there is below 1×).")  # B = 8's item shows it
    b8 = sch.per_b(schedule_of(*runs)).set_index("batch_size").loc[8]
    assert batch.unless_shown(b8) == ""
    other = pd.concat([b8.drop("shown"), pd.Series({"shown": "binary N=3"})])
    named = batch.unless_shown(other)
    assert re.fullmatch(r", chain N=1 0\.\d\d× \[[\d.]+, 0\.\d\d\],", named)  # another shown: the fastest named
    assert batch.unless_shown(other, names=False) == ""  # the main page's items: the speed page's table names it


def test_a_schedule_that_still_pays_or_never_pays_says_so():
    assert verdict(run(1, controls(c1=1.3)), run(2, controls(c1=1.6)))[:2] == ("gains", None)
    text = batch.sentences(schedule_of(run(1, controls(c1=1.3)), run(2, controls(c1=1.6))))[0]
    assert "still pays at B = 2, the largest measured" in text
    never = schedule_of(run(1, controls(c1=2.5)), run(2, controls(c1=2.8)))
    assert sch.stop(sch.per_b(never)) == ("loses", 1, True)
    assert "speculation pays at no measured B" in batch.sentences(never)[0]


def test_a_failed_control_leaves_its_b_unranked_and_no_verdict_rests_on_it():
    pays, loses = controls(c1=1.3), controls(c1=2.6)
    bad = {**loses, ss.PLAIN_AA: 2.6}  # A/A far from 1×
    rows = sch.per_b(schedule_of(run(1, pays), run(4, bad), run(8, loses))).set_index("batch_size")
    assert not rows.loc[4, "ranked"] and rows.loc[1, "ranked"] and rows.loc[8, "ranked"]
    assert verdict(run(1, pays), run(4, bad), run(8, loses))[:2] == ("loses", 8)  # not 4
    text = batch.sentences(schedule_of(run(1, pays), run(4, bad), run(8, loses)))[0]
    assert "stops paying at B = 8" not in text  # B = 4 may not pay: where it stops is not resolved
    assert "speculation loses from B = 8 on (the fastest: chain N=1 0." in text
    assert text.endswith("; whether it pays at B = 4 is not resolved.")
    flat = controls(c1=2.0)
    runs = run(1, pays), run(2, bad), run(4, flat, noise=0.05), run(8, loses)  # no gain from 4, B = 2 unranked
    text = batch.sentences(schedule_of(*runs))[0]
    assert verdict(*runs)[:2] == ("no gain", 4) and "no gain is resolved from B = 4 on (not a loss: " in text
    assert text.endswith("is below 1×); whether it pays at B = 2 is not resolved.")
    assert verdict(run(1, pays), run(4, bad))[:2] == ("open", None)
    text = batch.sentences(schedule_of(run(1, pays), run(4, bad)))[0]
    assert "B=4: a control fails, not ranked" in text and "not resolved" in text and "stops paying" in text
    assert "stops paying at" not in text


def test_the_report_shows_the_benchmarks_schedule_and_labels_the_single_runs(tmp_path):
    from specbench.report import hardware

    bench = pd.concat([run(1, controls(c1=1.3)), run(2, controls(c1=2.6))], ignore_index=True)
    t = Tables(**rc.tables(bench))
    t = replace(t, bench_schedule=sch.schedule(t.measured, sch.BENCHMARK))
    (text,) = batch.schedule_section(t)
    assert "stops paying at B = 2" in text and "| 1 | 12 (12) | A/A " in text and "64 new tokens, 12–24 prompts" in text
    assert ": hold |" in text and "| chain N=1 1.5" in text
    single = pd.DataFrame(
        [
            dict(pair="p", dataset="d", dtype="bfloat16", max_new_tokens=32, n_prompts=16, batch_size=b,
                 shape="chain", budget=1, measured=m, best=True)
            for b, m in ((1, 1.4), (4, 0.9))
        ]
    )  # fmt: skip
    (old,) = hardware.schedule_sentences(single)
    assert "single live runs, no interval" in old and "stops paying" not in old
    assert hardware.schedule_sentences(single, {("p", "d", "bfloat16")}) == []  # the benchmark has it


def test_the_schedules_figure_draws_each_candidates_interval_per_b_and_hollows_an_unranked_b():
    from matplotlib.collections import PathCollection

    bad = {**controls(c1=2.6), ss.PLAIN_AA: 2.6}  # B = 4's A/A fails
    sched = schedule_of(run(1, {**controls(c1=1.3), "chain N=2": 1.4}), run(4, bad))
    fig = batch.fig_bench_schedule(sched)
    assert fig is not None and fig.name == "bench_schedule.png" and "Hollow" in fig.caption
    ax = fig.fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "4"]
    bars = [c for c in ax.containers if c.get_label() in ("chain N=1", "chain N=2")]
    assert len(bars) == 2  # one error-bar line per candidate
    hollow = [ln for ln in ax.get_lines() if ln.get_markerfacecolor() == "white" and len(ln.get_xdata())]
    assert hollow and all((np.round(np.asarray(ln.get_xdata(), float)) == 4).all() for ln in hollow)  # B = 4
    assert not any(isinstance(c, PathCollection) and len(c.get_offsets()) for c in ax.collections)
    assert batch.fig_bench_schedule(pd.DataFrame()) is None


def test_a_schedule_run_at_batch_1_pools_into_its_keys_one_answer():
    """One number per key (issue 83): a schedule run at batch 1 and the answer run of the same key are one
    pooled run (runs as a level, each comparison on the units both candidates decoded), never two answers;
    the schedule shows the schedule's candidates from it."""
    answer = run(1, {**controls(c1=1.3), "binary N=3": 1.2}, roster="answer", run_id="20260101T000000-a")
    sched_run = run(1, {**controls(c1=1.3), "chain N=4": 1.0}, run_id="20260105T000000-s")
    a = ss.answer_first(ss.answers(pd.concat([answer, sched_run]))).set_index("candidate")
    assert set(a.run_id) == {"20260105T000000-s"} and set(a.roster) == {"answer"}
    assert a.loc["chain N=1"].n_runs == 2 and a.loc["binary N=3"].n_runs == 1 and a.loc["chain N=4"].n_runs == 1
    assert a.scheduled.to_dict() == {"chain N=1": True, "binary N=3": False, "chain N=4": True}
    alone = ss.answer_first(ss.answers(sched_run))  # no answer run: the schedule's B=1 run stands
    assert set(alone.run_id) == {"20260105T000000-s"}
    from specbench.report import measured  # the main page's "earlier runs" count: what speed.md lists

    assert measured.runs_at_batch1(Tables(measured=ss.answers(pd.concat([answer, sched_run])))) == 1


def test_the_candidates_are_the_answers_tree_twinned_chains_and_one_binary_tree():
    answer = run(1, {**controls(c1=1.3), "binary N=5": 1.1}, roster="answer")
    proj = pd.DataFrame(
        [
            dict(pair="p", dataset="d", tree="binary", budget=b, engine="replay", projected=x)
            for b, x in ((3, 1.2), (6, 1.4), (12, 1.3))
        ]
    )
    assert validate.schedule_picks(answer, proj, "p", "d", "bfloat16") == [
        ("binary", 5),
        *[("chain", n) for n in validate.CHAINS],
        ("binary", 6),
    ]
    assert validate.schedule_picks(None, None, "p", "d", "bfloat16") == [
        *[("chain", n) for n in validate.CHAINS],
        ("binary", 3),
    ]


def test_export_takes_the_draft_lengths_from_the_benchmark(tmp_path):
    from specbench.study.serving import engine_rules, export

    walls1 = {**controls(c1=1.30), "chain N=3": 1.6, "binary N=3": 1.31}  # chain N=1 ties binary, N=3 pays less
    walls2 = {**controls(c1=1.70), "chain N=3": 1.9, "binary N=3": 2.2}
    walls8 = {**controls(c1=2.6), "chain N=3": 2.9, "binary N=3": 3.0}
    bench = pd.concat([run(1, walls1), run(2, walls2), run(8, walls8)], ignore_index=True)
    lengths = sch.draft_lengths(bench, "p", sch.BENCHMARK)
    assert list(lengths) == [(1, 1), (2, 1), (8, 0)]
    assert lengths.source == sch.SOURCES[sch.BENCHMARK]
    bad = {**walls2, ss.PLAIN_AA: 2.6}
    unranked = pd.concat([run(1, walls1), run(2, bad), run(8, walls8)], ignore_index=True)
    assert list(sch.draft_lengths(unranked, "p", sch.BENCHMARK)) == [(1, 1), (8, 0)]  # B=2 left out
    bench.to_csv(tmp_path / "speed.csv", index=False)
    choice = engine_rules.Choice("p", "model", None, "chain", 1, {}, "greedy", 0.0)
    got = export.batch_schedule(str(tmp_path), choice)
    assert list(got) == [(1, 1), (2, 1), (8, 0)] and "interleaved benchmark" in engine_rules.schedule_note(got)
    assert (
        export.batch_schedule(str(tmp_path), engine_rules.Choice("q", "model", None, "chain", 1, {}, "greedy", 0.0))
        is None
    )


# --------------------------------------------------------------------------
# the command at batch_size=2, on the tiny pair
# --------------------------------------------------------------------------
def test_the_schedule_benchmark_at_batch_size_2_through_the_real_loop(tmp_path, tiny_pair_dirs):
    from test_speed_bench import speed_cmd  # forked from a server that has imported the benchmark's modules

    p = speed_cmd(tmp_path, tiny_pair_dirs, "batch_size=2", "+speed_candidates=schedule")
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(tmp_path / "speed.csv")
    names = ["plain", ss.PLAIN_AA, *[f"chain N={n}" for n in validate.CHAINS], "binary N=3", "chain N=1 (twin)"]
    assert sorted(set(df.candidate)) == sorted(names)
    assert (df.roster == sch.ROSTER).all() and (df.batch_size == 2).all()
    assert len(df) == 2 * len(names)  # 3 prompts in units of 2: two units
    assert set(df.prompt_ids.str.count(r"\|")) == {0, 1}
    assert df.same_tokens.all()  # a row's result never depends on B or the tree
    steps = pd.read_csv(tmp_path / "speed_steps.csv.gz")
    assert steps.groupby("candidate").emitted.sum().nunique() == 1


@pytest.mark.parametrize("b", [1, 2, 4, 8, 16])
def test_the_full_studys_schedule_jobs(b):
    from specbench.study.tools import plan

    jobs = {(p, bb): n for p, _d, bb, n, t in plan.schedule_jobs() if t == 64}
    assert {p for p, _ in jobs} == {"qwen_coder", "smollm_qwen"} and len(jobs) == 10
    n = jobs[("qwen_coder", b)]
    assert n >= 16 and n // b >= 6  # every B at least 6 units: an interval over 2 units is hardly one
