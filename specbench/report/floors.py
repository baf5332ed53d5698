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
LOSSY = ("typical", "ratio", "conservative", "epsilon")
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
# the floors, in the priority order
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
    Floor("3d. lossy rules at T=1", ("qwen_coder",), ("binary",), (16,), HE_MT, 32, ("naive",) + LOSSY, (1.0,)),
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
        ("mss", "traversal", "sequoia", "naive") + LOSSY,
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


def shortfall(floor: Floor, summary: pd.DataFrame) -> tuple[int, float]:
    """(cells missing, the minutes they would take): one decode per missing pair x shape x dataset x
    temperature (the rules of a floor ride on it, ``verify.paired_with``), each at the median wall
    time per prompt-token of the runs most like it in summary.csv (greedy or sampling like it; then
    same pair and tree, else same pair, since the drafter sets the cost, else same tree, else all), times the floor's prompts and tokens."""
    cells = missing(floor, summary)
    gone = sorted({(p, t, b, d, r if temp == 0 else "", temp) for p, t, b, d, r, temp in cells})
    s = _index(summary)
    s = s[s.pair_role.astype(str) == "decode"]
    s = s.assign(r=s.wall_s.astype(float) / (s.n_prompts * s.max_new_tokens))
    total = 0.0
    for pair, label, _, _, _, temp in gone:
        k = s[(s["T"] > 0) == (temp > 0)]  # sampling runs live, greedy ones replay
        for pick in (k[(k.pair == pair) & (k.label == label)], k[k.pair == pair], k[k.label == label], k, s):
            if len(pick):
                total += float(pick.r.median()) * floor.min_prompts * floor.min_tokens
                break
    return len(cells), total / 60


NEEDED = ("pair", "tree", "budget", "dataset", "verify", "n_prompts", "max_new_tokens")


def status(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per floor: name, cells, missing, minutes the missing cells would take (no rows when
    summary.csv lacks a column the floors need)."""
    if not set(NEEDED) <= set(summary.columns):
        return pd.DataFrame(columns=["floor", "cells", "missing", "minutes"])
    rows = []
    for f in FLOORS:
        n = len(f.cells())
        gone, minutes = shortfall(f, summary)
        rows.append({"floor": f.name, "cells": n, "missing": gone, "minutes": minutes})
    return pd.DataFrame(rows)
