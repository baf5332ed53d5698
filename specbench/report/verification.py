"""The verification page (results/tables/verification.md): each rule at T>0 against its token-level
baseline, paired on the prompts both ran, and its figures: the paired gains (`mode_gains.png`) and
the lossy rules' gain against their drift (`lossy_tradeoff.png`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from . import analysis, figures, phrases
from .context import Ctx
from .markdown import fig_links, table

T_MARKERS = ("o", "s", "^", "D", "v")  # by temperature, lowest first: the rule's colour tells rules apart


def _gain_rows(gains: pd.DataFrame) -> pd.DataFrame:
    """The gains with a row label per rule, baseline and tree (temperature: the marker) and their group."""
    return gains.assign(
        row=[f"{r['verify']} vs {r['baseline']} · {r['shape']} N={int(r['budget'])}" for r in gains.to_dict("records")],
        group=[str(k[1]) for k in gains[analysis.GROUP].apply(tuple, axis=1)],
        setting=[f"{k[0]} ({k[2]}, {int(k[3])} tok)" for k in gains[analysis.GROUP].apply(tuple, axis=1)],
    )


def _draw_gains(ax, g: pd.DataFrame, rows: list[str], temps: list[float]) -> None:
    for r in g.to_dict("records"):
        k = temps.index(r["temperature"])
        y = len(rows) - 1 - rows.index(r["row"]) - 0.22 * (k - (len(temps) - 1) / 2)
        c = figures.color(r["verify"], "rule")
        xerr = figures.ci([r["diff"]], [r["lo"]], [r["hi"]], [r["n_shared"]])
        ax.errorbar([r["diff"]], [y], xerr=xerr, ms=6, capsize=2, ls="none", color=c, marker=T_MARKERS[k % 5],
                    mfc=c if r["same_trees"] else "white", mec=c)  # fmt: skip
    ax.axvline(0, color="k", lw=0.8)
    ax.set_ylim(-0.6, len(rows) - 0.4)


def fig_mode_gains(gains: pd.DataFrame) -> figures.Fig | None:
    """Paired gain of each rule over its token-level baseline: a row per rule, baseline and tree, a marker per
    temperature; lossless and lossy rules in rows of panels, a column per group (at most three); filled: the
    same drafted trees, hollow: each rule's own trees."""
    if gains.empty:
        return None
    g = _gain_rows(gains)
    groups = sorted(set(g.group))[:3]
    temps = sorted(set(g.temperature))
    classes = [(lossless, sorted(set(c.row))) for lossless, c in g.groupby("lossless_b", sort=True)][::-1]
    with plt.rc_context(figures.PAGE_RC):
        fig = plt.figure(figsize=(figures.PAGE_W, 1.6 + 0.34 * sum(len(r) for _l, r in classes)), layout="constrained")
        spec = fig.add_gridspec(len(classes), len(groups), height_ratios=[len(r) for _l, r in classes])
        for i, (lossless, rows) in enumerate(classes):
            for j, grp in enumerate(groups):
                ax = fig.add_subplot(spec[i, j], sharex=fig.axes[0] if fig.axes else None)
                _draw_gains(ax, g[(g.lossless_b == lossless) & (g.group == grp)], rows, temps)
                ax.set_yticks(range(len(rows))[::-1], rows if j == 0 else [])
                ax.set_title(f"{grp}: {'lossless' if lossless else 'lossy'} rules")
                ax.set_xlabel("Δ tokens/step (paired)" if i == len(classes) - 1 else "")
        rules = sorted(set(g.verify))
        handles: list = [Patch(color=figures.color(v, "rule"), label=v) for v in rules]
        handles += [Line2D([], [], ls="none", marker=T_MARKERS[k % 5], color="#555555", label=f"T={t:g}")
                    for k, t in enumerate(temps)]  # fmt: skip
        fig.legend(handles=handles, loc="outside lower center", ncol=7, frameon=False, title="rule; temperature")
        fig.suptitle("; ".join(sorted(set(g.setting))))
    n = g.n_shared.astype(int)
    return figures.Fig(
        "mode_gains.png",
        fig,
        "Each verification rule at T>0 against its strongest token-level baseline on the same shape and "
        "budget (the row), on the prompts both ran: colour the rule, marker the temperature; filled: both verified "
        f"the same drafted trees, hollow: each drafted its own; bars: 95% paired bootstrap interval over the "
        f"{n.min()}–{n.max()} shared prompts (none from fewer than {figures.tables.MIN_CI}).",
    )


def fig_lossy(gains: pd.DataFrame) -> figures.Fig | None:
    if gains.empty:  # its rows' first_token_tv: NaN where summary.csv does not record it (results.optional)
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


def section(ctx: Ctx) -> str:
    g, out = ctx.t.modes, []
    for key, grp in analysis.groups(g, analysis.GROUP + ["temperature"]):
        grp = grp.sort_values(["lossless_b", "tree", "budget", "mode"], ascending=[False, True, True, True])
        out.append(
            f"**{phrases.where(grp.iloc[0].to_dict())}, T={key[-1]:g}**\n\n" + table(grp.to_dict("records"), MODE_COLS)
        )
    return "\n\n".join(out + fig_links(ctx, "mode_gains.png", "lossy_tradeoff.png"))
