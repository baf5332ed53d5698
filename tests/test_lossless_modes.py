"""Losslessness of every sampling mode on every child rule it accepts, from the mode's OWN
law (``distshift.path_end_law``: the accepted path and the token after it), by exact
enumeration of every drafted tree of a small Markov world (V = 3) and every verifier coin;
plus chi-square through the drafter's child selection (``sampling.choose_children``).

Also: the k = V no-replacement star, ``accept_prob`` on NaN, and the sibling-order and
child-rule parameters (``verify.order``, ``verify.children``)."""

from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare

from specbench.core.sampling import accept_prob
from specbench.core.tree import DraftTree
from specbench.verify import distshift
from specbench.verify.modes import get_mode
from specbench.verify.modespec import row_tags
from test_block_traversal import CHAIN3, TREE12, TREE21, drafted_trees, random_tables
from test_verify import draft_tree

UNBALANCED = [-1, 0, 0, 1, 1, 3]  # binary/16's pattern: the deep subtree under the rank-0 child
STAR3 = [-1, 0, 0, 0]
STORAGE, RANDOM = {"order": "storage"}, {"order": "random"}
NOREP = {"children": "sample_noreplace"}

# (mode, params, tree child rule): every mode on every random child rule it is lossless for
CASES = [
    ("mss", STORAGE, "sample"),
    ("mss", RANDOM, "sample"),
    ("sequoia", {}, "sample_noreplace"),
    ("traversal", {}, "sample"),
    ("traversal", NOREP, "sample_noreplace"),
    ("speculative", {}, "sample"),
    ("speculative", {}, "sample_noreplace"),
    ("block", {}, "sample"),
    ("block", NOREP, "sample_noreplace"),
    ("naive", {}, "sample"),
]


def markov_joint(P: torch.Tensor, root: int, m: int) -> torch.Tensor:
    """The target's law of the next m tokens after ``root`` (a [V]*m tensor)."""
    out = P[root]
    for _ in range(m - 1):
        out = out[..., None] * P[torch.arange(P.shape[0])].reshape(*([1] * (out.dim() - 1)), *P.shape)
    return out


def step_joint(mode: str, params: dict, parents, P, Q, rule: str, m: int) -> torch.Tensor:
    """Exact law of the first m emitted tokens: one step of ``mode`` (its own path law,
    over every drafted tree), then the target itself (a later step, if lossless)."""
    spec = get_mode(mode)
    prm = spec.params(params)
    v = P.shape[0]
    out = torch.zeros([v] * m, dtype=torch.float64)
    for w, tree, p, q in drafted_trees(parents, P, Q, rule):
        for node, end, nxt in distshift.path_end_law(spec, tree, p, q, prm):
            toks = [int(tree.tokens[n]) for n in _path(tree, node)]
            law = nxt.clone()
            for _ in range(m - len(toks) - 1):  # continue with the target (Markov)
                law = law[..., None] * P[torch.arange(v)].reshape(*([1] * (law.dim() - 1)), v, v)
            if len(toks) >= m:
                out[tuple(toks[:m])] += w * end
            else:
                out[tuple(toks)] += w * end * law
    return out


def _path(tree: DraftTree, v: int) -> list[int]:
    path = []
    while v > 0:
        path.append(v)
        v = tree.parents[v]
    return path[::-1]


@pytest.mark.parametrize("mode,params,rule", CASES)
def test_step_law_is_the_target_by_exact_enumeration(mode, params, rule):
    P, Q = random_tables(4)
    Q[0] = torch.tensor([0.75, 0.25, 0.0], dtype=torch.float64)  # a zero of q at the root
    shapes = [CHAIN3] if get_mode(mode).chain_only else [TREE21, TREE12, STAR3, UNBALANCED]
    for parents in shapes:
        m = max(distshift_depth(parents), 1) + 1
        got = step_joint(mode, params, parents, P, Q, rule, m)
        want = markov_joint(P, 0, m)
        assert float((got - want).abs().sum()) / 2 < 1e-12, (mode, params, rule, parents)


def distshift_depth(parents) -> int:
    return DraftTree(list(parents), torch.zeros(len(parents), dtype=torch.long), [0] * len(parents)).depth


def test_a_lossy_rule_fails_the_same_enumeration():
    """The check above has teeth: mss on Sequoia's trees (drawn without replacement) is
    caught, in either order (it is lossless on some worlds by accident, not on this one)."""
    P, Q = random_tables(1)
    for order in (STORAGE, RANDOM):
        got = step_joint("mss", order, STAR3, P, Q, "sample_noreplace", 2)
        assert float((got - markov_joint(P, 0, 2)).abs().sum()) / 2 > 1e-2, order


# --------------------------------------------------------------------------
# chi-square through the drafter's child selection
# --------------------------------------------------------------------------
def three_tokens(mode, params, expansion, P, Q, n, seed):
    spec = get_mode(mode, params)
    prm, rng, v = spec.params(params), torch.Generator().manual_seed(seed), P.shape[0]
    counts = torch.zeros(v**3)
    for _ in range(n):
        out: list[int] = []
        while len(out) < 3:
            tree, p, q = draft_tree(out[-1] if out else 0, expansion, spec.child_rule, P, Q, rng)
            verdict = spec.verdict(tree, p, q, rng, prm)
            out += [int(tree.tokens[i]) for i in verdict.path] + [verdict.next_token]
        counts[(out[0] * v + out[1]) * v + out[2]] += 1
    return counts


@pytest.mark.parametrize(
    "mode,params,expansion", [("mss", STORAGE, [2, 2]), ("traversal", NOREP, [2, 1]), ("block", NOREP, [1, 1, 1])]
)
def test_chi2_three_token_continuations(mode, params, expansion):
    P, Q = random_tables(6)
    n = 1500
    counts = three_tokens(mode, params, expansion, P, Q, n, seed=11)
    want = markov_joint(P, 0, 3).flatten()
    assert chisquare(counts, want * n).pvalue > 0.01


# --------------------------------------------------------------------------
# the k = V star, NaN, parameters
# --------------------------------------------------------------------------
def test_traversal_on_a_star_of_every_token_without_replacement():
    p = torch.tensor([[0.2, 0.3, 0.5]] + [[1 / 3] * 3] * 3, dtype=torch.float64)
    q = torch.tensor([[0.5, 0.3, 0.2]] + [[0.0] * 3] * 3, dtype=torch.float64)
    tree = DraftTree([-1, 0, 0, 0], torch.tensor([0, 0, 1, 2]), [0, 0, 1, 2], q, child_rule="sample_noreplace")
    spec = get_mode("traversal")
    reach = distshift.path_law(spec, tree, p, q, spec.params()).reach
    assert reach == pytest.approx([1.0, 0.4, 0.0, 0.6], abs=1e-12)
    verdict = spec.verdict(tree, p, q, torch.Generator().manual_seed(0), spec.params())
    assert verdict.path in ([1], [3])


def test_accept_prob_refuses_nan():
    with pytest.raises(ValueError, match="NaN"):
        accept_prob(torch.tensor([float("nan"), 0.5]), torch.tensor([0.5, 0.5]), 0)
    assert accept_prob(torch.tensor([0.2, 0.8]), torch.tensor([0.5, 0.5]), 0) == pytest.approx(0.4)


def test_order_and_children_parameters():
    mss, trav = get_mode("mss"), get_mode("traversal")
    assert mss.params()["order"] == "random" and trav.params()["children"] == "sample"
    with pytest.raises(ValueError, match="verify.order"):
        mss.params({"order": "reverse"})
    with pytest.raises(ValueError, match="verify.children"):
        trav.params({"children": "topk"})
    with pytest.raises(ValueError, match="not a parameter"):
        get_mode("sequoia").params({"order": "random"})
    assert get_mode("traversal", NOREP).child_rule == "sample_noreplace"
    assert get_mode("block", NOREP).verdict.__name__ == "block"
    assert row_tags(mss, mss.params(STORAGE)) == {"child_rule": "sample", "sibling_order": "storage"}
    assert row_tags(trav, trav.params(NOREP)) == {"child_rule": "sample_noreplace", "sibling_order": "storage"}
    assert row_tags(get_mode("speculative"), get_mode("speculative").params()) == {
        "child_rule": "sample",
        "sibling_order": "",
    }


# --------------------------------------------------------------------------
# HSD's one-shot reading on one chain is not lossless (registered as lossy: test_hsd_gbv.py)
# --------------------------------------------------------------------------
def one_shot_chain_law(tree, p, q, full_accept) -> list[tuple[int, float, torch.Tensor]]:
    """Backward scan on a chain X_1..X_g (block verification's structure): the whole chain is
    accepted with ``full_accept(R, w_g)`` (R = prod p/q, w_g block's weight); else the last
    position k < g whose coin succeeds with r_k / (1 - w_k + r_k) ends the path, and the next
    token is drawn from norm(max(0, w_k P_k - Q_k)).  Block: full_accept = w_g."""
    g = len(tree.parents) - 1
    toks, w, R, weights = tree.tokens.tolist(), 1.0, 1.0, [1.0]
    for k in range(1, g + 1):
        ratio = float(p[k - 1, toks[k]] / q[k - 1, toks[k]])
        R, w = R * ratio, min(1.0, w * ratio)
        weights.append(w)
    out, alive = [], 1.0
    for k in range(g, -1, -1):
        if k == g:
            a, nxt = full_accept(R, weights[g]), p[g].double()
        else:
            m = (weights[k] * p[k] - q[k]).clamp_min(0)
            r = float(m.sum())
            a, nxt = (r / (1 - weights[k] + r), m / r) if r > 0 else (0.0, p[k].double())
        a = 1.0 if k == 0 else a
        out.append((k, alive * a, nxt))
        alive -= alive * a
    return out


def test_hsds_one_shot_reading_is_not_lossless():
    """HSD's public code (ZhouYuxuanYX/Hierarchical-Speculative-Decoding, transformers/generation/
    utils.py, _speculative_sampling with backward=True) caps the joint ratio like block verification
    but accepts the whole draft with min(1, prod p/q); without its forward-sampling inner loop (more
    draft calls inside the step) that is lossy, while the same scan with block's weight is exact."""
    P, Q = random_tables(0)
    tvs = {}
    for name, full in (("block", lambda R, w: w), ("hsd_one_shot", lambda R, w: min(1.0, R))):
        out = torch.zeros(3, 3, 3, 3, dtype=torch.float64)
        for wt, tree, p, q in drafted_trees(CHAIN3, P, Q, "sample"):
            toks = tree.tokens.tolist()
            for k, end, nxt in one_shot_chain_law(tree, p, q, full):
                law = nxt
                for _ in range(3 - k):
                    law = law[..., None] * P.reshape(*([1] * (law.dim() - 1)), 3, 3)
                out[tuple(toks[1 : k + 1])] += wt * end * law
        tvs[name] = float((out - markov_joint(P, 0, 4)).abs().sum()) / 2
    assert tvs["block"] < 1e-12 and tvs["hsd_one_shot"] > 0.01, tvs
