"""The pairs page (results/tables/pairs.md): every pair that ran the same shape and budget, on the
prompts all of them ran, the drafter × target matrix (`matrix`) and the acceptance-length
histograms per pair (`accept_length_hist.png`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from . import analysis, figures, matrix
from .context import Ctx
from .markdown import fig_links, md_table


def _hist(cell) -> np.ndarray:
    try:
        return np.asarray([float(x) for x in str(cell).strip("[]").split(",") if x.strip()], float)
    except ValueError:
        return np.zeros(0)


HATCHES = (None, "////", "....", "xxxx")  # the datasets of one pair's panel, beside its one colour


def fig_accept_hist(cross: pd.DataFrame, rows: pd.DataFrame) -> figures.Fig | None:
    """Acceptance-length histograms (accept_hist) at the cross-pair setting most pairs share (per
    dataset and dtype: the shape most pairs ran, its middle budget): small multiples, one panel per
    pair in its palette colour, one hatch per dataset."""
    if cross.empty or rows.accept_hist.isna().all():  # NaN: not recorded (results.optional)
        return None
    hist = dict(zip(rows.config_hash, rows.accept_hist))
    picks = []
    for (ds, _dt), g in cross.groupby(["dataset", "dtype"], sort=True):
        n = g.groupby(["cross_shape", "budget"]).pair.nunique()
        top = sorted(k for k in n.index if n[k] == n.max())  # the settings most pairs ran, by shape and budget
        shape = top[0][0]
        budgets = [b for s, b in top if s == shape]
        budget = budgets[(len(budgets) - 1) // 2]  # their middle budget: neither N=1's 0/1 bars nor the longest tail
        picks.append(
            g[(g.cross_shape == shape) & (g.budget == budget)].assign(setting=f"{ds}, {shape} N={int(budget)}")
        )
    both = pd.concat(picks)
    settings = sorted(both.setting.unique())
    groups = [(p, g) for p, g in both.groupby("pair", sort=True)]

    def draw(ax, g):
        wid = 0.8 / len(settings)
        for r in g.sort_values("setting").to_dict("records"):
            h = _hist(hist.get(r["config_hash"]))
            i = settings.index(r["setting"])
            if h.sum():
                ax.bar(np.arange(len(h)) + (i - (len(settings) - 1) / 2) * wid, h / h.sum(), width=wid,
                       color=figures.color(r["pair"], "pair"), hatch=HATCHES[i % len(HATCHES)], edgecolor="white", lw=0,
                       label=f"{r['pair']}: {r['setting']}")  # fmt: skip
        ax.set_xlabel("accepted draft tokens in a step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("share of steps")

    fig = figures.panels(
        groups,
        "accept_length_hist.png",
        draw,
        "Acceptance-length histograms (SPEED-Bench style): the share of steps accepting k draft tokens (bonus not "
        "counted), one panel per pair in its palette colour, one bar per dataset (solid, hatched) at the shape and "
        "budget most pairs ran there, over each configuration's own prompts.",
        w=3.2,
        h=2.4,
        legend="dataset, shape and budget",
    )
    for ax in fig.fig.axes:
        ax.set_title(ax.get_title(), color=figures.color(ax.get_title(), "pair"), fontweight="bold")
    fig.fig.legends.clear()  # the datasets' hatches in a neutral grey, not the first panel's colour
    proxies = [
        Patch(fc="#888888", ec="white", hatch=HATCHES[i % len(HATCHES)], label=s) for i, s in enumerate(settings)
    ]
    fig.fig.legend(handles=proxies, loc="upper left", bbox_to_anchor=(1.0, 0.9), frameon=False, title="dataset, tree")
    return fig


def cross_table(g: pd.DataFrame) -> str:
    """(shape, N) x pairs: tokens/step · acceptance rate on the prompts all the row's pairs ran."""
    rows_ = sorted(
        {(r.cross_shape, int(r.budget), int(r.n_shared)) for r in g.itertuples()}, key=lambda c: (c[1], c[0])
    )
    cell = {
        (r.pair, r.cross_shape, int(r.budget)): f"{analysis.fmt(r.tps_shared, 2)} · {analysis.fmt(r.rate_shared, 2)}"
        + ("" if r.cross_shape.split("(")[0] == r.tree else f" ({r.tree})")
        for r in g.itertuples()
    }
    pairs = list(g.groupby("pair").tps_shared.max().sort_values(ascending=False, kind="mergesort").index)
    rows = [[f"{s} N={b}", str(n)] + [cell.get((p, s, b), "–") for p in pairs] for s, b, n in rows_]
    rows.append(["its own prompts", ""] + [analysis.fmt(g[g.pair == p].n_prompts.max()) for p in pairs])
    return md_table(rows, ["shape", "shared prompts"] + pairs)


def section(ctx: Ctx) -> str:
    c, out = ctx.t.cross, []
    for (ds, dt, mnt, tgt), g in analysis.groups(c, ["dataset", "dtype", "max_new_tokens", "target"]):
        out.append(f"**{ds} ({dt}, {int(mnt)} new tokens), target {tgt}**\n\n" + cross_table(g))
    return "\n\n".join(out + matrix.render(c) + fig_links(ctx, "accept_length_hist.png"))
