"""The one ranking of configurations (#86 item 2; results.ranking): its order, and what each caller that
used to rank by a rule of its own (validate's live-timing picks, the schedule's binary tree, export's
recommend=true, the live schedule's draft length, the TL;DR's pick per dataset) now picks where the rules
differed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specbench.report import tables
from specbench.results import ranking
from specbench.results import schedule as sch


def rows(*specs) -> pd.DataFrame:
    """(tree, budget, projected, tokens_per_step, n_prompts) per row, replayed greedy rows of one cell."""
    return pd.DataFrame(
        [
            dict(pair="p", dataset="d", engine="replay", verify="greedy", temperature=0.0, max_new_tokens=64,
                 tree=t, budget=b, projected=x, tokens_per_step=tps, n_prompts=n, config_hash=f"{t}{b}")
            for t, b, x, tps, n in specs
        ]
    )  # fmt: skip


def test_the_order_is_the_cap_then_the_prompts_then_the_rule_then_tokens_budget_and_tree():
    r = rows(("chain", 2, 1.5, 2.0, 16), ("chain", 3, 1.2, 2.0, 32), ("binary", 3, 1.2, 2.5, 32))
    r = pd.concat([r, rows(("kary", 1, 1.2, 2.5, 32), ("binary", 1, 1.2, 2.5, 32), ("wide", 9, 9.0, 9.0, 64))])
    r["cut"] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.2]  # wide N=9 loses a fifth of its steps to the cap
    got = [(t, int(b)) for t, b in zip(*ranking.order(r, "projected")[["tree", "budget"]].T.to_numpy())]
    assert got == [("binary", 1), ("kary", 1), ("binary", 3), ("chain", 3), ("chain", 2), ("wide", 9)]
    assert ranking.best(r.iloc[:0], "projected") is None
    assert ranking.best(r.drop(columns="cut"), "projected").tree == "wide"  # no cut column: every row admitted
    with pytest.raises(ValueError, match="rule=fastest"):
        ranking.order(r, "fastest")


def test_the_report_reads_the_one_set_of_constants():
    assert (tables.MIN_RANKED, tables.MIN_CI, tables.MAX_CUT) == (ranking.MIN_RANKED, ranking.MIN_CI, ranking.MAX_CUT)


def test_validate_breaks_a_tie_by_tokens_per_step_and_ranks_enough_prompts_first():
    from specbench.study.tools import validate

    speed = rows(("binary", 3, 1.3, 2.0, 32), ("chain", 3, 1.3, 2.4, 32), ("kary", 4, 1.6, 2.6, 8))
    got = [
        (t, int(b))
        for t, b in zip(validate.projected(speed, "p", "d").tree, validate.projected(speed, "p", "d").budget)
    ]
    assert got == [("chain", 3), ("binary", 3), ("kary", 4)]  # was kary 4 (fastest), then binary 3 (its name)


def test_the_schedules_binary_tree_is_the_best_of_enough_prompts():
    from specbench.study.tools import validate

    speed = rows(("binary", 3, 1.3, 2.0, 32), ("binary", 6, 1.5, 2.4, 8))
    assert validate.projected_binary(speed, "p", "d") == 3  # was 6: the highest projection on 8 prompts
    assert validate.projected_binary(speed.iloc[:0], "p", "d") == validate.BINARY


def test_export_recommends_the_reports_best_projection(tmp_path):
    from specbench.study.serving import export

    speed = rows(("binary", 3, 1.4, 2.0, 32), ("chain", 3, 1.4, 2.5, 32), ("kary", 4, 1.9, 2.6, 8))
    speed = speed.assign(dtype="float32", batch_size=1, tree_params="{}")
    speed.to_csv(tmp_path / "speedup.csv", index=False)
    assert export.recommended(str(tmp_path), {"pair": "p", "dataset": "d"}) == "chain3"  # was binary3 (first)


def test_the_live_schedules_draft_length_breaks_an_exact_tie_by_tokens_per_step():
    live = pd.DataFrame(
        [
            dict(pair="p", dataset="d", dtype="float32", max_new_tokens=64, n_prompts=16, engine="live", tree="chain",
                 shape="chain", batch_size=bs, budget=n, measured=m, tokens_per_step=tps, config_hash=f"{bs}{n}",
                 measured_hash=f"{bs}{n}")
            for bs, n, m, tps in ((1, 2, 1.3, 2.0), (1, 3, 1.3, 2.2), (4, 2, 0.9, 2.0), (4, 3, 0.8, 2.2))
        ]
    )  # fmt: skip
    got = sch.draft_lengths(live, "p", sch.LIVE)
    assert list(got) == [(1, 3), (4, 0)] and got.source == sch.SOURCES[sch.LIVE]  # B=1 was N=2 (the smaller)
    assert sch.draft_lengths(live, "q", sch.LIVE) is None and sch.draft_lengths(None, "p") is None


def test_the_tldrs_exploratory_pick_prefers_the_rows_of_enough_prompts():
    from specbench.report import phrases

    ans = rows(("chain", 1, None, 2.0, 8), ("sequoia", 1, None, 1.9, 32)).assign(
        speed=[1.10, 1.09], speed_basis="projected", claim="exploratory", cut=0.0, shape=["chain", "sequoia"]
    )
    (pick,) = phrases.fastest_per_dataset(ans)
    assert pick["shape"] == "sequoia"  # was chain N=1: the faster projection on 8 prompts
    ranked = ans.assign(claim="ranked", n_prompts=32)
    assert phrases.fastest_per_dataset(ranked)[0]["shape"] == "chain"  # both ranked: the faster, as before


def test_best_index_picks_per_grid_point_what_best_picks_there():
    """The linear model's best at a point and per cell of the phase diagram (``best_index``): per column of a
    grid of criteria, the row ``best`` would pick with that column as its criterion (the cap, the prompts,
    then the value, its ties by tokens per step, budget and tree; NaN last)."""
    r = rows(("chain", 2, 0, 2.0, 32), ("binary", 2, 0, 2.5, 32), ("kary", 1, 0, 2.5, 32), ("wide", 9, 0, 9.0, 64))
    r["cut"] = [0.0, 0.0, 0.0, 0.5]  # wide N=9 is not admitted: it ranks last whatever its value
    rng = np.random.default_rng(0)
    grid = rng.choice([0.5, 1.0, 1.5, np.nan], size=(len(r), 7, 5))  # many exact ties
    got = ranking.best_index(r, grid)
    assert got.shape == (7, 5)
    for i in range(7):
        for j in range(5):
            top = ranking.best(r.assign(projected=grid[:, i, j]), "projected")
            assert r.iloc[got[i, j]].config_hash == top.config_hash
    one = ranking.best_index(r.drop(columns=["cut", "n_prompts", "tokens_per_step"]), np.array([1.0, 2.0, 2.0, 0.5]))
    assert int(one) == 2  # a tie at 2.0: the smaller budget (kary N=1), as np.argmax's first would not


def test_the_gap_and_the_live_schedule_rank_by_the_one_ranking():
    """The best static shape per budget against the DP (``fraction``) and the live schedule's best per B
    (``measured``) are ``best``'s picks."""
    r = rows(("chain", 2, 0, 2.0, 32), ("binary", 2, 0, 2.5, 32)).assign(fraction=[0.9, 0.9], measured=[1.1, 1.2])
    assert ranking.best(r, "fraction").tree == "binary"  # a tie: the more tokens per step
    assert ranking.best(r, "measured").tree == "binary"
