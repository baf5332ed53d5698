"""The classic figure: acceptance rate and acceptance length against the draft budget N.

Every shape of every pair's replayed greedy grid, one row of panels per pair and two panels per
dataset (rate, then length), each on its main prompt set (`analysis.main_groups`); shaded: the
95% bootstrap interval over prompts from summary.csv (none from fewer than `tables.MIN_CI`
prompts).  Shapes that overlap stay apart by marker and line style as well as colour.  The
section that links it states the trade-off the figure shows, computed from the same rows.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from . import analysis, figures, tables

NAME = "acceptance_vs_budget.png"
METRICS = (("acceptance_rate", "acceptance rate"), ("acceptance_length", "acceptance length"))
LINESTYLES = ("-", "--", ":", "-.")  # with the 8 markers: 32 distinct (marker, line) looks
DODGE = 0.03  # octaves between neighbouring shapes' points, so identical curves stay visible
MIN_BUDGETS = 2  # a pair × dataset with fewer budgets has no curve to draw


def series(rows: pd.DataFrame, sums) -> list[tuple[tuple[str, str], pd.DataFrame]]:
    """((pair, dataset), rows) of every pair's greedy grid on its main prompt set, with 2+ budgets."""
    out = []
    for k, g in analysis.greedy_groups(rows, main_only=True):
        main = analysis.main_set(g, sums)
        if main.budget.nunique() >= MIN_BUDGETS:
            out.append(((str(k[0]), str(k[1])), main))
    return out


def hue(shape: str) -> str:
    """The palette's colour; a merged tree takes the colour of the shape it fills."""
    inner = shape.split("shape=", 1)[1].rstrip(")").split(",")[0] if shape.startswith("merged(") else ""
    return figures.color(inner or shape)


def looks(shapes) -> dict[str, dict]:
    """One look per shape name: its colour, and marker and line style by its sorted index."""
    return {
        s: dict(color=hue(s), marker=figures.MARKERS[i % 8], ls=LINESTYLES[(i + i // 8) % len(LINESTYLES)])
        for i, s in enumerate(sorted(set(shapes)))
    }


def log2_axis(ax, budgets) -> None:
    """log2 x axis ticked at the powers of two among the budgets (every budget crowds a narrow panel)."""
    figures.budget_axis(ax, budgets)
    ticks = sorted(int(b) for b in budgets)
    two = [b for b in ticks if b & (b - 1) == 0]
    ticks = two + [ticks[-1]] * (ticks[-1] not in two) if len(two) >= 2 else ticks
    ax.set_xticks(ticks, [str(b) for b in ticks])


def band(s: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """The interval's ends, collapsed to the value where it is missing or from < MIN_CI prompts."""
    v = s[metric].to_numpy(float)
    lo_err, hi_err = figures.ci(v, s.get(f"{metric}_lo"), s.get(f"{metric}_hi"), s.get("n_prompts"))
    return v - lo_err, v + hi_err


def draw_metric(ax, g: pd.DataFrame, metric: str, look: dict) -> None:
    """Each shape's line (hollow markers, dodged a little along N), its interval and its cut budgets."""
    shapes = sorted(g["shape"].unique())
    for shape, s in g.groupby("shape", sort=True):
        s = s.sort_values("budget")
        st = look[shape]
        x = s.budget * 2 ** (DODGE * (shapes.index(shape) - (len(shapes) - 1) / 2))
        ax.plot(x, s[metric], ms=4, lw=1.1, mfc="none", mew=1.0, label=shape, **st)
        lo, hi = band(s, metric)
        ax.fill_between(x, lo, hi, color=st["color"], alpha=0.12, lw=0)
        cut = s.cut > tables.MAX_CUT if "cut" in s else np.zeros(len(s), bool)
        ax.plot(x[cut], s[metric][cut], ls="none", marker="o", ms=9, mfc="none", mec=st["color"], zorder=3)
    log2_axis(ax, g.budget.unique())


def layout(groups) -> tuple[list[str], list[str]]:
    """Rows: pairs (the most configurations first); columns: datasets."""
    size: dict[str, int] = {}
    for (p, _d), g in groups:
        size[p] = size.get(p, 0) + len(g)
    pairs = sorted(size, key=lambda p: (-size[p], p))
    return pairs, sorted({d for (_p, d), _g in groups})


def fig_acceptance_vs_budget(rows: pd.DataFrame, sums) -> figures.Fig | None:
    groups = series(rows, sums)
    if not groups:
        return None
    pairs, datasets = layout(groups)
    look = looks(s for _k, g in groups for s in g["shape"])
    cells = {k: g for k, g in groups}
    with plt.rc_context(figures.RC):
        fig, axes = plt.subplots(
            len(pairs), 2 * len(datasets), figsize=(2.7 * 2 * len(datasets), 2.4 * len(pairs)), squeeze=False
        )
        for i, p in enumerate(pairs):
            for j, d in enumerate(datasets):
                for m, (metric, ylabel) in enumerate(METRICS):
                    ax = axes[i][2 * j + m]
                    if (p, d) not in cells:
                        ax.set_visible(False)
                        continue
                    draw_metric(ax, cells[(p, d)], metric, look)
                    ax.set_title(f"{p} · {d}")
                    ax.set_ylabel(ylabel)
        figures.legend_outside(fig, list(axes.flat), "shape")
        fig.tight_layout()
    return figures.Fig(
        NAME,
        fig,
        "Acceptance rate (accepted ÷ drafted tokens) and acceptance length (accepted draft tokens per step, "
        "bonus not counted) against the budget N, every shape of each pair's replayed greedy grid, one row per "
        "pair and two panels per dataset (its main prompt set); shaded: 95% bootstrap CI over prompts (none from "
        f"fewer than {tables.MIN_CI} prompts); large rings: more than {tables.MAX_CUT:.0%} of the steps were cut by "
        "max_new_tokens (never ranked).",
    )


def _at(s: pd.DataFrame, metric: str, budget) -> str:
    r = s[s.budget == budget].iloc[0]
    return f"{r[metric]:.2f}"


def tradeoff_sentence(rows: pd.DataFrame, sums, pair) -> str | None:
    """Rate falls and length grows with N: the main pair's chain (or first shape) at its smallest and
    largest budget, and how many of the figure's shape series do the same."""
    groups = series(rows, sums)
    if not groups:
        return None
    falls = grows = n = 0
    for _k, g in groups:
        for _shape, s in g.groupby("shape", sort=True):
            if s.budget.nunique() >= MIN_BUDGETS:
                s = s.sort_values("budget")
                n += 1
                falls += bool(s.acceptance_rate.iloc[-1] < s.acceptance_rate.iloc[0])
                grows += bool(s.acceptance_length.iloc[-1] > s.acceptance_length.iloc[0])
    main = sorted(groups, key=lambda kg: (kg[0][0] != pair, kg[0][1] != "humaneval", kg[0]))[0]
    (p, d), g = main
    shapes = sorted(g["shape"].unique(), key=lambda s: (s != "chain", s))
    s = g[g["shape"] == shapes[0]]
    lo, hi = s.budget.min(), s.budget.max()
    return (
        f"The trade-off: a larger budget lowers the acceptance rate and raises the acceptance length. {p}'s "
        f"{shapes[0]} on {d} accepts {_at(s, 'acceptance_rate', lo)} of its draft tokens at N={int(lo)} and "
        f"{_at(s, 'acceptance_rate', hi)} at N={int(hi)}, while its acceptance length grows from "
        f"{_at(s, 'acceptance_length', lo)} to {_at(s, 'acceptance_length', hi)} tokens per step; of the "
        f"figure's {n} shape series, the rate at the largest budget is below the smallest budget's in {falls} "
        f"and the length above it in {grows}."
    )


def section(ctx) -> str:
    """REPORT.md's acceptance-against-budget section: the computed trade-off and the figure."""
    t = ctx["t"]
    line = tradeoff_sentence(t["rows"], t["sums"], t["pair"])
    if line is None or NAME not in ctx["figs"]:
        return "_No replayed greedy grid with two or more budgets, so no acceptance-against-budget figure._"
    return "\n\n".join([line, ctx["link"](NAME)])
