"""The reference study's size floors (issue #23), checked against results/ by the report and a test.

A floor asks for every combination of its pairs x trees x budgets x datasets x temperatures x rules
to have a summary row on at least ``min_prompts`` prompts of ``min_tokens`` new tokens.  Floors are
listed in the issue's priority order; ``run_all.sh`` keeps them in that order within its hour, and
REPORT.md lists every unmet floor with what it would take at the measured wall time of the runs it
has (``shortfall``).  Pure pandas: the test over the committed CSVs uses the same definitions.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

import pandas as pd

STATIC = ("chain", "binary", "kary", "topk_wide", "specinfer", "medusa63", "sequoia", "adaptive_chain")
MAX_CUT = 0.10  # at most this share of a ranked budget's steps cut by max_new_tokens


@dataclass(frozen=True)
class Floor:
    name: str
    pairs: tuple
    trees: tuple  # tree labels: a tree name, or merged:<shape>
    budgets: tuple
    datasets: tuple
    min_prompts: int
    rules: tuple = ("greedy",)
    temperatures: tuple = (0.0,)
    min_tokens: int = 128
    engine: str | None = None  # "live" for measured speed
    shapes: tuple = ()  # (tree, budget) pairs instead of trees x budgets, where given

    def cells(self):
        shapes = self.shapes or [(t, b) for t, b in itertools.product(self.trees, self.budgets) if _fits(t, b)]
        return [
            (p, t, b, d, r, temp)
            for p, (t, b), d, r, temp in itertools.product(
                self.pairs, shapes, self.datasets, self.rules, self.temperatures
            )
        ]


HE_MT = ("humaneval", "mt_bench")
# the floors, in the priority order; each names the rules the study plan runs (what a mode is,
# lossless or lossy, a baseline or not, the report reads from its rows: study.describe)
FLOORS: tuple[Floor, ...] = (
    Floor(
        "1. qwen_coder greedy, every static shape, budgets 4-64, 3 datasets",
        ("qwen_coder",),
        STATIC,
        (4, 8, 16, 32, 64),
        ("humaneval", "mt_bench", "stdlib_code"),
        64,
    ),
    Floor(
        "1b. EAGLE-2 on part 1's prompts, all 3 datasets",
        ("qwen_coder",),
        ("eagle2",),
        (16,),
        ("humaneval", "mt_bench", "stdlib_code"),
        64,
    ),
    Floor(
        "1c. n-gram drafter on part 1's prompts",
        ("ngram_qwen",),
        ("chain", "binary", "ngram_trie"),
        (16,),
        ("humaneval", "mt_bench", "stdlib_code"),
        64,
    ),
    Floor(
        "1d. merged drafter on part 1's prompts, all 3 datasets",
        ("merged_qwen",),
        ("merged:binary",),
        (16,),
        ("humaneval", "mt_bench", "stdlib_code"),
        64,
    ),
    Floor(
        "2. layer-skip pair: chain/binary/sequoia/specinfer, budgets 4-32",
        ("qwen_skip",),
        ("chain", "binary", "sequoia", "specinfer"),
        (4, 8, 16, 32),
        HE_MT,
        32,
    ),
    Floor(
        "2b. other pairs: chain/binary/sequoia/specinfer, budgets 4-32",
        ("smollm_qwen", "gemma_qwen", "ngram_qwen"),
        ("chain", "binary", "sequoia", "specinfer"),
        (4, 8, 16, 32),
        HE_MT,
        32,
    ),
    Floor(
        "2c. merged pair: chain/binary/sequoia/specinfer shapes, budgets 4-32",
        ("merged_qwen",),
        ("merged:chain", "merged:binary", "merged:sequoia", "merged:specinfer"),
        (4, 8, 16, 32),
        HE_MT,
        32,
    ),
    Floor(
        "3. chains at T=1: speculative, block, gbv, hsd",
        ("qwen_coder",),
        ("chain",),
        (4,),
        HE_MT,
        32,
        ("speculative", "block", "gbv", "hsd"),
        (1.0,),
    ),
    Floor(
        "3b. trees with replacement at T=1: mss, traversal, gbv",
        ("qwen_coder",),
        ("binary",),
        (16,),
        HE_MT,
        32,
        ("mss", "traversal", "gbv"),
        (1.0,),
    ),
    Floor(
        "3c. trees without replacement at T=1: sequoia, traversal, gbv",
        ("qwen_coder",),
        ("binary",),
        (16,),
        HE_MT,
        32,
        ("sequoia", "traversal", "gbv"),
        (1.0,),
    ),
    Floor(
        "3d. lossy rules at T=1",
        ("qwen_coder",),
        ("binary",),
        (16,),
        HE_MT,
        32,
        ("naive", "typical", "ratio", "conservative", "epsilon"),
        (1.0,),
    ),
    Floor(
        "3e. chains at T=0.3 and 0.7",
        ("qwen_coder",),
        ("chain",),
        (4,),
        HE_MT,
        16,
        ("speculative", "block", "gbv", "hsd"),
        (0.3, 0.7),
    ),
    Floor(
        "3f. trees and lossy rules at T=0.3 and 0.7",
        ("qwen_coder",),
        ("binary",),
        (16,),
        HE_MT,
        16,
        ("mss", "traversal", "sequoia", "naive", "typical", "ratio", "conservative", "epsilon"),
        (0.3, 0.7),
    ),
    Floor(
        "4. live speed at batch 8: plain, chain/4, binary/16",
        ("qwen_coder",),
        (),
        (),
        ("humaneval",),
        16,
        engine="live",
        min_tokens=64,
        shapes=(("none", 0), ("chain", 4), ("binary", 16)),
    ),
    Floor(
        "4b. live speed at batch 1: plain and chain/4, qwen_coder and smollm_qwen",
        ("qwen_coder", "smollm_qwen"),
        (),
        (),
        ("humaneval",),
        16,
        engine="live-b1",
        min_tokens=64,
        shapes=(("none", 0), ("chain", 4)),
    ),
)


def tree_label(tree: str, params) -> str:
    """'merged:<shape>' for the merged drafter, else the tree's name."""
    if str(tree) != "merged":
        return str(tree)
    try:
        shape = json.loads(params).get("shape", "")
    except (TypeError, ValueError):
        shape = ""
    return f"merged:{shape}"


def _index(summary: pd.DataFrame) -> pd.DataFrame:
    s = summary.copy()
    for col, default in (
        ("tree_params", "{}"),
        ("engine", ""),
        ("batch_size", 1),
        ("temperature", 0.0),
        ("pair_role", "decode"),
        ("wall_s", float("nan")),
    ):
        if col not in s:
            s[col] = default
    s["label"] = [tree_label(t, p) for t, p in zip(s.tree, s.tree_params)]
    s["T"] = s.temperature.astype(float).round(3)
    s["live_b1"] = (s.engine.astype(str) == "live") & (s.batch_size.astype(int) == 1)
    return s


def _fits(tree: str, budget: int) -> bool:
    return not (tree == "none") ^ (budget == 0)


def missing(floor: Floor, summary: pd.DataFrame) -> list[tuple]:
    """The cells of a floor with no qualifying summary row."""
    s = _index(summary)
    if floor.engine == "live":
        s = s[(s.engine.astype(str) == "live") & ~s.live_b1]
    elif floor.engine == "live-b1":
        s = s[s.live_b1]
    ok = s[(s.n_prompts >= floor.min_prompts) & (s.max_new_tokens >= floor.min_tokens)]
    have = set(zip(ok.pair, ok.label, ok.budget.astype(int), ok.dataset, ok.verify, ok["T"]))
    return [c for c in floor.cells() if c not in have]


def _like(s: pd.DataFrame, floor: Floor, temp: float) -> pd.DataFrame:
    """The runs that cost like a floor's cell: live at batch 1 or batched for the speed floors, live
    sampling at T > 0, else greedy replay."""
    live = s.engine.astype(str) == "live"
    if floor.engine == "live-b1":
        return s[s.live_b1]
    if floor.engine == "live":
        return s[live & ~s.live_b1 & (s["T"] == 0)]
    return s[s["T"] > 0] if temp > 0 else s[~live & (s["T"] == 0)]


def shortfall(floor: Floor, summary: pd.DataFrame) -> tuple[int, float, int]:
    """(cells missing, the minutes they would take, decodes left unpriced): one decode per missing
    pair x shape x dataset x temperature (the rules of a floor ride on it, ``verify.paired_with``), each
    at the median wall time per prompt-token of this pair's runs of the same kind in summary.csv
    (`_like`: replay, live sampling, live at batch 1 or live batched, since they cost differently;
    the same tree where there is one), times the floor's prompts and tokens.  The drafter sets the
    cost, so a decode whose pair has no run of its kind here is counted as unpriced, never priced at
    another pair's rate."""
    cells = missing(floor, summary)
    gone = sorted({(p, t, b, d, r if temp == 0 else "", temp) for p, t, b, d, r, temp in cells})
    s = _index(summary)
    s = s[s.pair_role.astype(str) == "decode"]
    s = s.assign(r=s.wall_s.astype(float) / (s.n_prompts * s.max_new_tokens))
    total, unpriced = 0.0, 0
    for pair, label, _, _, _, temp in gone:
        k = _like(s, floor, temp)
        k = k[(k.pair == pair) & k.r.notna()]
        pick = k[k.label == label] if (k.label == label).any() else k
        if len(pick):
            total += float(pick.r.median()) * floor.min_prompts * floor.min_tokens
        else:
            unpriced += 1
    return len(cells), total / 60, unpriced


NEEDED = ("pair", "tree", "budget", "dataset", "verify", "n_prompts", "max_new_tokens")


def status(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per floor: name, cells, missing, minutes the missing cells would take and decodes left
    unpriced (`shortfall`; no rows when summary.csv lacks a column the floors need)."""
    if not set(NEEDED) <= set(summary.columns):
        return pd.DataFrame(columns=["floor", "cells", "missing", "minutes", "unpriced"])
    rows = []
    for f in FLOORS:
        n = len(f.cells())
        gone, minutes, unpriced = shortfall(f, summary)
        rows.append({"floor": f.name, "cells": n, "missing": gone, "minutes": minutes, "unpriced": unpriced})
    return pd.DataFrame(rows)
