"""The per-process offset (results.harness) on hand-made timing tables: estimated from the runs' own
controls, added to every interval the answer ranks by, and stated where the report says how."""

import numpy as np
import pandas as pd
import pytest

from specbench.results import harness
from specbench.results import runcontrols as rc
from specbench.results import speedstats as ss
from test_speed_bench import table


def test_fit_recovers_an_offset_and_finds_none_where_there_is_none():
    rng = np.random.default_rng(0)
    se = np.full(400, 0.01)
    sigma, p = harness.fit(rng.normal(0, np.sqrt(se**2 + 2 * 0.015**2)), se)
    assert sigma == pytest.approx(0.015, abs=0.002) and p < 1e-6
    sigma0, p0 = harness.fit(rng.normal(0, se), se)
    assert sigma0 < 0.002 and p0 > 0.01
    assert harness.fit(np.ones(harness.MIN_RUNS - 1), np.ones(harness.MIN_RUNS - 1)) == (
        0.0,
        pytest.approx(np.nan, nan_ok=True),
    )


def test_widen_adds_the_offset_in_quadrature_to_each_side():
    assert harness.widen(1.0, 0.9, 1.2, 0.0, 0.95) == (0.9, 1.2)
    lo, hi = harness.widen(1.0, 0.9, 1.2, 0.1 / 1.959964, 0.95)
    assert lo == pytest.approx(1 - np.hypot(0.1, 0.1)) and hi == pytest.approx(1 + np.hypot(0.2, 0.1))
    s = harness.Spread(tree=0.02, plain=0.0, runs=10)
    assert s.speedup_sd(1.5, runs=4) == pytest.approx(1.5 * 0.02 / 2) and s.aa_sd() == 0
    assert s.difference_sd(1.5, 1.2) == pytest.approx(0.02 * np.hypot(1.5, 1.2))
    both = harness.Spread(tree=0.02, plain=0.01, runs=10)  # plain's offset scales both speedups: moves their difference
    assert both.difference_sd(1.5, 1.2) == pytest.approx(np.hypot(0.02 * np.hypot(1.5, 1.2), 0.01 * 0.3))
    assert both.difference_sd(1.5, 1.5) == pytest.approx(0.02 * np.hypot(1.5, 1.5))


def runs_with_offsets(n: int, sd: float, seed: int = 0) -> list[pd.DataFrame]:
    """``n`` runs whose tree decodes each keep a relative offset (sd ``sd``) for the whole run, under 0.5%
    noise per unit; plain decoding keeps none."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        o = 1 + sd * rng.standard_normal(3)
        walls = {"plain": 2.0, ss.PLAIN_AA: 2.0, "binary N=3": 1.2 * o[0], "binary N=3 (twin)": 1.2 * o[1]}
        out.append(table({**walls, "chain N=3": 1.2 * 1.03 * o[2]}, noise=0.005, seed=i, run=f"r{i:02d}"))
    return out


def test_offsets_are_estimated_per_machine_and_widen_the_ties_and_controls():
    """Twelve runs with a 2% per-process offset: estimated from the twins (the A/A's near 0), so one run's
    3% slower chain ties the fastest and its twin control holds, where the runs' own intervals (over units
    alone) split them and fail controls."""
    runs = runs_with_offsets(12, 0.02)
    offsets = ss.spreads(pd.concat(runs, ignore_index=True))["m1"]
    spread = offsets.fit()
    assert spread.runs == 12 and 0.01 < spread.tree < 0.035 and spread.tree_p < 0.01 and spread.plain < 0.005
    own = [c for r in runs for c in ss.controls(ss.unit_sums(r)) if c["kind"] == "difference"]
    wide = [c for i, r in enumerate(runs) for c in ss.controls(ss.unit_sums(r), offsets.fit({f"r{i:02d}"}))]
    assert sum(not c["holds"] for c in own) >= 6 and sum(not c["holds"] for c in wide if c["kind"] == "difference") <= 2
    assert offsets.fit({"r00"}).runs == 11 and offsets.fit({f"r{i:02d}" for i in range(5)}) == harness.NONE
    for run in runs:
        raw, widened = ss.ranked(run).set_index("candidate"), ss.ranked(run, spread=spread).set_index("candidate")
        assert (widened.hi - widened.lo > raw.hi - raw.lo).all()
        assert set(widened[widened.tie].index) >= set(raw[raw.tie].index)
    assert any(len(ss.ranked(r, spread=spread).query("tie")) > len(ss.ranked(r).query("tie")) for r in runs)


def test_pooled_runs_divide_the_offset_and_the_report_states_it():
    """The answer pools the twelve runs (one candidate set, one prompt set): an offset divides among the runs
    pooled, a run is judged by the offsets of the other runs only (here none are left: not widened), and
    the TL;DR's lead says what a run's intervals were widened by."""
    from specbench.report import controls

    bench = pd.concat(runs_with_offsets(12, 0.02), ignore_index=True)
    t = rc.tables(bench)
    a = t["measured"]
    assert (a.spread == 0).all() and (a.spread_runs == 0).all()  # pooled: every run is judged, none left to judge by
    spread = t["spreads"]["m1"].fit()
    pooled = ss.latest_runs(bench)
    assert (pooled.pooled_runs == 12).all() and pooled.source_run.nunique() == 12
    one = ss.ranked(pooled, spread=spread).set_index("candidate")
    alone = ss.ranked(pooled.assign(pooled_runs=1), spread=spread).set_index("candidate")
    assert (one.hi - one.lo < alone.hi - alone.lo).all()
    last = bench[bench.run_id == "r11"]  # a newer candidate set would rank r11 alone: judged by the other 11
    r = ss.ranked(last, spread=ss.judged_by(t["spreads"], ss.latest_runs(last))).assign(machine="cpu A, 2 cores")
    assert (r.spread_runs == 11).all() and (r.spread > 0).all()
    said = controls.offset_clause(r)
    assert f"on cpu A: {r.spread.iloc[0]:.1%} of its speedup for a tree decode" in said and "other 11 runs'" in said
    quiet = rc.tables(pd.concat(runs_with_offsets(4, 0.0), ignore_index=True))
    assert controls.offset_clause(quiet["measured"]) == ""  # too few runs: none estimated, none said
