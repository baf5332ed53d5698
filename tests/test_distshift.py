"""Exact first-token distribution shift and expected acceptance (specbench/distshift.py)."""
from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import assume, given, settings, strategies as st

from specbench import distshift
from specbench.sampling import probs, sequoia_next_q
from specbench.trees import DraftTree
from specbench.verify import MODES

LOSSLESS_TREE = ["mss", "sequoia", "naive", "greedy"]
LOSSY = ["typical", "ratio", "conservative", "epsilon"]


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
    for c in range(1, k + 1):                    # optionally expand some depth-1 nodes
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
    for i, x in enumerate(tokens.tolist()):       # drafted tokens have q > 0
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
        assert distshift.first_token_tv(mode, tree, p, q, {}) < 1e-6, mode
    greedy_p = probs(p.log(), 0.0)               # greedy is lossless w.r.t. the argmax target
    assert distshift.first_token_tv("greedy", tree, greedy_p, q, {"temperature": 0}) < 1e-6


@settings(max_examples=40, deadline=None)
@given(cases(chain=True))
def test_speculative_chain_zero_tv(case):
    tree, p, q = case
    assert distshift.first_token_tv("speculative", tree, p, q, {}) < 1e-6


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
    assume(replace or k <= v)                  # without replacement needs k <= V
    tuples = itertools.product(range(v), repeat=k) if replace else itertools.permutations(range(v), k)
    total = torch.zeros(v, dtype=torch.float64)
    for xs in tuples:
        w = _draw_prob(q[0], xs, replace)
        if w == 0:
            continue
        t = tree.tokens.clone()
        t[1:k + 1] = torch.tensor(xs)
        sub = DraftTree(tree.parents, t, tree.ranks, q)
        total += w * distshift.first_token_dist(mode, sub, p, q, {}, marginal=False)
    assert torch.allclose(total, p[0], atol=1e-9)


def test_lossy_modes_shift_the_distribution():
    """Hand-built case: the draft's top token is over-confident-but-plausible."""
    p = torch.tensor([[0.55, 0.30, 0.15], [0.3, 0.3, 0.4]])
    q = torch.tensor([[0.50, 0.45, 0.05], [0.0, 0.0, 0.0]])
    tree = DraftTree([-1, 0], torch.tensor([0, 0]), [0, 0], q)
    for mode in LOSSY:
        cfg = {"temperature": 1.0}
        assert distshift.first_token_tv(mode, tree, p, q, cfg) > 0.1, mode
    assert not any(MODES.meta(m)["lossless"] for m in LOSSY)


def test_conditional_is_not_the_target():
    """Losslessness is an average over the draft's draw: given the drawn token, q == p
    accepts it with certainty, so the conditional TV is 1 - p(x)."""
    p = torch.tensor([[0.6, 0.4], [0.5, 0.5]])
    tree = DraftTree([-1, 0], torch.tensor([0, 1]), [0, 1], p.clone())
    assert distshift.first_token_tv("speculative", tree, p, p, {}, marginal=False) == pytest.approx(0.6)
    assert distshift.first_token_tv("speculative", tree, p, p, {}) < 1e-12


def test_expected_accepted_chain_draft_equals_target():
    p = torch.softmax(torch.randn(5, 7, generator=torch.Generator().manual_seed(0)), -1)
    q = p.clone()
    q[-1] = 0
    tree = DraftTree([-1, 0, 1, 2, 3], torch.tensor([0, 1, 2, 3, 4]), [0] * 5, q)
    for mode in ("speculative", "mss", "sequoia"):
        assert distshift.expected_accepted(mode, tree, p, q, {}) == pytest.approx(4.0)
    assert distshift.expected_accepted("naive", tree, p, q, {}) == pytest.approx(
        float(p[0, 1] * (1 + p[1, 2] * (1 + p[2, 3] * (1 + p[3, 4])))))


@pytest.mark.parametrize("mode", ["mss", "sequoia", "naive", "typical", "ratio"])
def test_expected_accepted_matches_monte_carlo(mode):
    g = torch.Generator().manual_seed(1)
    v = 4
    parents = [-1, 0, 0, 0, 1, 1, 2]
    p = torch.softmax(torch.randn(7, v, generator=g), -1)
    q = torch.softmax(torch.randn(7, v, generator=g), -1)
    q[3:] = 0
    tokens = torch.tensor([0, 1, 1, 2, 0, 3, 2])          # a duplicate root child
    tree = DraftTree(parents, tokens, [0, 0, 1, 2, 0, 1, 0], q)
    exact = distshift.expected_accepted(mode, tree, p, q, {})
    fn = MODES.get(mode)
    n = 4000
    got = [len(fn(tree, p, q, g, {}).path) for _ in range(n)]
    mean = sum(got) / n
    sd = (sum((x - mean) ** 2 for x in got) / n) ** 0.5
    assert abs(mean - exact) <= 4 * sd / n ** 0.5 + 1e-9


def test_first_token_dist_matches_monte_carlo_for_mss_order():
    """The subset DP for mss's random child order against sampling the verifier."""
    g = torch.Generator().manual_seed(2)
    p = torch.tensor([[0.1, 0.2, 0.3, 0.4]] + [[0.25] * 4] * 3)
    q = torch.tensor([[0.4, 0.3, 0.2, 0.1]] + [[0.0] * 4] * 3)
    tree = DraftTree([-1, 0, 0, 0], torch.tensor([0, 0, 0, 1]), [0, 0, 0, 1], q)
    dist = distshift.first_token_dist("mss", tree, p, q, {}, marginal=False)
    n = 6000
    counts = torch.zeros(4)
    for _ in range(n):
        v = MODES.get("mss")(tree, p, q, g, {})
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
        assert distshift.first_token_tv(mode, tree, p, q, {}) < 1e-6
        assert not math.isnan(distshift.expected_accepted(mode, tree, p, q, {}))


def test_unknown_mode_lists_valid_ones():
    tree = DraftTree([-1, 0], torch.tensor([0, 1]), [0, 0], None)
    with pytest.raises(KeyError, match="Valid: .*sequoia"):
        distshift.first_token_tv("nope", tree, torch.ones(2, 2) / 2, None, {})
