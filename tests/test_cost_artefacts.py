"""The cost model's artefacts (#51 item 5), on hand-made tables: a cost-aware Sequoia labelled and
deduplicated by the tree it built, no ranked row costed on a derived basis, vectors from too few
or scored calibration prompts, the one-token forward slower than the two-token one, and the
prefill a live run's tokens/s include."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from specbench.report import analysis, measured, speedup, tables
from specbench.results.optional import filled
from test_speed_model import TREES, config, costs, steps, t_target

AWARE = json.dumps({"costs": "results/costs.csv", "cost_pair": "p", "cost_dtype": "float32", "depth": 12})


def summary_row(h, tree, budget, params="{}", **kw) -> dict:
    return dict(
        config_hash=h, pair="p", dataset="d", dtype="float32", max_new_tokens=16, tree=tree, tree_params=params,
        budget=budget, verify="greedy", temperature=0.0, engine="replay", n_prompts=32, **kw,
    )  # fmt: skip


def step_rows(h, sizes, accepted) -> list[dict]:
    return [
        dict(config_hash=h, prompt_id=f"q{i % 2}", step=i // 2, tree_size=n, tree_depth=2, accepted=a, emitted=a + 1)
        for i, (n, a) in enumerate(zip(sizes, accepted))
    ]


def test_a_cost_aware_sequoia_is_labelled_and_deduplicated_by_the_tree_it_built():
    acc = [1, 2, 0, 1]
    st = pd.DataFrame(step_rows("aware", [3] * 4, acc) + step_rows("bin", [3] * 4, acc))
    summ = pd.DataFrame([summary_row("aware", "sequoia", 64, AWARE), summary_row("bin", "binary", 3)])
    df = analysis.with_built(analysis.prepare(summ), st)
    r = df.set_index("config_hash").loc["aware"].to_dict()
    assert r["shape"] == "sequoia(cost-aware)" and r["tree_budget"] == 3 and r["built_depth"] == 2
    assert analysis.built_label(r) == "3 nodes, depth 2 (N ≤ 64)"
    assert analysis.built_label(df.set_index("config_hash").loc["bin"].to_dict()) is None
    idents = tables.identities(df, st)  # same steps at its built size: the same tree as binary N=3
    assert idents.set_index("config_hash").loc["aware", "same_as"] == "bin"
    ann = tables.annotate(df, st, pd.DataFrame(), pd.DataFrame(), idents).set_index("config_hash")
    assert ann.loc["aware", "same_as"] == "binary N=3"
    from specbench.report.hardware import label

    assert label({**r, "budget": 64}) == "sequoia(cost-aware) 3 nodes, depth 2 (N ≤ 64)"


def test_validate_never_picks_a_cost_aware_or_derived_row():
    from specbench.study.tools.validate import picks, speed_picks

    base = dict(pair="p", dataset="d", engine="replay", verify="greedy", temperature=0, max_new_tokens=128)
    rows = [
        dict(base, tree="sequoia", tree_params=AWARE, budget=64, projected=1.8, projected_lo=1.6, projected_hi=2.0,
             tokens_per_step=3.0, cost_basis="scored"),
        dict(base, tree="merged", tree_params="{}", budget=4, projected=1.7, projected_lo=1.5, projected_hi=1.9,
             tokens_per_step=3.1, cost_basis="derived"),
        dict(base, tree="chain", tree_params="{}", budget=3, projected=1.6, projected_lo=1.4, projected_hi=1.8,
             tokens_per_step=3.2, cost_basis="scored"),
    ]  # fmt: skip
    speed = pd.DataFrame(rows)
    assert speed_picks(speed, "p", "d") == [("chain", 3)]
    assert ("sequoia", 64) not in picks(speed, "p", "d", 3)


def test_no_ranked_row_is_costed_on_a_derived_basis():
    assert tables.claim(64, 0.0, None, "derived") == f"not ranked: {tables.DERIVED}"
    assert tables.claim(64, 0.0, None, "scored") == "ranked"
    assert tables.claim(64, 0.0, None, "lookup") == "ranked"  # an n-gram drafter: its measured lookups
    df = pd.DataFrame([config("ng", 4, tree="ngram_trie")])
    got = speedup.projected_speedup(df, steps("ng", [("a", 3, 3, 2, "", 0.004)]), costs(draft=False)).iloc[0]
    assert got.cost_basis == "lookup"
    got = speedup.projected_speedup(
        pd.DataFrame([config("h", 4)]), filled(steps("h", TREES).drop(columns="scored"), "steps.csv.gz"), costs()
    ).iloc[0]
    assert got.cost_basis == "derived"


def test_the_tldr_names_a_derived_row_it_could_not_rank():
    from specbench.report import tldr

    r = dict(bracket="interior", cost_basis="derived", claim=tables.claim(64, 0.0, None, "derived"))
    assert tldr.note(r) == f" ({r['claim']})"


def test_a_vector_from_too_few_or_scored_prompts_ranks_no_sequoia_row():
    summ = pd.DataFrame([summary_row("s", "sequoia", 4, json.dumps({"calib_dataset": "d", "calib_pair_id": "x"}))])
    df = analysis.prepare(summ.assign(pair_id="x"))
    sums = pd.DataFrame(
        {"steps": 1, "emitted": 1, "accepted": 0, "drafted": 1},
        index=pd.MultiIndex.from_tuples([("s", f"q{i}") for i in range(32)], names=["config_hash", "prompt_id"]),
    )

    def status(ids):
        vec = pd.DataFrame([dict(pair_id="x", dataset="d", prompt_ids=";".join(ids))])
        return tables.calibration(df, sums, vec).calibration.iloc[0]

    assert status([f"c{i}" for i in range(16)]) == "disjoint"
    few = status([f"c{i}" for i in range(4)])
    assert few == "disjoint, 4 prompts < 16"
    assert tables.claim(32, 0.0, tables.calibration_issue(few)) == "not ranked: acceptance vector from 4 prompts < 16"
    assert status(["q1"] + [f"c{i}" for i in range(16)]).startswith("in-sample (1 shared)")


def test_calibration_takes_sixteen_prompts_and_refuses_scored_ones(tmp_path):
    from types import SimpleNamespace

    from specbench.study.tools.calibrate import MIN_PROMPTS, calibration_prompts, check_disjoint, scored_count

    ids = [f"p{i}" for i in range(40)]
    ctx = SimpleNamespace(
        tokenizer=lambda: None,
        prompts=lambda tok, whole: ids,
        job=SimpleNamespace(dataset=SimpleNamespace(limit=4)),
    )
    assert calibration_prompts(ctx) == ids[-MIN_PROMPTS:] and MIN_PROMPTS == 16
    (tmp_path / "summary.csv").write_text("dataset,n_prompts\nd,24\nd,8\nother,40\n")
    assert scored_count(tmp_path / "summary.csv", "d") == 24 and scored_count(tmp_path / "none.csv", "d") == 0
    check_disjoint(ids, ids[-16:], 24)  # p24..p39: none scored
    with pytest.raises(ValueError, match="among the first 32 the study scores"):
        check_disjoint(ids, ids[-16:], 32)


def slow_one_token() -> pd.DataFrame:
    c = costs(draft=False)
    c.loc[c.n_tokens == 1, "seconds"] = 0.30  # slower than t(2) = 0.204
    return c.assign(repeats=7, seconds_min=c.seconds * 0.9, seconds_max=c.seconds * 1.1, device="cpu")


def test_the_method_states_the_slow_one_token_forward_and_what_it_explains():
    speed = pd.DataFrame([dict(pair="p", dtype="float32", projected=1.5, tokens_per_step=1.4)])
    text = speedup.one_token(slow_one_token(), speed)
    assert "t(1) = 0.300 s (7 repeats, 0.270–0.330) against 0.204 s" in text
    assert "at KV 128 and 0.300 s" in text
    assert "that is why 1 projections (p) exceed their own tokens per step (by up to 7%)" in text
    assert "python -m specbench.study.tools.costs pair=p dtype=float32 +costs_repeats=21" in text
    assert speedup.one_token(costs(draft=False).assign(seconds_min=0, seconds_max=1), speed) == ""


def test_a_live_rows_error_counts_the_prefill_its_baseline_measured():
    """Plain run 'b': its first step per prompt took 1.0 s more than the later ones (0.2 s): 1.0 s of
    prefill per prompt, on both sides; no draft curve, so no draft prefill."""
    base = pd.DataFrame(
        [dict(config_hash="b", prompt_id=p, step=i, verify_s=1.2 if i == 0 else 0.2) for p in "xy" for i in range(4)]
    )
    out = pd.DataFrame([dict(config("h", 4, engine="live"), new_tokens=32, projected=1.5, baseline_hash="b")])
    got = speedup.with_prefill(out, base, costs(draft=False)).iloc[0]
    plain = 32 * t_target(1)
    assert got.prefill_s == pytest.approx(1.0)
    assert got.projected_request == pytest.approx((2 + plain) / (2 + plain / 1.5))
    with_draft = speedup.with_prefill(out, base, costs()).iloc[0]  # the draft's prefill: ratio of t(128)s
    ratio = np.interp(128, range(1, 20), [0.05 + 0.01 * n for n in range(1, 20)]) / t_target(19)
    assert with_draft.projected_request == pytest.approx((2 + plain) / (2 * (1 + ratio) + plain / 1.5))


def test_the_error_sentence_gives_both_errors():
    rows = pd.DataFrame(
        [
            dict(batch_size=1, error=0.05, error_decode=0.20, prefill_s=0.8),
            dict(batch_size=1, error=-0.10, error_decode=0.10, prefill_s=0.6),
            dict(batch_size=8, error=np.nan, error_decode=np.nan, prefill_s=np.nan),
        ]
    )
    text = measured.error_sentence(rows)
    assert "(0.60–0.80 s of target forward per prompt" in text
    assert "median absolute error 8%, worst -10%, over 2 configurations" in text
    assert (
        "on decoding alone (prefill left out, as the projections in the tables are) median absolute error 15%, worst +20%"
        in text
    )


def test_every_merged_step_records_what_its_drafter_scored(tiny_draft, tiny_target, tiny_tokenizer):
    from conftest import decode_one
    from specbench.drafting.drafters import ModelDrafter
    from specbench.drafting.merged import MergedDrafter
    from specbench.trees.policies import make_policy

    prompt = tiny_tokenizer.encode("def add(a, b): return a + b\ndef add(a, b):")
    for budget in (1, 4, 8):
        for shape in ("chain", "binary"):
            policy = make_policy("merged", budget, {"shape": shape, "ngram_share": 0.5})
            recs, _ = decode_one(MergedDrafter(ModelDrafter(tiny_draft, 1.0)), tiny_target, prompt, policy, 16)
            assert recs and all(r.scored for r in recs), (budget, shape)
            table = pd.DataFrame([dict(vars(r), config_hash="m") for r in recs])
            assert not costmodel_counts(table).derived


def costmodel_counts(table: pd.DataFrame):
    from specbench.report import costmodel

    return costmodel.counts(table.assign(scored=table.scored.replace("", np.nan)))


def test_a_derived_basis_unranks_a_projection_never_a_measurement():
    summ = pd.DataFrame([summary_row("live", "chain", 4), summary_row("proj", "chain", 5)])
    df = analysis.prepare(summ)
    speed = pd.DataFrame(
        [
            dict(config_hash="live", measured=1.1, measured_hash="live", projected=1.0, cost_basis="derived"),
            dict(config_hash="proj", measured=np.nan, measured_hash="", projected=1.2, cost_basis="derived"),
        ]
    )
    ann = tables.annotate(df, None, speed, pd.DataFrame(), pd.DataFrame()).set_index("config_hash")
    assert ann.loc["live", "claim"] == "ranked"
    assert ann.loc["proj", "claim"] == f"not ranked: {tables.DERIVED}"


def test_another_machines_cost_points_state_their_repeats_and_spread():
    """The TL;DR's GPU bullet says how each cost point was timed (item 7): its repeats and the spread of
    its repeats (interquartile range over median), from results/costs.csv's own columns."""
    from specbench.report import tldr

    c = pd.DataFrame(
        dict(device=["cuda"] * 3 + ["cpu"], dtype="bfloat16", repeats=11, seconds=[0.02, 0.03, 0.02, 0.2],
             seconds_q25=[0.019, 0.02, 0.02, 0.19], seconds_q75=[0.021, 0.035, 0.026, 0.21])
    )  # fmt: skip
    got = tldr.repeat_spread(c, "cuda", {"bfloat16"})
    assert got == "cost points of 11 repeats each, IQR a median 30% of the median (up to 50%)"
    assert tldr.repeat_spread(c, "cuda", {"float32"}) == "each cost point timed once"  # no such rows
