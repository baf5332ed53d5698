"""results/gap_to_optimum.csv: each static shape's measured tokens_per_step against the Sequoia optimum.

For each pair and dataset with a greedy acceptance vector P (results/acceptance_vector*.csv,
``python -m specbench.study.tools.calibrate``) and each greedy configuration of a static shape
(a rank-path list) at budget N (a vector is matched by ``pair_id``, the pair's content identity,
never by its name; only a vector file without that column falls back to the name):

  optimum    = 1 + E_P[accepted] of the Sequoia DP's best tree of N nodes (``sequoia.optimal_paths``)
  predicted  = 1 + E_P[accepted] of this shape (``sequoia.expected_accepted``): what the DP's
               model (independent acceptance across depths, by rank only) says the shape gets
  fraction   = measured tokens_per_step / optimum
  model_gap  = predicted - measured: where positive, the shape falls short of what the model
               predicts (acceptance is not independent across depths, or the vector is off)

The 1 is the bonus token (tokens_per_step counts it; it is one less at EOS / the length limit,
so measured is a hair below 1 + acceptance_length).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ...results.columns import CONFIG_COLUMNS, tree_params

if TYPE_CHECKING:  # core.tree loads torch: only when a shape is made (``static_paths``)
    from ...core.tree import RankPath

COLUMNS = [
    *CONFIG_COLUMNS,
    "n_prompts",
    "tokens_per_step",
    "tokens_per_step_lo",
    "tokens_per_step_hi",
    "predicted",
    "optimum",
    "fraction",
    "model_gap",
    "vector_n",
]


def _pair_key(pair_id, pair) -> str:
    """A vector's or configuration's pair key: its pair_id, or ``name:<pair>`` where it has none."""
    return str(pair_id) if isinstance(pair_id, str) and pair_id else f"name:{pair}"


def greedy_vectors(vectors: pd.DataFrame | None) -> dict[tuple[str, str], tuple[list[float], int]]:
    """(pair key, dataset) -> (P by rank, positions measured) of the greedy (T=0) vectors."""
    if vectors is None or vectors.empty:
        return {}
    v = vectors[(vectors.verify.astype(str) == "greedy") & (vectors.temperature.astype(float) == 0)]
    ids = v["pair_id"] if "pair_id" in v else pd.Series(np.nan, index=v.index)
    v = v.assign(key=[_pair_key(i, p) for i, p in zip(ids, v.pair)])
    out = {}
    for (pair, dataset), g in v.groupby(["key", "dataset"], sort=True):
        by_rank = dict(zip(g["rank"].astype(int), g.p_accept.astype(float)))
        n = int(g["n"].max()) if "n" in g else 0
        out[(str(pair), str(dataset))] = ([by_rank.get(r, 0.0) for r in range(max(by_rank) + 1)], n)
    return out


def static_paths(tree: str, budget: int, params: str) -> list[RankPath] | None:
    """The shape's rank paths, or None for a policy that is not a static shape (adaptive, eagle2, ...)."""
    from ...trees.policies import StaticShape, make_policy  # heavy: torch, only where a vector was calibrated (collect)

    policy = make_policy(tree, int(budget), tree_params(params, strict=True))
    return policy.paths() if isinstance(policy, StaticShape) else None


def gap_to_optimum(summary: pd.DataFrame, vectors: pd.DataFrame | None) -> pd.DataFrame:
    """One row per greedy static-shape configuration whose pair and dataset have a vector."""
    from ...trees.sequoia import expected_accepted, optimal_paths  # heavy: torch (the tree policies), as static_paths'

    vecs = greedy_vectors(vectors)
    greedy = summary[(summary.temperature.astype(float) == 0) & (summary.budget > 0)]
    rows = []
    for r in greedy.sort_values(["pair", "dataset", "budget", "config_hash"]).to_dict("records"):
        vec = vecs.get((_pair_key(r.get("pair_id"), r["pair"]), str(r["dataset"]))) or vecs.get(
            (_pair_key(None, r["pair"]), str(r["dataset"]))
        )
        if not vec or (paths := static_paths(r["tree"], r["budget"], r["tree_params"])) is None:
            continue
        best = 1.0 + expected_accepted(optimal_paths(vec[0], int(r["budget"])), vec[0])
        pred = 1.0 + expected_accepted(paths, vec[0])
        tps = float(r["tokens_per_step"])
        rows.append(
            {
                **{c: r.get(c, np.nan) for c in COLUMNS[:11]},
                "predicted": pred,
                "optimum": best,
                "fraction": tps / best,
                "model_gap": pred - tps,
                "vector_n": vec[1],
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)
