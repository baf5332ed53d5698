"""The answer page (results/tables/answer.md): per pair × dataset and shape the fastest budget, measured
or projected, with its acceptance, interval, prompts and bracket; its figures: the gain over the chain
(`gain_vs_chain.png`) and the projected speedup against budget beside the live checks
(`projected_speedup.png`)."""

from __future__ import annotations

import pandas as pd
from matplotlib.lines import Line2D

from . import analysis, figures, phrases, tables
from .markdown import fig_links, table

MIN_BUDGETS = 3  # a group compared with chain at fewer budgets has no curve: the table only


def fig_gain_vs_chain(diffs: pd.DataFrame, pair) -> figures.Fig | None:
    if diffs.empty or pair not in set(diffs.pair):
        return None
    d = diffs[diffs.pair == pair]
    groups = [
        (f"{pair} · {k[1]} ({k[2]}, {int(k[3])} tok)", g)
        for k, g in d.groupby(analysis.GROUP, sort=True)
        if g.budget.nunique() >= MIN_BUDGETS
    ][: figures.MAX_PANELS]
    if not groups:
        return None
    shapes = sorted({s for _t, g in groups for s in g["shape"]})

    def draw(ax, g):
        for shape, s in g.groupby("shape", sort=True):
            s = s.sort_values("budget")
            x = s.budget * 2 ** (0.05 * (shapes.index(shape) - (len(shapes) - 1) / 2))
            yerr = figures.ci(s["diff"], s.lo, s.hi, s.n_shared)
            ax.errorbar(x, s["diff"], yerr=yerr, ms=5, capsize=2, ls="none", label=shape, **figures.style(shape))
        ax.axhline(0, color="k", lw=0.8)
        figures.budget_axis(ax, g.budget.unique())
        ax.set_ylabel("Δ tokens/step vs chain")

    return figures.page_panels(
        groups,
        "gain_vs_chain.png",
        draw,
        f"Paired difference in tokens_per_step of each shape over chain at the same budget ({pair}, "
        f"greedy) on the prompts both ran; bars: 95% paired bootstrap interval (none from fewer than {tables.MIN_CI} "
        f"shared prompts); each panel its own y scale; groups compared at fewer than {MIN_BUDGETS} budgets are in "
        "the tables only.",
        cols=1,
        h=2.7,
        legend="shape",
        ncol=3,
    )


MAX_SHAPES = 6  # projected curves per panel


def fig_projected(rows: pd.DataFrame, sums, live: pd.DataFrame) -> figures.Fig | None:
    """Every pair × dataset with a live batch-1 check: the projected speedup of the replayed grid's
    shapes that were checked live, and each live run's measured speedup, its marker by run size."""
    b1 = live[live.projected.notna() & live.measured.notna()] if len(live) and "projected" in live else live.iloc[:0]
    if b1.empty:
        return None
    sizes = sorted(
        {figures.run_size(r) for r in b1.to_dict("records")}, key=lambda x: tuple(int(v) for v in x.split(" × "))
    )
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
            ax.plot([r["budget"]], [r["measured"]], ls="none", marker=figures.RUN_MARKERS[sizes.index(figures.run_size(r)) % 6], ms=10,
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
    handles += [Line2D([], [], ls="none", marker=figures.RUN_MARKERS[i % 6], ms=9, mfc="#888888", mec="black",
                       label=f"measured live, {sz}") for i, sz in enumerate(sizes)]  # fmt: skip
    labels += [f"measured live, {sz} (prompts × tokens)" for sz in sizes]
    fig.fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.9), frameon=False, title="shape")
    return fig


ANSWER_COLS = [
    ("shape", lambda r: r["shape"] + (f" (= {r['same_as']})" if isinstance(r.get("same_as"), str) else "")),
    ("best N (tried)", lambda r: analysis.built_label(r) or f"{int(r['budget'])} ({r['budgets']})"),
    ("bracketed", lambda r: r["bracket"]),
    ("speedup", phrases.speed),
    ("tokens/step [95% CI]", lambda r: phrases.metric(r, "tokens_per_step")),
    ("acceptance rate", lambda r: phrases.metric(r, "acceptance_rate", 3)),
    ("acceptance length", lambda r: phrases.metric(r, "acceptance_length")),
    ("prompts / tokens", lambda r: f"{analysis.fmt(r.get('n_prompts'))} / {analysis.fmt(r.get('new_tokens'))}"),
    ("cut by cap", lambda r: phrases.pct(r.get("cut"))),
    ("claim", phrases.claim_word),
]


def section(ctx) -> str:
    t, out = ctx["t"], []
    order = {p: i for i, p in enumerate(phrases.widest_first(t["answer"]))}  # the main pair's tables first
    for _key, g in sorted(analysis.groups(t["answer"]), key=lambda kg: (order[kg[1].pair.iloc[0]], -len(kg[1]), kg[0])):
        out.append(f"**{phrases.where(g.iloc[0].to_dict())}**\n\n" + table(g.to_dict("records"), ANSWER_COLS))
    return "\n\n".join(out + fig_links(ctx, "gain_vs_chain.png", "projected_speedup.png"))
