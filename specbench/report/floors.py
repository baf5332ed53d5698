"""The reference study's size floors (issue #23; declared with the sweeps that meet them in
``results.plan``), checked against results/ by the report and a test.

A floor asks for every combination of its pairs x trees x budgets x datasets x temperatures x rules
to have a summary row on at least ``min_prompts`` prompts of ``min_tokens`` new tokens.  Floors are
listed in the issue's priority order; ``run_all.sh`` runs the plan's sweeps in that order, and
REPORT.md lists every unmet floor with what it would take at the measured wall time of the runs it
has (``shortfall``).  Pure pandas: the test over the committed CSVs uses the same definitions.
"""

from __future__ import annotations

import pandas as pd

from ..results import plan
from ..results.columns import tree_label
from ..results.plan import Floor

STATIC = plan.STATIC
FLOORS: tuple[Floor, ...] = plan.floors()  # the study plan's floors, in the priority order


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
    if not set(NEEDED) <= set(summary.columns) or summary.n_prompts.isna().all():  # NaN: not recorded
        return pd.DataFrame(columns=["floor", "cells", "missing", "minutes", "unpriced"])
    rows = []
    for f in FLOORS:
        n = len(f.cells())
        gone, minutes, unpriced = shortfall(f, summary)
        rows.append({"floor": f.name, "cells": n, "missing": gone, "minutes": minutes, "unpriced": unpriced})
    return pd.DataFrame(rows)
