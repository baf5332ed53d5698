"""results/acceptance_matrix.csv and results/gap_to_optimum.csv (results.acceptance, study.job.optimum), and
the identity mean accepted per step = sum over nodes of P(node accepted)."""

from __future__ import annotations

import glob

import numpy as np
import pandas as pd
import pytest
import torch

from specbench.results.acceptance import identity_gap
from specbench.results.files import STEPS_FILE, read_csv
from specbench.study.job.optimum import gap_to_optimum
from specbench.trees.sequoia import expected_accepted, optimal_paths
from specbench.verify import distshift
from specbench.verify.modes import get_mode
from test_block_traversal import random_tables
from test_hydra import job_args, specbench
from test_verify import draft_tree


@pytest.fixture(scope="module")
def sweep(tiny_pair_dirs, tmp_path_factory):
    """A small tiny-model sweep (greedy, live and replay), collected."""
    tmp = tmp_path_factory.mktemp("acc")
    out, res = tmp / "outputs", tmp / "results"
    r = specbench(
        *job_args(tiny_pair_dirs, out, "-m", "tree=chain,binary,specinfer", "tree.budget=2,5", "engine=live,auto")
    )
    assert r.returncode == 0, r.stderr[-3000:]
    pair = read_csv(glob.glob(str(out / "**" / "summary.csv"), recursive=True)[0]).pair.iloc[0]
    pd.DataFrame(
        [
            dict(pair=pair, dataset="smoke", verify="greedy", temperature=0.0, rank=k, p_accept=p, n=99)
            for k, p in enumerate((0.6, 0.2, 0.1))
        ]
    ).to_csv(tmp / "vec.csv", index=False)
    res.mkdir()
    (res / "acceptance_vector.csv").write_text((tmp / "vec.csv").read_text())
    r = specbench("specbench.collect", str(out), "--out", str(res))
    assert r.returncode == 0, r.stderr[-2000:]
    return res


def test_identity_on_every_job_of_a_sweep(sweep):
    summary, steps = read_csv(sweep / "summary.csv"), read_csv(sweep / STEPS_FILE)
    matrix = read_csv(sweep / "acceptance_matrix.csv")
    assert len(summary) == 12 and set(summary.engine) == {"live", "replay"}
    gap = identity_gap(matrix, summary)
    accepted_somewhere = summary[summary.acceptance_length > 0].config_hash
    assert set(accepted_somewhere) <= set(gap.index)
    assert gap.abs().max() < 1e-5  # CSV rounding (%.6g) only
    # greedy: the exact law's reach is the accepted path, so sum over nodes of P(accepted) per step
    # (steps.expected_accepted = sum of distshift.path_law(...).reach) is the accepted count itself
    assert (steps.expected_accepted == steps.accepted).all()
    per_cfg = matrix[matrix.scope == "config"].groupby("config_hash").marginal.sum()
    exact = steps.groupby("config_hash").expected_accepted.mean()
    assert np.allclose(per_cfg, exact.reindex(per_cfg.index), atol=1e-5)
    cells = matrix.dropna(subset=["conditional"])
    assert len(cells) and (cells.accepted <= cells.offered).all() and cells.conditional.between(0, 1).all()
    # live and replay record the same children along the accepted path (same trees, same matrix)
    key = ["tree", "budget", "depth", "rank"]
    live = matrix[matrix.config_hash.isin(summary[summary.engine == "live"].config_hash)].set_index(key)
    rep = matrix[matrix.config_hash.isin(summary[summary.engine == "replay"].config_hash)].set_index(key)
    pd.testing.assert_frame_equal(live[["offered", "accepted"]].sort_index(), rep[["offered", "accepted"]].sort_index())
    pooled = matrix[matrix.scope == "pooled"]
    assert set(pooled.dataset) == {"smoke"} and pooled.accepted.sum() == steps.accepted.sum()


def test_gap_to_optimum_on_the_sweep(sweep):
    gap = read_csv(sweep / "gap_to_optimum.csv")
    vec = [0.6, 0.2, 0.1]
    assert len(gap) == 12  # every config is a static shape
    for r in gap.to_dict("records"):
        assert r["optimum"] == pytest.approx(1 + expected_accepted(optimal_paths(vec, r["budget"]), vec), abs=1e-5)
        assert r["predicted"] <= r["optimum"] + 1e-9
        assert r["fraction"] == pytest.approx(r["tokens_per_step"] / r["optimum"], rel=1e-4)
    chain = gap[(gap.tree == "chain") & (gap.budget == 2)].iloc[0]
    assert chain.predicted == pytest.approx(1 + 0.6 + 0.36, abs=1e-5)


def test_gap_skips_adaptive_and_unvectored_configs():
    summary = pd.DataFrame(
        [
            dict(
                pair="a",
                dataset="d",
                dtype="float32",
                config_hash=h,
                tree=t,
                tree_params="{}",
                budget=4,
                temperature=0.0,
                n_prompts=2,
                tokens_per_step=2.0,
                tokens_per_step_lo=1.5,
                tokens_per_step_hi=2.5,
            )
            for h, t in (("x", "chain"), ("y", "adaptive_chain"))
        ]
    )
    vec = pd.DataFrame([dict(pair="a", dataset="d", verify="greedy", temperature=0.0, rank=0, p_accept=0.5, n=9)])
    got = gap_to_optimum(summary, vec)
    assert list(got.config_hash) == ["x"] and got.optimum.iloc[0] == pytest.approx(1 + 0.5 + 0.25 + 0.125 + 0.0625)
    assert gap_to_optimum(summary.assign(dataset="other"), vec).empty


def test_gap_matches_vectors_by_pair_id_not_by_name():
    """Two pairs that share a name (two local pairs, or one pair in two dtypes) never share a vector."""
    row = dict(
        pair="local",
        dataset="d",
        dtype="float32",
        tree="chain",
        tree_params="{}",
        budget=2,
        temperature=0.0,
        n_prompts=2,
        tokens_per_step=2.0,
        tokens_per_step_lo=1.5,
        tokens_per_step_hi=2.5,
    )
    summary = pd.DataFrame([dict(row, config_hash="x", pair_id="A"), dict(row, config_hash="y", pair_id="B")])
    vec = pd.DataFrame(
        [dict(pair="local", pair_id="A", dataset="d", verify="greedy", temperature=0.0, rank=0, p_accept=0.5, n=9)]
    )
    got = gap_to_optimum(summary, vec)
    assert list(got.config_hash) == ["x"] and got.optimum.iloc[0] == pytest.approx(1.75)
    legacy = gap_to_optimum(summary, vec.drop(columns="pair_id"))  # a vector file without pair_id
    assert list(legacy.config_hash) == ["x", "y"]


@pytest.mark.parametrize(
    "mode,expansion,how",
    [
        ("mss", [2, 2], "sample"),
        ("traversal", [2, 1], "sample"),
        ("block", [1, 1, 1], "sample"),
        ("sequoia", [3, 1], "sample_noreplace"),
    ],
)
def test_mean_accepted_is_the_sum_of_node_reach(mode, expansion, how):
    """Sampling modes: per node, the empirical frequency of being accepted matches the exact law's
    reach (distshift.path_law), so mean accepted = sum over nodes of P(node accepted)."""
    P, Q = random_tables(7, v=4)
    g = torch.Generator().manual_seed(1)
    spec = get_mode(mode)
    params = spec.params({"temperature": 1.0})
    for _ in range(3):
        tree, p, q = draft_tree(0, expansion, how, P, Q, g)
        reach = np.array(distshift.path_law(spec, tree, p, q, params).reach)
        n, hits = 4000, np.zeros(len(reach))
        for _ in range(n):
            for node in spec.verdict(tree, p, q, g, params).path:
                hits[node] += 1
        se = np.sqrt(reach * (1 - reach) / n) + 1e-9
        assert (np.abs(hits[1:] / n - reach[1:]) <= 5 * se[1:] + 1e-3).all(), (hits / n, reach)
        total_se = np.sqrt(reach[1:].sum() * len(reach) / n)
        assert abs(hits.sum() / n - reach[1:].sum()) <= 5 * total_se
