"""The comparisons fixed in advance (#36): one list, declared from the data's structure, every
comparison on it reported with a family-wise adjusted interval (pandas, numpy, scipy).

The list (`fixed_list`) reads which rows exist — their rule, tree, budget, temperature, group and
``pair_key`` (rows sharing one verified the same drafted trees) — and never a result, so no
comparison is on it because it came out large.  At T > 0, per comparison group (`analysis.GROUP`),
shape, budget and temperature:

1. *baseline*: every rule (a paired control and the reference rule's own decode excepted) against
   its strongest token-level baseline, the row `analysis._reference_row` declares (on the same
   drafted trees where one shares its pair_key, else the reference rule's decode);
2. *best lossless*: every lossy rule against the best lossless rule, fixed a priori as the mode the
   rows declare the reference of their kind of tree (``baseline_of``, `study.job.describe`: speculative
   sampling on chains, multi-step speculative sampling, mss, on trees): its row on the same trees
   where one exists, else its decode on the same prompts;
3. *naive*: every lossy rule (``mode_family``) against the rule the rows declare the lossy rules'
   baseline (``baseline_of`` lossy: naive) on the same drafted trees, where it verified them.

A pair of rows reached by two of these is listed once, with both reasons.  Each comparison is the
paired difference Δ in tokens_per_step on the prompts both ran (`compare.paired_difference`:
ratio of sums, `compare.N_PAIRED` paired bootstrap draws, seed 0), its 95% percentile interval,
the two-sided bootstrap p-value (`compare.boot_p`: the smallest α whose 1 − α interval excludes
zero) and Holm's step-down over the whole list at family-wise `ALPHA` (`compare.holm`).  The adjusted
interval is the percentile interval at 1 − α_i, α_i = ALPHA / (m − min(i, k) + 1) for the
comparison of p-value rank i, k the first rank Holm does not reject: the step's own level, held at
the stopping step's for the comparisons after it.  So an adjusted interval excludes zero exactly
when Holm rejects.  A comparison with fewer than `tables.MIN_CI` shared prompts stays on the list
(it counts in m) with p = 1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import analysis, compare, tables
from .analysis import is_lossless
from .compare import ALPHA

KEYS = analysis.GROUP + ["tree", "tree_params", "budget", "temperature"]
BASELINE, BEST, NAIVE = "baseline", "best lossless", "naive"
COLUMNS = (  # one string, split on spaces
    "pair dataset engine dtype max_new_tokens temperature tree shape budget verify lossless against"
    " baseline_verify same_trees config_hash baseline_hash n_prompts tokens_per_step"
    " baseline_tokens_per_step diff diff_lo diff_hi p_value holm_p holm_alpha adj_lo adj_hi clears_zero"
).split()


def is_lossy(r: dict) -> bool:
    """A row of a lossy rule: its declared ``mode_family``, else (older rows) its ``lossless`` flag."""
    family = r.get("mode_family")
    return family == "lossy" if isinstance(family, str) and family else not is_lossless(r["lossless"])


def _first(rows: pd.DataFrame) -> dict | None:
    """The row a declared choice names among several: paired re-verifications (same random numbers)
    before the decode, then by config_hash."""
    if rows.empty:
        return None
    order = rows.sort_values(["pair_role", "config_hash"], ascending=[False, True], kind="mergesort")
    return order.iloc[0].to_dict()


def _on_trees(d: pd.DataFrame, r: dict, baseline_of: str, own_decode: bool) -> dict | None:
    """The row of the mode declared the baseline of ``baseline_of`` on r's drafted trees (same
    pair_key), else, with own_decode, its decode with r's keys (its own trees, the same prompts)."""
    cand = analysis._same(analysis.with_role(d, "baseline_of", baseline_of), r, KEYS)
    same = cand[cand.pair_key == r["pair_key"]]
    if len(same) or not own_decode:
        return _first(same)
    return _first(cand[cand.pair_role == "decode"])


def targets(d: pd.DataFrame, r: dict) -> list[tuple[dict, str]]:
    """(row compared with, reason) for one subject row r, in the declared order."""
    out = []
    base = analysis._reference_row(d, r, KEYS)
    if len(base):
        out.append((base.iloc[0].to_dict(), BASELINE))
    if is_lossy(r):
        best = _on_trees(d, r, analysis.kind(r["tree"]), True)
        for ref, why in ((best, BEST), (_on_trees(d, r, analysis.LOSSY_BASELINE, False), NAIVE)):
            if ref is not None:
                out.append((ref, why))
    return out


def fixed_list(df: pd.DataFrame) -> list[tuple[dict, dict, str]]:
    """(subject row, compared row, reasons) for every comparison fixed in advance, in a stable order;
    ``df``: `analysis.prepare`'s rows.  Reads the rows' structure only, never a result column."""
    if df.empty or not (df.temperature > 0).any():
        return []
    hot = df[(df.temperature > 0) & ~analysis._controls(df)]
    hot = hot[[not analysis.is_reference(b, t) for b, t in zip(hot.baseline_of, hot.tree)]]
    hot = hot.sort_values(KEYS + ["verify", "config_hash"], kind="mergesort")
    out: dict[tuple[str, str], tuple[dict, dict, list[str]]] = {}
    for r in hot.to_dict("records"):
        for ref, why in targets(df, r):
            key = (str(r["config_hash"]), str(ref["config_hash"]))
            out.setdefault(key, (r, ref, []))[2].append(why)
    return [(r, ref, ", ".join(whys)) for r, ref, whys in out.values()]


def _row(r: dict, ref: dict, why: str, p: compare.Paired | None) -> dict:
    n = p.n_prompts if p is not None else 0
    tested = p if p is not None and n >= tables.MIN_CI else None
    return dict(
        {k: r.get(k) for k in ("pair", "dataset", "engine", "dtype", "max_new_tokens", "temperature", "tree", "shape")},
        budget=int(r["budget"]),
        verify=r["verify"],
        lossless=is_lossless(r["lossless"]),
        against=why,
        baseline_verify=ref["verify"],
        same_trees=ref["pair_key"] == r["pair_key"],
        config_hash=r["config_hash"],
        baseline_hash=ref["config_hash"],
        n_prompts=n,
        tokens_per_step=p.a_value if p else np.nan,
        baseline_tokens_per_step=p.b_value if p else np.nan,
        diff=p.diff if p else np.nan,
        diff_lo=tested.lo if tested else np.nan,
        diff_hi=tested.hi if tested else np.nan,
        p_value=compare.boot_p(tested) if tested else np.nan,
        paired=p,
    )


def comparisons(df: pd.DataFrame, sums: pd.DataFrame) -> pd.DataFrame:
    """Every comparison of `fixed_list` with Δ, its 95% interval, p, Holm's adjusted p, the adjusted
    interval's level and bounds and whether it clears zero (`COLUMNS`, plus the `paired` object)."""
    rows = []
    for r, ref, why in fixed_list(df):
        try:
            p = compare.paired_difference(sums, r, ref)
        except compare.Incomparable:
            p = None
        rows.append(_row(r, ref, why, p))
    if not rows:
        return pd.DataFrame(columns=COLUMNS + ["paired"])
    out = pd.DataFrame(rows)
    out["holm_p"], out["holm_alpha"] = compare.holm(out.p_value.to_numpy(float), ALPHA)
    bounds = [
        compare.interval_at(p, 1 - a) if p is not None and pv == pv else (np.nan, np.nan)
        for p, a, pv in zip(out.paired, out.holm_alpha, out.p_value)
    ]
    out["adj_lo"], out["adj_hi"] = [b[0] for b in bounds], [b[1] for b in bounds]
    out["clears_zero"] = (out.holm_p < ALPHA) & out.p_value.notna()
    return out[COLUMNS + ["paired"]]


def csv_frame(comp: pd.DataFrame) -> pd.DataFrame:
    """results/comparisons.csv: `COLUMNS` (the `paired` objects left out)."""
    return comp.reindex(columns=COLUMNS)
