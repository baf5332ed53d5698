"""The committed reference study against its floors (issue #23, specbench/report/floors.py):
part 1 (qwen_coder, greedy, every static shape at budgets 4-64 on 64+ prompts of three datasets,
128+ tokens) is complete and no ranked budget loses more than 10% of its steps to max_new_tokens;
every floor is met (run_all.sh's hour and its extended part); a floor left unmet would be named in
REPORT.md with what it would take; and the floor checker itself finds a missing cell."""

from __future__ import annotations

import os
import re

import pandas as pd
import pytest

from conftest import report_text
from specbench.report import floors
from specbench.report.bookkeeping import floor_sentences
from specbench.report.tables import claim, cut_share, is_ranked
from specbench.results.files import STEPS_FILE
from specbench.results.ranking import MAX_CUT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "results")
ROW = dict(  # one greedy replay of the layer-skip pair on HumanEval
    pair="qwen_skip",
    tree="chain",
    tree_params="{}",
    budget=4,
    dataset="humaneval",
    verify="greedy",
    temperature=0.0,
    n_prompts=32,
    max_new_tokens=128,
    engine="replay",
    batch_size=32,
    wall_s=10.0,
    pair_role="decode",
)


@pytest.fixture(scope="module")
def committed():
    summary = pd.read_csv(os.path.join(RESULTS, "summary.csv"))
    steps = pd.read_csv(
        os.path.join(RESULTS, STEPS_FILE), usecols=["config_hash", "prompt_id", "step", "accepted", "emitted"]
    )
    return summary, steps


def test_part_one_is_complete_and_no_ranked_budget_is_cut_by_the_length_limit(committed):
    """Every cell of part 1 is there; a budget that lost more than 10% of its steps to max_new_tokens
    is never ranked (report.tables.claim), and at 128 tokens every shape keeps at least its budgets
    1-32 rankable on every dataset (only budgets 48 and 64 may cross the line)."""
    summary, steps = committed
    first = floors.FLOORS[0]
    assert floors.missing(first, summary) == []
    rows = floors._index(summary)
    rows = rows[
        (rows.pair == "qwen_coder")
        & (rows.verify == "greedy")
        & rows.label.isin(floors.STATIC)
        & (rows.n_prompts >= first.min_prompts)
        & (rows.max_new_tokens >= first.min_tokens)
    ]
    rows = rows.assign(cut=rows.config_hash.map(cut_share(steps, summary)))
    assert rows.cut.notna().all() and len(rows) >= len(list(first.cells()))
    for r in rows.itertuples():
        assert is_ranked(claim(r.n_prompts, r.cut)) == (r.cut <= MAX_CUT), (r.tree, r.budget, r.dataset)
    over = rows[rows.cut > MAX_CUT]
    assert (over.budget > 32).all(), over[["tree", "budget", "dataset", "cut"]]


def test_every_unmet_floor_is_named_in_the_report_with_its_cost(committed):
    summary, _ = committed
    report = report_text(os.path.join(ROOT, "REPORT.md"))
    status = floors.status(summary)
    assert (status.missing == 0).any()
    for r in status[status.missing > 0].itertuples():
        assert r.floor in report, r.floor
    # with every floor met the loop above checks nothing: take gemma_qwen's budget-32 runs away and the
    # report's sentence names floor 2b, counts its 8 absent cells and prices them at gemma's own runs
    lines = floor_sentences(summary[~((summary.pair == "gemma_qwen") & (summary.budget == 32))])
    unmet = [line for line in lines if line.startswith("Floor not met: ")]
    assert len(unmet) == 1 and unmet[0].startswith(f"Floor not met: {floors.FLOORS[5].name}: 8 of 96 configurations")
    # gemma's grid replays by ranks now: priced at its own (seconds-long) runs, not at a live rate
    assert re.search(r"would take (about [1-9]\d* min|under a minute) more\.$", unmet[0]), unmet[0]


def test_every_floor_is_met_by_the_committed_results(committed):
    """Issue #23's floors 1-5, each cell on enough prompts of enough new tokens: the hour's (1-1d, 2,
    4) and the extended run's (2b, 2c, 3-3f, 4b)."""
    summary, _ = committed
    status = floors.status(summary)
    assert len(status) == len(floors.FLOORS)
    assert (status.missing == 0).all(), status[status.missing > 0][["floor", "missing"]]


def test_missing_cells_are_found():
    row = ROW
    summary = pd.DataFrame([row, dict(row, budget=8, n_prompts=31), dict(row, budget=16, max_new_tokens=64)])
    floor = floors.FLOORS[4]
    gone = floors.missing(floor, summary)
    assert ("qwen_skip", "chain", 4, "humaneval", "greedy", 0.0) not in gone
    assert ("qwen_skip", "chain", 8, "humaneval", "greedy", 0.0) in gone  # too few prompts
    assert ("qwen_skip", "chain", 16, "humaneval", "greedy", 0.0) in gone  # too few tokens
    n, minutes, unpriced = floors.shortfall(floor, summary)
    assert n == len(gone) == len(list(floor.cells())) - 1 and unpriced == 0
    per_token = sorted(10.0 / (p * t) for p, t in ((32, 128), (31, 128), (32, 64)))[1]  # the median
    assert minutes == pytest.approx(n * per_token * 32 * 128 / 60)


def test_a_pair_with_no_run_of_its_kind_is_unpriced_not_priced_at_another_pairs_rate():
    """The drafter sets the cost: a cross-vocabulary pair's cells are never priced at the layer-skip
    pair's replay rate, and sampling cells never at a greedy replay's."""
    summary = pd.DataFrame([ROW])
    n, minutes, unpriced = floors.shortfall(floors.FLOORS[5], summary)  # 2b: smollm, gemma, n-gram
    assert n == len(list(floors.FLOORS[5].cells())) and minutes == 0 and unpriced > 0
    n, minutes, unpriced = floors.shortfall(floors.FLOORS[7], summary)  # 3: sampling chains at T = 1
    assert minutes == 0 and unpriced == 2  # one decode per dataset carries the four rules
