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
from matplotlib.lines import Line2D

from . import analysis, figures, findings
from .context import Ctx
from .markdown import bullets, fig_links, md_table


def main_rows(gap: pd.DataFrame | None, df: pd.DataFrame, sums: pd.DataFrame) -> pd.DataFrame:
    """The gap rows of the configurations in each pair/dataset's main greedy group and prompt set."""
    if gap is None or gap.empty:
        return pd.DataFrame()
    keep = set()
    for _, g in analysis.greedy_groups(df, main_only=True):
        keep |= set(analysis.main_set(g, sums).config_hash)
    rows = gap[gap.config_hash.isin(keep)].copy()
    by_hash = df.drop_duplicates("config_hash").set_index("config_hash")
    rows["pair"] = rows.config_hash.map(by_hash.pair)
    for d in DEPTHS:  # the measured acceptance at depth d of the steps that reached it (the caption's why)
        rows[f"alpha_{d}"] = rows.config_hash.map(by_hash[f"alpha_{d}"]) if f"alpha_{d}" in by_hash else float("nan")
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


DEPTHS = (1, 2, 3)
DP_DASH = dict(color="k", ls="--", lw=1.4)


def gap_panels(rows: pd.DataFrame, min_budgets: int = 3) -> list:
    """At most six pair × dataset panels with ``min_budgets``+ budgets: the main pair's (the most configurations)
    first, then the others whose best shape measures the highest, the median and the lowest share of the DP."""
    groups = {k: g for k, g in rows.groupby(["pair", "dataset"], sort=True) if g.budget.nunique() >= min_budgets}
    if not groups:
        return []
    main = max(sorted({p for p, _d in groups}), key=lambda p: sum(len(g) for k, g in groups.items() if k[0] == p))
    mine = [k for k in groups if k[0] == main][:3]
    rest = sorted((k for k in groups if k[0] != main), key=lambda k: -groups[k].fraction.max())
    picks = [rest[i] for i in sorted({0, len(rest) // 2, len(rest) - 1})] if rest else []
    return [(f"{p} · {d}", groups[(p, d)]) for p, d in mine + picks[: figures.MAX_PANELS - len(mine)]]


def why_below(rows: pd.DataFrame) -> str:
    """The caption's why, from the chain most above the DP's best tree: its per-depth acceptance against the
    vector's rank-0 probability (the chain's N=1 prediction less 1)."""
    chains = rows[(rows["shape"] == "chain") & (rows.tokens_per_step > rows.optimum)]
    if chains.empty:
        return ""
    r = chains.loc[(chains.tokens_per_step / chains.optimum).idxmax()]
    one = rows[(rows["shape"] == "chain") & (rows.pair == r.pair) & (rows.dataset == r.dataset) & (rows.budget == 1)]
    p0 = f"the vector's P(rank 0) {float(one.predicted.iloc[0]) - 1:.2f} at every depth; " if len(one) else ""
    alphas = ", ".join(f"{r[f'alpha_{d}']:.2f}" for d in DEPTHS if pd.notna(r.get(f"alpha_{d}")))
    return (
        f" Where measured curves lie above the dashed line ({int((rows.tokens_per_step > rows.optimum).sum())} of "
        f"{len(rows)} configurations), the DP is not wrong about its search but about its model: it assumes every "
        f"draft token is accepted independently, by rank alone, while accepted tokens come in runs. {r.pair} on "
        f"{r.dataset}, chain N={int(r.budget)}: {p0}measured acceptance at depths {', '.join(map(str, DEPTHS))} "
        f"{alphas} (each given the depth before accepted), so the chain measures "
        f"{analysis.fmt(r.tokens_per_step, 2)} tokens/step against {analysis.fmt(r.predicted, 2)} predicted for it "
        f"and {analysis.fmt(r.optimum, 2)} for the DP's best tree: the DP's optimum is the best tree under "
        "independence, not a bound."
    )


def fig_gap(rows: pd.DataFrame, min_budgets: int = 3) -> figures.Fig | None:
    if rows.empty:
        return None
    groups = gap_panels(rows, min_budgets)
    if not groups:
        return None
    every = [set(s for s, x in g.groupby("shape") if x.budget.nunique() >= min_budgets) for _t, g in groups]
    shapes = sorted(set.intersection(*every))

    def draw(ax, g):
        opt = g.drop_duplicates("budget").sort_values("budget")
        ax.plot(opt.budget, opt.optimum, label="DP prediction, best tree", **DP_DASH)
        for shape, s in g[g["shape"].isin(shapes)].groupby("shape", sort=True):
            s, st = s.sort_values("budget"), figures.style(shape)
            yerr = figures.ci(s.tokens_per_step, s.tokens_per_step_lo, s.tokens_per_step_hi, s.n_prompts)
            ax.errorbar(
                s.budget, s.tokens_per_step, yerr=yerr, ms=5, capsize=2, lw=1.4, label=figures.short_label(shape), **st
            )
            ax.plot(s.budget, s.predicted, ls=":", lw=1.2, marker=st["marker"], mfc="none", ms=5, color=st["color"])
        figures.budget_axis(ax, g.budget.unique(), figures.POWERS_OF_2)
        ax.set_ylabel("tokens/step")

    caption = (
        f"Measured tokens_per_step of {', '.join(map(figures.short_label, shapes))} (solid; 95% bootstrap CI from "
        f"{figures.tables.MIN_CI}+ prompts) against the Sequoia DP's prediction for its best tree (dashed) and for "
        "the same shape (hollow, dotted), from the pair's greedy acceptance vector; the main pair on each dataset, "
        "then the pairs × datasets whose best shape reaches the highest, median and lowest share of the DP's "
        f"prediction (every pair, dataset and shape with {min_budgets}+ budgets: the table above); each panel its "
        "own y scale." + why_below(rows)
    )
    dotted = Line2D([], [], ls=":", lw=1.2, marker="o", mfc="none", color="#555555")
    extra = [(dotted, "DP prediction, same shape")]
    return figures.page_panels(groups, "gap_to_optimum.png", draw, caption, cols=3, h=2.8, ncol=3, extra=extra)


def section(ctx: Ctx) -> str:
    rows = ctx.t.gap
    if rows.empty:
        return "_No results/gap_to_optimum.csv rows (greedy static shapes with a calibrated acceptance vector)._"
    return "\n\n".join(
        [
            bullets(findings.sentences(ctx.t.findings, "gap"), ""),
            "Each cell: measured tokens_per_step (share of the DP "
            "prediction for the best tree; DP prediction for the shape itself).",
            md_table(*pivot(rows)),
        ]
        + fig_links(ctx, "gap_to_optimum.png")
    )
