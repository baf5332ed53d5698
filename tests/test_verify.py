"""Verification modes (specbench/verify/modes.py) and sampling helpers (specbench/core/sampling.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf
from scipy.stats import chisquare

from specbench.core.registry import UnknownName
from specbench.core.sampling import CHILD_RULES, TREE_CHILD_RULES, choose_children, probs
from specbench.core.tree import DraftTree
from specbench.results.files import read_csv
from specbench.verify.modes import MODES, Verdict, get_mode
from specbench.verify.modespec import check_compatible, modes_for

LOSSLESS = ["greedy", "speculative", "mss", "sequoia", "naive", "block", "traversal", "gbv"]
ALL = LOSSLESS + ["typical", "ratio", "conservative", "epsilon", "hsd"]
CHAIN_ONLY = ("speculative", "block", "hsd")


# --------------------------------------------------------------------------
# a tiny synthetic "model pair": next-token tables indexed by the last token
# --------------------------------------------------------------------------
def draft_tree(root: int, expansion, how: str, P: torch.Tensor, Q: torch.Tensor, rng):
    """Grow a breadth-first tree under ``expansion`` (children per level) from the
    draft table Q with the mode's child rule; return (tree, p rows, q rows)."""
    parents, tokens, ranks, level = [-1], [root], [0], [0]
    for k in expansion:
        nxt = []
        for node in level:
            toks, rks = choose_children(Q[tokens[node]], k, how, rng)
            for t, r in zip(toks, rks):
                parents.append(node)
                tokens.append(t)
                ranks.append(r)
                nxt.append(len(tokens) - 1)
        level = nxt
    tok = torch.tensor(tokens)
    q = Q[tok].clone()
    q[[i for i in range(len(parents)) if i not in parents]] = 0.0
    return DraftTree(parents, tok, ranks, q, child_rule=how), P[tok], q


def two_token_counts(mode: str, expansion, P, Q, n: int, seed: int) -> torch.Tensor:
    """Empirical distribution of the first two emitted tokens after context token 0."""
    rng = torch.Generator().manual_seed(seed)
    spec = get_mode(mode)
    params = spec.params({"temperature": 1.0})
    v = P.shape[0]
    counts = torch.zeros(v * v)
    for _ in range(n):
        out: list[int] = []
        while len(out) < 2:
            tree, p, q = draft_tree(out[-1] if out else 0, expansion, spec.child_rule, P, Q, rng)
            verdict = spec.verdict(tree, p, q, rng, params)
            out += [int(tree.tokens[i]) for i in verdict.path] + [verdict.next_token]
        counts[out[0] * v + out[1]] += 1
    return counts


def target_two_token(P: torch.Tensor) -> torch.Tensor:
    return (P[0][:, None] * P).flatten()


def tables(seed: int, v: int = 4):
    g = torch.Generator().manual_seed(seed)
    P = torch.softmax(0.8 * torch.randn(v, v, generator=g), -1)
    Q = torch.softmax(1.5 * torch.randn(v, v, generator=g), -1)
    Q[0] = torch.tensor([0.7, 0.3, 0.0, 0.0])  # zero draft mass: exercises the fallbacks
    return P, Q


@pytest.mark.parametrize("mode,expansion", [("speculative", [1, 1]), ("mss", [3, 1]), ("sequoia", [3, 1])])
def test_chi2_lossless_modes_reproduce_target(mode, expansion):
    P, Q = tables(0)
    n = 2500
    counts = two_token_counts(mode, expansion, P, Q, n, seed=11)
    assert chisquare(counts, target_two_token(P) * n).pvalue > 0.01


def test_chi2_rejects_ratio():
    """The draft's top token 0 has q = 0.4 <= p = 0.5, so `ratio` always accepts it."""
    P, Q = tables(0)
    P[0] = torch.tensor([0.5, 0.2, 0.2, 0.1])
    Q[0] = torch.tensor([0.4, 0.3, 0.2, 0.1])
    n = 2500
    counts = two_token_counts("ratio", [1, 1], P, Q, n, seed=11)
    assert chisquare(counts, target_two_token(P) * n).pvalue < 1e-6


@pytest.mark.parametrize("mode", ["speculative", "mss", "sequoia", "block", "traversal"])
def test_chain_with_draft_equal_target_accepts_everything(mode):
    g = torch.Generator().manual_seed(5)
    P = torch.softmax(torch.randn(50, 50, generator=g), -1)
    for seed in range(5):
        rng = torch.Generator().manual_seed(seed)
        spec = get_mode(mode)
        tree, p, q = draft_tree(3, [1] * 6, spec.child_rule, P, P, rng)
        verdict = spec.verdict(tree, p, q, rng, spec.params())
        assert verdict.path == [1, 2, 3, 4, 5, 6]


def test_greedy_unchanged():
    p = probs(torch.tensor([[0.0, 3, 1], [5, 0, 0], [0, 0, 2], [1, 0, 0]]), 0.0)
    tree = DraftTree([-1, 0, 0, 2], torch.tensor([0, 2, 1, 2]), [0, 0, 1, 0], None)
    spec = get_mode("greedy")
    assert spec.verdict(tree, p, None, torch.Generator(), spec.params()) == Verdict([2, 3], 0)


def test_unknown_mode_lists_valid_ones():
    with pytest.raises(UnknownName, match="Valid: .*mss.*sequoia.*Did you mean 'mss'"):
        get_mode("msss")


def test_chain_only_mode_on_branching_tree():
    q = torch.full((3, 4), 0.25)
    tree = DraftTree([-1, 0, 0], torch.tensor([0, 1, 2]), [0, 0, 1], q)
    with pytest.raises(ValueError, match="tree=chain"):
        get_mode("speculative").checked_verdict(tree, q, torch.Generator(), get_mode("speculative").params())
    assert get_mode("speculative").chain_only is True


def test_seeded_runs_are_reproducible():
    P, Q = tables(1)
    for mode in ALL[1:]:
        a = two_token_counts(mode, [1, 1] if mode in CHAIN_ONLY else [2, 1], P, Q, 20, seed=3)
        b = two_token_counts(mode, [1, 1] if mode in CHAIN_ONLY else [2, 1], P, Q, 20, seed=3)
        assert torch.equal(a, b), mode


def test_modes_need_q_or_say_so():
    tree = DraftTree([-1, 0], torch.tensor([0, 1]), [0, 0], None)
    p = torch.full((2, 3), 1 / 3)
    with pytest.raises(ValueError, match="needs the draft distributions"):
        get_mode("mss").checked_verdict(tree, p, torch.Generator(), get_mode("mss").params())
    naive = get_mode("naive")
    assert isinstance(naive.verdict(tree, p, None, torch.Generator(), naive.params()), Verdict)


def test_registry_meta_and_configs():
    assert set(MODES.names()) == set(ALL)
    for name in ALL:
        spec = get_mode(name)
        assert spec.name == name and spec.doc
        assert spec.child_rule in CHILD_RULES
        assert spec.lossless == (name in LOSSLESS)
        assert spec.chain_only == (name in CHAIN_ONLY)
        cfg = option(name)
        assert cfg.pop("name") == name and cfg.pop("paired_with") == []
        assert cfg == spec.params(), name  # the option shows exactly the spec's defaults
        for key in ("temperature", "draft_temperature", "top_p"):
            assert key in cfg, (name, key)
    assert option("greedy")["temperature"] == 0


def option(name: str) -> dict:
    """The config option ``verify=<name>`` as the mode's registration stored it (core.options)."""
    return OmegaConf.to_container(ConfigStore.instance().load(f"verify/{name}.yaml").node)


def test_params_merge_defaults_and_reject_unknown_keys():
    spec = get_mode("typical")
    assert spec.params({"name": "typical", "eps": 0.2, "delta": None}) == {
        "temperature": 1.0,
        "draft_temperature": 1.0,
        "top_p": 1.0,
        "eps": 0.2,
        "delta": 0.3,
    }
    assert spec.params(OmegaConf.create({"temperature": 0.5}))["temperature"] == 0.5
    with pytest.raises(ValueError, match="verify.factor: not a parameter of verify=typical"):
        spec.params({"factor": 2})
    with pytest.raises(TypeError):
        spec.defaults["eps"] = 1.0  # frozen


def test_compatibility_names_the_modes_that_fit():
    # hsd is lossy (as published), so, like the ratio rules, nothing refuses it on top-k trees
    assert set(modes_for("topk")) == {"greedy", "naive", "typical", "ratio", "conservative", "epsilon", "hsd"}
    assert set(modes_for("fixed")) == {"greedy", "naive", "typical"}
    assert "mss" in modes_for("sample") and "sequoia" not in modes_for("sample")
    assert "sequoia" in modes_for("sample_noreplace") and "mss" not in modes_for("sample_noreplace")
    for rule in ("sample", "sample_noreplace"):
        assert {"block", "traversal", "speculative", "gbv", "hsd"} <= set(modes_for(rule))
    with pytest.raises(
        ValueError,
        match="verify=mss is lossless only on .*sample.*'topk' trees; "
        "modes that fit: conservative, epsilon, greedy, hsd, naive",
    ):
        check_compatible(get_mode("mss"), "topk")
    with pytest.raises(ValueError, match="verify=ratio needs the draft distributions q"):
        check_compatible(get_mode("ratio"), "fixed")
    for name in ALL:
        spec = get_mode(name)
        check_compatible(spec, spec.child_rule)  # every mode fits its own child rule
        assert spec.lossless_for <= set(TREE_CHILD_RULES)
    with pytest.raises(ValueError, match="unknown child rule"):
        modes_for("beam")


# --------------------------------------------------------------------------
# sampling helpers
# --------------------------------------------------------------------------
def test_probs_temperature_and_top_p():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    assert torch.equal(probs(logits, 0.0), torch.tensor([[1.0, 0, 0, 0]]))
    full = probs(logits, 1.0)
    assert torch.allclose(full, torch.softmax(logits, -1))
    nucleus = probs(logits, 1.0, top_p=0.8)  # top two hold 0.64 + 0.24 >= 0.8
    assert (nucleus[0, 2:] == 0).all() and torch.isclose(nucleus.sum(), torch.tensor(1.0))
    assert torch.allclose(probs(logits, 0.5), torch.softmax(logits / 0.5, -1))
    with pytest.raises(ValueError, match="top_p"):
        probs(logits, 1.0, top_p=0.0)


def test_choose_children_rules():
    q = torch.tensor([0.1, 0.6, 0.3, 0.0])
    rng = torch.Generator().manual_seed(0)
    assert choose_children(q, 2, "topk", rng) == ([1, 2], [0, 1])
    toks, ranks = choose_children(q, 8, "sample", rng)
    assert len(toks) == 8 and 3 not in toks
    toks, _ = choose_children(q, 4, "sample_noreplace", rng)
    assert sorted(toks) == [0, 1, 2, 3]  # the zero-mass token comes last, uniformly
    assert toks[-1] == 3
    with pytest.raises(ValueError, match="Valid: topk"):
        choose_children(q, 2, "beam", rng)


# --------------------------------------------------------------------------
# real pair (skipped unless the embedded Qwen models are installed)
#   flock /tmp/specbench-real.lock .venv/bin/python -m pytest -q -m real tests/test_verify.py
# --------------------------------------------------------------------------
def _real_installed() -> bool:
    try:
        from specbench.inputs.embedded import installed

        return installed()
    except ImportError:
        return False


@pytest.mark.real
@pytest.mark.skipif(not _real_installed(), reason="embedded models not installed (bash scripts/setup.sh)")
def test_real_mss_smoke(tmp_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    cmd = [
        sys.executable,
        "-m",
        "specbench.run",
        "verify=mss",
        "verify.temperature=1.0",
        "verify.draft_temperature=1.0",
        "tree=binary",
        "tree.budget=8",
        "dataset=smoke",  # a 13-token prompt: the 1.5B target's fp32 prefill of a HumanEval one is most of a run
        "dataset.limit=1",  # the CLI path; test_real_smoke checks the law through the API
        "max_new_tokens=12",
        "dtype=float32",
        "engine=live",
        "progress=false",
        f"out_root={tmp_path}",
    ]
    subprocess.run(cmd, cwd=root, check=True)
    steps = read_csv(next(tmp_path.rglob("steps.csv")))
    summary = read_csv(next(tmp_path.rglob("summary.csv")))
    assert steps.first_token_tv.max() < 1e-6
    assert 0 < summary.acceptance_rate.iloc[0] <= 1
