"""The answer page (results/tables/answer.md): per pair × dataset and shape the fastest budget, measured
or projected, with its acceptance, interval, prompts and bracket; its figures: the gain over the chain
(`gain_vs_chain.png`) and the projected speedup against budget beside the live checks
(`projected_speedup.png`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from . import analysis, figures, phrases, tables
from .context import Ctx, Tables
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
OTHER_PAIRS = 4  # panels beside the main pair's datasets


def bench_points(measured: pd.DataFrame | None, study: dict) -> pd.DataFrame:
    """The interleaved benchmark's batch-1 estimates (``t.measured``, from ``speedstats.answers``) on the
    machine whose cost curves the projections read (``study``: ``costcurve.machines`` of the study's
    curves), one per pair, dataset, dtype, shape and budget: the estimate over the most units."""
    if measured is None or measured.empty:
        return pd.DataFrame()
    m = measured[(measured.batch_size.astype(int) == 1) & (measured.budget.astype(int) > 0)]
    on = [str(i) in study.get((p, d, t), ()) for p, d, t, i in zip(m.pair, m.device, m.dtype, m.machine_id)]
    m = m[on].assign(label=[analysis.shape_label(t, p) for t, p in zip(m.tree[on], m.tree_params[on])])
    m = m.sort_values(["n_units", "run_id"], ascending=False, kind="mergesort")
    return m.drop_duplicates(["pair", "dataset", "device", "dtype", "label", "budget"]).assign(single=False)


def single_points(live: pd.DataFrame, bench: pd.DataFrame) -> pd.DataFrame:
    """Single live batch-1 runs (``t.live``: one run, no interval) of the pairs × datasets the benchmark
    has not timed, in ``bench_points``' columns: drawn as such, never as the benchmark's estimate."""
    cols = ["pair", "dataset", "device", "dtype", "tree", "budget"]
    if live is None or live.empty or not {"projected", "measured", "shape", *cols} <= set(live):
        return pd.DataFrame()
    one = live[live.projected.notna() & live.measured.notna() & (live.batch_size.astype(int) == 1)]
    timed = set(zip(bench.pair, bench.dataset)) if len(bench) else set()
    one = one.loc[np.array([k not in timed for k in zip(one.pair, one.dataset)], dtype=bool)]
    return one[cols].assign(label=one["shape"], speedup=one.measured, lo=float("nan"), hi=float("nan"), single=True)


def _grid_shape(grid: pd.DataFrame, label: str, tree: str) -> str | None:
    """The replayed grid's shape a benchmarked candidate is: its label, else the grid's one shape of its tree."""
    if label in set(grid["shape"]):
        return label
    same = sorted(set(grid["shape"][grid.tree == tree]))
    return same[0] if len(same) == 1 else None


def projected_panels(rows: pd.DataFrame, sums, bench: pd.DataFrame, pair) -> list:
    """(title, (curves, points)) per pair × dataset with benchmark points: the main pair's datasets, then the
    OTHER_PAIRS other pairs × datasets whose best benchmarked candidate is fastest."""
    found: list = []
    for (p, ds), b in bench.groupby(["pair", "dataset"], sort=True) if len(bench) else []:
        grid = dict(figures.main_groups(rows, sums, p)).get(ds)
        if grid is None or grid.empty:
            continue
        same = (b.dtype == grid.dtype.iloc[0]) | b.single.astype(bool)  # a benchmark: of the curve pricing the grid
        b = b[same & (b.device == grid.device.iloc[0])]
        b = b.assign(shape=[_grid_shape(grid, lab, t) for lab, t in zip(b.label, b.tree)]).dropna(subset=["shape"])
        shapes = sorted(set(b["shape"]))[:MAX_SHAPES]
        curves = grid[grid.projected.notna() & grid["shape"].isin(shapes)]
        if len(curves):
            found.append((p != pair, -float(b.speedup.max()), f"{p} · {ds}", (curves, b[b["shape"].isin(shapes)])))
    found.sort(key=lambda x: x[:3])
    mine = [f for f in found if not f[0]][: figures.MAX_PANELS]
    others = [f for f in found if f[0]][: min(OTHER_PAIRS, figures.MAX_PANELS - len(mine))]
    return [(title, cg) for _o, _s, title, cg in mine + others]


def _draw_projected(ax, cg) -> None:
    curves, points = cg
    for shape, s in curves.groupby("shape", sort=True):
        s = s.sort_values("budget")
        st = figures.style(shape, "shape")
        ax.plot(s.budget, s.projected, ms=4, lw=1.3, mfc="none", label=figures.short_label(shape), **st)
    for r in points.to_dict("records"):
        st = figures.style(r["shape"], "shape")
        err = figures.ci([r["speedup"]], [r["lo"]], [r["hi"]])
        face = dict(mfc="white") if r["single"] else {}
        ax.errorbar(
            [r["budget"]], [r["speedup"]], yerr=err, ms=9, capsize=3, mec="black", mew=0.8, zorder=5, **st, **face
        )
    ax.axhline(1, color="k", lw=0.8)
    figures.budget_axis(ax, curves.budget.unique(), figures.POWERS_OF_2)
    ax.set_ylabel("speedup ×")


def fig_projected(rows: pd.DataFrame, sums, t: Tables) -> figures.Fig | None:
    """The projected speedup of the replayed grid's shapes against budget (lines) and the interleaved
    benchmark's pooled estimate of each benchmarked candidate on the same machine (large markers, 95%
    interval; a pair × dataset it has not timed: its single live runs, hollow, no interval), per pair × dataset
    (``projected_panels``)."""
    bench = bench_points(t.measured, t.cost_study)
    parts = [p for p in (bench, single_points(t.live, bench)) if len(p)]
    points = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    groups = projected_panels(rows, sums, points, t.pair)
    if not groups:
        return None
    others = sum(not title.startswith(f"{t.pair} · ") for title, _cg in groups)
    hollow = [(Line2D([], [], ls="none", marker="o", ms=8, mfc="white", mec="black"), "single live run, no interval")]
    return figures.page_panels(
        groups,
        "projected_speedup.png",
        _draw_projected,
        "Projected speedup against budget (lines; the projection's 95% interval: answer.md) of the replayed greedy "
        "grid's shapes that the interleaved speed benchmark timed, and the benchmark's estimate for each "
        "(large markers, the shape's look, bars: its 95% paired interval) at batch 1 on the machine whose cost "
        f"curves the projections read; {t.pair} on each dataset, then the {others} other pairs × datasets whose "
        "best benchmarked candidate is fastest (every pair: answer.md, speed.md); hollow: a single live run, no "
        "interval, where the benchmark has not timed the pair × dataset.",
        cols=3,
        h=2.8,
        legend="shape (line: projected; large marker: benchmark)",
        ncol=3,
        sharey=True,
        extra=hollow if any(bool(cg[1].single.any()) for _t, cg in groups) else (),
    )


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


def section(ctx: Ctx) -> str:
    t, out = ctx.t, []
    order = {p: i for i, p in enumerate(phrases.widest_first(t.answer))}  # the main pair's tables first
    for _key, g in sorted(analysis.groups(t.answer), key=lambda kg: (order[kg[1].pair.iloc[0]], -len(kg[1]), kg[0])):
        out.append(f"**{phrases.where(g.iloc[0].to_dict())}**\n\n" + table(g.to_dict("records"), ANSWER_COLS))
    return "\n\n".join(out + fig_links(ctx, "gain_vs_chain.png", "projected_speedup.png"))
