"""The tree-attention speed-up heatmap, drawn by one function for the benchmark's figures
(``attention.bench``: ``attention_speedup_<dtype>.png``) and the report's (``report.tree_attention.figures``:
``attention_speedup.png``): sequential ÷ fused median time over KV length × tree size, one panel per
shape and dtype, every panel on one log colour scale symmetric around 1 (blue: fused faster); and which
rows both draw (``one_machine``: attention.csv keeps each machine's rows apart, the figures show one).

Imports numpy, pandas and matplotlib's colours only: no torch, nothing from specbench (the report
imports it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm

CELL = ["shape", "dtype", "kv_len", "tree_size"]
COLORBAR = "sequential ÷ fused time (shared log scale)"


def machines(df: pd.DataFrame) -> pd.Series:
    """Each row's ``machine_id`` ("" for rows from before rows named their machine)."""
    ids = df["machine_id"] if "machine_id" in df else pd.Series("", index=df.index)
    return ids.fillna("").astype(str)


def one_machine(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of the machine that timed the most of them (the report's grid and figures are one machine's:
    a default run's small grid on another machine stays in the file beside the full grid, not mixed into it)."""
    if df.empty:
        return df
    ids = machines(df)
    return df[ids == ids.value_counts().index[0]]


def unsteady_caption(ratio: pd.DataFrame) -> str:
    """What the dagger means, with how many of ``ratio``'s cells carry one; "" where none does."""
    if "unsteady" not in ratio or not ratio.unsteady.any():
        return ""
    limit = ratio.steady_iqr[ratio.unsteady.astype(bool)].max()
    return (
        f"†: a ratio one of whose two timings spread (IQR) over {limit:.0%} of its median (the run's steady_iqr): "
        f"disturbed, read as noise; the colour scale is the steady cells' ({int(ratio.unsteady.sum())} of {len(ratio)} cells)."
    )


def ratios(kern: pd.DataFrame) -> pd.DataFrame:
    """Sequential ÷ fused median time (column ``r``) per (shape, dtype, kv_len, tree_size) cell of
    kernel rows that timed both (a cell's repeats averaged), and ``unsteady``: either timing's
    IQR over its run's ``steady_iqr`` (the benchmark's retiming threshold, recorded in each row; rows
    from before it was recorded are not judged) times its median; no rows without both."""
    k = kern[kern.impl.isin(["fused", "sequential"])]
    k = k.assign(
        spread=k.iqr_s / k.median_s if "iqr_s" in k else 0.0,
        steady_iqr=k.steady_iqr.astype(float) if "steady_iqr" in k else float("inf"),
    )
    values = ["median_s", "spread", "steady_iqr"]
    piv = k.pivot_table(index=CELL, columns="impl", values=values, dropna=False) if len(k) else pd.DataFrame()
    if not len(piv) or not {"fused", "sequential"} <= set(piv["median_s"].columns):
        return pd.DataFrame(columns=[*CELL, "r", "unsteady", "steady_iqr"])
    both = ["fused", "sequential"]
    out = pd.DataFrame({"r": piv["median_s"].sequential / piv["median_s"].fused})
    out["unsteady"] = (piv["spread"][both] > piv["steady_iqr"][both]).any(axis=1)
    out["steady_iqr"] = piv["steady_iqr"][both].min(axis=1)
    return out.dropna(subset=["r"]).reset_index()


def shared_norm(ratio: pd.DataFrame) -> LogNorm:
    """The one colour scale of every panel: 1/lim to lim, lim the largest ratio either way among the
    steady cells (all, where none is; at least 1.01), so one disturbed timing does not wash out the rest."""
    steady = ratio.r[~ratio.unsteady.astype(bool)] if "unsteady" in ratio and not ratio.unsteady.all() else ratio.r
    lim = float(max(steady.max(), 1 / steady.min(), 1.01)) if len(steady) else 2.0
    return LogNorm(vmin=1 / lim, vmax=lim)


def draw(ax, cell: pd.DataFrame, norm: LogNorm, title: str):
    """One panel: ``cell``'s ratios (one shape and dtype, from ``ratios``) over KV length (rows) ×
    tree size (columns), each finite one written in its square, with ``†`` where it is unsteady
    (``unsteady_caption``); returns the image (for a colour bar)."""
    t = cell.pivot(index="kv_len", columns="tree_size", values="r")
    mark = cell.pivot(index="kv_len", columns="tree_size", values="unsteady").reindex_like(t).fillna(False)
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
            ax.text(c, r, f"{val:.1f}" + ("†" if mark.iat[r, c] else ""), ha="center", va="center", fontsize=6)
    ax.grid(False)
    return im
