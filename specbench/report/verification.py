"""The verification page (results/tables/verification.md): each rule at T>0 against its token-level
baseline, paired on the prompts both ran, and its figures: the paired gains (`mode_gains.png`) and
the lossy rules' gain against their drift (`lossy_tradeoff.png`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import analysis, figures, phrases
from .markdown import fig_links, table


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


MODE_COLS = [
    ("rule", lambda r: r["mode"] + ("" if r["lossless_b"] else " (lossy)")),
    ("baseline", lambda r: r["baseline"]),
    ("shape", lambda r: r["shape"]),
    ("N", lambda r: int(r["budget"])),
    ("prompts", lambda r: int(r["n_shared"])),
    ("tokens/step", lambda r: analysis.fmt(r["paired"].a_value, 2)),
    ("baseline tokens/step", lambda r: analysis.fmt(r["paired"].b_value, 2)),
    ("Δ [95% paired CI]", phrases.gain),
    ("first_token_tv", lambda r: analysis.fmt(r.get("first_token_tv"))),
]


def section(ctx) -> str:
    g, out = ctx["t"]["modes"], []
    for key, grp in analysis.groups(g, analysis.GROUP + ["temperature"]):
        grp = grp.sort_values(["lossless_b", "tree", "budget", "mode"], ascending=[False, True, True, True])
        out.append(
            f"**{phrases.where(grp.iloc[0].to_dict())}, T={key[-1]:g}**\n\n" + table(grp.to_dict("records"), MODE_COLS)
        )
    return "\n\n".join(out + fig_links(ctx, "mode_gains.png", "lossy_tradeoff.png"))
