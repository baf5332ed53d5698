"""The comparisons fixed in advance (#36): the list is read from the rows' structure, each
comparison appears on its page with its Holm-adjusted interval, Holm is right on a known example,
and the committed report carries every comparison of the list."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specbench.report import analysis, compare, fixed, fixed_page, tables
from specbench.report.context import Ctx, Inputs, Tables
from specbench.results.files import read_csv
from specbench.study.job.describe import mode_columns

ROOT = Path(__file__).resolve().parents[1]
GROUP = dict(pair="p", dataset="humaneval", dtype="bfloat16", max_new_tokens=64, engine="live", temperature=1.0)
# (config_hash, verify, lossless, tree, budget, pair_key, pair_role, mean emitted per step)
ROWS = [
    ("M", "mss", True, "binary", 16, "M", "decode", 3.0),
    ("M2", "mss", True, "binary", 16, "M", "paired", 3.0),
    ("TR", "traversal", True, "binary", 16, "M", "paired", 3.1),
    ("S", "sequoia", True, "binary", 16, "S", "decode", 3.2),
    ("N", "naive", True, "binary", 16, "N", "decode", 2.5),
    ("N2", "naive", True, "binary", 16, "N", "paired", 2.5),
    ("TY", "typical", False, "binary", 16, "N", "paired", 3.6),
    ("RA", "ratio", False, "binary", 16, "N", "paired", 2.0),
    ("C", "speculative", True, "chain", 4, "C", "decode", 2.8),
    ("BL", "block", True, "chain", 4, "C", "paired", 2.9),
    ("HS", "hsd", False, "chain", 4, "C", "paired", 2.8),
]
EXPECTED = {
    ("TR", "M2", "baseline"),  # on its own trees a paired mss re-verification first
    ("S", "M", "baseline"),  # sequoia drew its own trees: mss's decode
    ("N", "M", "baseline"),
    ("TY", "N2", "baseline, naive"),
    ("TY", "M", "best lossless"),
    ("RA", "N2", "baseline, naive"),
    ("RA", "M", "best lossless"),
    ("BL", "C", "baseline"),
    ("HS", "C", "baseline, best lossless"),  # no naive on a chain
}


def _tables():
    summary = pd.DataFrame(
        [
            dict(
                GROUP,
                config_hash=h,
                verify=v,
                lossless=ll,
                tree=tree,
                tree_params="{}",
                budget=n,
                pair_key=k,
                pair_role=role,
                n_prompts=12,
                tokens_per_step=tps,
                **mode_columns(v),  # each mode's declared role, as its rows carry it
            )
            for h, v, ll, tree, n, k, role, tps in ROWS
        ]
    )
    rng = np.random.default_rng(1)
    steps = []
    for h, *_, tps in ROWS:
        for i in range(12):
            base = tps + 0.3 * np.sin(i)  # a per-prompt level every row shares (pairing matters)
            emitted = rng.poisson(base, size=6) + 1
            steps += [dict(config_hash=h, prompt_id=f"q{i}", emitted=e, accepted=e - 1, tree_size=4) for e in emitted]
    return summary, pd.DataFrame(steps)


@pytest.fixture(scope="module")
def made():
    summary, steps = _tables()
    comp = fixed.comparisons(analysis.prepare(summary), tables.prompt_sums(steps))
    page = fixed_page.section(Ctx(t=Tables(comparisons=comp, df=analysis.prepare(summary)), data=Inputs(steps=steps)))
    return comp, page


def test_the_list_is_exactly_the_declared_comparisons(made):
    summary, _ = _tables()
    got = {(r["config_hash"], ref["config_hash"], why) for r, ref, why in fixed.fixed_list(analysis.prepare(summary))}
    assert got == EXPECTED
    # structure only: the list does not move when every result does
    moved = summary.assign(tokens_per_step=summary.tokens_per_step[::-1].to_numpy())
    assert {(r["config_hash"], ref["config_hash"], w) for r, ref, w in fixed.fixed_list(analysis.prepare(moved))} == got
    comp, _ = made
    assert set(zip(comp.config_hash, comp.baseline_hash, comp.against)) == EXPECTED


def test_each_comparison_appears_on_the_page_with_its_adjusted_interval(made):
    comp, page = made
    lines = page.splitlines()
    for r in comp.to_dict("records"):
        row = [ln for ln in lines if f"| {r['config_hash']} − {r['baseline_hash']} |" in ln]
        assert len(row) == 1, r
        adjusted = fixed_page.signed(r["diff"], r["adj_lo"], r["adj_hi"])
        assert f"| {adjusted} | {'yes' if r['clears_zero'] else 'no'} |" in row[0]
        assert r["adj_lo"] <= r["diff_lo"] and r["diff_hi"] <= r["adj_hi"]  # widened, never narrowed
    assert f"Of the {len(comp)} comparisons fixed in advance" in page
    assert comp.clears_zero.any() and not comp.clears_zero.all()


def test_holm_on_a_known_example():
    adj, level = compare.holm(np.array([0.01, 0.04, 0.03, 0.005]))
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4·0.005, 3·0.01, 2·0.03, max(0.06, 0.04)
    assert np.allclose(adj, [0.03, 0.06, 0.06, 0.02])
    # two rejected (ranks 1-2); from rank 3, the first not rejected, the level stays 0.05/2
    assert np.allclose(level, [0.05 / 3, 0.05 / 2, 0.05 / 2, 0.05 / 4])
    adj, level = compare.holm(np.array([np.nan, 0.001]))  # NaN counts as 1
    assert np.allclose(adj, [1.0, 0.002]) and np.allclose(level, [0.05, 0.025])
    assert [len(x) for x in compare.holm(np.array([]))] == [0, 0]


def test_the_bootstrap_p_value_is_where_the_interval_leaves_zero():
    for seed in range(3):
        draws = np.random.default_rng(seed).normal(0.3 * seed, 0.2, size=2000)
        p = compare.Paired("a", "b", 20, 1.0, 1.0, 0.0, 0.0, 0.0, draws)
        pv = compare.boot_p(p)
        for a in np.linspace(0.001, 0.999, 97):
            lo, hi = compare.interval_at(p, 1 - a)
            assert (lo > 0 or hi < 0) == (a > pv), (seed, a, pv)
    assert compare.boot_p(compare.Paired("a", "b", 20, 1.0, 1.0, 0.0, 0.0, 0.0, np.zeros(100))) == 1.0


def test_every_committed_comparison_is_on_the_linked_page_with_its_adjusted_interval():
    comp = pd.read_csv(ROOT / "results" / "comparisons.csv", dtype={"config_hash": str, "baseline_hash": str})
    summary = read_csv(str(ROOT / "results" / "summary.csv"))
    declared = {(r["config_hash"], ref["config_hash"], w) for r, ref, w in fixed.fixed_list(analysis.prepare(summary))}
    assert declared and set(zip(comp.config_hash, comp.baseline_hash, comp.against)) == declared
    report = (ROOT / "REPORT.md").read_text()
    assert "(results/tables/comparisons.md)" in report and "Best lossless" not in report
    assert f"Of the {len(comp)} comparisons fixed in advance" in report
    assert f"), {int(comp.clears_zero.sum())} clear zero" in report
    lines = (ROOT / "results" / "tables" / "comparisons.md").read_text().splitlines()
    for r in comp.to_dict("records"):
        row = [ln for ln in lines if f"| {r['config_hash']} − {r['baseline_hash']} |" in ln]
        assert len(row) == 1, r
        assert (
            f"| {fixed_page.signed(r['diff'], r['adj_lo'], r['adj_hi'])} | {'yes' if r['clears_zero'] else 'no'} |"
            in row[0]
        )
        assert bool(r["clears_zero"]) == (r["adj_lo"] > 0 or r["adj_hi"] < 0), r  # Holm and the interval agree
