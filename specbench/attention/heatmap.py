"""The tree-attention speed-up heatmap, drawn by one function for the benchmark's figures
(``attention.bench``: ``attention_speedup_<dtype>.png``) and the report's (``report.tree_attention.figures``:
``attention_speedup.png``): sequential ÷ fused median time over KV length × tree size, one panel per
shape and dtype, every panel on one log colour scale symmetric around 1 (blue: fused faster).

Imports numpy, pandas and matplotlib's colours only: no torch, nothing from specbench (the report
imports it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm

CELL = ["shape", "dtype", "kv_len", "tree_size"]
COLORBAR = "sequential ÷ fused time (shared log scale)"


def ratios(kern: pd.DataFrame) -> pd.DataFrame:
    """Sequential ÷ fused median time (column ``r``) per (shape, dtype, kv_len, tree_size) cell of
    kernel rows that timed both (a cell's repeats averaged); no rows without both."""
    k = kern[kern.impl.isin(["fused", "sequential"])]
    piv = k.pivot_table(index=CELL, columns="impl", values="median_s") if len(k) else pd.DataFrame()
    if not {"fused", "sequential"} <= set(piv.columns):
        return pd.DataFrame(columns=[*CELL, "r"])
    return (piv.sequential / piv.fused).dropna().rename("r").reset_index()


def shared_norm(r: pd.Series) -> LogNorm:
    """The one colour scale of every panel: 1/lim to lim, lim the largest ratio either way (at least 1.01)."""
    lim = float(max(r.max(), 1 / r.min(), 1.01)) if len(r) else 2.0
    return LogNorm(vmin=1 / lim, vmax=lim)


def draw(ax, cell: pd.DataFrame, norm: LogNorm, title: str):
    """One panel: ``cell``'s ratios (one shape and dtype, from ``ratios``) over KV length (rows) ×
    tree size (columns), each finite one written in its square; returns the image (for a colour bar)."""
    t = cell.pivot(index="kv_len", columns="tree_size", values="r")
    im = ax.imshow(t.to_numpy(), cmap="RdBu", norm=norm, origin="lower", aspect="auto")
    ax.set(
        xticks=range(t.shape[1]),
        xticklabels=t.columns,
        yticks=range(t.shape[0]),
        yticklabels=t.index,
        xlabel="tree size N",
        ylabel="KV length",
        title=title,
    )
    for (r, c), val in np.ndenumerate(t.to_numpy()):
        if np.isfinite(val):
            ax.text(c, r, f"{val:.1f}", ha="center", va="center", fontsize=6)
    ax.grid(False)
    return im
