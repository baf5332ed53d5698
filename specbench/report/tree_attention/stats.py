"""The tree-attention tables behind REPORT.md's section and its figures (pandas only), from
results/attention.csv: fused time per (dtype, batch, KV length, draft length N) cell, its roofline
fraction, its noise, the per-branch re-read and recompute ratios against the measured speedup, and
the real model's view (``level == "model"`` rows).

Fused attention at one cell is the same computation whatever the tree shape (only the mask's values
differ), so its rows for the different shapes are independent measurements of one thing: their
max ÷ min (``spread``) is the run-to-run noise of that cell, which the repeats' IQR (one burst of
3–7 calls) does not see.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...attention.heatmap import one_machine

CELL = ["dtype", "batch", "kv_len", "tree_size"]
AXES = {"batch": "batch", "kv_len": "KV length", "tree_size": "draft length N"}


def kernels(att: pd.DataFrame | None) -> pd.DataFrame:
    """The kernel-level rows of results/attention.csv (empty where it is absent or lacks timings)."""
    if att is None or att.empty or not {"impl", "median_s"} <= set(att.columns):
        return pd.DataFrame()
    return one_machine(att[att.level == "kernel"])  # a file without levels: kernel rows (results.optional)


def roof_frac(k: pd.DataFrame) -> tuple[pd.Series | None, str]:
    """Each row's fraction of its roofline and where the roof comes from (None: not recorded)."""
    if k.roofline_frac.notna().any():
        return k.roofline_frac, "max(bytes moved ÷ measured copy bandwidth, FLOPs ÷ measured matmul peak)"
    if k.bw_frac.notna().any():
        return k.bw_frac, "bytes moved ÷ measured copy bandwidth"
    if k.bytes_moved.notna().any() and k.bandwidth_gbs.notna().any():  # NaN where not recorded
        return k.bytes_moved / (k.bandwidth_gbs * 1e9) / k.median_s, "bytes moved ÷ measured copy bandwidth"
    return None, ""


def fused_cells(kern: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: fused ms (median over shapes), its min and max over shapes, ``spread``
    (max ÷ min), the repeats' relative IQR (median over shapes), the fewest repeats, the roofline
    fraction (median over shapes)."""
    f = kern[(kern.impl == "fused") & kern.median_s.notna()].copy()
    if f.empty:
        return pd.DataFrame()
    roof, _ = roof_frac(f)
    f["roof"] = roof if roof is not None else np.nan
    f["rel_iqr"] = f["iqr_s"] / f.median_s
    f["reps"] = f["repeats"]
    g = f.groupby(CELL, sort=True)
    out = g.agg(
        fused_ms=("median_s", "median"),
        lo_ms=("median_s", "min"),
        hi_ms=("median_s", "max"),
        n_shapes=("median_s", "size"),
        rel_iqr=("rel_iqr", "median"),
        reps=("reps", "min"),
        roof=("roof", "median"),
    ).reset_index()
    out[["fused_ms", "lo_ms", "hi_ms"]] *= 1000
    out["spread"] = out.hi_ms / out.lo_ms
    return out


def speedups(kern: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, shape): sequential ÷ fused time, the KV re-read ratio (per-branch KV bytes ÷
    fused KV bytes = (branches × KV + branch tokens) ÷ (KV + nodes)), the recompute ratio (branch
    tokens ÷ tree nodes), and ``noise``: the ratio lies within its cell's spread."""
    if kern.empty or not {"fused", "sequential"} <= set(kern.impl):
        return pd.DataFrame()
    w = kern.pivot_table(index=CELL + ["shape"], columns="impl", values="median_s", aggfunc="median")
    sp = (w.sequential / w.fused).dropna().rename("speedup").reset_index()
    geo = kern[kern.impl == "fused"].drop_duplicates(CELL + ["shape"])  # NaN where not recorded
    geo = geo[CELL + ["shape", "n_branches", "branch_tokens", "nodes"]]
    sp = sp.merge(geo, on=CELL + ["shape"], how="left")
    sp["reread"] = (sp.n_branches * sp.kv_len + sp.branch_tokens) / (sp.kv_len + sp.nodes)
    sp["recompute"] = sp.branch_tokens / sp.nodes
    if not cells.empty:
        sp = sp.merge(cells[CELL + ["spread"]], on=CELL, how="left")
        sp["noise"] = np.maximum(sp.speedup, 1 / sp.speedup) <= sp.spread
    return sp


def axis_effects(cells: pd.DataFrame) -> dict[str, tuple[float, float, int, int]]:
    """{axis: (smallest, largest ratio of fused time at its top level ÷ its bottom level, bottom,
    top)} over the cells that vary only that axis (the others and the dtype held fixed)."""
    out = {}
    for axis in AXES:
        others = [c for c in CELL if c != axis]
        ratios = []
        for _, g in cells.groupby(others, sort=True):
            if g[axis].nunique() >= 2:
                g = g.sort_values(axis)
                ratios.append(g.fused_ms.iloc[-1] / g.fused_ms.iloc[0])
        if ratios:
            out[axis] = (min(ratios), max(ratios), int(cells[axis].min()), int(cells[axis].max()))
    return out


def model_view(att: pd.DataFrame | None) -> pd.DataFrame:
    """The real model's rows, one per shape: tree (one forward) and per-branch seconds, their ratio."""
    if att is None or not (att.level == "model").any():
        return pd.DataFrame()
    m = one_machine(att[att.level == "model"])
    w = m.pivot_table(index="shape", columns="impl", values="median_s", aggfunc="median")
    if not {"model_tree", "model_branches"} <= set(w):
        return pd.DataFrame()
    keep = ["kv_len", "tree_size", "dtype", "nodes", "n_branches", "branch_tokens", "repeats", "note"]
    info = m.drop_duplicates("shape").set_index("shape")[keep]
    out = info.join(w[["model_tree", "model_branches"]]).reset_index()
    out["ratio"] = out.model_branches / out.model_tree
    return out.dropna(subset=["ratio"]).sort_values("shape").reset_index(drop=True)


def corr(x: pd.Series, y: pd.Series) -> float:
    """Pearson r of log x and log y (nan with fewer than 3 points or no variation)."""
    lx, ly = np.log(x.astype(float)), np.log(y.astype(float))
    if len(lx) < 3 or lx.std() == 0 or ly.std() == 0:
        return float("nan")
    return float(np.corrcoef(lx, ly)[0, 1])


def by_shape_n(sp: pd.DataFrame) -> pd.DataFrame:
    """Median speedup, re-read and recompute ratios per (shape, N) over the branching cells."""
    br = sp[sp.n_branches > 1]
    return br.groupby(["shape", "tree_size"], sort=True)[["speedup", "reread", "recompute"]].median().reset_index()
