"""Regression tests for the losslessness bugs of issue #13 (each failed on 50a8a27).

1. Sampling verifiers accepted children with q(x) = 0, and the exact law was chosen
   from the mode's child rule instead of the tree's.
2. Sequoia on a shape with a gap in sibling ranks (``[[0], [2]]``) was lossy.
3. typical's tie-break, sequoia's NaN first_token_tv at a real vocabulary size,
   and temperatures that underflow ``sampling.probs``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch
from scipy.stats import chisquare

from specbench.core.sampling import accept_prob, check_temperature, choose_children, choose_slots, probs, sequoia_next_q
from specbench.core.tree import DraftTree
from specbench.drafting.levels import drafted
from specbench.verify import distshift
from specbench.verify.modes import get_mode
from specbench.verify.modespec import check_compatible


def first_tokens(spec, tree, p, q, n: int, seed: int) -> torch.Tensor:
    """Counts of the first emitted token over n verifier runs on one tree."""
    rng, params = torch.Generator().manual_seed(seed), spec.params()
    counts = torch.zeros(p.shape[-1])
    for _ in range(n):
        v = spec.verdict(tree, p, q, rng, params)
        counts[int(tree.tokens[v.path[0]]) if v.path else v.next_token] += 1
    return counts


# --------------------------------------------------------------------------
# bug 1: children the draft could not have drawn; law from the tree's child rule
# --------------------------------------------------------------------------
def test_zero_q_child_is_never_accepted():
    """The issue's minimal repro: mss accepted token 2 (q = 0) 1000 times in 1000."""
    p = torch.tensor([[0.9, 0.05, 0.05, 0.0]] * 2)
    q = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.0] * 4])
    assert accept_prob(p[0], q[0], 2) == 0.0
    for mode in ("mss", "sequoia", "speculative"):
        spec = get_mode(mode)
        tree = DraftTree([-1, 0], torch.tensor([0, 2]), [0, 2], q, child_rule=spec.child_rule)
        counts = first_tokens(spec, tree, p, q, 1000, seed=0)
        # the impossible child is skipped without a residual update: the output is p
        assert counts[2] < 100, (mode, counts)
        want = p[0, :3].double() / p[0, :3].double().sum()
        assert chisquare(counts[:3], want * 1000).pvalue > 1e-3, mode
        law = distshift.first_token_dist(spec, tree, p, q, spec.params(), marginal=False)
        assert torch.allclose(law, p[0].double(), atol=1e-12), mode


def eagle_like_tree(v: int = 12, seed: int = 0):
    """Top-k children (width 4 at the root, then 2, then 1; N = 10) from random rows."""
    g = torch.Generator().manual_seed(seed)
    parents, level = [-1], [0]
    for width in (4, 2, 1):
        nxt = []
        for node in level[:2]:
            for _ in range(width):
                parents.append(node)
                nxt.append(len(parents) - 1)
        level = nxt
    parents = parents[:11]
    n = len(parents)
    p = torch.softmax(2 * torch.randn(n, v, generator=g), -1)
    q = torch.softmax(2 * torch.randn(n, v, generator=g), -1)
    tokens, ranks = [0] * n, [0] * n
    for u in range(n):
        kids = [c for c in range(n) if parents[c] == u]
        toks, rks = choose_children(q[u], len(kids), "topk") if kids else ([], [])
        for c, t, r in zip(kids, toks, rks):
            tokens[c], ranks[c] = t, r
        if not kids:
            q[u] = 0.0
    return DraftTree(parents, torch.tensor(tokens), ranks, q, child_rule="topk"), p, q


@pytest.mark.parametrize("mode", ["mss", "sequoia"])
def test_sampling_modes_on_topk_trees_are_refused_and_their_tv_is_true(mode):
    """On an eagle2-like top-k tree the recorded TV was ~1e-16; it is the verifier's
    true drift (Monte Carlo agrees), and job validation refuses the combination."""
    spec = get_mode(mode)
    tree, p, q = eagle_like_tree()
    with pytest.raises(ValueError, match=f"verify={mode} is lossless only on .*'topk' trees; modes that fit"):
        check_compatible(spec, tree.child_rule)
    law = distshift.first_token_dist(spec, tree, p, q, spec.params())
    tv = distshift.first_token_tv(spec, tree, p, q, spec.params())
    assert tv > 0.1
    n = 4000
    freq = first_tokens(spec, tree, p, q, n, seed=1) / n
    assert (freq - law.float()).abs().max() < 4 * math.sqrt(0.25 / n)
    assert abs(0.5 * float((freq - p[0]).abs().sum()) - tv) < 0.05


# --------------------------------------------------------------------------
# bug 2: sequoia on a shape with a gap in sibling ranks
# --------------------------------------------------------------------------
def _noreplace_prob(q_row: torch.Tensor, xs) -> float:
    out, drawn = 1.0, torch.zeros(q_row.numel(), dtype=torch.bool)
    for x in xs:
        out *= float(sequoia_next_q(q_row, drawn)[x])
        drawn[x] = True
    return out


def gap_law(p, q, keep_old_draws: bool) -> torch.Tensor:
    """Exact first-token law of sequoia on the shape [[0], [2]]: either the old drafter
    (3 draws without replacement, the second dropped) or ``choose_slots`` (2 draws)."""
    spec, v = get_mode("sequoia"), p.shape[-1]
    total = torch.zeros(v, dtype=torch.float64)
    for xs in itertools.permutations(range(v), 3 if keep_old_draws else 2):
        kept = (xs[0], xs[2]) if keep_old_draws else xs
        tree = DraftTree([-1, 0, 0], torch.tensor([0, *kept]), [0, 0, 2], q, child_rule="sample_noreplace")
        total += _noreplace_prob(q[0].double(), xs) * distshift.first_token_dist(
            spec, tree, p, q, spec.params(), marginal=False
        )
    return total


def test_sequoia_rank_gap_is_lossless_with_choose_slots():
    p = torch.tensor([[0.05, 0.15, 0.5, 0.3, 0.0]] + [[0.2] * 5] * 2, dtype=torch.float64)
    q = torch.tensor([[0.4, 0.3, 0.1, 0.1, 0.1]] + [[0.0] * 5] * 2, dtype=torch.float64)
    old = 0.5 * float((gap_law(p, q, keep_old_draws=True) - p[0]).abs().sum())
    new = 0.5 * float((gap_law(p, q, keep_old_draws=False) - p[0]).abs().sum())
    assert old > 0.01 and new < 1e-12
    rng = torch.Generator().manual_seed(0)
    assert (
        choose_slots(q[0], [0, 2], "sample_noreplace", rng)[0]
        == choose_children(q[0], 2, "sample_noreplace", torch.Generator().manual_seed(0))[0]
    )
    assert choose_slots(q[0], [1, 3], "topk")[0] == [1, 3]
    with pytest.raises(ValueError, match="strictly increasing"):
        choose_slots(q[0], [2, 0], "topk")


def test_sequoia_rank_gap_chi2_through_choose_slots():
    spec = get_mode("sequoia")
    p = torch.tensor([[0.05, 0.15, 0.5, 0.3, 0.0]] + [[0.2] * 5] * 2)
    q = torch.tensor([[0.4, 0.3, 0.1, 0.1, 0.1]] + [[0.0] * 5] * 2)
    rng, params, n = torch.Generator().manual_seed(3), spec.params(), 20000
    counts = torch.zeros(5)
    for _ in range(n):
        toks, ranks = choose_slots(q[0], [0, 2], "sample_noreplace", rng)
        tree = DraftTree([-1, 0, 0], torch.tensor([0, *toks]), [0, *ranks], q, child_rule="sample_noreplace")
        v = spec.verdict(tree, p, q, rng, params)
        counts[int(tree.tokens[v.path[0]]) if v.path else v.next_token] += 1
    assert counts[4] == 0
    want = p[0, :4].double() / p[0, :4].double().sum()
    assert chisquare(counts[:4], want * n).pvalue > 1e-3


def test_model_drafter_draws_exactly_the_kept_slots(tiny_draft):
    from specbench.drafting.drafters import ModelDrafter

    drafter = ModelDrafter(tiny_draft, temperature=1.0)
    drafter.reset([1, 2, 3])
    tree = drafted(drafter.expand_static([(0,), (2,)], "sample_noreplace", torch.Generator().manual_seed(0)))
    want, _ = choose_slots(tree.q[0], [0, 2], "sample_noreplace", torch.Generator().manual_seed(0))
    assert tree.tokens[1:].tolist() == want


# --------------------------------------------------------------------------
# bug 3: typical's tie-break, sequoia NaN, underflowing temperatures
# --------------------------------------------------------------------------
def test_typical_breaks_ties_by_likelihood_like_medusa():
    """Among equally long typical paths Medusa keeps the most likely one (sum of log p)."""
    spec = get_mode("typical")
    p = torch.tensor([[0.3, 0.4, 0.2, 0.1], [0.5, 0.3, 0.1, 0.1], [0.1, 0.2, 0.6, 0.1], [0.25] * 4, [0.25] * 4])
    # rank-0 child (token 0, p .3) then token 1 (.3): .09;  rank-1 child (token 1, .4) then token 2 (.6): .24
    tree = DraftTree([-1, 0, 0, 1, 2], torch.tensor([9, 0, 1, 1, 2]) % 4, [0, 0, 1, 1, 0], None)
    v = spec.verdict(tree, p, None, torch.Generator().manual_seed(0), spec.params())
    assert v.path == [2, 4]
    law = distshift.path_law(spec, tree, p, None, spec.params())
    assert law.reach == [1.0, 0.0, 1.0, 0.0, 1.0]
    star = DraftTree([-1, 0, 0], torch.tensor([0, 0, 1]), [0, 0, 1], None)
    assert spec.verdict(star, p[:3], None, torch.Generator(), spec.params()).path == [2]


def test_sequoia_tv_is_exact_at_real_vocabulary_size():
    g = torch.Generator().manual_seed(4)
    v = 50000
    p = torch.softmax(3 * torch.randn(2, v, generator=g), -1)
    q = torch.softmax(3 * torch.randn(2, v, generator=g), -1)
    q[1:] = 0
    spec = get_mode("sequoia")
    tree = DraftTree(
        [-1, 0, 0, 0, 0],
        torch.tensor([0, 1, 2, 3, 4]),
        [0] * 5,
        torch.cat([q, q[1:].expand(3, -1)]),
        child_rule="sample_noreplace",
    )
    pp = torch.cat([p, p[1:].expand(3, -1)])
    tv = distshift.first_token_tv(spec, tree, pp, tree.q, spec.params())
    assert tv < 1e-9
    mss = get_mode("mss")
    sampled = dataclasses.replace(tree, child_rule="sample")
    assert distshift.first_token_tv(mss, sampled, pp, tree.q, mss.params()) < 1e-9


def test_underflowing_temperatures_are_rejected():
    logits = torch.tensor([[30.0, 1.0, -5.0]])
    for bad in (1e-39, 1e-30, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="verify.temperature="):
            probs(logits, bad)
        with pytest.raises(ValueError, match="verify.temperature="):
            get_mode("mss").params({"temperature": bad})
    with pytest.raises(ValueError, match="verify.draft_temperature="):
        get_mode("mss").params({"draft_temperature": 1e-39})
    assert check_temperature(0) == 0.0 and check_temperature("0.7") == 0.7
    out = probs(logits, 1e-6)
    assert torch.isfinite(out).all() and out[0, 0] == 1.0
