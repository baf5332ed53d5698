"""Report figures (matplotlib Agg, byte-deterministic PNGs; no torch): palette, helpers, acceptance.

Each ``fig_*`` function takes tables and returns a `Fig` (file name, matplotlib figure, caption)
or None when its data is missing; `save_all` writes them.  Rules every figure keeps: never
average across datasets or prompt sets (one panel per group); **one palette keyed by name**
(`color`: the same shape, pair, rule or implementation has the same colour in every figure);
legends outside the data; shared y-axes where panels show the same metric.  The palette itself
(colours and markers) is `palette`.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, NamedTuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from . import analysis, palette, tables  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

RC: dict[RcKeyType, Any] = {
    "svg.hashsalt": "specbench",
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 8,
    "legend.fontsize": 7,
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "path.simplify": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
PNG_META = {"Software": None}
MARKERS = palette.MARKERS


class Fig(NamedTuple):
    name: str
    fig: Figure
    caption: str


base_name = palette.base_name


def color(name: str, kind: str | None = None) -> str:
    """The palette's colour of a name (`palette.look`): the same in every figure."""
    return palette.look(name, kind)[0]


def style(name: str, kind: str | None = None) -> dict:
    """Colour and marker from the palette (`palette.look`): same name, same look everywhere."""
    c, m = palette.look(name, kind)
    return dict(color=c, marker=m)


shape_style = style  # the notebook's name for it


def save_all(figs: list[Fig], out_dir: str) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    for f in figs:
        f.fig.savefig(os.path.join(out_dir, f.name), format="png", metadata=PNG_META, bbox_inches="tight")
        plt.close(f.fig)
    return [f.name for f in figs]


def grid(n: int, w: float = 3.6, h: float = 2.8, sharey: bool = False, sharex: bool = False, layout=None):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(w * cols, h * rows), squeeze=False, sharey=sharey, sharex=sharex, layout=layout
    )
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def legend_outside(fig, axes, title: str | None = None) -> None:
    seen: dict[str, Artist] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if seen:
        labels = sorted(seen)
        fig.legend(
            [seen[k] for k in labels], labels, loc="upper left", bbox_to_anchor=(1.0, 0.9), title=title, frameon=False
        )


def budget_axis(ax, budgets):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(budgets))
    ax.set_xticklabels([str(int(b)) for b in sorted(budgets)])
    ax.minorticks_off()
    ax.set_xlabel("budget N (draft tokens)")


def ci(v, lo, hi, n=None):
    """Error-bar lengths from an interval; none (zero length) where n < MIN_CI prompts."""
    v = np.asarray(v, float)
    lo = np.asarray(v if lo is None else lo, float)
    hi = np.asarray(v if hi is None else hi, float)
    lo, hi = np.where(np.isfinite(lo), lo, v), np.where(np.isfinite(hi), hi, v)
    if n is not None:
        few = np.asarray(n, float) < tables.MIN_CI
        lo, hi = np.where(few, v, lo), np.where(few, v, hi)
    return [np.maximum(v - lo, 0), np.maximum(hi - v, 0)]


def panels(groups, name: str, draw, caption: str, sharey=True, sharex=False, w=3.6, h=2.8, legend="shape") -> Fig:
    """One panel per (title, rows); draw(ax, rows) fills it; one legend outside."""
    with plt.rc_context(RC):
        fig, axes = grid(len(groups), w=w, h=h, sharey=sharey, sharex=sharex)
        for ax, (title, rows) in zip(axes, groups):
            draw(ax, rows)
            ax.set_title(title)
            if sharey:
                ax.yaxis.set_tick_params(labelleft=True)
            if sharex:
                ax.xaxis.set_tick_params(labelbottom=True)
        legend_outside(fig, axes[: len(groups)], legend)
        fig.tight_layout()
    return Fig(name, fig, caption)


def group_title(k) -> str:
    return f"{k[0]} · {k[1]} ({k[2]}, {int(k[3])} tok)"


def main_groups(rows: pd.DataFrame, sums, pair) -> list:
    return [(f"{d}", g) for d, g in analysis.main_groups(rows, sums, pair)]


# --------------------------------------------------------------------------
# acceptance
# --------------------------------------------------------------------------
def fig_gain_vs_chain(diffs: pd.DataFrame, pair) -> Fig | None:
    if diffs.empty or pair not in set(diffs.pair):
        return None
    d = diffs[diffs.pair == pair]
    groups = [(f"{k[1]} ({k[2]}, {int(k[3])} tok)", g) for k, g in d.groupby(analysis.GROUP, sort=True)]
    shapes = sorted(d["shape"].unique())

    def draw(ax, g):
        for shape, s in g.groupby("shape", sort=True):
            s = s.sort_values("budget")
            x = s.budget * 2 ** (0.08 * (shapes.index(shape) - (len(shapes) - 1) / 2))
            ax.errorbar(
                x,
                s["diff"],
                yerr=ci(s["diff"], s.lo, s.hi, s.n_shared),
                ms=3,
                capsize=2,
                ls="none",
                label=shape,
                **style(shape),
            )
        ax.axhline(0, color="k", lw=0.6)
        budget_axis(ax, g.budget.unique())
        ax.set_ylabel("Δ tokens_per_step vs chain")

    return panels(
        groups,
        "gain_vs_chain.png",
        draw,
        f"Paired difference in tokens_per_step of each shape over chain at the same budget ({pair}, "
        f"greedy) on the prompts both ran; bars: 95% paired bootstrap interval (none from fewer than {tables.MIN_CI} "
        "shared prompts).",
    )


MIN_REACH = 20  # a depth is drawn only where at least this many steps reached it


def position_acceptance(steps: pd.DataFrame, hashes) -> pd.DataFrame:
    """SPEED-Bench-style per-position conditional acceptance: for depth d, the steps that reached it
    (tree_depth >= d and accepted >= d-1) and the share of them that accepted d."""
    s = steps[steps.config_hash.isin(hashes)]
    rows = []
    for h, g in s.groupby("config_hash", sort=True):
        acc, dep = g.accepted.to_numpy(), g.tree_depth.to_numpy()
        for d in range(1, int(dep.max()) + 1):
            reach = (dep >= d) & (acc >= d - 1)
            if reach.sum() >= MIN_REACH:
                rows.append(dict(config_hash=h, depth=d, n=int(reach.sum()), alpha=float((acc[reach] >= d).mean())))
    return pd.DataFrame(rows)


def fig_alpha(rows, sums, steps, pair, budget: int = 16) -> Fig | None:
    """At N = `budget`, or the largest budget below it that the main sweep ran."""
    groups = main_groups(rows, sums, pair)
    if not groups or steps is None or "tree_depth" not in steps:
        return None
    ran = sorted({int(b) for _, g in groups for b in g.budget})
    budget = max([b for b in ran if b <= budget] or ran[:1])
    pick = [(t, g[g.budget == budget]) for t, g in groups]
    pick = [(t, g) for t, g in pick if len(g)]
    if not pick:
        return None
    alpha = position_acceptance(steps, set().union(*[set(g.config_hash) for _, g in pick]))
    if alpha.empty:
        return None

    def draw(ax, g):
        for r in g.sort_values("shape").to_dict("records"):
            a = alpha[alpha.config_hash == r["config_hash"]]
            if len(a):
                ax.plot(a.depth, a.alpha, ms=3, label=r["shape"], **style(r["shape"]))
        ax.set_xlabel("depth d (position in the accepted path)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("P(accept d | reached d)")
        ax.set_ylim(0, 1.05)

    return panels(
        pick,
        "alpha_by_depth.png",
        draw,
        f"Per-position conditional acceptance (SPEED-Bench style) for {pair}, greedy, every shape at "
        f"N={budget}: the share of steps that reached depth d (tree deep enough and d−1 accepted) which "
        f"accepted d; a depth is drawn only where at least {MIN_REACH} steps reached it.",
    )


def _hist(cell) -> np.ndarray:
    try:
        return np.asarray([float(x) for x in str(cell).strip("[]").split(",") if x.strip()], float)
    except ValueError:
        return np.zeros(0)


HATCHES = (None, "////", "....", "xxxx")  # the datasets of one pair's panel, beside its one colour


def fig_accept_hist(cross: pd.DataFrame, rows: pd.DataFrame) -> Fig | None:
    """Acceptance-length histograms (accept_hist) at the cross-pair setting most pairs share (per
    dataset and dtype: the shape most pairs ran, its middle budget): small multiples, one panel per
    pair in its palette colour, one hatch per dataset."""
    if cross.empty or "accept_hist" not in rows:
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
                       color=color(r["pair"], "pair"), hatch=HATCHES[i % len(HATCHES)], edgecolor="white", lw=0,
                       label=f"{r['pair']}: {r['setting']}")  # fmt: skip
        ax.set_xlabel("accepted draft tokens in a step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("share of steps")

    fig = panels(
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
        ax.set_title(ax.get_title(), color=color(ax.get_title(), "pair"), fontweight="bold")
    fig.fig.legends.clear()  # the datasets' hatches in a neutral grey, not the first panel's colour
    proxies = [
        Patch(fc="#888888", ec="white", hatch=HATCHES[i % len(HATCHES)], label=s) for i, s in enumerate(settings)
    ]
    fig.fig.legend(handles=proxies, loc="upper left", bbox_to_anchor=(1.0, 0.9), frameon=False, title="dataset, tree")
    return fig


def fig_acceptance_vector(vector: pd.DataFrame | None) -> Fig | None:
    """results/acceptance_vector.csv as it is: P(accept | draft rank k), per pair, one panel per dataset."""
    if vector is None or not {"rank", "p_accept", "dataset", "pair"} <= set(vector.columns):
        return None
    v = vector[vector.temperature.astype(float) == 0] if "temperature" in vector else vector
    groups = [(d, g) for d, g in v.groupby("dataset", sort=True)]

    def draw(ax, g):
        for pair, gp in g.groupby("pair", sort=True):
            gp = gp[gp.p_accept.astype(float) > 0].sort_values("rank")
            ax.plot(gp["rank"], gp.p_accept, ms=3, lw=0.8, label=pair, **style(pair, "pair"))
        ax.set_xlabel("draft rank k")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_yscale("log")
        ax.set_ylabel("P(target accepts the rank-k draft token)")

    return panels(
        groups,
        "acceptance_vector.png",
        draw,
        "The greedy acceptance vectors of results/acceptance_vector.csv (the Sequoia calibration input): "
        "per pair, the probability that the target's next token is the draft's rank-k token (log scale; ranks "
        "never accepted are not drawn).",
        legend="pair",
    )
