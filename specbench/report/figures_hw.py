"""Figures of the answer per hardware and per batch size (``hardware`` computes them)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from . import figures
from .hardware import MS, RS, label, speedup


def fig_phase(a: pd.DataFrame, points: pd.DataFrame) -> figures.Fig | None:
    """One panel per pair × dataset: the modelled best configuration over (r, m), this
    machine's measured point starred."""
    if a.empty:
        return None
    groups = [(f"{p} · {d}", g.reset_index(drop=True)) for (p, d), g in a.groupby(["pair", "dataset"], sort=True)]

    def draw(ax, g):
        best = speedup(g, RS, MS).argmax(axis=0)  # [r, m]
        names = sorted({label(g.iloc[i]) for i in np.unique(best)})
        code = np.vectorize(lambda i: names.index(label(g.iloc[i])))(best)
        ax.pcolormesh(RS, MS, code.T, cmap="tab20", vmin=0, vmax=19, shading="nearest")
        for j, name in enumerate(names):
            ys, xs = np.nonzero(code.T == j)
            if len(xs) >= 0.04 * code.size:  # label the regions large enough to hold one
                ax.text(RS[int(np.median(xs))], MS[int(np.median(ys))], name, fontsize=6, ha="center", va="center")
        pair = g.pair.iloc[0]
        for pt in points[points.pair == pair].to_dict("records") if len(points) else []:
            xy = (max(pt["r"], RS[0]), pt["m"])  # a drafter without a model (r = 0) at the left edge
            ax.plot(*xy, "k*", ms=9)
            ax.annotate(f"{pt.get('device', '')} {pt['dtype']}", xy, fontsize=6, xytext=(4, 4),
                        textcoords="offset points")  # fmt: skip
        ax.set(xscale="log", yscale="log", xlabel="draft / target cost ratio r", ylabel="marginal cost per token m")

    return figures.panels(
        groups,
        "phase_diagram.png",
        draw,
        "The fastest tree (shape and budget) under a modelled cost curve — a forward of k tokens costs "
        "1 + m(k − 1) target one-token forwards, r times that on the draft — over the replayed greedy "
        "study's own steps; ★ this machine's measured point (results/costs.csv). Left and low: cheap drafts "
        "and flat verification (GPU-like), where larger trees pay.",
    )


def fig_schedule(sched: pd.DataFrame) -> figures.Fig | None:
    """Measured speedup against the draft budget, one line per batch size B (plain decoding = 1);
    only the settings where some line has two or more budgets (the rest: the table)."""
    if sched.empty:
        return None
    keys = ["pair", "dataset", "dtype", "n_prompts", "max_new_tokens"]
    groups = [
        (f"{k[0]} · {k[1]} ({k[2]}, {k[3]} × {k[4]} tok)", g)
        for k, g in sched.groupby(keys, sort=True)
        if g.groupby(["batch_size", "shape"]).budget.nunique().max() >= 2
    ]
    if not groups:
        return None
    sizes = sorted({int(b) for _t, g in groups for b in g.batch_size})
    shades = plt.get_cmap("viridis")(np.linspace(0, 0.85, len(sizes)))

    def draw(ax, g):
        for (b, shape), s in g.groupby(["batch_size", "shape"], sort=True):
            s = s.sort_values("budget")
            c = shades[sizes.index(int(b))]
            ax.plot(s.budget, s.measured, marker="o" if shape == "chain" else "s", ms=3, color=c,
                    label=f"B={int(b):>2}" + ("" if shape == "chain" else f" {shape}"))  # fmt: skip
        ax.axhline(1, color="k", lw=0.6)
        ax.set(xlabel="budget N (draft tokens)", ylabel="measured speedup ×")

    return figures.panels(
        groups,
        "batch_schedule.png",
        draw,
        "Measured speedup over plain decoding at the same batch size B against the draft budget, one line "
        "per B (live, same prompts; darker: smaller B): the best N per B is the schedule a serving engine "
        "takes. Settings with a single budget per B are in the table only.",
        legend="batch",
    )
