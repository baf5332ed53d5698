"""Token-level lossless verification modes: greedy, speculative, mss, sequoia, naive.

Each mode is one ``ModeSpec`` registration (verdict + exact per-node law + child
rules + defaults; conventions in ``modespec``).  Importing this module registers
every mode, including the lossy rules (``lossy``), block / traversal verification
(``block``) and HSD / GBV (``seqlevel``); callers use ``get_mode(name)``.

Lossless: greedy (w.r.t. the greedy target, on any tree), speculative (chains),
mss, sequoia, naive (any tree), block (chains), traversal, gbv.
Lossy: typical, ratio, conservative, epsilon, hsd (chains; as its public code runs it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.sampling import TREE_CHILD_RULES, accept_prob, as_dist, residual, sample, sequoia_next_q
from ..core.tree import DraftTree
from .distshift import (
    MAX_DP_CHILDREN,
    TooBig,
    fixed_next,
    fixed_path,
    marginal_noreplace,
    marginal_sample,
    top_down,
    top_down_next,
)
from .modespec import (
    LOSSY_BASELINE,
    MODES,
    Law,
    ModeParams,
    ModeSpec,
    Role,
    TargetRows,
    Verdict,
    argmax_ids,
    register,
)

ANY_TREE = frozenset(TREE_CHILD_RULES)


def get_mode(name: str, params=None) -> ModeSpec:
    """The mode's spec; an unknown name lists the valid ones.  With ``params`` (the
    ``verify`` group or a dict) the spec drafts with ``params["children"]`` where the
    mode has that parameter (``ModeSpec.configured``)."""
    spec = MODES.get(name)
    return spec if params is None else spec.configured(spec.params(params))


# --------------------------------------------------------------------------
# greedy
# --------------------------------------------------------------------------
def greedy_path(tree: DraftTree, p: TargetRows, q=None, params=None) -> list[int]:
    """Longest path whose tokens equal the target's argmax after their parent."""
    return argmax_walk(tree, argmax_ids(p))


def argmax_walk(tree: DraftTree, best: list[int]) -> list[int]:
    """Longest path whose tokens equal ``best[parent]`` (the first such child at each level)."""
    tokens = tree.tokens.tolist()
    node = 0
    path: list[int] = []
    while nxt := [c for c in tree.children(node) if tokens[c] == best[node]]:
        node = nxt[0]
        path.append(node)
    return path


def greedy(tree: DraftTree, p: TargetRows, q, rng: torch.Generator, params) -> Verdict:
    """Longest path whose tokens equal the target's argmax, then the argmax bonus: reads
    only the argmax after each node (p's rows, or replay's ``TargetArgmax``)."""
    best = argmax_ids(p)
    path = argmax_walk(tree, best)
    return Verdict(path, best[path[-1] if path else 0])


def _argmax_dist(p_row: torch.Tensor, params=None) -> torch.Tensor:
    pr = p_row.double()
    return torch.zeros_like(pr).scatter_(0, pr.argmax().view(1), 1.0)


@dataclass(frozen=True, eq=False)
class GreedyParams(ModeParams):
    temperature: float = 0.0


register(
    ModeSpec(
        name="greedy",
        verdict=greedy,
        child_rule="topk",
        lossless_for=ANY_TREE,
        law=Law(fixed_path(greedy_path, _argmax_dist), draw_free=True, next_laws=fixed_next(_argmax_dist)),
        params_type=GreedyParams,
        argmax=True,
        doc="Longest path of target-argmax tokens, then the argmax bonus.",
    )
)


# --------------------------------------------------------------------------
# multi-step speculative sampling: speculative (chain), mss, sequoia
# --------------------------------------------------------------------------
def _multi_step(
    tree: DraftTree, p: torch.Tensor, q: torch.Tensor, rng: torch.Generator, shuffle: bool, update_q: bool
) -> Verdict:
    """Multi-step speculative sampling down the tree.

    At each node try the children (random order if ``shuffle``, else storage
    order), accept child x with prob min(1, p(x)/q(x)); on rejection
    p <- norm(max(0, p - q)) and, if ``update_q`` (Sequoia), q[x] <- 0 renormalised
    (uniform over not-yet-rejected tokens once q has no mass).  A child with q(x) = 0
    (it cannot have been drawn from q) is skipped: never accepted, no update.  When
    every child is rejected, or at a leaf, the next token is drawn from the current p.
    """
    tokens = tree.tokens.tolist()
    node = 0
    path: list[int] = []
    while True:
        kids = tree.children(node)
        pr = as_dist(p[node])
        if not kids:
            return Verdict(path, sample(pr, rng))
        qr = as_dist(q[node])
        if update_q:
            qr = sequoia_next_q(qr, torch.zeros(qr.numel(), dtype=torch.bool))
            rejected = torch.zeros(qr.numel(), dtype=torch.bool)
        order = torch.randperm(len(kids), generator=rng).tolist() if shuffle else range(len(kids))
        chosen = None
        for j in order:
            x = tokens[kids[j]]
            if qr[x] <= 0:
                continue
            if float(torch.rand((), generator=rng, dtype=torch.float64)) < accept_prob(pr, qr, x):
                chosen = kids[j]
                break
            pr = residual(pr, qr)
            if update_q:
                rejected[x] = True
                qr = sequoia_next_q(qr, rejected)
        if chosen is None:
            return Verdict(path, sample(pr, rng))
        node = chosen
        path.append(node)


def speculative(tree: DraftTree, p: torch.Tensor, q, rng: torch.Generator, params) -> Verdict:
    """Speculative sampling (Leviathan et al.; Chen et al.) on a chain."""
    return _multi_step(tree, p, q, rng, shuffle=False, update_q=False)


def mss(tree: DraftTree, p: torch.Tensor, q, rng: torch.Generator, params: OrderParams) -> Verdict:
    """SpecInfer multi-step speculative sampling (Miao et al. 2024, Algorithm 2; children
    i.i.d. from q), siblings tried in ``params.order``: "random" (the paper's rule: a
    uniformly random order) or "storage" (the draw order).  Both are lossless on i.i.d.
    children: a draw's law does not depend on its position, so each child tried is a
    fresh draw from q (the lemma in ``distshift.marginal_sample``).  On an unbalanced
    shape storage order tries the rank-0 child (with the deepest subtree) first."""
    return _multi_step(tree, p, q, rng, shuffle=params.order == "random", update_q=False)


def sequoia(tree: DraftTree, p: torch.Tensor, q, rng: torch.Generator, params) -> Verdict:
    """Sequoia (children without replacement; p and q both updated on rejection)."""
    return _multi_step(tree, p, q, rng, shuffle=False, update_q=True)


def node_mss(tree, node, p, q, params, final=True):
    """mss at one node, conditional on its children's tokens, in ``params["order"]``
    (speculative: a chain, the order is moot)."""
    if params.get("order", "storage") == "storage":
        return node_sequential(tree, node, p, q, final, update_q=False)
    return node_mss_random(tree, node, p, q, final)


def node_mss_random(tree, node, p, q, final=True):
    """mss in random order: a dynamic programme over the SET of children already
    rejected (p_i depends only on how many were rejected; each untried child is next
    with prob 1/#untried); 2^k states (TooBig past 16).  Children with q(x) = 0 are
    skipped by the verifier, so they drop out here."""
    qr = q[node]
    kids = [c for c in tree.children(node) if qr[int(tree.tokens[c])] > 0]
    xs = [int(tree.tokens[c]) for c in kids]
    k = len(kids)
    if k > MAX_DP_CHILDREN:
        raise TooBig
    ps = [p[node]]
    for _ in range(k if final else k - 1):  # p_k only matters for the emitted token
        ps.append(residual(ps[-1], qr))
    a = [[accept_prob(ps[i], qr, x) for x in xs] for i in range(k)]
    f = [0.0] * (1 << k)
    f[0] = 1.0
    acc = dict.fromkeys(kids, 0.0)
    for s in range(1 << k):
        n = bin(s).count("1")
        if f[s] == 0.0 or n == k:
            continue
        share = f[s] / (k - n)
        for j in range(k):
            if not s >> j & 1:
                acc[kids[j]] += share * a[n][j]
                f[s | 1 << j] += share * (1.0 - a[n][j])
    return acc, ps[-1], f[-1]


def node_sequential(tree, node, p, q, final=True, update_q=False):
    """Children tried in storage order, p updated on rejection and, if ``update_q``
    (Sequoia), q too; a child with q(x) = 0 at its turn is skipped."""
    kids = tree.children(node)
    pr = p[node]
    rejected = torch.zeros(pr.numel(), dtype=torch.bool)
    qr = sequoia_next_q(q[node], rejected) if update_q else as_dist(q[node])
    acc, reach = {}, 1.0
    for i, c in enumerate(kids):
        x = int(tree.tokens[c])
        if qr[x] <= 0:
            acc[c] = 0.0
            continue
        a = accept_prob(pr, qr, x)
        acc[c] = reach * a
        reach *= 1.0 - a
        if i == len(kids) - 1 and not final:
            break
        pr = residual(pr, qr)
        rejected[x] = True
        if update_q and i < len(kids) - 1:
            qr = sequoia_next_q(qr, rejected)
    return acc, pr, reach


def node_sequoia(tree, node, p, q, params, final=True):
    """Sequoia at one node: children in storage order, p and q updated on rejection."""
    return node_sequential(tree, node, p, q, final, update_q=True)


@dataclass(frozen=True, eq=False)
class OrderParams(ModeParams):
    """``order``: siblings tried in "random" order (SpecInfer's rule) or in "storage" (draw) order."""

    order: str = "random"


_SAMPLED = {"sample": marginal_sample, "sample_noreplace": marginal_noreplace}  # one child: same draw
register(
    ModeSpec(
        name="speculative",
        verdict=speculative,
        child_rule="sample",
        lossless_for=frozenset(_SAMPLED),
        law=Law(top_down(node_mss), _SAMPLED, next_laws=top_down_next(node_mss)),
        needs_q=True,
        chain_only=True,
        role=Role(baseline_of=("chain",), token_level=("chain",)),
        doc="Speculative sampling (Leviathan et al.; Chen et al.) on a chain.",
    )
)
register(
    ModeSpec(
        name="mss",
        verdict=mss,
        child_rule="sample",
        lossless_for=frozenset({"sample"}),
        law=Law(top_down(node_mss), {"sample": marginal_sample}, next_laws=top_down_next(node_mss)),
        needs_q=True,
        params_type=OrderParams,
        role=Role(baseline_of=("tree",), token_level=("chain", "tree")),  # on a chain: speculative sampling
        doc="SpecInfer multi-step speculative sampling (children i.i.d. from q; verify.order random|storage).",
    )
)
register(
    ModeSpec(
        name="sequoia",
        verdict=sequoia,
        child_rule="sample_noreplace",
        lossless_for=frozenset({"sample_noreplace"}),
        sibling_order="storage",
        law=Law(
            top_down(node_sequoia), {"sample_noreplace": marginal_noreplace}, next_laws=top_down_next(node_sequoia)
        ),
        needs_q=True,
        role=Role(token_level=("tree",)),  # the token-level rule on trees drawn without replacement
        doc="Sequoia (children without replacement, tried in draw order; p and q both updated on rejection).",
    )
)


# --------------------------------------------------------------------------
# naive
# --------------------------------------------------------------------------
def naive(tree: DraftTree, p: torch.Tensor, q, rng: torch.Generator, params) -> Verdict:
    """SpecInfer naive sampling: draw x ~ p; accept it if it is a child, else emit it."""
    tokens = tree.tokens.tolist()
    node = 0
    path: list[int] = []
    while True:
        x = sample(p[node], rng)
        hit = [c for c in tree.children(node) if tokens[c] == x]
        if not hit:
            return Verdict(path, x)
        node = hit[0]
        path.append(node)


def node_naive(tree, node, p, q, params, final=True):
    """naive at one node: the first child holding token x is accepted with prob p(x)."""
    pr = p[node].double()
    acc, seen = {}, set()
    for c in tree.children(node):
        x = int(tree.tokens[c])
        if x not in seen:
            seen.add(x)
            acc[c] = float(pr[x])
    rest = pr.clone()
    rest[list(seen)] = 0.0
    none = float(rest.sum())
    return acc, (rest / none if none > 0 else pr), none


register(
    ModeSpec(
        name="naive",
        verdict=naive,
        child_rule="topk",
        lossless_for=ANY_TREE,
        law=Law(top_down(node_naive), draw_free=True, next_laws=top_down_next(node_naive)),
        role=Role(baseline_of=(LOSSY_BASELINE,), token_level=("tree",)),  # on top-k trees, as the lossy rules
        doc="SpecInfer naive sampling: draw x ~ p; accept it if it is a child, else emit it.",
    )
)

from . import block, lossy, seqlevel  # noqa: E402,F401  (register the other modes)
