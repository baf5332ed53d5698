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

from . import figures, findings, palette
from .hardware import MS, RS, label, other_sentence, speedup
from .markdown import bullets, fig_links

MAX_PANELS = 4
MACHINE_MARKERS = {"cpu": "*", "cuda": "D"}
MIN_LABEL = 24  # cells of the (r, m) grid a region needs for a label (smaller ones: colour and legend only)
# a shape whose palette colour an earlier shape already has is hatched, so a panel never shows two
# shapes in one look (the regions carry no marker)
HATCHED = {
    s
    for i, s in enumerate(palette.SHAPES)
    if palette.SHAPES[s][0] in [c for c, _m in list(palette.SHAPES.values())[:i]]
}


def phase_panels(a: pd.DataFrame, points: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """At most MAX_PANELS pairs on their main dataset (humaneval first): the pairs timed on the most
    machines first, then the most configurations; the hardware page's bullets give every pair."""
    devices = points.groupby("pair").device.nunique() if len(points) else pd.Series(dtype=int)
    ds = sorted(set(a.dataset), key=lambda d: (d != "humaneval", d))[0]
    on = a[a.dataset == ds]
    pairs = sorted(set(on.pair), key=lambda p: (-int(devices.get(p, 0)), -int((on.pair == p).sum()), p))
    return [(f"{p} · {ds}", on[on.pair == p].reset_index(drop=True)) for p in pairs[:MAX_PANELS]]


def _shade(hex_color: str, k: int, n: int) -> tuple:
    """The k-th of n budgets of one shape: its palette colour, lighter for the larger budgets."""
    rgb = np.array(mcolors.to_rgb(hex_color))
    return tuple(rgb + (1 - rgb) * (0.55 * k / max(n - 1, 1)))


def _shape_colour(shape: str) -> str:
    return palette.merged_look(shape)[0] if shape.startswith("merged") else palette.look(shape, "shape")[0]


def _hatch(shape: str) -> str | None:
    return "////" if figures.base_name(shape.split(":")[0]) in HATCHED else None


def _regions(g: pd.DataFrame):
    """(code [r, m], names, colours): the modelled best configuration per cell, -1 where plain decoding wins."""
    sp = speedup(g, RS, MS)
    best = sp.argmax(axis=0)
    plain = sp.max(axis=0) <= 1.0
    names = sorted({label(g.iloc[i]) for i in np.unique(best[~plain])},
                   key=lambda n: (n.split(" N=")[0], int(n.split("N=")[1])))  # fmt: skip
    code = np.vectorize(lambda i: names.index(label(g.iloc[i])) if label(g.iloc[i]) in names else -1)(best)
    code = np.where(plain, -1, code)
    colours = []
    for n in names:
        shape = n.split(" N=")[0]
        same = [m for m in names if m.split(" N=")[0] == shape]
        colours.append(_shade(_shape_colour(shape), same.index(n), len(same)))
    return code, names, colours


def _label_regions(ax, code: np.ndarray, names: list[str], points=()) -> None:
    """Each region's tree and budget at its innermost cell (the farthest from its edge) clear of the measured
    ``points`` ((r, m) each) and their labels, the largest regions first; a label that would overlap one
    already placed, or finds no clear cell, is left out (colour and legend)."""
    clear = _clear_of(points)
    placed: list[tuple[float, float]] = []
    order = sorted(range(-1, len(names)), key=lambda j: -int((code == j).sum()))
    for j in order:
        mask = code.T == j
        if mask.sum() < MIN_LABEL:
            continue
        depth = ndimage.distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1] * clear
        if depth.max() <= 0:
            continue
        y, x = np.unravel_index(int(np.argmax(depth)), depth.shape)
        fx, fy = x / len(RS), y / len(MS)
        if any(abs(fx - px) < 0.2 and abs(fy - py) < 0.05 for px, py in placed):
            continue
        placed.append((fx, fy))
        ax.text(RS[x], MS[y], "plain decoding" if j < 0 else names[j], fontsize=8, ha="center", va="center",
                bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.75))  # fmt: skip


def _clear_of(points) -> np.ndarray:
    """The (m, r) grid's cells where a region label covers no measured point's marker or its label (to the
    marker's lower right: ``fig_phase``'s annotation), as fractions of the log axes."""
    fy, fx = np.mgrid[0 : len(MS), 0 : len(RS)]
    fx, fy = fx / len(RS), fy / len(MS)
    clear = np.ones((len(MS), len(RS)), dtype=bool)
    for r, m in points:
        px = np.argmin(np.abs(np.log(RS) - np.log(max(r, RS[0])))) / len(RS)
        py = np.argmin(np.abs(np.log(MS) - np.log(m))) / len(MS)
        clear &= ~((fx > px - 0.15) & (fx < px + 0.45) & (fy > py - 0.12) & (fy < py + 0.06))
    return clear


def point_labels(pts: pd.DataFrame) -> list[str]:
    """One panel's marker labels: each point's device, and where the panel has several on one device, its
    dtype and machine too ('cpu float32, AMD EPYC (AVX2)'), so no two points read alike."""
    if pts.empty:
        return []
    several = pts.device.astype(str).duplicated(keep=False)
    machine = pts.machine.fillna("").astype(str) if "machine" in pts else pd.Series("", index=pts.index)
    out = []
    for (_i, pt), many, m in zip(pts.iterrows(), several, machine):
        dev = str(pt["device"])  # pt.dtype would be the Series' own
        name = f"{dev} {pt['dtype']}, {m.split(', ')[0]}".rstrip(", ") if many else dev
        out.append(name + (" (random weights)" if pt.get("weights") == "random" else ""))
    return out


def fig_phase(a: pd.DataFrame, points: pd.DataFrame) -> figures.Fig | None:
    """At most four panels (`phase_panels`): the modelled best tree over (r, m), each region
    labelled, plain decoding where no tree beats it, each measured machine's point."""
    if a.empty:
        return None
    groups = phase_panels(a, points)
    shapes: dict[str, str] = {}
    with plt.rc_context(figures.RC):
        cols = min(len(groups), 2)
        fig, grid = plt.subplots(-(-len(groups) // cols), cols, figsize=(6.2 * cols, 5.0 * -(-len(groups) // cols)),
                                 squeeze=False)  # fmt: skip
        axes = list(grid.flat)
        for ax in axes[len(groups) :]:
            ax.set_visible(False)
        for ax, (title, g) in zip(axes, groups):
            code, names, colours = _regions(g)
            cmap = mcolors.ListedColormap([palette.PLAIN, *colours])
            ax.pcolormesh(RS, MS, code.T + 1, cmap=cmap, vmin=-0.5, vmax=len(names) + 0.5, shading="nearest")
            for j, n in enumerate(names):
                mask = (code.T == j).astype(float)
                ax.contour(RS, MS, mask, levels=[0.5], colors="white", linewidths=0.5)
                if _hatch(n):
                    ax.contourf(RS, MS, mask, levels=[0.5, 1.5], colors="none", hatches=[_hatch(n)])
            mine = points[points.pair == g.pair.iloc[0]] if len(points) else pd.DataFrame()
            _label_regions(ax, code, names, list(zip(mine.r, mine.m)) if len(mine) else [])
            for n in names:
                shapes.setdefault(n.split(" N=")[0], _shape_colour(n.split(" N=")[0]))
            for pt, name in zip(mine.to_dict("records"), point_labels(mine)):
                xy = (max(pt["r"], RS[0]), pt["m"])  # a drafter without a model (r = 0) at the left edge
                mk = MACHINE_MARKERS.get(str(pt.get("device")), "X")
                ax.plot(*xy, ls="none", marker=mk, ms=12, mfc="white", mec="black", mew=1.5, zorder=6)
                ax.annotate(name, xy, fontsize=8, xytext=(8, -12), textcoords="offset points", fontweight="bold", zorder=6,
                            bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="black", lw=0.5))  # fmt: skip
            ax.set(xscale="log", yscale="log", xlabel="draft / target cost ratio r", ylabel="marginal cost per token m")
            ax.set_title(title, fontsize=10, fontweight="bold")
            ax.grid(False)
        handles: list = [
            Patch(fc=c, hatch=_hatch(s), ec="white", label=f"{s} (lighter: larger N)")
            for s, c in sorted(shapes.items())
        ]
        handles.append(Patch(color=palette.PLAIN, label="plain decoding (no tree is faster)"))
        devs = sorted({str(d) for d in points.device}) if len(points) else []
        handles += [Line2D([], [], ls="none", marker=MACHINE_MARKERS.get(d, "X"), mfc="white", mec="black", ms=9,
                           label=f"{d}: its measured (r, m)") for d in devs]  # fmt: skip
        fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 0.95), frameon=False, fontsize=8)
        fig.tight_layout()
    return figures.Fig(
        "phase_diagram.png",
        fig,
        "The fastest tree (shape and budget, labelled in its region) under a modelled cost curve — a forward of k "
        "tokens costs 1 + m(k − 1) target one-token forwards, r times that on the draft — over the replayed greedy "
        "study's own steps, for the pairs timed on the most machines (every pair, dataset and machine: hardware.md); "
        "grey: plain decoding, where no tree is modelled faster; markers: each machine's measured point "
        "(results/costs.csv). Left and low: cheap drafts and flat verification (GPU-like), where larger trees pay.",
    )


def section(ctx) -> str:
    others = [x for x in [other_sentence(ctx["t"].get("other_points"))] if x]
    found = [bullets(findings.sentences(ctx["t"]["findings"], "machines") + others, "")]
    found += [bullets(findings.sentences(ctx["t"]["findings"], "phase"), "")]
    return "\n\n".join(found + fig_links(ctx, "phase_diagram.png"))
