"""Report figures, part two: verification rules, speed, the gap to the optimum and tree attention.

Same conventions as `figures` (one palette keyed by name, `Fig` results, legends outside).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ..attention import heatmap
from . import analysis, figures, palette


def fig_mode_gains(gains: pd.DataFrame) -> figures.Fig | None:
    """Paired gain of each rule over its token-level baseline; lossless and lossy rules in separate
    panels; filled markers: the same drafted trees, hollow: each rule's own trees; n in the label."""
    if gains.empty:
        return None
    groups = []
    for (k, lossless), g in gains.groupby([gains[analysis.GROUP].apply(tuple, axis=1), "lossless_b"], sort=True):
        title = f"{figures.group_title(k)}, {'lossless' if lossless else 'lossy'} rules"
        groups.append((title, g.sort_values(["mode", "shape", "budget"], kind="mergesort")))
    rows = max(len(g) for _, g in groups)

    def draw(ax, g):
        y = np.arange(len(g))[::-1]
        for yi, r in zip(y, g.to_dict("records")):
            st = figures.style(r["verify"], "rule")
            ax.errorbar(
                [r["diff"]],
                [yi],
                xerr=figures.ci([r["diff"]], [r["lo"]], [r["hi"]], [r["n_shared"]]),
                ms=6.5,
                capsize=2,
                ls="none",
                label=r["verify"],
                color=st["color"],
                marker=st["marker"],
                mfc=st["color"] if r["same_trees"] else "white",
                mec=st["color"],
            )
        ax.set_yticks(
            y,
            [
                f"{r['mode']} vs {r['baseline']} · {r['shape']} N={int(r['budget'])} · n={r['n_shared']}"
                for r in g.to_dict("records")
            ],
        )
        ax.axvline(0, color="k", lw=0.6)
        ax.set_xlabel("Δ tokens_per_step (paired)")

    return figures.panels(
        groups,
        "mode_gains.png",
        draw,
        "Each verification rule at T>0 against its strongest token-level baseline on the same shape and "
        "budget (named on each row), on the prompts both ran; filled: both verified the same drafted "
        f"trees, hollow: each drafted its own; bars: 95% paired bootstrap interval, drawn only from "
        f"{figures.tables.MIN_CI}+ shared prompts (n).",
        sharey=False,
        sharex=True,
        w=7.5,
        h=0.9 + 0.3 * rows,
        legend="rule",
    )


def fig_lossy(gains: pd.DataFrame) -> figures.Fig | None:
    if gains.empty or "first_token_tv" not in gains:
        return None
    lossy = gains[~gains.lossless_b & gains.first_token_tv.notna()]
    if lossy.empty:
        return None
    groups = [(figures.group_title(k), g) for k, g in lossy.groupby(analysis.GROUP, sort=True)]

    def draw(ax, g):
        for r in g.sort_values(["mode", "shape", "budget"], kind="mergesort").to_dict("records"):
            ax.errorbar(
                [r["first_token_tv"]],
                [r["diff"]],
                yerr=figures.ci([r["diff"]], [r["lo"]], [r["hi"]], [r["n_shared"]]),
                ms=5,
                capsize=2,
                ls="none",
                label=r["verify"],
                color=figures.color(r["verify"], "rule"),
                marker="o" if r["tree"] == "chain" else "s",
            )
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xlabel("first_token_tv (drift from the target distribution)")
        ax.set_ylabel("Δ tokens_per_step vs token-level rule")

    return figures.panels(
        groups,
        "lossy_tradeoff.png",
        draw,
        "Lossy rules: paired gain in tokens_per_step over the lossless token-level rule against the "
        "first-token total-variation distance from the target distribution (circles: chains, squares: "
        "trees).",
        legend="rule",
    )


RUN_MARKERS = ("*", "D", "^", "v", "P", "X")  # a live run's size (prompts × new tokens), in sorted order
MAX_SHAPES = 6  # projected curves per panel


def run_size(r) -> str:
    return f"{int(r['n_prompts'])} × {int(r['max_new_tokens'])}"


def fig_projected(rows: pd.DataFrame, sums, live: pd.DataFrame) -> figures.Fig | None:
    """Every pair × dataset with a live batch-1 check: the projected speedup of the replayed grid's
    shapes that were checked live, and each live run's measured speedup, its marker by run size."""
    b1 = live[live.projected.notna() & live.measured.notna()] if len(live) and "projected" in live else live.iloc[:0]
    if b1.empty:
        return None
    sizes = sorted({run_size(r) for r in b1.to_dict("records")}, key=lambda x: tuple(int(v) for v in x.split(" × ")))
    groups = []
    for (pair, ds), g in b1.groupby(["pair", "dataset"], sort=True):
        grid = dict(figures.main_groups(rows, sums, pair)).get(ds)
        if grid is None:
            continue
        checked = sorted(set(g["shape"]))[:MAX_SHAPES]
        curves = grid[grid.projected.notna() & grid["shape"].isin(checked)]
        groups.append((f"{pair} · {ds}", (curves, g[g["shape"].isin(checked)])))
    if not groups:
        return None

    def draw(ax, cg):
        curves, runs = cg
        for shape, s in curves.groupby("shape", sort=True):
            s = s.sort_values("budget")
            st = figures.style(shape, "shape")
            ax.plot(s.budget, s.projected, ms=3.5, lw=1.1, mfc="none", label=shape.split("(expansion")[0], **st)
            ax.fill_between(s.budget, s.projected_lo, s.projected_hi, color=st["color"], alpha=0.12, lw=0)
        for r in runs.to_dict("records"):
            ax.plot([r["budget"]], [r["measured"]], ls="none", marker=RUN_MARKERS[sizes.index(run_size(r)) % 6], ms=10,
                    color=figures.color(r["shape"], "shape"), mec="black", mew=0.7, zorder=5)  # fmt: skip
        ax.axhline(1, color="k", lw=0.6)
        figures.budget_axis(ax, curves.budget.unique() if len(curves) else runs.budget.unique())
        ax.set_ylabel("speedup ×")

    fig = figures.panels(
        groups,
        "projected_speedup.png",
        draw,
        "Projected speedup against budget (lines; shaded: 95% interval over prompts and cost repeats) of the "
        "replayed greedy grid's shapes that were checked live, and each live batch-1 run's measured speedup "
        "(large markers, the shape's colour; marker: the run's prompts × new tokens), one panel per pair × dataset "
        f"with a live check (at most {MAX_SHAPES} shapes each). Each run: the speed table on speed.md.",
        w=4.0,
        h=3.0,
    )
    handles: list = list(fig.fig.legends[0].legend_handles)
    labels = [t.get_text() for t in fig.fig.legends[0].get_texts()]
    fig.fig.legends.clear()
    handles += [Line2D([], [], ls="none", marker=RUN_MARKERS[i % 6], ms=9, mfc="#888888", mec="black",
                       label=f"measured live, {sz}") for i, sz in enumerate(sizes)]  # fmt: skip
    labels += [f"measured live, {sz} (prompts × tokens)" for sz in sizes]
    fig.fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.9), frameon=False, title="shape")
    return fig


def fig_measured_vs_projected(live: pd.DataFrame) -> figures.Fig | None:
    """Every live batch-1 configuration with a projection in one panel: measured against projected,
    one look per pair · dataset · prompts × tokens (colour: the pair; marker: the setting)."""
    both = live[live.projected.notna()] if len(live) else live
    if both.empty:
        return None
    both = both.assign(
        setting=[f"{r.pair} · {r.dataset} · {int(r.n_prompts)}×{int(r.max_new_tokens)}" for r in both.itertuples()]
    )

    sizes = sorted({run_size(r) for r in both.to_dict("records")}, key=lambda x: tuple(int(v) for v in x.split(" × ")))
    datasets = sorted(set(both.dataset), key=lambda d: (d != "humaneval", d))

    def draw(ax, g):
        for name, s in g.groupby("setting", sort=True):
            c = figures.color(s.pair.iloc[0], "pair")
            xerr = figures.ci(s.projected, s.projected_lo, s.projected_hi)
            # filled: the main dataset and the larger target (the pair palette's circle); hollow: the others
            small = palette.PAIRS.get(str(s.pair.iloc[0]), ("", "o"))[1] != "o"
            first = datasets.index(s.dataset.iloc[0]) == 0 and not small
            ax.errorbar(s.projected, s.measured, xerr=xerr, ls="none", ms=7, capsize=2, elinewidth=0.6, color=c,
                        marker=RUN_MARKERS[sizes.index(run_size(s.iloc[0])) % 6], mec="k" if first else c, mew=0.8,
                        mfc=c if first else "white", alpha=0.9, label=name)  # fmt: skip
        vals = np.concatenate([g.projected_lo.fillna(g.projected), g.projected_hi.fillna(g.projected), g.measured])
        lim = [float(np.nanmin(vals)) * 0.95, float(np.nanmax(vals)) * 1.03]
        ax.plot(lim, lim, color="k", lw=0.6, ls="--")
        ax.fill_between(lim, [v * 0.9 for v in lim], [v * 1.1 for v in lim], color="k", alpha=0.06, lw=0)
        ax.set(xlim=lim, ylim=lim, aspect="equal", xlabel="projected speedup ×", ylabel="measured speedup ×")

    return figures.panels(
        [("live batch-1 runs: measured against projected", both)],
        "speed_measured_vs_projected.png",
        draw,
        "Measured speedup (live tokens/s ÷ the live plain-decoding baseline) against the projection from "
        "measured forward costs, one point per live batch-1 configuration (colour: the pair; marker: the run's "
        "prompts × new tokens; hollow: a second dataset or a pair whose target is the smaller one; bars: the projection's 95% interval); "
        "dashed: measured = projected, "
        "grey band: within ±10%. Each point's shape and budget: the speed table.",
        sharey=False,
        w=4.6,
        h=4.4,
        legend="pair · dataset · setting",
    )


def fig_gap(rows: pd.DataFrame, min_budgets: int = 3) -> figures.Fig | None:
    if rows.empty:
        return None
    groups = [
        (f"{p} / {d}", g)
        for (p, d), g in rows.groupby(["pair", "dataset"], sort=True)
        if g.budget.nunique() >= min_budgets
    ]
    if not groups:
        return None

    def draw(ax, g):
        opt = g.drop_duplicates("budget").sort_values("budget")
        ax.plot(opt.budget, opt.optimum, "k--", lw=1.2, label="DP prediction, best tree")
        for shape, s in g.groupby("shape", sort=True):
            s = s.sort_values("budget")
            st = figures.style(shape)
            ax.errorbar(
                s.budget,
                s.tokens_per_step,
                yerr=figures.ci(s.tokens_per_step, s.tokens_per_step_lo, s.tokens_per_step_hi, s.n_prompts),
                ms=3,
                capsize=2,
                label=shape,
                **st,
            )
            ax.plot(s.budget, s.predicted, ls=":", lw=0.8, marker=st["marker"], mfc="none", ms=3, color=st["color"])
        figures.budget_axis(ax, g.budget.unique())
        ax.set_ylabel("tokens_per_step")

    return figures.panels(
        groups,
        "gap_to_optimum.png",
        draw,
        "Measured tokens_per_step of each static shape (solid; 95% bootstrap CI from "
        f"{figures.tables.MIN_CI}+ prompts) against "
        "the Sequoia DP's prediction for its best tree (dashed) and the DP's prediction for the same shape "
        "(hollow, dotted), per pair and "
        f"dataset with at least {min_budgets} budgets (the others are in the table only); each panel its own "
        "y scale.",
        sharey=False,
        h=3.4,
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
    norm = heatmap.shared_norm(ratio.r)
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
        f"{ATTN['batch']}, over KV length × tree size; one colour scale for every panel (blue: fused faster).",
    )
