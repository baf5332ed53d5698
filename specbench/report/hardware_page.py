"""The hardware page (results/tables/hardware.md): the findings per measured machine and per pair on a
modelled cost curve (the findings table's `machines` and `phase` rows), and the phase diagram
(``hardware`` computes the model)."""

from __future__ import annotations

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from scipy import ndimage

from ..results import ranking
from . import figures, findings, palette, tldr
from .context import Ctx
from .hardware import MS, RS, label, other_sentence, speedup
from .markdown import bullets, fig_links

MAX_PANELS = 4
MACHINE_MARKERS = ("*", "D", "^", "P", "v", "X", "s", "o")  # by machine name, sorted
MIN_LABEL = 24  # cells of the (r, m) grid a region needs for a label (smaller ones: colour and legend only)
# a shape whose palette colour an earlier shape already has is hatched, so a panel never shows two
# shapes in one look (the regions carry no marker); "none" (plain decoding) is never a region
REGION_SHAPES = [s for s in palette.SHAPES if s != "none"]
HATCHED = {
    s for i, s in enumerate(REGION_SHAPES) if palette.SHAPES[s][0] in [palette.SHAPES[t][0] for t in REGION_SHAPES[:i]]
}


def phase_panels(a: pd.DataFrame, points: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """At most MAX_PANELS pairs on their main dataset (humaneval first): the pairs timed on the most
    machines first, then the most configurations; the hardware page's bullets give every pair."""
    devices = points.groupby("pair").device.nunique() if len(points) else pd.Series(dtype=int)
    ds = sorted(set(a.dataset), key=lambda d: (d != "humaneval", d))[0]
    on = a[a.dataset == ds]
    pairs = sorted(set(on.pair), key=lambda p: (-int(devices.get(p, 0)), -int((on.pair == p).sum()), p))
    return [(f"{p} · {ds}", on[on.pair == p].reset_index(drop=True)) for p in pairs[:MAX_PANELS]]


def _shape_colour(shape: str) -> str:
    return palette.merged_look(shape)[0] if shape.startswith("merged") else palette.look(shape, "shape")[0]


def _hatch(shape: str) -> str | None:
    return "////" if figures.base_name(shape.split(":")[0]) in HATCHED else None


def _regions(g: pd.DataFrame):
    """(code [r, m], names, colours): the modelled best configuration per cell, -1 where plain decoding wins."""
    sp = speedup(g, RS, MS)
    best = ranking.best_index(g, sp)  # per cell, the one ranking's pick (the modelled speedup its criterion)
    plain = np.take_along_axis(sp, best[None], axis=0)[0] <= 1.0  # the pick's own speedup, not the grid's max
    names = sorted({label(g.iloc[i]) for i in np.unique(best[~plain])},
                   key=lambda n: (n.split(" N=")[0], int(n.split("N=")[1])))  # fmt: skip
    code = np.vectorize(lambda i: names.index(label(g.iloc[i])) if label(g.iloc[i]) in names else -1)(best)
    code = np.where(plain, -1, code)
    return code, names, [_shape_colour(n.split(" N=")[0]) for n in names]  # one colour per shape: N in the labels


LABEL_ROWS = 3  # a region label's height in (r, m) grid cells at 9 pt in a page-width panel
CHAR_COLS = 1.0  # its width per character, in cells


def _label_regions(ax, code: np.ndarray, names: list[str], points=()) -> None:
    """Each region's tree and budget at the innermost cell where the whole label lies inside the region and
    covers no measured point (``points``: (r, m) each), the largest regions first; a label that would overlap
    one already placed, or fits nowhere, is left out (colour and legend name the region)."""
    placed: list[tuple[int, int, float]] = []
    order = sorted(range(-1, len(names)), key=lambda j: -int((code == j).sum()))
    for j in order:
        mask, text = code.T == j, "plain decoding" if j < 0 else names[j]
        if mask.sum() < MIN_LABEL:
            continue
        half = len(text) * CHAR_COLS / 2
        fits = ndimage.binary_erosion(mask, structure=np.ones((LABEL_ROWS, int(np.ceil(2 * half)) + 1)))
        depth = ndimage.distance_transform_edt(np.pad(fits, 1))[1:-1, 1:-1] * _clear_of(points, half)
        if depth.max() <= 0:
            continue
        y, x = np.unravel_index(int(np.argmax(depth)), depth.shape)
        if any(abs(x - px) < half + ph and abs(y - py) < LABEL_ROWS for px, py, ph in placed):
            continue
        placed.append((int(x), int(y), half))
        ax.text(RS[x], MS[y], text, fontsize=figures.MIN_PT, ha="center", va="center",
                bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.75))  # fmt: skip


def _clear_of(points, half: float = 0.0) -> np.ndarray:
    """The (m, r) grid's cells where a label ``half`` cells wide on each side, centred there, keeps two cells
    clear of every measured point's marker."""
    yy, xx = np.mgrid[0 : len(MS), 0 : len(RS)]
    clear = np.ones((len(MS), len(RS)), dtype=bool)
    for r, m in points:
        px = np.argmin(np.abs(np.log(RS) - np.log(max(r, RS[0]))))
        py = np.argmin(np.abs(np.log(MS) - np.log(m)))
        clear &= ~((np.abs(xx - px) < half + 2) & (np.abs(yy - py) < LABEL_ROWS / 2 + 2))
    return clear


def machine_name(pt: dict) -> str:
    """A measured point's name in the legend: its machine (the CPU or GPU model and vector capability), dtype,
    and random weights where the curve timed the architectures alone."""
    machine = str(pt.get("machine") or "").split(", ")[0] or str(pt["device"])
    return f"{machine} · {pt['dtype']}" + (" (random weights)" if pt.get("weights") == "random" else "")


def _region_panel(ax, g: pd.DataFrame, mine: pd.DataFrame) -> dict[str, str]:
    """The modelled best tree over (r, m), each region labelled where there is room; its shapes' colours."""
    code, names, colours = _regions(g)
    cmap = mcolors.ListedColormap([palette.PLAIN, *colours])
    ax.pcolormesh(RS, MS, code.T + 1, cmap=cmap, vmin=-0.5, vmax=len(names) + 0.5, shading="nearest")
    for j, n in enumerate(names):
        mask = (code.T == j).astype(float)
        ax.contour(RS, MS, mask, levels=[0.5], colors="white", linewidths=0.8)
        if _hatch(n):
            ax.contourf(RS, MS, mask, levels=[0.5, 1.5], colors="none", hatches=[_hatch(n)])
    _label_regions(ax, code, names, [(max(r, RS[0]), m) for r, m in zip(mine.r, mine.m)] if len(mine) else [])
    ax.set(xscale="log", yscale="log", xlabel="draft / target cost ratio r", ylabel="marginal cost per token m")
    return {n.split(" N=")[0]: _shape_colour(n.split(" N=")[0]) for n in names}


def _free_panel(ax, g: pd.DataFrame) -> dict[str, str]:
    """A drafter without a model (r = 0: the (r, m) plane has nothing along r): each shape's best modelled
    speedup over its budgets against m, plain decoding at 1."""
    sp = speedup(g, np.array([RS[0]]), MS)[:, 0, :]
    for shape in sorted(set(g["shape"])):
        best = sp[(g["shape"] == shape).to_numpy()].max(axis=0)
        ax.plot(MS, best, lw=1.5, markevery=6, ms=5, label=figures.short_label(shape), **figures.style(shape, "shape"))
    ax.axhline(1, color=palette.PLAIN, lw=2)
    ax.set(xscale="log", xlabel="marginal cost per token m", ylabel="modelled speedup × (best N per shape)")
    return {}


def _points(ax, g: pd.DataFrame, mine: pd.DataFrame, markers: dict[str, str], free: bool) -> None:
    for pt in mine.to_dict("records"):
        if free:
            xy = (pt["m"], float(speedup(g, np.array([RS[0]]), np.array([pt["m"]])).max()))
        else:
            xy = (max(pt["r"], RS[0]), pt["m"])  # a drafter without a model (r = 0) at the left edge
        ax.plot(*xy, ls="none", marker=markers[machine_name(pt)], ms=12, mfc="white", mec="black", mew=1.5, zorder=6)


def fig_phase(a: pd.DataFrame, points: pd.DataFrame, others: pd.DataFrame | None = None) -> figures.Fig | None:
    """At most four panels (`phase_panels`): the modelled best tree over (r, m) (`_region_panel`; a drafter
    without a model: against m alone, `_free_panel`), every machine's measured point (the study's curves and
    the others', ``hardware.other_points``), a marker per machine named in the legend, never on the plot."""
    if a.empty:
        return None
    pts = pd.concat([p for p in (points, others) if p is not None and len(p)], ignore_index=True)
    pts = pts if len(pts) else pd.DataFrame(columns=["pair", "device", "dtype", "r", "m"])
    groups = phase_panels(a, pts)
    names = sorted({machine_name(p) for p in pts.to_dict("records")})
    markers = {n: MACHINE_MARKERS[i % len(MACHINE_MARKERS)] for i, n in enumerate(names)}
    shapes: dict[str, str] = {}
    with plt.rc_context(figures.PAGE_RC):
        fig = plt.figure(figsize=(figures.PAGE_W, 4.3 * -(-len(groups) // 2) + 1.4), layout="constrained")
        for ax, (title, g) in zip(figures.page_axes(fig, len(groups), min(len(groups), 2)), groups):
            mine = pts[pts.pair == g.pair.iloc[0]]
            free = bool((g.F == 0).all())
            shapes.update(_free_panel(ax, g) if free else _region_panel(ax, g, mine))
            _points(ax, g, mine, markers, free)
            ax.set_title(title + (" (drafts for free: r = 0)" if free else ""))
            ax.grid(False)
        _phase_legend(fig, shapes, markers, fig.axes)
    return figures.Fig("phase_diagram.png", fig, CAPTION)


def _phase_legend(fig, shapes: dict[str, str], markers: dict[str, str], axes) -> None:
    handles: list = [Patch(fc=c, hatch=_hatch(s), ec="white", label=s) for s, c in sorted(shapes.items())]
    handles.append(Patch(color=palette.PLAIN, label="plain decoding (no tree is faster)"))
    handles += [Line2D([], [], ls="none", marker=mk, mfc="white", mec="black", ms=10, mew=1.5, label=f"{n}: measured")
                for n, mk in markers.items()]  # fmt: skip
    lines = {h.get_label(): h for ax in axes for h in ax.get_lines() if not h.get_label().startswith("_")}
    handles += [h for k, h in sorted(lines.items()) if k not in shapes]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False)


CAPTION = (
    "The fastest tree (shape and budget, labelled in its region where there is room; white lines part the "
    "budgets of one shape) under a modelled cost curve — a forward of k tokens costs 1 + m(k − 1) target "
    "one-token forwards, r times that on the draft — over the replayed greedy study's own steps, for the pairs "
    "timed on the most machines (every pair, dataset and machine: hardware.md); grey: plain decoding, where no "
    "tree is modelled faster; markers: each machine's measured (r, m) from results/costs.csv, named in the "
    "legend. A drafter without a model drafts for free (r = 0): its panel gives each shape's best modelled "
    "speedup against m. Left and low: cheap drafts and flat verification (GPU-like), where larger trees pay."
)


def section(ctx: Ctx) -> str:
    t, data = ctx.t, ctx.data
    rec = tldr.recommended(t)
    others = [x for x in [other_sentence(t.other_points)] if x]
    others += tldr.hardware_sentence(t, rec, data.envs or {}, data.costs) if len(rec) else []
    found = [bullets(findings.sentences(ctx.t.findings, "machines") + others, "")]
    found += [bullets(findings.sentences(ctx.t.findings, "phase"), "")]
    return "\n\n".join(found + fig_links(ctx, "phase_diagram.png"))
