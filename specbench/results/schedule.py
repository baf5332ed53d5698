"""The batch-size schedule from results/speedup.csv rows (single live runs, one per cell, without
intervals), read by the report (its table, figure and sentences, labelled as such) and by
``study.serving.export`` where the interleaved benchmark has no schedule (``study.tools.speedsched``).

Imports: pandas only (the report imports no torch).
"""

from __future__ import annotations

import pandas as pd

SETTING = ["pair", "dataset", "dtype", "max_new_tokens", "n_prompts"]  # one live setting, never mixed
SOURCE = "single live runs of the batch-size study (one run per cell, no interval)"


class Lengths(list):
    """[(batch size, draft length K), ...] and where they come from (``source``, in export's notes)."""

    def __init__(self, items, source: str):
        super().__init__(items)
        self.source = source


def schedule(speed: pd.DataFrame) -> pd.DataFrame:
    """Per live setting with ≥ 2 batch sizes: each (B, configuration)'s measured speedup and
    whether it is that B's fastest (``best``)."""
    if speed.empty or not {"measured", "engine", "batch_size", "measured_hash", *SETTING} <= set(speed.columns):
        return pd.DataFrame()
    live = speed[(speed.engine == "live") & (speed.measured_hash.astype(str) == speed.config_hash.astype(str))]
    live = live[live.groupby(SETTING).batch_size.transform("nunique") >= 2].copy()
    if live.empty:
        return pd.DataFrame()
    top = live.groupby(SETTING + ["batch_size"]).measured.transform("max")
    order = [c for c in (*SETTING, "batch_size", "shape", "tree", "budget") if c in live.columns]
    return live.assign(best=live.measured == top).sort_values(order)


def draft_lengths(speed: pd.DataFrame, pair: str, tree: str = "chain") -> Lengths | None:
    """[(batch size, draft length K), ...] of ``pair``'s ``tree`` runs in the live setting with
    the most batch sizes: per B the fastest one's N where it beats plain decoding, else 0;
    None without such a study.  Single runs without intervals (``SOURCE``): ``study.serving.export`` takes
    them only where the interleaved benchmark has no schedule (``speedsched.draft_lengths``)."""
    if speed.empty or "tree" not in speed.columns:
        return None
    sched = schedule(speed[(speed.pair.astype(str) == pair) & (speed.tree == tree)])
    if sched.empty:
        return None
    setting = sched.groupby(SETTING).batch_size.nunique().idxmax()
    one = sched.set_index(SETTING).loc[[setting]]
    best = one[one.best].sort_values("batch_size", kind="mergesort").drop_duplicates("batch_size")
    return Lengths([(int(r.batch_size), int(r.budget) if r.measured > 1 else 0) for r in best.itertuples()], SOURCE)
