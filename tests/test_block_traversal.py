"""Block (Sun et al. 2025) and traversal (Weng et al. 2025) verification (specbench/verify/block.py).

Exact checks enumerate every drafted tree of a small Markov "model pair" (next-token
tables P, Q indexed by the last token) with its draw probability.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from scipy.stats import chisquare

from specbench.core.sampling import sequoia_next_q
from specbench.core.tree import DraftTree
from specbench.verify import block as verify_block
from specbench.verify import distshift
from specbench.verify.modes import get_mode
from test_verify import draft_tree

CHAIN3 = [-1, 0, 1, 2]
TREE21 = [-1, 0, 0, 1, 2]  # two root children, one grandchild each
TREE12 = [-1, 0, 1, 1]  # one root child with two children


def random_tables(seed: int, v: int = 3):
    g = torch.Generator().manual_seed(seed)
    P = torch.softmax(1.5 * torch.randn(v, v, generator=g, dtype=torch.float64), -1)
    Q = torch.softmax(1.5 * torch.randn(v, v, generator=g, dtype=torch.float64), -1)
    return P, Q


def _tuples(q_row: torch.Tensor, k: int, rule: str):
    """Every ordered k-tuple of children the rule can draw from q_row, with its probability."""
    v = q_row.numel()
    for xs in itertools.product(range(v), repeat=k) if rule == "sample" else itertools.permutations(range(v), k):
        w, drawn = 1.0, torch.zeros(v, dtype=torch.bool)
        for x in xs:
            w *= float(q_row[x] if rule == "sample" else sequoia_next_q(q_row, drawn)[x])
            drawn[x] = True
        if w > 0:
            yield w, xs


def drafted_trees(parents, P, Q, rule: str, root: int = 0):
    """(probability, tree, p rows, q rows) for every tree of this shape the drafter can draw."""
    n = len(parents)
    kids = [[c for c in range(n) if parents[c] == u] for u in range(n)]

    def rec(u: int, tokens: list[int], w: float):
        if u == n:
            tok = torch.tensor(tokens)
            q = Q[tok].clone()
            q[[i for i in range(n) if not kids[i]]] = 0.0
            yield w, DraftTree(list(parents), tok, [0] * n, q, child_rule=rule), P[tok], q
            return
        if not kids[u]:
            yield from rec(u + 1, tokens, w)
            return
        for wx, xs in _tuples(Q[tokens[u]], len(kids[u]), rule):
            t = list(tokens)
            for c, x in zip(kids[u], xs):
                t[c] = x
            yield from rec(u + 1, t, w * wx)

    yield from rec(0, [root] + [0] * (n - 1), 1.0)


def mean_accepted(mode: str, parents, P, Q, rule: str) -> float:
    spec = get_mode(mode)
    return sum(
        w * distshift.expected_accepted(spec, t, p, q, spec.params())
        for w, t, p, q in drafted_trees(parents, P, Q, rule)
    )


def two_token_law(mode: str, parents, P, Q, rule: str) -> torch.Tensor:
    """Exact law of the first two emitted tokens (a step that emits one token is
    followed by a lossless next step: its first token is P[last])."""
    v = P.shape[0]
    out = torch.zeros(v, v, dtype=torch.float64)
    for w, tree, p, q in drafted_trees(parents, P, Q, rule):
        entry, final = verify_block.plan(tree, p, q)
        alive = 1.0
        for node in verify_block.post_order(tree):
            end = alive if node == 0 else alive * final[node]
            alive -= end
            toks = [int(tree.tokens[n]) for n in verify_block.root_path(tree, node)]
            nxt = verify_block.node_stages(tree, node, p, q, entry[node])[2]
            if len(toks) >= 2:
                out[toks[0], toks[1]] += w * end
            elif toks:
                out[toks[0]] += w * end * nxt
            else:
                out += w * end * nxt[:, None] * P
    return out


# --------------------------------------------------------------------------
# the papers
# --------------------------------------------------------------------------
def test_block_reproduces_the_papers_toy_example():
    """Sun et al. Section 1: binary vocabulary, M_b = (1/3, 2/3), M_s = (2/3, 1/3), two
    draft tokens: 10/9 expected accepted tokens token by token, 11/9 block by block."""
    P = torch.tensor([[1 / 3, 2 / 3]] * 2, dtype=torch.float64)
    Q = torch.tensor([[2 / 3, 1 / 3]] * 2, dtype=torch.float64)
    chain = [-1, 0, 1]
    assert mean_accepted("speculative", chain, P, Q, "sample") == pytest.approx(10 / 9, abs=1e-12)
    assert mean_accepted("block", chain, P, Q, "sample") == pytest.approx(11 / 9, abs=1e-12)
    assert mean_accepted("traversal", chain, P, Q, "sample") == pytest.approx(11 / 9, abs=1e-12)


def random_chain(g: torch.Generator, n: int = 5, v: int = 6):
    """(p, q, tokens, tree): a sampled chain of n - 1 drafts over V = v with random p and q."""
    p = torch.softmax(2 * torch.randn(n, v, generator=g, dtype=torch.float64), -1)
    q = torch.softmax(2 * torch.randn(n, v, generator=g, dtype=torch.float64), -1)
    q[-1] = 0
    tokens = torch.randint(v, (n,), generator=g)
    return p, q, tokens, DraftTree(list(range(-1, n - 1)), tokens, [0] * n, q, child_rule="sample")


def test_block_weights_are_algorithm_2s():
    """The final weights of a chain's nodes are Algorithm 2's h_i (h_g = p_g), computed
    here straight from the paper's formulas."""
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        n = 5
        p, q, tokens, tree = random_chain(g, n)
        _, final = verify_block.plan(tree, p, q)
        weight = 1.0
        for i in range(1, n):
            weight = min(1.0, weight * float(p[i - 1, tokens[i]] / q[i - 1, tokens[i]]))
            r = float((weight * p[i] - q[i]).clamp_min(0).sum())
            h = weight if i == n - 1 else r / (r + 1 - weight)
            assert final[i] == pytest.approx(h, abs=1e-12)


# --------------------------------------------------------------------------
# lossless: exact laws and chi-square through the drafter's child selection
# --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "mode,parents,rule",
    [
        ("block", CHAIN3, "sample"),
        ("traversal", CHAIN3, "sample"),
        ("traversal", TREE21, "sample"),
        ("traversal", TREE12, "sample"),
        ("traversal", TREE21, "sample_noreplace"),
    ],
)
def test_exact_law_is_the_target(mode, parents, rule):
    P, Q = random_tables(1)
    Q[0] = torch.tensor([0.8, 0.2, 0.0], dtype=torch.float64)  # zero draft mass at the root
    spec = get_mode(mode)
    first = torch.zeros(3, dtype=torch.float64)
    for w, tree, p, q in drafted_trees(parents, P, Q, rule):
        first += w * distshift.first_token_dist(spec, tree, p, q, spec.params(), marginal=False)
        assert distshift.first_token_tv(spec, tree, p, q, spec.params()) < 1e-12
    assert 0.5 * float((first - P[0]).abs().sum()) < 1e-6
    assert torch.allclose(two_token_law(mode, parents, P, Q, rule), P[0][:, None] * P, atol=1e-12)


def three_token_counts(mode: str, expansion, P, Q, n: int, seed: int) -> torch.Tensor:
    rng, spec = torch.Generator().manual_seed(seed), get_mode(mode)
    v = P.shape[0]
    counts = torch.zeros(v**3)
    for _ in range(n):
        out: list[int] = []
        while len(out) < 3:
            tree, p, q = draft_tree(out[-1] if out else 0, expansion, spec.child_rule, P, Q, rng)
            verdict = spec.verdict(tree, p, q, rng, spec.params())
            out += [int(tree.tokens[i]) for i in verdict.path] + [verdict.next_token]
        counts[(out[0] * v + out[1]) * v + out[2]] += 1
    return counts


@pytest.mark.parametrize("mode,expansion", [("block", [1, 1, 1]), ("traversal", [2, 1])])
def test_chi2_three_token_continuations(mode, expansion):
    P, Q = random_tables(2)
    Q[0] = torch.tensor([0.7, 0.3, 0.0], dtype=torch.float64)
    n = 2000
    counts = three_token_counts(mode, expansion, P, Q, n, seed=5)
    want = torch.einsum("a,ab,bc->abc", P[0], P, P).flatten()
    assert chisquare(counts, want * n).pvalue > 0.01


# --------------------------------------------------------------------------
# expected accepted: never below the token-level rule on the same drafts
# --------------------------------------------------------------------------
def test_block_never_below_speculative_on_random_chains():
    gains = []
    for seed in range(60):
        P, Q = random_tables(seed)
        spec_, block = (mean_accepted(m, CHAIN3, P, Q, "sample") for m in ("speculative", "block"))
        assert block >= spec_ - 1e-12, seed
        gains.append(block - spec_)
    assert max(gains) > 0.01
    P, Q = random_tables(0)  # equality: one draft token, or draft == target
    assert mean_accepted("block", [-1, 0], P, Q, "sample") == pytest.approx(
        mean_accepted("speculative", [-1, 0], P, Q, "sample"), abs=1e-12
    )
    assert mean_accepted("block", CHAIN3, P, P, "sample") == pytest.approx(3.0, abs=1e-12)


@pytest.mark.parametrize("parents", [TREE21, TREE12])
def test_traversal_never_below_mss_on_random_trees(parents):
    gains = []
    for seed in range(40):
        P, Q = random_tables(seed)
        mss, trav = (mean_accepted(m, parents, P, Q, "sample") for m in ("mss", "traversal"))
        assert trav >= mss - 1e-12, seed
        gains.append(trav - mss)
    assert max(gains) > 0.01


def test_traversal_equals_mss_on_stars_and_when_draft_is_target():
    star = [-1, 0, 0, 0]
    for seed in range(10):
        P, Q = random_tables(seed)
        assert mean_accepted("traversal", star, P, Q, "sample") == pytest.approx(
            mean_accepted("mss", star, P, Q, "sample"), abs=1e-12
        )
    P, _ = random_tables(3)
    assert mean_accepted("traversal", TREE21, P, P, "sample") == pytest.approx(2.0, abs=1e-12)


def test_block_is_chain_only_and_traversal_needs_q():
    q = torch.full((3, 4), 0.25)
    tree = DraftTree([-1, 0, 0], torch.tensor([0, 1, 2]), [0, 0, 1], q, child_rule="sample")
    block = get_mode("block")
    with pytest.raises(ValueError, match="verify=block works on a chain only"):
        block.checked_verdict(tree, q, torch.Generator(), block.params())
    no_q = DraftTree([-1, 0, 0], torch.tensor([0, 1, 2]), [0, 0, 1], None, child_rule="sample")
    with pytest.raises(ValueError, match="verify=traversal needs the draft distributions q"):
        get_mode("traversal").checked_verdict(no_q, q, torch.Generator(), block.params())
