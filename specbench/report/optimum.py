"""REPORT.md's gap-to-the-optimum section, from results/gap_to_optimum.csv (``study.optimum``).

Per pair and dataset (greedy, each dataset's main comparison group and prompt set,
never averaged across datasets): each static shape's measured tokens_per_step, the
Sequoia DP's prediction for that shape and the DP's optimum at the same budget from
the measured acceptance vector; a table, sentences computed from the rows, a figure.
"""
from __future__ import annotations

import pandas as pd

from . import analysis as A
from . import figures as F
from .sections import bullets, figure, md_table


def main_rows(gap: pd.DataFrame | None, df: pd.DataFrame, sums: pd.DataFrame) -> pd.DataFrame:
    """The gap rows of the configurations in each pair/dataset's main greedy group and prompt set."""
    if gap is None or gap.empty:
        return pd.DataFrame()
    keep = set()
    for _, g in A.greedy_groups(df, main_only=True):
        keep |= set(A.main_set(g, sums).config_hash)
    rows = gap[gap.config_hash.isin(keep)].copy()
    # the report's pair label (a pair_id is appended where two pairs share a name), so no table,
    # sentence or panel mixes them
    rows["pair"] = rows.config_hash.map(df.drop_duplicates("config_hash").set_index("config_hash").pair)
    rows["shape"] = [A.shape_label(t, p) for t, p in zip(rows.tree, rows.tree_params)]
    return rows.sort_values(["pair", "dataset", "budget", "fraction", "shape"], ascending=[True, True, True, False, True],
                            kind="mergesort").reset_index(drop=True)


def sentences(rows: pd.DataFrame) -> list[str]:
    out = []
    for (pair, dataset), g in rows.groupby(["pair", "dataset"], sort=True):
        best = g.sort_values(["budget", "fraction"], ascending=[True, False], kind="mergesort").drop_duplicates("budget")
        parts = [f"N={int(r.budget)}: {r.shape} {r.fraction:.0%} of {A.fmt(r.optimum, 2)}" for r in best.itertuples()]
        short = g[g.model_gap > 0]
        worst = g.loc[g.model_gap.idxmax()]
        out.append(f"{pair} on {dataset}: the best static shape per budget, as a share of the DP optimum "
                   f"(tokens/step): " + "; ".join(parts) + f". {len(short)} of {len(g)} shapes measure below the DP's own prediction "
                   f"for them (mean {g.model_gap.mean():+.2f} tokens/step, predicted minus measured); the largest "
                   f"shortfall is {worst['shape']} at N={int(worst.budget)}: {A.fmt(worst.tokens_per_step, 2)} "
                   f"measured vs {A.fmt(worst.predicted, 2)} predicted ({worst.model_gap / worst.predicted:.0%} below).")
    return out


def fig_gap(rows: pd.DataFrame, out_dir: str):
    if rows.empty:
        return None
    groups = [(f"{p} / {d}", g) for (p, d), g in rows.groupby(["pair", "dataset"], sort=True)]

    def draw(ax, g):
        opt = g.drop_duplicates("budget").sort_values("budget")
        ax.plot(opt.budget, opt.optimum, "k--", lw=1.2, label="DP optimum (measured vector)")
        for shape, s in g.groupby("shape", sort=True):
            s = s.sort_values("budget")
            st = F.shape_style(shape)
            ax.errorbar(s.budget, s.tokens_per_step, yerr=F._ci(s.tokens_per_step, s.tokens_per_step_lo,
                        s.tokens_per_step_hi), ms=3, capsize=2, label=shape, **st)
            ax.plot(s.budget, s.predicted, ls=":", lw=0.8, marker=st["marker"], mfc="none", ms=3, color=st["color"])
        F._budget_axis(ax, g.budget.unique())
        ax.set_ylabel("tokens_per_step")

    name = F._panels(groups, out_dir, "gap_to_optimum.png", draw, h=3.4)
    return name, ("Measured tokens_per_step of each static shape (solid markers, 95% bootstrap CI over prompts) "
                  "against the Sequoia DP optimum at each budget (dashed) and the DP's prediction for the same "
                  "shape (hollow markers, dotted), from the measured greedy acceptance vector; one panel per "
                  "pair and dataset.")


def pivot(rows: pd.DataFrame) -> tuple[list[list], list[str]]:
    """One row per pair, dataset and shape; per budget ``measured (fraction; predicted)``,
    and per dataset a first row with the DP optimum."""
    budgets = sorted(int(b) for b in rows.budget.unique())
    table = []
    for (pair, dataset), g in rows.groupby(["pair", "dataset"], sort=True):
        opt = g.drop_duplicates("budget").set_index("budget").optimum
        table.append([pair, dataset, "**DP optimum**"] + [A.fmt(opt.get(b), 2) for b in budgets])
        for shape, s in g.groupby("shape", sort=True):
            s = s.set_index("budget")
            table.append([pair, dataset, shape] + [
                f"{A.fmt(s.tokens_per_step[b], 2)} ({s.fraction[b]:.0%}; pred {A.fmt(s.predicted[b], 2)})"
                if b in s.index else "" for b in budgets])
    return table, ["pair", "dataset", "shape"] + [f"N={b}" for b in budgets]


def section(gap: pd.DataFrame | None, df: pd.DataFrame, sums: pd.DataFrame, fig_dir: str, rel: str) -> str:
    rows = main_rows(gap, df, sums)
    if rows.empty:
        return ("_No results/gap_to_optimum.csv rows (it needs greedy static-shape runs and a calibrated "
                "acceptance vector for their pair and dataset; `python -m specbench.collect` writes it)._")
    out = ["For each pair and dataset with a measured greedy acceptance vector P (rank k's acceptance "
           "probability), the Sequoia dynamic program gives the best static tree's expected tokens per step at "
           "each budget, optimum = 1 + max over trees of Σ_nodes Π_path P[rank]; *predicted* is the same sum for "
           "the shape itself, *fraction* = measured / optimum.  The DP assumes acceptance is independent across "
           "depths and ignores the end of a decode (a prompt's last step emits only what EOS / max_new_tokens "
           "leave, which weighs more at large N); *predicted − measured* shows where the model is off.",
           bullets(sentences(rows), ""),
           "Each cell: measured tokens_per_step (fraction of the optimum; the DP's prediction for the shape)."]
    out.append(md_table(*pivot(rows)))
    figure(out, fig_gap(rows, fig_dir), rel)
    return "\n\n".join(out)
