"""Measured speedup divides by the plain run of the same batch size, never another batch's
(report.speedup.BASELINE_MATCH): a live batch-8 run over a batch-1 baseline would count batching
as speculation."""

from __future__ import annotations

import pandas as pd

from specbench.report import lossless, speedup
from specbench.results.optional import filled

ROW = dict(
    pair="qwen_coder",
    dataset="humaneval",
    dtype="bfloat16",
    max_new_tokens=64,
    engine="live",
    verify="greedy",
    temperature=0.0,
)


def _summary() -> pd.DataFrame:
    rows = [
        dict(ROW, config_hash="plain1", tree="none", budget=0, batch_size=1, tokens_per_s=4.0),
        dict(ROW, config_hash="plain8", tree="none", budget=0, batch_size=8, tokens_per_s=20.0),
        dict(ROW, config_hash="chain1", tree="chain", budget=4, batch_size=1, tokens_per_s=6.0),
        dict(ROW, config_hash="chain8", tree="chain", budget=4, batch_size=8, tokens_per_s=18.0),
        dict(ROW, config_hash="chain32", tree="chain", budget=4, batch_size=32, tokens_per_s=30.0),
    ]
    return pd.DataFrame(rows)


def test_each_batch_size_has_its_own_baseline():
    summary = _summary()
    df = summary[summary.tree != "none"]
    got = speedup.measured_speedup(df, summary).set_index("config_hash")
    assert got.loc["chain1", "baseline_hash"] == "plain1"
    assert got.loc["chain1", "measured"] == 6.0 / 4.0
    assert got.loc["chain8", "baseline_hash"] == "plain8"
    assert got.loc["chain8", "measured"] == 18.0 / 20.0  # below 1: batching, not speculation, bought the speed
    assert "chain32" not in got.index  # no plain run at batch 32: no measured speedup at all


def test_lossless_sentences_name_the_batch_and_read_tables_without_it():
    table = pd.DataFrame(
        [dict(ROW, batch_size=8, n_prompts=4, identical=4, diverged=[[]], config_hash="chain8")],
    )
    (line,) = lossless.lossless_sentences(table)
    assert "batch 8" in line and "4 of 4" in line
    (line,) = lossless.lossless_sentences(table.drop(columns="batch_size"))
    assert "batch" not in line and "4 of 4" in line


def test_a_batched_live_row_keeps_its_measured_speedup_and_gets_no_batch_1_projection():
    """costs.csv times one sequence's forwards: a projection from it is a batch-1 figure, so a live
    batch-8 row has none (and keeps its row and measured speedup in the table)."""
    summary = _summary().assign(tokens_per_step=2.0, pair_name="qwen_coder")
    costs = pd.DataFrame(
        [
            dict(role=role, pair="qwen_coder", dtype="bfloat16", n_tokens=n, kv_len=256, seconds=0.01 * (1 + n / 64))
            for role in ("draft", "target")
            for n in (1, 2, 4, 5, 8, 16, 32)
        ]
    )
    df = summary[summary.tree != "none"]
    steps = filled(  # as the report reads steps.csv.gz
        pd.DataFrame(
            [
                dict(config_hash=h, prompt_id="p", tree_size=4, tree_depth=4, emitted=2, scored="1.1.1.1")
                for h in ("chain1", "chain8", "chain32")
            ]
        ),
        "steps.csv.gz",
    )
    got = speedup.speedup_table(df, summary, steps, costs).set_index("config_hash")
    assert got.loc["chain1", "projected"] > 0 and got.loc["chain1", "measured"] == 1.5
    assert pd.isna(got.loc["chain8", "projected"]) and got.loc["chain8", "measured"] == 0.9
    assert "chain32" not in got.index  # batched, and no plain run at its batch: neither figure
