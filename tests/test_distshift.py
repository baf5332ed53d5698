"""Exact first-token distribution shift and expected acceptance (specbench/verify/distshift.py)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from specbench.core.sampling import probs, sequoia_next_q
from specbench.core.tree import DraftTree
from specbench.verify import distshift
from specbench.verify.modes import get_mode

LOSSLESS_TREE = ["mss", "sequoia", "naive", "greedy"]
LOSSY = ["typical", "ratio", "conservative", "epsilon"]


def tv(mode: str, tree, p, q, overrides=None, marginal=True) -> float:
    """first_token_tv of ``mode`` on ``tree`` drafted by the mode's own child rule."""
    spec = get_mode(mode)
    tree = dataclasses.replace(tree, child_rule=spec.child_rule)
    return distshift.first_token_tv(spec, tree, p, q, spec.params(overrides), marginal)


def expected(mode: str, tree, p, q) -> float:
    spec = get_mode(mode)
    tree = dataclasses.replace(tree, child_rule=spec.child_rule)
    return distshift.expected_accepted(spec, tree, p, q, spec.params())


def dist_rows(draw, n: int, v: int, zeros: bool = True) -> torch.Tensor:
    """n random probability rows over v tokens (some entries may be exactly 0)."""
    lo = 0.0 if zeros else 0.01
    rows = []
    for _ in range(n):
        w = draw(st.lists(st.floats(lo, 1.0), min_size=v, max_size=v))
        if sum(w) < 1e-3:
            w[0] = 1.0
        rows.append(torch.tensor(w, dtype=torch.float64) / sum(w))
    return torch.stack(rows)


@st.composite
def cases(draw, chain: bool = False, distinct: bool = False):
    """(tree, p, q): a random tree of depth <= 2, target rows for every node,
    draft rows for the expanded ones.  Root tokens may repeat unless ``distinct``."""
    v = draw(st.integers(2, 5))
    k = 1 if chain else draw(st.integers(1, min(3, v) if distinct else 3))
    parents = [-1] + [0] * k
    for c in range(1, k + 1):  # optionally expand some depth-1 nodes
        for _ in range(draw(st.integers(0, 1 if chain else 2))):
            parents.append(c)
    n = len(parents)
    if distinct:
        roots = draw(st.permutations(range(v)))[:k]
    else:
        roots = draw(st.lists(st.integers(0, v - 1), min_size=k, max_size=k))
    rest = draw(st.lists(st.integers(0, v - 1), min_size=n - 1 - k, max_size=n - 1 - k))
    tokens = torch.tensor([0] + list(roots) + rest)
    p = dist_rows(draw, n, v)
    q = dist_rows(draw, n, v)
    for i in range(n):
        if i not in parents:
            q[i] = 0.0
    for i, x in enumerate(tokens.tolist()):  # drafted tokens have q > 0
        if i and q[parents[i], x] == 0:
            q[parents[i], x] = 0.5
            q[parents[i]] /= q[parents[i]].sum()
    ranks = [0] + [sum(1 for j in range(1, i) if parents[j] == parents[i]) for i in range(1, n)]
    return DraftTree(parents, tokens, ranks, q), p, q


@settings(max_examples=60, deadline=None)
@given(cases())
def test_lossless_tree_modes_have_zero_tv(case):
    tree, p, q = case
    for mode in ("mss", "sequoia", "naive"):
        assert tv(mode, tree, p, q) < 1e-6, mode
    greedy_p = probs(p.log(), 0.0)  # greedy is lossless w.r.t. the argmax target
    assert tv("greedy", tree, greedy_p, q, {"temperature": 0}) < 1e-6


@settings(max_examples=40, deadline=None)
@given(cases(chain=True))
def test_speculative_chain_zero_tv(case):
    tree, p, q = case
    assert tv("speculative", tree, p, q) < 1e-6


def _draw_prob(q_row: torch.Tensor, xs, replace: bool) -> float:
    """Probability that the drafter draws the ordered tuple xs."""
    out, drawn = 1.0, torch.zeros(q_row.numel(), dtype=torch.bool)
    for x in xs:
        w = q_row if replace else sequoia_next_q(q_row, drawn)
        out *= float(w[x])
        drawn[x] = True
    return out


@settings(max_examples=25, deadline=None)
@given(cases(), st.sampled_from(["mss", "sequoia"]))
def test_conditional_dists_average_to_target(case, mode):
    """Brute force over every drafted root tuple: sum_x P(draw x) * dist(. | x) == p[0].
    This checks the conditional enumeration (random order, duplicates, q updates,
    uniform fallback) independently of the closed-form marginals."""
    tree, p, q = case
    k, v = len(tree.children(0)), p.shape[1]
    replace = mode == "mss"
    assume(replace or k <= v)  # without replacement needs k <= V
    tuples = itertools.product(range(v), repeat=k) if replace else itertools.permutations(range(v), k)
    total = torch.zeros(v, dtype=torch.float64)
    for xs in tuples:
        w = _draw_prob(q[0], xs, replace)
        if w == 0:
            continue
        t = tree.tokens.clone()
        t[1 : k + 1] = torch.tensor(xs)
        spec = get_mode(mode)
        sub = DraftTree(tree.parents, t, tree.ranks, q, child_rule=spec.child_rule)
        total += w * distshift.first_token_dist(spec, sub, p, q, spec.params(), marginal=False)
    assert torch.allclose(total, p[0], atol=1e-9)


def test_lossy_modes_shift_the_distribution():
    """Hand-built case: the draft's top token is over-confident-but-plausible."""
    p = torch.tensor([[0.55, 0.30, 0.15], [0.3, 0.3, 0.4]])
    q = torch.tensor([[0.50, 0.45, 0.05], [0.0, 0.0, 0.0]])
    tree = DraftTree([-1, 0], torch.tensor([0, 0]), [0, 0], q)
    for mode in LOSSY:
        assert tv(mode, tree, p, q, {"temperature": 1.0}) > 0.1, mode
    assert not any(get_mode(m).lossless for m in LOSSY)


def test_conditional_is_not_the_target():
    """Losslessness is an average over the draft's draw: given the drawn token, q == p
    accepts it with certainty, so the conditional TV is 1 - p(x)."""
    p = torch.tensor([[0.6, 0.4], [0.5, 0.5]])
    tree = DraftTree([-1, 0], torch.tensor([0, 1]), [0, 1], p.clone())
    assert tv("speculative", tree, p, p, marginal=False) == pytest.approx(0.6)
    assert tv("speculative", tree, p, p) < 1e-12


def test_expected_accepted_chain_draft_equals_target():
    p = torch.softmax(torch.randn(5, 7, generator=torch.Generator().manual_seed(0)), -1)
    q = p.clone()
    q[-1] = 0
    tree = DraftTree([-1, 0, 1, 2, 3], torch.tensor([0, 1, 2, 3, 4]), [0] * 5, q)
    for mode in ("speculative", "mss", "sequoia"):
        assert expected(mode, tree, p, q) == pytest.approx(4.0)
    assert expected("naive", tree, p, q) == pytest.approx(
        float(p[0, 1] * (1 + p[1, 2] * (1 + p[2, 3] * (1 + p[3, 4]))))
    )


@pytest.mark.parametrize("mode", ["mss", "sequoia", "naive", "typical", "ratio"])
def test_expected_accepted_matches_monte_carlo(mode):
    g = torch.Generator().manual_seed(1)
    v = 4
    parents = [-1, 0, 0, 0, 1, 1, 2]
    p = torch.softmax(torch.randn(7, v, generator=g), -1)
    q = torch.softmax(torch.randn(7, v, generator=g), -1)
    q[3:] = 0
    tokens = torch.tensor([0, 1, 1, 2, 0, 3, 2])  # a duplicate root child
    tree = DraftTree(parents, tokens, [0, 0, 1, 2, 0, 1, 0], q)
    exact = expected(mode, tree, p, q)
    spec = get_mode(mode)
    n = 4000
    got = [len(spec.verdict(tree, p, q, g, spec.params()).path) for _ in range(n)]
    mean = sum(got) / n
    sd = (sum((x - mean) ** 2 for x in got) / n) ** 0.5
    assert abs(mean - exact) <= 4 * sd / n**0.5 + 1e-9


def test_first_token_dist_matches_monte_carlo_for_mss_order():
    """The subset DP for mss's random child order against sampling the verifier."""
    g = torch.Generator().manual_seed(2)
    p = torch.tensor([[0.1, 0.2, 0.3, 0.4]] + [[0.25] * 4] * 3)
    q = torch.tensor([[0.4, 0.3, 0.2, 0.1]] + [[0.0] * 4] * 3)
    tree = DraftTree([-1, 0, 0, 0], torch.tensor([0, 0, 0, 1]), [0, 0, 0, 1], q)
    mss = get_mode("mss")
    dist = distshift.first_token_dist(mss, tree, p, q, mss.params(), marginal=False)
    n = 6000
    counts = torch.zeros(4)
    for _ in range(n):
        v = mss.verdict(tree, p, q, g, mss.params())
        counts[int(tree.tokens[v.path[0]]) if v.path else v.next_token] += 1
    assert torch.allclose(counts / n, dist.float(), atol=4 * math.sqrt(0.25 / n))


def test_large_vocab_is_exact_and_not_nan():
    g = torch.Generator().manual_seed(3)
    v = 5000
    p = torch.softmax(3 * torch.randn(3, v, generator=g), -1)
    q = torch.softmax(3 * torch.randn(3, v, generator=g), -1)
    q[1:] = 0
    tree = DraftTree([-1, 0, 0], torch.tensor([0, 1, 2]), [0, 0, 1], q)
    for mode in ("mss", "sequoia"):
        assert tv(mode, tree, p, q) < 1e-6
        assert not math.isnan(expected(mode, tree, p, q))


def test_law_follows_the_trees_child_rule_not_the_modes():
    """A top-k tree has no draft randomness: its exact law is the conditional one,
    whatever child rule the mode expects (here mss's exact TV is far from 0)."""
    p = torch.tensor([[0.2, 0.3, 0.5], [1 / 3] * 3])
    q = torch.tensor([[0.7, 0.2, 0.1], [0.0] * 3])
    mss = get_mode("mss")
    topk = DraftTree([-1, 0], torch.tensor([0, 0]), [0, 0], q, child_rule="topk")
    sampled = dataclasses.replace(topk, child_rule="sample")
    assert distshift.first_token_tv(mss, sampled, p, q, mss.params()) < 1e-12
    # token 0 accepted w.p. min(1, .2/.7); else the residual (0, .1, .4)/.5 * (1 - 2/7)
    want = torch.tensor([2 / 7, 5 / 7 * 0.2, 5 / 7 * 0.8], dtype=torch.float64)
    assert torch.allclose(distshift.first_token_dist(mss, topk, p, q, mss.params()), want)
    assert distshift.first_token_tv(mss, topk, p, q, mss.params()) == pytest.approx(
        0.5 * float((want - p[0].double()).abs().sum())
    )
