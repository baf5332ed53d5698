"""The gap to the Sequoia DP's prediction, from results/gap_to_optimum.csv (``study.optimum``).

Per pair and dataset (greedy, each dataset's main comparison group and prompt set, never
averaged across datasets): each static shape's measured tokens_per_step, the DP's prediction
for that shape and for the DP's best tree at the same budget, from the measured acceptance
vector.  The DP assumes acceptance independent across depths, so its "optimum" is a
prediction, not a bound: a shape can measure above it.  And the calibration of each Sequoia row
(``calibration``): its acceptance vector's prompts against the prompts it was scored on.
"""

from __future__ import annotations

import pandas as pd

from . import analysis, compare

MIN_CALIB = 16  # a ranked Sequoia tree's acceptance vector comes from at least this many calibration prompts


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


def calibration(df: pd.DataFrame, sums: pd.DataFrame, vector: pd.DataFrame | None) -> pd.DataFrame:
    """Per sequoia configuration: the prompts its acceptance vector was calibrated on (the vector of
    its `calib_dataset` / `calib_pair_id`; acceptance_vector.csv `prompt_ids`, when recorded) against
    the prompts it was scored on: disjoint (by dataset or by prompt id), in-sample, or not recorded."""
    rows = []
    for r in df[df.tree == "sequoia"].to_dict("records"):
        p = analysis.params_of(r.get("tree_params"))
        ds, pid = str(p.get("calib_dataset", r["dataset"])), str(p.get("calib_pair_id", r.get("pair_id", "")))
        scored = set(compare.prompts_of(sums, r["config_hash"]))
        calib = None
        if vector is not None and "prompt_ids" in vector:
            v = vector[vector.dataset.astype(str) == ds]
            if "pair_id" in v and pid:
                v = v[v.pair_id.astype(str) == pid]
            calib = {x for cell in v.prompt_ids.dropna().astype(str) for x in cell.split(";") if x} or None
        shared = len(calib & scored) if calib is not None else None
        status = (
            f"disjoint (calibrated on {ds})"
            if ds != str(r["dataset"])
            else "not recorded"
            if calib is None
            else f"in-sample ({shared} shared)"
            if shared
            else f"disjoint, {len(calib)} prompts < {MIN_CALIB}"
            if len(calib) < MIN_CALIB
            else "disjoint"
        )
        rows.append(
            dict(r, n_calib=len(calib) if calib else None, n_scored=len(scored), shared=shared, calibration=status)
        )
    return pd.DataFrame(rows)
