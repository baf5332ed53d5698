"""The tree-attention section's computed sentences and tables (`stats` holds the numbers):
time over batch × KV length × draft length, the roofline fraction, the noise against the effects,
why fusion helps some shapes and not others, the real model's view and the per-cell table."""

from __future__ import annotations

import pandas as pd

from ..markdown import md_table
from ..phrases import pct
from . import stats

SPAN = {"batch": "batch {lo} to {hi}", "kv_len": "KV length {lo} to {hi}", "tree_size": "N={lo} to N={hi}"}


def xx(x: float, digits: int = 2) -> str:
    return "n/a" if x != x else f"{x:.{digits}f}×"


def grid_sentence(cells: pd.DataFrame) -> str:
    if cells.empty:
        return ""
    eff = stats.axis_effects(cells)
    grows = [f"{xx(lo, 1)}–{xx(hi, 1)} from {SPAN[a].format(lo=b, hi=t)}" for a, (lo, hi, b, t) in eff.items()]
    b0, kv0 = int(cells.batch.min()), int(cells.kv_len.mode().iloc[0])
    kv_b = sorted(set(cells[cells.batch != b0].kv_len))
    b_kv = sorted(set(cells[cells.kv_len != kv0].batch))
    plane = (
        f" The grid is two planes crossing at batch {b0}, KV {kv0}: batches above {b0} were measured at KV "
        f"{kv0} only and the other KV lengths at batch {b0} only, so a panel of the figure other than KV {kv0} "
        f"has one line per dtype."
        if kv_b == [kv0] and b_kv in ([], [b0])
        else ""
    )
    return (
        "**Batch, KV length and draft length.** Fused tree-attention time (the median over the tree shapes, "
        "which are one computation at a given point; attention_grid.png) grows "
        + ("; ".join(grows) or "along no axis (each was measured at one value)")
        + " (each range over the other axes and both dtypes held fixed)."
        + plane
    )


def roof_sentence(kern: pd.DataFrame, cells: pd.DataFrame) -> str:
    f = kern[kern.impl == "fused"]
    roof, source = stats.roof_frac(f)
    if roof is None or cells.roof.isna().all():
        return "_No roofline is recorded (attention.csv lacks roofline_frac, bw_frac and bytes_moved)._"
    machine = ""
    if f.bandwidth_gbs.notna().any():
        machine = f"{f.bandwidth_gbs.median():.1f} GB/s copy bandwidth"
        peaks = f.groupby("dtype").peak_gflops.median().dropna()
        machine += "".join(f", {dt} matmul {v:.0f} GFLOP/s" for dt, v in peaks.items())
        machine = f" ({machine}; columns bandwidth_gbs, peak_gflops)"
    by_dt = [
        f"{dt} a median {pct(g.roof.median())} ({pct(g.roof.min())}–{pct(g.roof.max())}; "
        f"batch {int(g.batch.min())} → {int(g.batch.max())}: {pct(g[g.batch == g.batch.min()].roof.median())} → "
        f"{pct(g[g.batch == g.batch.max()].roof.median())})"
        for dt, g in cells.groupby("dtype", sort=True)
    ]
    bound = ""
    if {"compute_bound_s", "bw_bound_s"} <= set(f):
        share = (f.compute_bound_s > f.bw_bound_s).mean()
        bound = (
            f" The FLOP bound is the larger at {pct(share)} of the points (dense FLOPs over every score, masked "
            "ones included): at these sizes the kernels are compute-bound on this machine."
        )
    return (
        f"**Roofline.** Each point's roof is {source}, both measured by the benchmark on this machine{machine}. "
        f"Fused attention reaches {'; '.join(by_dt)} of it.{bound}"
    )


def _range(v: pd.Series) -> str:
    lo, hi = int(v.min()), int(v.max())
    return str(lo) if lo == hi else f"{lo}–{hi}"


def _within(sp: pd.DataFrame) -> str:
    inside = sp[sp.noise]
    parts = []
    for shape, g in inside.groupby("shape", sort=True):
        ns = g.groupby("tree_size").size()
        tot = sp[sp["shape"] == shape].groupby("tree_size").size()
        parts.append(f"{shape} at " + ", ".join(f"N={int(n)} ({c} of {tot[n]})" for n, c in ns.items()))
    return "; ".join(parts)


def spread_sentence(cells: pd.DataFrame, sp: pd.DataFrame) -> str:
    multi = cells[cells.n_shapes > 1]
    if multi.empty:
        return ""
    worst = multi.loc[multi.spread.idxmax()]
    reps = cells.reps.dropna()
    rep_txt = (
        f"Each fused point was timed {_range(reps)} times; the repeats' IQR is a median "
        f"{pct(cells.rel_iqr.median())} of the median (max {pct(cells.rel_iqr.max())}). "
        if len(reps) and cells.rel_iqr.notna().any()
        else ""
    )
    text = (
        f"**Noise against the effects.** {rep_txt}Fused attention at one (batch, KV length, N, dtype) is one "
        f"computation whatever the tree shape, so its {int(multi.n_shapes.max())} shape rows measure the same "
        f"thing: they differ by a median {xx(multi.spread.median())} (75th percentile "
        f"{xx(multi.spread.quantile(0.75))}, max {xx(worst.spread)} at {worst['dtype']} batch {int(worst.batch)}, KV "
        f"{int(worst.kv_len)}, N={int(worst.tree_size)}): the run-to-run drift of this shared machine, not the "
        "repeats' IQR, is the noise, and every ratio below is read against that spread of its own cell."
    )
    if sp.empty or sp.n_branches.isna().all():  # no tree geometry recorded
        return text
    br = sp[sp.n_branches > 1]
    out = br[~br.noise]
    eff = min((lo for lo, _, _, _ in stats.axis_effects(cells).values()), default=float("nan"))
    return text + (
        f" The effects shown stand above it: fused time grows at least {xx(eff, 1)} along each axis, and "
        f"{len(out)} of {len(br)} speedups of fused over per-branch attention on a branching tree exceed their "
        f"cell's spread ("
        + ", ".join(f"{s} {int((~g.noise).sum())} of {len(g)}" for s, g in br.groupby("shape", sort=True))
        + ")"
        + (
            f"; the other {len(br) - len(out)} ({_within(br)}) lie within it, marked ≈ in the per-cell table: "
            "no measurable difference at these repeats."
            if len(out) < len(br)
            else "."
        )
    )


def _moves(a: float, b: float) -> str:
    return "falls from" if b < a / 1.05 else "rises from" if b > a * 1.05 else "goes from"


def why_sentence(kern: pd.DataFrame, sp: pd.DataFrame) -> str:
    if sp.empty:
        return ""
    br = sp[sp.n_branches > 1]
    if len(br) < 3:
        return ""
    top = br.loc[br.reread.idxmax()]
    f = kern[kern.impl == "fused"]
    bound = (
        f" ({pct((f.compute_bound_s > f.bw_bound_s).mean())} of the points are FLOP-bound)"
        if {"compute_bound_s", "bw_bound_s"} <= set(f)
        else ""
    )
    text = (
        "**Why fusion helps some shapes and not others.** Per-branch attention re-reads the prefix KV once per "
        f"branch (up to {xx(top.reread, 1)} the fused kernel's KV bytes: {top['shape']} N={int(top.tree_size)}, "
        f"KV {int(top.kv_len)}) and recomputes shared ancestors (branch tokens ÷ tree nodes, up to "
        f"{xx(br.recompute.max())}). The measured sequential ÷ fused speedup follows the recomputed tokens "
        f"(log–log r = {stats.corr(br.recompute, br.speedup):.2f} over {len(br)} branching points) "
        "more than the KV "
        f"re-read (r = {stats.corr(br.reread, br.speedup):.2f}), as a compute-bound kernel's should{bound}"
    )
    m = stats.by_shape_n(sp)
    n1 = int(m.tree_size.max())
    at = m[m.tree_size == n1].sort_values("speedup")
    if len(at) < 2:
        return text + "."
    lo, hi = at.iloc[0], at.iloc[-1]
    c = m[m["shape"] == lo["shape"]].sort_values("tree_size").iloc[0]
    return text + (
        f": {lo['shape']} re-reads the KV about {xx(m[m['shape'] == lo['shape']].reread.median(), 1)} at every N, "
        f"yet its median speedup {_moves(c.speedup, lo.speedup)} {xx(c.speedup)} at N={int(c.tree_size)} to "
        f"{xx(lo.speedup)} at N={n1} as its recompute ratio goes from {xx(c.recompute)} to {xx(lo.recompute)}, "
        f"while {hi['shape']}, "
        f"whose branches share long ancestors, recomputes {xx(hi.recompute)} and gains {xx(hi.speedup)} at N={n1}."
    )


def model_text(mv: pd.DataFrame, sp: pd.DataFrame) -> str:
    if mv.empty:
        return (
            "_No real-model rows in attention.csv: `python -m specbench.attention_bench model_view=true` adds "
            "one tree forward against one forward per branch._"
        )
    kern_sp = {}
    if not sp.empty:
        for r in mv.to_dict("records"):
            hit = sp[
                (sp["shape"] == r["shape"])
                & (sp.batch == 1)
                & (sp.kv_len == r.get("kv_len"))
                & (sp.tree_size == r.get("tree_size"))
                & (sp["dtype"] == r.get("dtype"))
            ]
            kern_sp[r["shape"]] = float(hit.speedup.iloc[0]) if len(hit) else float("nan")
    rows = [
        [
            r["shape"],
            int(r["n_branches"]) if r.get("n_branches") == r.get("n_branches") else "?",
            f"{r['model_tree']:.2f}",
            f"{r['model_branches']:.2f}",
            xx(r["ratio"], 1),
            xx(kern_sp.get(r["shape"], float("nan")), 1),
        ]
        for r in mv.to_dict("records")
    ]
    r0 = mv.iloc[0]
    where = ", ".join(
        str(x)
        for x in (
            r0.get("note", ""),
            f"KV {int(r0['kv_len'])}",
            f"N={int(r0['tree_size'])}",
            r0.get("dtype", ""),
            f"{int(r0['repeats'])} repeats" if pd.notna(r0["repeats"]) else "",
        )
        if x
    )
    big, small = mv.loc[mv.ratio.idxmax()], mv.loc[mv.ratio.idxmin()]
    sentence = (
        f"**The real model's view** ({where}; seconds per tree, median): verifying the whole tree in one forward "
        f"takes {big.model_tree:.2f} s for {big['shape']} against {big.model_branches:.2f} s for one forward per "
        f"branch ({xx(big.ratio, 1)})"
        + (
            f", and {small.model_tree:.2f} s against {small.model_branches:.2f} s for {small['shape']} "
            f"({xx(small.ratio, 1)})"
            if len(mv) > 1
            else ""
        )
        + ". Per-branch verification repeats the whole forward per branch (projections, MLP and the weight reads, "
        "not attention alone), so its cost follows the number of branches rather than the attention kernel's own "
        "speedup at the same point (last column)."
    )
    table = md_table(rows, ["shape", "branches", "tree forward s", "per-branch s", "ratio", "attention kernel ratio"])
    return sentence + "\n\n" + table


def cell_table(cells: pd.DataFrame, sp: pd.DataFrame) -> str:
    """Every cell, folded: fused ms, its spread over shapes, the repeats, the roofline, speedups (≈: in noise)."""
    if cells.empty:
        return ""
    shapes = sorted(sp["shape"].unique()) if not sp.empty else []
    by = sp.set_index(stats.CELL + ["shape"]) if shapes else None
    rows = []
    for r in cells.to_dict("records"):
        row = [r["dtype"], int(r["batch"]), int(r["kv_len"]), int(r["tree_size"]), f"{r['fused_ms']:.3f}"]
        row += [f"{r['lo_ms']:.3f}–{r['hi_ms']:.3f} ({xx(r['spread'])})"]
        row += [f"{'?' if r['reps'] != r['reps'] else int(r['reps'])} / {pct(r['rel_iqr'])}", pct(r["roof"])]
        for s in shapes:
            key = (r["dtype"], r["batch"], r["kv_len"], r["tree_size"], s)
            if by is not None and key in by.index:
                e = by.loc[key]
                row.append(f"{e.speedup:.2f}" + (" ≈" if bool(e.get("noise", False)) else ""))
            else:
                row.append("")
        rows.append(row)
    head = ["dtype", "batch", "KV", "N", "fused ms", "across shapes ms (max ÷ min)", "repeats / IQR", "roofline"]
    return (
        f"<details><summary>Per cell ({len(cells)}): fused time, its spread across shapes, its repeats and their "
        "IQR ÷ median, its roofline fraction, and sequential ÷ fused per shape (≈: within the cell's spread)"
        "</summary>\n\n" + md_table(rows, head + [f"{s} seq ÷ fused" for s in shapes]) + "\n\n</details>"
    )
