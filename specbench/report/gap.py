"""The gap to the Sequoia DP's prediction, from results/gap_to_optimum.csv (``study.job.optimum``).

Per pair and dataset (greedy, each dataset's main comparison group and prompt set, never
averaged across datasets): each static shape's measured tokens_per_step, the DP's prediction
for that shape and for the DP's best tree at the same budget, from the measured acceptance
vector.  The DP assumes acceptance independent across depths, so its "optimum" is a
prediction, not a bound: a shape can measure above it.  Its table, findings and figure
(`gap_to_optimum.png`) make the analysis page's subsection.
"""

from __future__ import annotations

import pandas as pd

from . import analysis, figures, findings
from .markdown import bullets, fig_links, md_table


def main_rows(gap: pd.DataFrame | None, df: pd.DataFrame, sums: pd.DataFrame) -> pd.DataFrame:
    """The gap rows of the configurations in each pair/dataset's main greedy group and prompt set."""
    if gap is None or gap.empty:
        return pd.DataFrame()
    keep = set()
    for _, g in analysis.greedy_groups(df, main_only=True):
        keep |= set(analysis.main_set(g, sums).config_hash)
    rows = gap[gap.config_hash.isin(keep)].copy()
    rows["pair"] = rows.config_hash.map(df.drop_duplicates("config_hash").set_index("config_hash").pair)
    rows["shape"] = [analysis.shape_label(t, p) for t, p in zip(rows.tree, rows.tree_params)]
    return rows.sort_values(
        ["pair", "dataset", "budget", "fraction", "shape"], ascending=[True, True, True, False, True], kind="mergesort"
    ).reset_index(drop=True)


def pivot(rows: pd.DataFrame) -> tuple[list[list], list[str]]:
    """One row per pair, dataset and shape; per budget ``measured (share; DP prediction for the shape)``,
    and per dataset a first row with the DP's prediction for its best tree."""
    budgets = sorted(int(b) for b in rows.budget.unique())
    table = []
    for (pair, dataset), g in rows.groupby(["pair", "dataset"], sort=True):
        opt = g.drop_duplicates("budget").set_index("budget").optimum
        table.append([pair, dataset, "**DP prediction, best tree**"] + [analysis.fmt(opt.get(b), 2) for b in budgets])
        for shape, s in g.groupby("shape", sort=True):
            s = s.set_index("budget")
            table.append(
                [pair, dataset, shape]
                + [
                    f"{analysis.fmt(s.tokens_per_step[b], 2)} ({s.fraction[b]:.0%}; "
                    f"DP {analysis.fmt(s.predicted[b], 2)})"
                    if b in s.index
                    else ""
                    for b in budgets
                ]
            )
    return table, ["pair", "dataset", "shape"] + [f"N={b}" for b in budgets]


def fig_gap(rows: pd.DataFrame, min_budgets: int = 3) -> figures.Fig | None:
    if rows.empty:
        return None
    groups = [
        (f"{p} / {d}", g)
        for (p, d), g in rows.groupby(["pair", "dataset"], sort=True)
        if g.budget.nunique() >= min_budgets
    ]
    if not groups:
        return None

    def draw(ax, g):
        opt = g.drop_duplicates("budget").sort_values("budget")
        ax.plot(opt.budget, opt.optimum, "k--", lw=1.2, label="DP prediction, best tree")
        for shape, s in g.groupby("shape", sort=True):
            s = s.sort_values("budget")
            st = figures.style(shape)
            ax.errorbar(
                s.budget,
                s.tokens_per_step,
                yerr=figures.ci(s.tokens_per_step, s.tokens_per_step_lo, s.tokens_per_step_hi, s.n_prompts),
                ms=3,
                capsize=2,
                label=shape,
                **st,
            )
            ax.plot(s.budget, s.predicted, ls=":", lw=0.8, marker=st["marker"], mfc="none", ms=3, color=st["color"])
        figures.budget_axis(ax, g.budget.unique())
        ax.set_ylabel("tokens_per_step")

    return figures.panels(
        groups,
        "gap_to_optimum.png",
        draw,
        "Measured tokens_per_step of each static shape (solid; 95% bootstrap CI from "
        f"{figures.tables.MIN_CI}+ prompts) against "
        "the Sequoia DP's prediction for its best tree (dashed) and the DP's prediction for the same shape "
        "(hollow, dotted), per pair and "
        f"dataset with at least {min_budgets} budgets (the others are in the table only); each panel its own "
        "y scale.",
        sharey=False,
        h=3.4,
    )


def section(ctx) -> str:
    rows = ctx["t"]["gap"]
    if rows.empty:
        return "_No results/gap_to_optimum.csv rows (greedy static shapes with a calibrated acceptance vector)._"
    return "\n\n".join(
        [
            bullets(findings.sentences(ctx["t"]["findings"], "gap"), ""),
            "Each cell: measured tokens_per_step (share of the DP "
            "prediction for the best tree; DP prediction for the shape itself).",
            md_table(*pivot(rows)),
        ]
        + fig_links(ctx, "gap_to_optimum.png")
    )
