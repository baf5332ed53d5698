"""The run effect (results.harness) on hand-made timing tables: estimated from reruns of one configuration,
added to every interval the answer ranks by, and stated where the report says how."""

import numpy as np
import pandas as pd
import pytest

from specbench.results import harness
from specbench.results import runcontrols as rc
from specbench.results import speedstats as ss
from test_speed_bench import table


def test_fit_recovers_a_run_effect_and_finds_none_where_the_runs_agree_within_their_intervals():
    rng = np.random.default_rng(0)
    v = np.full(3, 0.01**2)
    noisy = [(rng.normal(0, np.sqrt(0.01**2 + 0.03**2), 3), v) for _ in range(200)]
    tau, df, n = harness.fit(noisy)
    assert df == 400 and n == 200 and tau == pytest.approx(0.03, abs=0.004)
    quiet = [(rng.normal(0, 0.01, 3), v) for _ in range(200)]
    assert harness.fit(quiet)[0] < 0.006
    assert harness.fit([(np.array([0.1]), np.array([0.0]))]) == (0.0, 0, 0)  # one run: nothing to estimate


def test_by_machine_pools_over_machines_where_one_has_too_few_reruns():
    g = [(np.array([0.0, 0.1]), np.array([0.0, 0.0]))]
    s = harness.by_machine({"a": g * harness.MIN_DF, "b": g})
    assert not s["a"].pooled and s["a"].df == harness.MIN_DF and s["b"].pooled and s["b"] == s[harness.POOLED]
    assert s["a"].tau == pytest.approx(np.std([0.0, 0.1], ddof=1))
    assert s["a"].log_var(4) == pytest.approx(s["a"].tau ** 2 / 4)
    assert s["a"].difference_var(1.5, 1.2, 2) == pytest.approx(s["a"].tau ** 2 * (1.5**2 + 1.2**2) / 2)


def reruns(n: int, sd: float, seed: int = 0) -> list[pd.DataFrame]:
    """``n`` runs of the same 16 prompts whose tree decodes each move by a relative run effect (sd ``sd``)
    for the whole run, under 0.5% noise per unit; plain decoding keeps none."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        o = np.exp(sd * rng.standard_normal())
        walls = {"plain": 2.0, ss.PLAIN_AA: 2.0, "binary N=3": 1.2 * o, "binary N=3 (twin)": 1.2 * o}
        out.append(table({**walls, "chain N=3": 1.2 * 1.03 * o}, noise=0.005, seed=i, run=f"r{i:02d}"))
    return out


def test_the_run_effect_widens_a_single_run_and_the_report_states_it():
    """Eight reruns with a 3% run effect: a single run's own interval (±0.5% noise) would rank chain
    apart from binary in every run and claim a precision no rerun shows; with the run effect the single
    run's interval covers the spread of the reruns, and the TL;DR's lead says what it carries."""
    from specbench.report import controls

    runs = reruns(8, 0.03)
    spread = ss.spreads(pd.concat(runs, ignore_index=True))["m1"]
    assert 0.015 < spread.tau < 0.06 and spread.df == 7 * 4
    values = [ss.ranked(r).set_index("candidate").speedup["binary N=3"] for r in runs]
    own = ss.ranked(runs[0]).set_index("candidate").loc["binary N=3"]
    wide = ss.ranked(runs[0], spread=spread).set_index("candidate").loc["binary N=3"]
    assert sum(own.lo <= v <= own.hi for v in values) <= 3
    assert sum(wide.lo <= v <= wide.hi for v in values) >= 7
    said = controls.offset_clause(ss.ranked(runs[0], spread=spread).assign(machine="cpu A, 2 cores"))
    assert "run effect" in said and f"{spread.tau:.1%}" in said and "on cpu A" in said
    quiet = rc.tables(runs[0])
    assert controls.offset_clause(quiet["measured"]) == ""  # no rerun anywhere: none estimated, none said
