"""The report's figure kit (matplotlib Agg, byte-deterministic PNGs; no torch): `Fig`, the rc settings,
the palette's looks by name, panels, intervals, budget axes and `save_all`.  Each figure lives with the
section it illustrates (``answer.fig_projected``, ``hardware_page.fig_phase``, ...).

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


def lighter(hex_color: str, frac: float) -> tuple:
    """The colour mixed with white by ``frac`` (0: as it is)."""
    rgb = np.array(matplotlib.colors.to_rgb(hex_color))
    return tuple(rgb + (1 - rgb) * frac)


def short_label(shape: str) -> str:
    """A legend's name of a shape: 'specinfer' for its one expansion, 'merged:binary' for a merged tree."""
    if shape.startswith("merged(") and "shape=" in shape:
        return "merged:" + shape.split("shape=", 1)[1].split(",")[0].rstrip(")")
    return shape.split("(expansion")[0]


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


POWERS_OF_2 = tuple(2**i for i in range(11))  # budget ticks where every budget's would crowd a page-width panel


def budget_axis(ax, budgets, ticks=None):
    """A log-2 budget axis, a tick at each budget (or at those of ``ticks`` within their range)."""
    ax.set_xscale("log", base=2)
    at = sorted(budgets) if ticks is None else [t for t in ticks if min(budgets) <= t <= max(budgets)]
    ax.set_xticks(at)
    ax.set_xticklabels([str(int(b)) for b in at])
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


RUN_MARKERS = ("*", "D", "^", "v", "P", "X")  # a live run's size (prompts × new tokens), in sorted order


def run_size(r) -> str:
    return f"{int(r['n_prompts'])} × {int(r['max_new_tokens'])}"


# Page width: a figure read at 1000 px (10 in at savefig.dpi), every text 9 pt or more, legends below
# the panels (never beside them, which would widen the figure), at most MAX_PANELS panels.
PAGE_W = 9.8  # a hair under 10 in: the tight bounding box adds a few pixels
MIN_PT = 9
MAX_PANELS = 6
PAGE_RC: dict[RcKeyType, Any] = {
    **RC,
    **{k: MIN_PT for k in ("font.size", "axes.labelsize", "xtick.labelsize", "ytick.labelsize")},
    **{k: MIN_PT for k in ("legend.fontsize", "legend.title_fontsize")},
    "axes.titlesize": 10,
}


def page_axes(fig, n: int, cols: int, sharey: bool = False, sharex: bool = False) -> list:
    """n panels in rows of ``cols``; a last row with fewer is centred, so no slot stands empty."""
    rows = -(-n // cols)
    spec = fig.add_gridspec(rows, 2 * cols)
    axes: list = []
    for i in range(n):
        row, col = divmod(i, cols)
        start = col * 2 + (cols - (n - row * cols) if row == rows - 1 else 0)
        ax = fig.add_subplot(spec[row, start : start + 2])
        if axes and sharey:
            ax.sharey(axes[0])
        if axes and sharex:
            ax.sharex(axes[0])
        axes.append(ax)
    return axes


def legend_below(fig, axes, title: str | None = None, ncol: int = 3, extra=()) -> None:
    """One legend under the panels: every labelled series once (sorted), then ``extra`` (handle, label)s."""
    seen: dict[str, Artist] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    items = [(seen[k], k) for k in sorted(seen)] + list(extra)
    if items:
        fig.legend(*zip(*items), loc="outside lower center", ncol=ncol, title=title, frameon=False)


def page_panels(
    groups, name: str, draw, caption: str, cols: int = 3, h: float = 3.0, legend=None, ncol: int = 3, extra=(), **share
) -> Fig:
    """`panels` at page width (``PAGE_RC``): at most MAX_PANELS, ``cols`` per row, one legend below."""
    if len(groups) > MAX_PANELS:
        raise ValueError(f"internal: {name} has {len(groups)} panels (at most {MAX_PANELS})")
    cols = min(cols, len(groups))
    with plt.rc_context(PAGE_RC):
        fig = plt.figure(figsize=(PAGE_W, h * -(-len(groups) // cols) + 0.9), layout="constrained")
        axes = page_axes(fig, len(groups), cols, **share)
        for ax, (title, rows) in zip(axes, groups):
            draw(ax, rows)
            ax.set_title(title)
        legend_below(fig, axes, legend, ncol=ncol, extra=extra)
    return Fig(name, fig, caption)
