"""Paired verdicts: several modes verify the same drafted trees (engine.loop.paired_generators,
verify.paired_with), recorded as separate rows sharing a pair_key."""

from __future__ import annotations

import glob

import pytest
import torch

from specbench.drafting.drafters import ModelDrafter
from specbench.engine.loop import Decoding, decode_prompt, paired_generators
from specbench.engine.verifiers import LiveVerifier
from specbench.results.files import STEPS_FILE, read_csv
from specbench.study.job import checks, jobspec
from specbench.trees.policies import make_policy
from specbench.verify.modes import get_mode
from test_hydra import job_args, specbench

HOT = {"temperature": 1.0, "draft_temperature": 1.0}


def run(draft, target, prompt, tree, budget, mode, paired=(), seed=3, n=20):
    spec = get_mode(mode)
    params = spec.params(HOT)
    pairs = tuple((get_mode(m), get_mode(m).params(HOT)) for m in paired)
    res = decode_prompt(
        "p",
        prompt,
        ModelDrafter(draft, 1.0),
        LiveVerifier(target, 1.0, 1.0),
        make_policy(tree, budget),
        Decoding(spec, params, n, frozenset(), paired=pairs),
        torch.Generator().manual_seed(seed),
    )
    return res


def strip(records):
    return [(r.step, r.tree_size, r.accepted, r.emitted, r.accept_path, r.path_children) for r in records]


@pytest.mark.parametrize(
    "tree,budget,mode,other", [("chain", 4, "speculative", "block"), ("binary", 6, "mss", "traversal")]
)
def test_paired_modes_see_the_primary_trees(tiny_draft, tiny_target, tiny_tokenizer, tree, budget, mode, other):
    prompt = tiny_tokenizer.encode("def add(a, b):")
    alone = run(tiny_draft, tiny_target, prompt, tree, budget, mode)
    res = run(tiny_draft, tiny_target, prompt, tree, budget, mode, paired=(other, mode, other))
    # pairing never changes the decode (paired generators are apart from the drafting stream)
    assert res.tokens == alone.tokens and strip(res.records) == strip(alone.records)
    assert len(res.paired) == 3
    first, own, again = res.paired
    for recs in res.paired:
        assert [(r.step, r.tree_size, r.tree_depth) for r in recs] == [
            (r.step, r.tree_size, r.tree_depth) for r in res.records
        ]
        assert [r.path_children.split(".")[0] for r in recs] == [r.path_children.split(".")[0] for r in res.records]
    assert strip(first) == strip(again)  # common random numbers across paired modes
    # (block / traversal beat the token-level rule in expectation over the draft's draws, not on
    # every drawn tree: tests/test_block_traversal.py checks that by enumeration)
    for a, b in zip(own, res.records):  # the primary's own rule, re-verified: same law
        assert a.expected_accepted == pytest.approx(b.expected_accepted, abs=1e-9)
        assert b.first_token_tv < 1e-6 and a.first_token_tv < 1e-6


def test_paired_generators_are_common_and_apart_from_drafting():
    rng = torch.Generator().manual_seed(42)
    a, b = paired_generators(rng, 2)
    x, y = torch.rand(5, generator=a), torch.rand(5, generator=b)
    assert torch.equal(x, y)
    assert not torch.equal(x, torch.rand(5, generator=torch.Generator().manual_seed(42)))


def spec(**over):
    cfg = {
        "pair": {
            "name": "local",
            "draft": {"source": "local", "path": "d"},
            "target": {"source": "local", "path": "t"},
        },
        "tree": {"name": "chain", "budget": 4},
        "verify": {"name": "speculative"},
        "dataset": {"name": "smoke"},
        "engine": "auto",
    }
    for k, v in over.items():
        cfg[k] = {**cfg[k], **v} if isinstance(v, dict) else v
    return jobspec.from_config(cfg)


def test_validation_names_the_modes_that_fit():
    job = spec(verify={"paired_with": ["block", "speculative"]})
    assert job.verify.paired_with == ("block", "speculative")
    assert checks.validate(job)[0] == "live"  # auto never replays a paired job
    assert "paired_with" in job.to_dict()["verify"] and "paired_with" not in spec().to_dict()["verify"]
    for over, needle in (
        (
            {"tree": {"name": "binary"}, "verify": {"name": "mss", "paired_with": ["block"]}},
            "modes that fit: gbv, mss, traversal",
        ),
        ({"verify": {"name": "greedy", "paired_with": ["mss"]}}, "modes that fit: conservative"),
        ({"verify": {"paired_with": ["nope"]}}, "Valid:"),
    ):
        with pytest.raises(jobspec.ConfigError) as e:
            checks.validate(spec(**over))
        assert "verify.paired_with" in str(e.value) and needle in str(e.value)
        assert "\n" not in str(e.value)
    with pytest.raises(jobspec.ConfigError, match="distinct"):
        spec(verify={"paired_with": ["block", "block"]})


def test_paired_job_rows_share_prompts_seeds_and_trees(tiny_pair_dirs, tmp_path):
    out = tmp_path / "outputs"
    r = specbench(
        *job_args(
            tiny_pair_dirs,
            out,
            "tree=chain",
            "tree.budget=3",
            "verify=speculative",
            "verify.paired_with=[block]",
            "engine=auto",
        )
    )
    assert r.returncode == 0, r.stderr[-3000:]
    res = tmp_path / "results"
    assert specbench("specbench.collect", str(out), "--out", str(res)).returncode == 0
    summary, steps = read_csv(res / "summary.csv"), read_csv(res / STEPS_FILE)
    assert sorted(summary.verify) == ["block", "speculative"] and summary.config_hash.is_unique
    decode = summary[summary.pair_role == "decode"].iloc[0]
    assert (summary.pair_key == decode.config_hash).all()
    assert summary.seed.nunique() == 1 and (summary.engine == "live").all()
    by = {v: g.sort_values(["prompt_id", "step"]) for v, g in steps.groupby("verify")}
    for col in ("prompt_id", "step", "tree_size", "tree_depth"):
        assert by["block"][col].tolist() == by["speculative"][col].tolist()
    assert len(glob.glob(str(out / "**" / "paired" / "block" / "summary.csv"), recursive=True)) == 1


def test_sequence_level_rules_pair_with_either_baseline_on_its_own_trees():
    """traversal drafts like the decode it rides on: with sequoia (without replacement) and with
    mss in either order (with replacement); mss never verifies Sequoia's trees."""
    binary = {"name": "binary", "budget": 6}
    for verify in (
        {"name": "sequoia", "paired_with": ["sequoia", "traversal"]},
        {"name": "mss", "order": "storage", "paired_with": ["mss", "traversal"]},
        {"name": "mss", "order": "random", "paired_with": ["traversal"]},
        {"name": "traversal", "children": "sample_noreplace", "paired_with": ["sequoia"]},
    ):
        job = spec(tree=binary, verify=verify)
        mode = checks.validate(job)[1]
        assert checks.paired_params(job.verify, "traversal")["children"] == mode.child_rule
        if verify["name"] == "mss":
            assert checks.paired_params(job.verify, "mss")["order"] == verify["order"]
    with pytest.raises(jobspec.ConfigError, match="modes that fit: .*sequoia, traversal"):
        checks.validate(spec(tree=binary, verify={"name": "sequoia", "paired_with": ["mss"]}))
    with pytest.raises(jobspec.ConfigError, match="verify.children"):
        spec(tree=binary, verify={"name": "traversal", "children": "topk"})
