"""study.tools.margins: where a greedy output diverges from plain decoding, the target's logit margin
there (results/divergence_margins.csv), and the report's losslessness section quoting it."""

import subprocess
import sys

import pandas as pd
import pytest
import torch

from specbench.report import lossless
from specbench.study.tools.margins import COLUMNS, divergences, logit_margins

KEYS = dict(pair="p", pair_id="A", dataset="d", dtype="bfloat16", max_new_tokens=8, verify="greedy", temperature=0.0)


def _summary():
    rows = [
        dict(KEYS, config_hash="base", tree="none"),
        dict(KEYS, config_hash="same", tree="chain"),
        dict(KEYS, config_hash="diff", tree="binary"),
        dict(KEYS, config_hash="short", tree="kary"),
        dict(KEYS, config_hash="other", tree="chain", dtype="float32"),  # no baseline in float32
        dict(KEYS, config_hash="hot", tree="chain", verify="mss", temperature=1.0),
    ]
    return pd.DataFrame(rows)


def test_divergences_pairs_each_greedy_config_with_its_baseline():
    outputs = {
        ("base", "x"): [1, 2, 3, 4],
        ("base", "y"): [5, 6],
        ("same", "x"): [1, 2, 3, 4],
        ("diff", "x"): [1, 2, 9, 4],
        ("diff", "y"): [5, 6],
        ("short", "x"): [1, 2],
        ("other", "x"): [7],
        ("hot", "x"): [8],
    }
    rows = divergences(_summary(), outputs)
    assert [(r["config_hash"], r["prompt_id"]) for r in rows] == [
        ("diff", "x")
    ]  # a shorter run has no token to compare
    r = rows[0]
    assert (r["baseline_hash"], r["position"], r["token"], r["baseline_token"], r["prefix"]) == (
        "base",
        2,
        9,
        3,
        [1, 2],
    )


def test_logit_margins_are_the_targets_logits_after_the_shared_prefix(tiny_target):
    prompt, prefix = [5, 17, 33], [40, 41]
    with torch.no_grad():
        logits = tiny_target(input_ids=torch.tensor([prompt + prefix])).logits[0, -1].float()
    top = torch.topk(logits, 3).indices.tolist()
    row = dict(
        pair="p",
        pair_id="A",
        dataset="d",
        dtype="bfloat16",
        max_new_tokens=8,
        config_hash="c",
        baseline_hash="b",
        prompt_id="x",
        position=2,
        token=top[2],
        baseline_token=top[0],
        prefix=prefix,
    )
    out = logit_margins(tiny_target, prompt, [row])[0]
    assert set(out) == set(COLUMNS)
    assert out["margin"] == pytest.approx(float(logits[top[0]] - logits[top[2]]), abs=1e-5) and out["margin"] > 0
    assert out["top2_margin"] == pytest.approx(float(logits[top[0]] - logits[top[1]]), abs=1e-5)


def test_missing_summary_is_a_one_line_error(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "specbench.study.tools.margins", "--results", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert p.returncode != 0 and p.stderr.strip().count("\n") == 0 and "collect" in p.stderr
    assert list(tmp_path.iterdir()) == []


def _table():
    return pd.DataFrame(
        [
            dict(
                config_hash="diff",
                baseline_hash="base",
                pair="p",
                dataset="d",
                dtype="bfloat16",
                max_new_tokens=8,
                shape="binary",
                budget=4,
                engine="live",
                n_prompts=2,
                identical=1,
                diverged=[("x", 2)],
            )
        ]
    )


def test_report_quotes_the_margin_beside_each_divergence():
    margins = pd.DataFrame(
        [
            dict(config_hash="diff", baseline_hash="base", prompt_id="x", margin=-0.05),
            dict(config_hash="diff", baseline_hash="other", prompt_id="x", margin=9.0),
        ]
    )
    text = lossless.lossless_section(_table(), None, True, True, margins)
    assert "x@2 (Δlogit -0.050)" in text  # the margin against this row's own baseline
    assert "1 of 1 divergences measured, |Δlogit| at most 0.050" in text and "1 of 1 negative" in text
    none = margins[margins.baseline_hash == "nobody"]
    assert "has no row for these divergences" in lossless.lossless_section(_table(), None, True, True, none)


def test_report_says_when_the_margins_are_absent():
    text = lossless.lossless_section(_table(), None, True, True, None)
    assert "x@2 |" in text and "divergence_margins.csv is absent" in text
    same = _table().assign(identical=2, diverged=[[]])
    assert "divergence_margins" not in lossless.lossless_section(same, None, True, True, None)
