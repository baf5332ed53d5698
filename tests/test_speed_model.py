"""The per-step cost model (report.costmodel, report.speedup): each step charged its own tree.

Hand-made steps tables and cost curves, so every expected number is arithmetic in the test.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from specbench.report import speedup
from specbench.report.tables import bracket
from specbench.results import costcurve
from specbench.results.costcurve import kv_weights
from specbench.results.optional import filled


def t_draft(n):
    return 0.05 + 0.01 * n


def t_target(n):
    return 0.20 + 0.002 * n


def costs(pair="p", draft=True, repeats=7, noise=0.0) -> pd.DataFrame:
    rows = []
    rng = np.random.default_rng(1)
    for role, f in (("draft", t_draft), ("target", t_target)):
        if role == "draft" and not draft:
            continue
        for kv in (128, 512):
            for n in range(1, 20):
                reps = f(n) * (1 + noise * rng.standard_normal(repeats))
                rows.append(
                    dict(
                        role=role,
                        pair=pair,
                        dtype="float32",
                        n_tokens=n,
                        kv_len=kv,
                        repeats=repeats,
                        seconds=float(np.median(reps)),
                        samples=" ".join(f"{x:.9g}" for x in reps),
                    )
                )
    return pd.DataFrame(rows)


def config(h, budget, tree="chain", engine="replay", **kw) -> dict:
    return dict(
        config_hash=h,
        pair="p",
        dataset="d",
        dtype="float32",
        tree=tree,
        tree_params="{}",
        budget=budget,
        verify="greedy",
        temperature=0.0,
        engine=engine,
        batch_size=1,
        n_prompts=2,
        max_new_tokens=16,
        tokens_per_step=0.0,
        **kw,
    )


def steps(h, rows) -> pd.DataFrame:
    """rows: (prompt, tree_size, tree_depth, emitted, scored, draft_s)."""
    return pd.DataFrame(
        [
            dict(
                config_hash=h, prompt_id=p, tree_size=n, tree_depth=d, emitted=e, scored=sc, draft_s=ds, verify_s=np.nan
            )
            for p, n, d, e, sc, ds in rows
        ]
    )


TREES = [  # a chain of 3 (root forward + 2 expansions), then a 5-node tree (2 pending tokens, 3 nodes)
    ("a", 3, 3, 2, "1.1.1", np.nan),
    ("b", 5, 2, 4, "2.3", np.nan),
]


def by_hand(trees) -> float:
    emitted = sum(e for _, _, _, e, _, _ in trees)
    cost = sum(sum(t_draft(int(k)) for k in sc.split(".")) + t_target(n + 1) for _, n, _, _, sc, _ in trees)
    return emitted * t_target(1) / cost


def test_each_step_is_charged_the_forwards_of_its_own_tree():
    df = pd.DataFrame([config("h", 4)])
    got = speedup.projected_speedup(df, steps("h", TREES), costs()).iloc[0]
    assert got.projected == pytest.approx(by_hand(TREES))
    assert got.cost_basis == "scored"
    assert got.draft_s_step_model == pytest.approx((3 * t_draft(1) + t_draft(2) + t_draft(3)) / 2)
    assert got.verify_s_step_model == pytest.approx((t_target(4) + t_target(6)) / 2)
    # exact curves: every resample is the same, and prompts are the only spread
    assert got.projected_lo <= got.projected <= got.projected_hi


def test_the_budget_is_never_charged_only_the_trees():
    """An adaptive policy at budget 32 whose trees were small costs what its trees cost."""
    df = pd.DataFrame([config("small", 4), config("big", 32, tree="adaptive_chain")])
    st = pd.concat([steps("small", TREES), steps("big", TREES)])
    got = speedup.projected_speedup(df, st, costs()).set_index("config_hash").projected
    assert got["big"] == pytest.approx(got["small"]) == pytest.approx(by_hand(TREES))


def test_a_drafter_without_a_model_is_charged_its_measured_lookup():
    trees = [("a", 3, 3, 2, "", 0.004), ("b", 5, 2, 4, "", 0.006)]
    df = pd.DataFrame([config("ng", 4, tree="ngram_trie")])
    got = speedup.projected_speedup(df, steps("ng", trees), costs(draft=False)).iloc[0]
    want = 6 * t_target(1) / (0.010 + t_target(4) + t_target(6))
    assert got.projected == pytest.approx(want)


def test_steps_without_scored_are_charged_a_derived_frontier_and_say_so():
    st = filled(steps("h", TREES).drop(columns="scored"), "steps.csv.gz")  # an older steps.csv.gz, as read
    got = speedup.projected_speedup(pd.DataFrame([config("h", 4)]), st, costs()).iloc[0]
    derived = [("a", 3, 3, 2, "1.1.1", 0), ("b", 5, 2, 4, "1.3", 0)]  # depth forwards of ceil(N/D)
    assert got.cost_basis == "derived" and got.projected == pytest.approx(by_hand(derived))


def test_the_interval_carries_the_cost_repeats_spread():
    df = pd.DataFrame([config("h", 4)])
    many = [(f"p{i}", n, d, e, sc, ds) for i in range(8) for _, n, d, e, sc, ds in TREES]
    exact = speedup.projected_speedup(df, steps("h", many), costs()).iloc[0]
    noisy = speedup.projected_speedup(df, steps("h", many), costs(noise=0.2)).iloc[0]
    # every prompt alike: with exact costs the interval is the point; noisy repeats widen it
    assert exact.projected_hi - exact.projected_lo == pytest.approx(0, abs=1e-12)
    assert noisy.projected_hi - noisy.projected_lo > 0.01
    assert noisy.projected_lo <= noisy.projected <= noisy.projected_hi


def test_a_curves_draws_are_the_medians_of_each_points_own_resamples():
    """``Curve.draws`` (medians taken at once) equals drawing each point's resample in turn and
    taking its median, on the same random stream: points with 7, 4 and 1 repeats, two KV lengths."""
    rng = np.random.default_rng(3)
    samples = tuple((rng.random(n), rng.random(m)) for n, m in [(7, 7), (4, 7), (1, 4)])
    curve = costcurve.Curve(np.array([1.0, 2.0, 4.0]), samples, (0.25, 0.75))
    stream = np.random.default_rng(costcurve.SEED)

    def resampled() -> list[float]:  # each point's resample in turn, its median, weighted by KV length
        return [
            sum(w * float(np.median(stream.choice(x, len(x)))) for w, x in zip(curve.weights, row)) for row in samples
        ]

    by_point = np.stack([curve.values()] + [resampled() for _ in range(50)])
    assert np.array_equal(curve.draws(50), by_point)


def test_costs_are_never_another_pairs_or_dtypes():
    df = pd.DataFrame([config("h", 4)])
    assert speedup.projected_speedup(df, steps("h", TREES), costs(pair="other")).empty
    bf = costs().assign(dtype="bfloat16")
    assert speedup.projected_speedup(df, steps("h", TREES), bf).empty


def test_a_replayed_configuration_is_ranked_by_its_live_twins_measurement():
    """The live batch-1 run of the same tree, pair, data and rule measures the replayed row's
    speed; the projection's error is the live row's own (its own steps against its own clock)."""
    rep = config("rep", 4, tokens_per_s=np.nan)
    live = config("live", 4, engine="live", tokens_per_s=3.0)
    base = config("base", 0, tree="none", engine="live", tokens_per_s=2.0)
    df = pd.DataFrame([rep, live, base]).assign(mode="greedy", shape="chain", lossless=True)
    st = filled(pd.concat([steps("rep", TREES), steps("live", TREES)]), "steps.csv.gz")  # as the report reads it
    table = speedup.speedup_table(df, df, st, costs()).set_index("config_hash")
    assert table.loc["live", "measured"] == pytest.approx(1.5)
    assert table.loc["rep", "measured"] == pytest.approx(1.5) and table.loc["rep", "measured_hash"] == "live"
    assert table.loc["live", "error"] == pytest.approx(by_hand(TREES) / 1.5 - 1)
    assert np.isnan(table.loc["rep", "error"])
    out = speedup.speedup_csv(table.reset_index())
    assert list(out.columns) == speedup.SPEEDUP_COLUMNS and json.loads(out.tree_params.iloc[0]) == {}


def test_a_best_budget_at_the_edge_of_the_grid_is_no_optimum():
    assert bracket(4, [1, 2, 4, 8]) == "interior"
    assert bracket(1, [1, 2, 4]) == "smallest admitted"
    assert bracket(4, [4, 8, 16]).startswith("edge: smallest tried")
    assert bracket(16, [4, 8, 16]).startswith("edge: largest tried")


def test_kv_weights_interpolate_between_the_measured_lengths():
    assert kv_weights([128, 512]) == pytest.approx({128: 2 / 3, 512: 1 / 3})
    assert kv_weights([256]) == {256: 1.0} and kv_weights([512, 1024]) == {512: 1.0}


VEC = [0.6, 0.15, 0.06, 0.03]


def test_sequoia_hardware_aware_size_maximises_tokens_per_second():
    from specbench.trees.sequoia import draft_forwards, expected_accepted, fastest_paths, optimal_paths

    def rate(paths):
        return (1 + expected_accepted(paths, VEC)) / (
            sum(t_draft(k) for k in draft_forwards(paths)) + t_target(len(paths) + 1)
        )

    got = fastest_paths(VEC, 16, 5, t_draft, t_target)
    brute = max(rate(optimal_paths(VEC, n, d)) for n in range(1, 17) for d in range(1, min(n, 5) + 1))
    assert rate(got) == pytest.approx(brute)
    # verification for free and drafting for free: the largest, deepest tree is the fastest
    assert sorted(fastest_paths(VEC, 16, 5, lambda n: 0.0, lambda n: 1.0)) == sorted(optimal_paths(VEC, 16, 5))
    # each verified token costs a forward: one draft token is all that pays
    assert fastest_paths(VEC, 16, 5, lambda n: 0.0, lambda n: float(n)) == [(0,)]
    assert draft_forwards([(0,), (1,), (0, 0), (0, 1), (0, 0, 0)]) == [1, 1, 1]


def test_sequoia_reads_its_cost_curves_from_a_costs_csv(tmp_path):
    from specbench.trees.policies import make_policy
    from specbench.trees.sequoia import fastest_paths

    path = tmp_path / "costs.csv"
    costs().to_csv(path, index=False)
    params = {"vector": VEC, "depth": 5, "costs": str(path), "cost_pair": "p", "cost_dtype": "float32"}
    got = make_policy("sequoia", 16, params).paths()
    assert sorted(map(tuple, got)) == sorted(fastest_paths(VEC, 16, 5, t_draft, t_target))
    with pytest.raises(ValueError, match="no draft costs of pair q"):
        make_policy("sequoia", 16, {**params, "cost_pair": "q"}).paths()


def test_replay_records_the_draft_forwards_live_runs():
    """A chain of 3: the root's forward then one per expanded depth; after a step that accepted
    the whole chain, its leaf (never forwarded) goes with the bonus token into the next root forward."""
    from specbench.engine.replay import replay_prompt
    from specbench.trees.policies import make_policy

    recs = replay_prompt("p", [0, 0, 0, 0, 5, 0, 1, 0], make_policy("chain", 3, {}))
    assert [r.accepted for r in recs] == [3, 0, 1, 1]  # the last step is cut by the length limit
    assert [r.scored for r in recs] == ["1.1.1", "2.1.1", "1.1.1", "1.1.1"]


def test_validate_picks_each_static_shapes_best_and_the_overall_top(tmp_path):
    from specbench.study.tools.validate import main

    rows = [
        dict(pair="p", dataset="d", engine="replay", verify="greedy", temperature=0, tree=t, budget=b,
             projected=s, max_new_tokens=128)
        for t, b, s in [("chain", 2, 1.3), ("chain", 4, 1.2), ("binary", 4, 1.1), ("binary", 8, 1.25),
                        ("eagle2", 16, 1.4), ("chain", 3, 1.0)]
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(tmp_path / "speedup.csv", index=False)
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--speedup", str(tmp_path / "speedup.csv"), "--pairs", "p", "--datasets", "d", "--top", "1"]) == 0
    assert out.getvalue().split("\n")[:4] == [
        "pair=p dataset=d tree=none",
        "pair=p dataset=d tree=eagle2 tree.budget=16",
        "pair=p dataset=d tree=binary tree.budget=8",
        "pair=p dataset=d tree=chain tree.budget=2",
    ]
    assert main(["--speedup", str(tmp_path / "nope.csv")]) == 2


def test_the_projection_reads_every_draw_at_once_as_it_would_one_by_one():
    """``costmodel.projection`` reads all of a curve's draws in one product (``Curve.weights_at``); it
    equals reading each draw in turn with ``Curve.at`` (sizes between, at and beyond the measured ones,
    a lookup drafter and a model drafter), on the same prompt resamples."""
    from specbench.report import costmodel

    rng = np.random.default_rng(5)
    sizes = np.array([1.0, 2.0, 4.0, 8.0, 16.0])

    def curve(scale, beyond=False):
        c = costcurve.Curve(sizes, tuple((scale * (1 + rng.random(5)) * n,) for n in sizes), (1.0,), beyond)
        return c, c.draws(60)

    c = costmodel.Counts(
        emitted=rng.integers(5, 30, 6).astype(float),
        draft_sizes=np.array([1, 3, 5]),
        draft=rng.integers(0, 9, (6, 3)).astype(float),
        verify_sizes=np.array([1, 5, 16, 24]),
        verify=rng.integers(0, 9, (6, 4)).astype(float),
        lookup=rng.random(6),
        steps=np.full(6, 20.0),
        derived=False,
    )

    def one_by_one(draft, target):  # the loop the product replaced: each draw's curve read by Curve.at
        sums = []
        for b in range(len(target[1])):
            v = c.verify @ target[0].at(c.verify_sizes, target[1][b])
            d = c.lookup if draft is None else c.draft @ draft[0].at(c.draft_sizes, draft[1][b])
            sums.append((d + v, float(target[0].at(1, target[1][b]))))
        stream = np.random.default_rng(costcurve.SEED)
        reps = []
        for total, base in sums[1:]:
            w = np.bincount(stream.integers(0, 6, 6), minlength=6)
            reps.append(w @ c.emitted * base / (w @ total))
        return c.emitted.sum() * sums[0][1] / sums[0][0].sum(), *np.percentile(reps, [2.5, 97.5])

    for draft, target in [(curve(0.01), curve(0.1)), (None, curve(0.1, beyond=True))]:
        got = costmodel.projection(c, draft, target)
        assert [got["projected"], got["projected_lo"], got["projected_hi"]] == pytest.approx(
            one_by_one(draft, target), rel=1e-12
        )
        assert got["projected_lo"] < got["projected"] < got["projected_hi"]
