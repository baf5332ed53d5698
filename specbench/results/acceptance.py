"""results/acceptance_matrix.csv: acceptance by depth x sibling rank, from steps.csv (pandas only).

For one greedy configuration, over its steps (a step's accepted path is
``accept_path``, the sibling ranks of its accepted nodes, and ``path_children``,
the children counts of the root and of each accepted node):

  accepted[d, r]  = steps whose accepted node at depth d has sibling rank r
  offered[d, r]   = steps whose accepted path reached depth d-1 and whose node there has a child
                    of rank r (more than r children; every shape's ranks are 0..k-1)
  conditional     = accepted / offered    P(rank r accepted at depth d | its parent accepted, offered)
  marginal        = accepted / n_steps    P(the accepted path holds the node (d, r))

so  sum over (d, r) of marginal = mean accepted per step = acceptance_length: the
identity SPEED-Bench checks per position (tests/test_acceptance.py checks it on every
job of a small sweep, and against the exact law ``distshift.path_law(...).reach``).
``scope=config`` rows are one configuration; ``scope=pooled`` rows pool every greedy
configuration of a pair and dataset (config_hash empty): Sequoia's positional
assumption says the conditional acceptance does not depend on the shape.
Rows without ``path_children`` (steps from before it was recorded) have NaN offered
and conditional.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .columns import CONFIG_COLUMNS

COLUMNS = [
    "scope",
    *CONFIG_COLUMNS,
    "depth",
    "rank",
    "n_steps",
    "offered",
    "accepted",
    "conditional",
    "marginal",
]


def _ints(s) -> list[int]:
    return [int(x) for x in str(s).split(".")] if isinstance(s, str) and s else []


Cells = dict[tuple[int, int], int]  # (depth, sibling rank) -> steps


def counts(steps: pd.DataFrame) -> tuple[Cells, Cells | None, int]:
    """(accepted[(d, r)], offered[(d, r)] or None without path_children, n_steps) over some steps."""
    acc: Cells = {}
    off: Cells | None = {} if "path_children" in steps and steps.path_children.notna().all() else None
    for path in steps.accept_path:
        for d, r in enumerate(_ints(path), 1):
            acc[(d, r)] = acc.get((d, r), 0) + 1
    if off is not None:
        for kids in steps.path_children:
            for d, k in enumerate(_ints(kids), 1):
                for r in range(k):
                    off[(d, r)] = off.get((d, r), 0) + 1
    return acc, off, len(steps)


def _rows(keys: dict, steps: pd.DataFrame) -> list[dict]:
    acc, off, n = counts(steps)
    cells = sorted(set(acc) | set(off or {}))
    out = []
    for d, r in cells:
        a = acc.get((d, r), 0)
        o = off.get((d, r), 0) if off is not None else np.nan
        out.append(
            {
                **keys,
                "depth": d,
                "rank": r,
                "n_steps": n,
                "offered": o,
                "accepted": a,
                "conditional": a / o if o > 0 else np.nan,
                "marginal": a / n if n else np.nan,
            }
        )
    return out


def acceptance_matrix(summary: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Every greedy (T=0) configuration's matrix, then each pair and dataset pooled."""
    if steps is None or steps.empty or "accept_path" not in steps:
        return pd.DataFrame(columns=COLUMNS)
    greedy = summary[(summary.temperature.astype(float) == 0) & (summary.budget > 0)]
    by_hash = dict(tuple(steps[steps.config_hash.isin(set(greedy.config_hash))].groupby("config_hash")))
    rows = []
    for r in greedy.sort_values(["pair", "dataset", "config_hash"]).to_dict("records"):
        if r["config_hash"] in by_hash:
            keys = {c: r.get(c) for c in COLUMNS[1:8]}
            rows += _rows({"scope": "config", **keys}, by_hash[r["config_hash"]])
    for (pair, dataset, dtype), g in greedy.groupby(["pair", "dataset", "dtype"], sort=True):
        st = [by_hash[h] for h in sorted(g.config_hash) if h in by_hash]
        if st:
            keys = dict(
                scope="pooled",
                pair=pair,
                dataset=dataset,
                dtype=dtype,
                config_hash="",
                tree="",
                tree_params="",
                budget=np.nan,
            )
            rows += _rows(keys, pd.concat(st, ignore_index=True))
    return pd.DataFrame(rows, columns=COLUMNS)


def identity_gap(matrix: pd.DataFrame, summary: pd.DataFrame) -> pd.Series:
    """Per configuration: sum of marginal acceptance minus its acceptance_length (0 up to rounding)."""
    per = matrix[matrix.scope == "config"].groupby("config_hash").marginal.sum()
    length = summary.set_index("config_hash").acceptance_length
    return (per - length.reindex(per.index)).rename("identity_gap")


LENGTH_COLUMNS = ["config_hash", "n_requests", "n_steps", "al_token_weighted", "al_per_request"]


def acceptance_lengths(steps: pd.DataFrame | None) -> pd.DataFrame:
    """Per configuration, the acceptance length as the field's tools report it (SPEED-Bench,
    SGLang): AL = 1 + accepted per step (the bonus token counted), token-weighted over every
    step and per request (the mean of each prompt's AL)."""
    if steps is None or steps.empty or "accepted" not in steps:
        return pd.DataFrame(columns=LENGTH_COLUMNS)
    per_prompt = steps.groupby(["config_hash", "prompt_id"], sort=True).accepted.agg(["mean", "size"])
    g = per_prompt.groupby(level="config_hash")
    out = pd.DataFrame(
        {
            "n_requests": g.size(),
            "n_steps": g["size"].sum(),
            "al_token_weighted": 1 + steps.groupby("config_hash").accepted.mean(),
            "al_per_request": 1 + g["mean"].mean(),
        }
    )
    return out.reset_index()[LENGTH_COLUMNS]
