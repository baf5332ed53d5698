"""Which configuration is the best: the evidence rules' constants and the one ranking every "best"
reads (the report's answer and the TL;DR's pick per dataset, the live batch-size schedule's best per B, the
best static shape per budget against the DP, the linear model's best at a machine's point and per cell of the
phase diagram (``best_index``: a grid of criteria at once), the live-timing picks of ``study.tools.validate``,
the batch-size schedule's binary tree and draft length, and ``study.serving.export``'s ``recommend=true``).
Pandas and numpy.

A configuration ranks first where a ranked claim may rest on it (``admitted``: at most ``MAX_CUT``
of its steps cut by max_new_tokens, where the rows carry ``cut``; ``enough``: at least ``MIN_RANKED``
prompts, where they carry ``n_prompts``), then by the rule's criterion (``RULES``: higher first, a
missing value last), then by more tokens per step, then the smaller budget, then the tree's name;
rows equal on all of these keep their order.

The interleaved benchmark's answer among candidates with intervals (the ties, the pick rule) is
``speedstats``'s, not this; across its keys' answers, the best by the interval's lower end is ``surest`` (the
TL;DR's answer per machine class).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MIN_RANKED = 32  # prompts a ranked or "best" claim rests on
MIN_CI = 10  # prompts below which no interval is printed
MAX_CUT = 0.10  # at most this share of a ranked budget's steps cut by max_new_tokens
RULES = {  # the criterion each rule ranks by (higher is better)
    "speed": "speed",  # the report's: measured where timed, else projected (``speed_basis``)
    "projected": "projected",  # the cost model's projected speedup
    "measured": "measured",  # a live run's measured speedup
    "tokens_per_step": "tokens_per_step",  # acceptance alone (no speed)
    "fraction": "fraction",  # the share of the Sequoia DP's predicted tokens per step (the gap to the optimum)
}


def admitted(rows: pd.DataFrame) -> pd.Series:
    """Per row: at most ``MAX_CUT`` of its steps cut by max_new_tokens (every row, without ``cut``)."""
    if "cut" not in rows:
        return pd.Series(True, index=rows.index)
    return ~(rows.cut.astype(float) > MAX_CUT)


def enough(rows: pd.DataFrame) -> pd.Series:
    """Per row: at least ``MIN_RANKED`` prompts (every row, without ``n_prompts``)."""
    if "n_prompts" not in rows:
        return pd.Series(True, index=rows.index)
    return rows.n_prompts.astype(float) >= MIN_RANKED


def order(rows: pd.DataFrame, rule: str = "speed") -> pd.DataFrame:
    """``rows`` best first by ``rule`` (``RULES``; the module docstring's order)."""
    if rule not in RULES:
        raise ValueError(f"rule={rule}: must be one of {', '.join(RULES)}")
    zero = pd.Series(0.0, index=rows.index)
    keys = {
        "_ok": admitted(rows),
        "_enough": enough(rows),
        "_key": rows[RULES[rule]].astype(float).fillna(-np.inf) if RULES[rule] in rows else zero,
        "_tps": rows.tokens_per_step.astype(float).fillna(-np.inf) if "tokens_per_step" in rows else zero,
        "_budget": rows.budget.astype(float) if "budget" in rows else zero,
        "_tree": rows.tree.astype(str) if "tree" in rows else pd.Series("", index=rows.index),
    }
    ranked = rows.assign(**keys).sort_values(list(keys), ascending=[False] * 4 + [True] * 2, kind="mergesort")
    return ranked.drop(columns=list(keys))


def best(rows: pd.DataFrame, rule: str = "speed") -> pd.Series | None:
    """The best row of ``rows`` by ``rule`` (``order``), or None without rows."""
    return None if rows.empty else order(rows, rule).iloc[0]


def best_index(rows: pd.DataFrame, values: np.ndarray) -> np.ndarray:
    """Per column of ``values`` (``[len(rows), ...]``: each row's criterion at each point of a grid, higher is
    better, NaN last), the position in ``rows`` of the row ``best`` would pick were that its criterion: of the
    rows that rank first (``admitted``, ``enough``), the highest value, its ties by ``order``'s later keys."""
    values = np.asarray(values, dtype=float)
    first = (admitted(rows).to_numpy(int) * 2 + enough(rows).to_numpy(int)).reshape(-1, *[1] * (values.ndim - 1))
    v = np.where(np.isnan(values) | (first < first.max()), -np.inf, values)
    later = order(rows.assign(_pos=np.arange(len(rows)), speed=0.0), "speed")  # the keys after the criterion
    rank = np.empty(len(rows), dtype=float)
    rank[later._pos.to_numpy()] = np.arange(len(rows))
    rank = rank.reshape(-1, *[1] * (values.ndim - 1))
    return np.argmin(np.where(v == v.max(axis=0), rank, np.inf), axis=0)


def surest(keys: pd.DataFrame) -> dict | None:
    """Of benchmark keys' rows (each key's fastest), the best across keys: among those ranked (controls hold,
    an interval) the highest lower end of the interval, then the faster; None where none is ranked (the
    TL;DR's answer per machine class: a tree only where that interval is above 1x)."""
    ok = keys[keys.controls_hold & keys.lo.notna()]
    return ok.sort_values(["lo", "speedup"], ascending=False).iloc[0].to_dict() if len(ok) else None
