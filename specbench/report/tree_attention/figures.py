"""The tree-attention section's five figures (numbers from `stats`): ``attention_grid.png`` (fused
time and its roofline fraction over batch × KV length × draft length), ``attention_fusion.png``
(fused's speedup over per-branch attention against the KV re-read and the recompute ratio),
``attention_model.png`` (the real model: one tree forward against one per branch),
``attention_time.png`` (time against tree size at one slice) and ``attention_speedup.png`` (the
speed-up heatmap, drawn by `attention.heatmap`, the function the benchmark draws it with).

Same conventions as the report's `figures` (palette keyed by name, `Fig` results, legends outside the data).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ...attention import heatmap
from .. import figures
from . import stats

DTYPE_LINE = {"bfloat16": ("-", "o"), "float32": ("--", "s")}


def _log2_ticks(ax, values) -> None:
    ticks = sorted(int(v) for v in values)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_locator(plt.NullLocator())


def _batch_colors(batches) -> dict:
    cols = plt.get_cmap("viridis")(np.linspace(0.0, 0.85, max(len(batches), 1)))
    return {b: cols[i] for i, b in enumerate(sorted(batches))}


def _grid_legend(fig, colors: dict, dtypes) -> None:
    handles = [Line2D([], [], color=c, lw=2, label=f"batch {int(b)}") for b, c in colors.items()]
    handles += [
        Line2D([], [], color="0.3", ls=DTYPE_LINE.get(d, ("-", "o"))[0], marker=DTYPE_LINE.get(d, ("-", "o"))[1],
               ms=3, label=d)
        for d in sorted(dtypes)
    ]  # fmt: skip
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 0.9), frameon=False)


def fig_attention_grid(kern: pd.DataFrame) -> figures.Fig | None:
    """Row 1: fused ms against N, one panel per KV length, one line per batch (style: dtype), band = the
    spread over shapes; row 2: the same points' roofline fraction."""
    cells = stats.fused_cells(kern)
    if cells.empty or cells.tree_size.nunique() < 2:
        return None
    _, source = stats.roof_frac(kern[kern.impl == "fused"])
    has_roof = cells.roof.notna().any()
    kvs = sorted(cells.kv_len.unique())
    colors = _batch_colors(cells.batch.unique())
    rows = 2 if has_roof else 1
    with plt.rc_context(figures.RC):
        fig, axes = plt.subplots(rows, len(kvs), figsize=(2.6 * len(kvs), 2.5 * rows), squeeze=False, sharey="row")
        for j, kv in enumerate(kvs):
            for (dt, b), g in cells[cells.kv_len == kv].groupby(["dtype", "batch"], sort=True):
                g = g.sort_values("tree_size")
                ls, mk = DTYPE_LINE.get(dt, ("-", "o"))
                kw = dict(color=colors[b], ls=ls, marker=mk, ms=3)
                axes[0][j].plot(g.tree_size, g.fused_ms, **kw)
                axes[0][j].fill_between(g.tree_size, g.lo_ms, g.hi_ms, color=colors[b], alpha=0.12, lw=0)
                if has_roof:
                    axes[1][j].plot(g.tree_size, g.roof, **kw)
            axes[0][j].set_title(f"KV length {int(kv)}")
            axes[0][j].set_yscale("log")
            for i in range(rows):
                _log2_ticks(axes[i][j], cells.tree_size.unique())
                axes[i][j].yaxis.set_tick_params(labelleft=True)
            axes[rows - 1][j].set_xlabel("draft length N")
        axes[0][0].set_ylabel("fused ms (median over shapes)")
        if has_roof:
            axes[1][0].set_ylabel("fraction of roofline")
            axes[1][0].set_ylim(0, min(1.0, float(cells.roof.max()) * 1.15))
        _grid_legend(fig, colors, cells.dtype.unique())
        fig.tight_layout()
    return figures.Fig(
        "attention_grid.png",
        fig,
        "Fused tree-attention time against draft length N, one panel per KV length, one line per batch size "
        "(solid bfloat16, dashed float32); the line is the median over the tree shapes (one computation) and "
        "the band their min–max, the noise of that point"
        + (f"; bottom row: the fraction of the roofline reached, roof = {source}, measured on this machine." if has_roof else ".")
        + _plane_note(cells),
    )  # fmt: skip


def _plane_note(cells: pd.DataFrame) -> str:
    b0 = cells.batch.min()
    kvs = sorted(int(k) for k in cells[cells.batch != b0].kv_len.unique())
    return f" Batches above {int(b0)} were measured at KV {', '.join(map(str, kvs))} only." if len(kvs) == 1 else ""


def _fusion_panel(ax, sp: pd.DataFrame, x: str, label: str, noise: float) -> None:
    for (shape, dt), g in sp.groupby(["shape", "dtype"], sort=True):
        mk = DTYPE_LINE.get(dt, ("-", "o"))[1]
        inside = g.noise  # speedups' (every row of a cell that has fused timings)
        c = figures.color(shape)
        ax.scatter(g[x][~inside], g.speedup[~inside], s=14, marker=mk, color=c, label=f"{shape}, {dt}")
        ax.scatter(g[x][inside], g.speedup[inside], s=14, marker=mk, facecolors="none", edgecolors=c)
    hi = float(sp[x].max()) * 1.2
    ax.plot([1, hi], [1, hi], color="0.5", ls=":", lw=1, label="speedup = ratio")
    if noise == noise:
        ax.axhspan(1 / noise, noise, color="0.85", zorder=0, label="median noise (spread over shapes)")
    ax.set(xscale="log", yscale="log", xlabel=label, ylabel="sequential ÷ fused time")
    ticks = [t for t in (1, 1.5, 2, 3, 4, 8, 16, 32, 64) if t <= hi]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(plt.NullLocator())


def fig_attention_fusion(kern: pd.DataFrame) -> figures.Fig | None:
    """Speedup against the KV re-read ratio and against the recompute ratio, every (cell, shape)."""
    cells = stats.fused_cells(kern)
    sp = stats.speedups(kern, cells)
    if sp.empty or sp.reread.nunique() < 2:  # NaN where the geometry is not recorded
        return None
    noise = float(cells[cells.n_shapes > 1].spread.median()) if (cells.n_shapes > 1).any() else float("nan")
    with plt.rc_context(figures.RC):
        fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.2), sharey=True)
        _fusion_panel(axes[0], sp, "reread", "KV bytes re-read: per-branch ÷ fused", noise)
        _fusion_panel(axes[1], sp, "recompute", "tokens recomputed: branch tokens ÷ tree nodes", noise)
        axes[1].yaxis.set_tick_params(labelleft=True)
        axes[0].set_title("against the KV re-read")
        axes[1].set_title("against the recomputed ancestors")
        figures.legend_outside(fig, axes[:1], "shape, dtype")
        fig.tight_layout()
    return figures.Fig(
        "attention_fusion.png",
        fig,
        "Why fusion helps some shapes and not others: fused attention's speedup over per-branch attention at "
        "every measured point (batch, KV length, N) against how much more KV per-branch attention reads (left) "
        "and how many more tokens it computes (right); hollow: within that point's noise (grey band: the median "
        "noise); dotted: speedup equal to the ratio.",
    )


def fig_attention_model(att: pd.DataFrame | None) -> figures.Fig | None:
    """The real model: seconds per tree for one tree forward and for one forward per branch."""
    mv = stats.model_view(att)
    if mv.empty:
        return None
    x = np.arange(len(mv))
    with plt.rc_context(figures.RC):
        fig, ax = plt.subplots(figsize=(4.2, 3.0))
        ax.bar(x - 0.2, mv.model_tree, 0.4, color=figures.color("fused"), label="one tree forward (fused)")
        ax.bar(x + 0.2, mv.model_branches, 0.4, color=figures.color("sequential"), label="one forward per branch")
        for i, r in enumerate(mv.to_dict("records")):
            nb = f"{int(r['n_branches'])} branches, " if r.get("n_branches") == r.get("n_branches") else ""
            ax.annotate(f"{nb}{r['ratio']:.1f}×", (i + 0.2, r["model_branches"]), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(x, list(mv["shape"]))
        ax.set_ylabel("seconds per tree (median)")
        ax.set_ylim(0, float(mv.model_branches.max()) * 1.18)
        r0 = mv.iloc[0]
        ax.set_title(
            f"real model, KV {int(r0.get('kv_len', 0))}, N={int(r0.get('tree_size', 0))}, {r0.get('dtype', '')}"
        )
        figures.legend_outside(fig, [ax], None)
        fig.tight_layout()
    return figures.Fig(
        "attention_model.png",
        fig,
        "The real target model verifying one draft tree: one forward over the whole tree (tree attention) "
        "against one forward per root-to-leaf branch; the label gives the number of branches and the ratio.",
    )


ATTN = {"batch": 1, "kv_len": 1024}


def fig_attention_time(kern: pd.DataFrame) -> figures.Fig | None:
    """Time against tree size at one fixed slice (batch 1, KV 1024): no median over other settings."""
    k = kern[(kern.batch == ATTN["batch"]) & (kern.kv_len == ATTN["kv_len"]) & kern.median_s.notna()]
    if k.empty or k.tree_size.nunique() < 2:
        return None
    groups = [(f"{s}, {dt}", g) for (s, dt), g in k.groupby(["shape", "dtype"], sort=True)]

    def draw(ax, g):
        for impl, s in g.groupby("impl", sort=True):
            s = s.sort_values("tree_size")
            ax.plot(s.tree_size, s.median_s * 1e3, ms=3, label=impl, **figures.style(impl, "impl"))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = sorted(int(x) for x in g.tree_size.unique())
        ax.set_xticks(ticks, [str(x) for x in ticks])
        ax.xaxis.set_minor_locator(plt.NullLocator())
        ax.set_xlabel("tree size N (draft tokens)")
        ax.set_ylabel("median ms")

    return figures.panels(
        groups,
        "attention_time.png",
        draw,
        f"Tree-attention time against tree size at batch {ATTN['batch']} and KV length {ATTN['kv_len']} "
        "(one measured point per size and implementation, median over repeats).",
        legend="implementation",
    )


def fig_attention_ratio(kern: pd.DataFrame) -> figures.Fig | None:
    """sequential ÷ fused over KV length × tree size at batch 1, one shared colour scale (``attention.heatmap``)."""
    ratio = heatmap.ratios(kern[kern.batch == ATTN["batch"]])
    if ratio.empty or ratio.kv_len.nunique() < 2:
        return None
    norm = heatmap.shared_norm(ratio)
    groups = [(f"{s}, {dt}", g) for (s, dt), g in ratio.groupby(["shape", "dtype"], sort=True)]
    with plt.rc_context(figures.RC):
        fig, axes = figures.grid(len(groups), w=3.4, h=3.0, layout="constrained")
        for ax, (title, g) in zip(axes, groups):
            im = heatmap.draw(ax, g, norm, title)
        fig.colorbar(im, ax=axes[: len(groups)], label=heatmap.COLORBAR)
    return figures.Fig(
        "attention_speedup.png",
        fig,
        f"Fused tree attention's speedup over per-branch attention (sequential ÷ fused median time) at batch "
        f"{ATTN['batch']}, over KV length × tree size; one colour scale for every panel (blue: fused faster)."
        + (f" {heatmap.unsteady_caption(ratio)}" if ratio.unsteady.any() else ""),
    )


def make(att: pd.DataFrame | None) -> list[figures.Fig | None]:
    """The section's figures from results/attention.csv (None where its data is missing)."""
    kern = stats.kernels(att)
    grid = [fig_attention_time, fig_attention_ratio, fig_attention_grid, fig_attention_fusion]
    return [*(f(kern) if len(kern) else None for f in grid), fig_attention_model(att)]
