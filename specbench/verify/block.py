"""Sequence-level lossless verification: block (chains) and traversal (trees).

* **traversal** -- Weng et al., "Traversal Verification for Speculative Tree Decoding"
  (NeurIPS 2025, arXiv 2505.12398), Algorithm 1: visit the tree's nodes leaves first
  (post-order DFS, children in storage order); accept the first visited node whose
  coin succeeds with its sequence-level acceptance probability; a rejected node is
  deleted, and its parent's target row, draft row and acceptance weight are updated.
* **block** -- Sun et al., "Block Verification Accelerates Speculative Decoding"
  (ICLR 2025, arXiv 2403.10444), Algorithm 2: on a chain X_1..X_g,
  p_i = min(1, p_{i-1} P_{i-1}(X_i) / Q_{i-1}(X_i)),
  h_i = r_i / (r_i + 1 - p_i) with r_i = sum_x max(0, p_i P_i(x) - Q_i(x)) (h_g = p_g),
  tau = the largest i with eta_i <= h_i, then Y ~ norm(max(0, p_tau P_tau - Q_tau))
  (P_g when tau = g).  This is traversal verification on a chain (post-order = leaf
  first), so both modes share one implementation (``plan``).

The weight of a node (p_alpha in Weng et al.) and its updates
------------------------------------------------------------
Node u holds a state (w, P, Q): weight w (1 at the root), target row P = p[u], draft
row Q = q[u].  Its children are tried in storage order; child x gets weight
w_x = min(1, w P(x) / Q(x)) at its turn.  After the child (and so its whole subtree)
is rejected: r = sum max(0, w P - Q), w <- r / (1 - w + r), P <- norm(max(0, w P - Q)),
and, for trees drawn without replacement (``tree.child_rule == "sample_noreplace"``),
Q <- Q with x removed, renormalised (Sequoia's update).  When no child is left, u is
accepted with probability w and the next token is drawn from P.

Both modes draft with ``verify.children`` ("sample", the default, or "sample_noreplace"),
so they verify the same drafted trees as mss or sequoia (``verify.paired_with``).

Why it is lossless (on "sample" and "sample_noreplace" trees): averaged over the
draws in its subtree, a state (w, P, Q) is accepted somewhere with probability w and
then emits a continuation distributed as the target's; the first token has joint law
min(w P, Q) + (1 - w + r) * w' * P' = min(w P, Q) + max(0, w P - Q) = w P.  At the
root w = 1 stays 1 and P follows the token-level residuals, so the root behaves like
mss / sequoia (``distshift.marginal_sample``) and no child of a weight-w node needs a
draw it did not get.  A child with Q(x) = 0 cannot have been drawn: weight 0, no
update (its subtree is never accepted).

Because every weight is a deterministic function of the drafted tree, the node
acceptances are precomputed: the law of the end node v of the accepted path is
a_v * prod_{u before v in post-order} (1 - a_u), with a_v the weight of v once its
children are gone.  The verdict draws the coins in that order (Algorithm 1's loop).
"""

from __future__ import annotations

import torch

from ..core.sampling import as_dist, sample, sequoia_next_q
from ..core.tree import DraftTree
from .distshift import marginal_noreplace, marginal_sample
from .modespec import ChildrenParams, Law, ModeSpec, PathLaw, Verdict, register

SAMPLED = {"sample": marginal_sample, "sample_noreplace": marginal_noreplace}


def _rejected(w: float, P: torch.Tensor, Q: torch.Tensor) -> tuple[float, torch.Tensor]:
    """(w', P') after a child drawn from Q was rejected (unchanged when a rejection has
    probability 0, i.e. w = 1 and P <= Q everywhere)."""
    m = (w * P - Q).clamp_min(0)
    r = float(m.sum())
    if 1.0 - w + r <= 0 or r <= 0:
        return (w if 1.0 - w + r <= 0 else 0.0), P
    return r / (1.0 - w + r), m / r


def node_stages(
    tree: DraftTree, u: int, p: torch.Tensor, q: torch.Tensor | None, w: float
) -> tuple[list[float], float, torch.Tensor]:
    """Node u entered with weight w: (its children's weights in storage order, its
    final weight a_u, its final target row) -- see the module docstring."""
    P = as_dist(p[u])
    kids = tree.children(u)
    if not kids:
        return [], w, P
    noreplace = tree.child_rule == "sample_noreplace"
    Q = torch.zeros_like(P) if q is None else as_dist(q[u])
    rejected = torch.zeros(P.numel(), dtype=torch.bool)
    if noreplace:
        Q = sequoia_next_q(Q, rejected)
    weights = []
    for i, c in enumerate(kids):
        x = int(tree.tokens[c])
        if Q[x] <= 0:
            weights.append(0.0)
            continue
        weights.append(min(1.0, w * float(P[x]) / float(Q[x])))
        w, P = _rejected(w, P, Q)
        if noreplace and i < len(kids) - 1:  # after the last child no draw follows (k = V)
            rejected[x] = True
            Q = sequoia_next_q(Q, rejected)
    return weights, w, P


def post_order(tree: DraftTree, u: int = 0) -> list[int]:
    """Nodes of u's subtree, each after its children (children in storage order)."""
    out: list[int] = []
    for c in tree.children(u):
        out += post_order(tree, c)
    return out + [u]


def plan(tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None) -> tuple[list[float], list[float]]:
    """(entry weight, final acceptance weight a) of every node; a[0] = 1."""
    n = len(tree.parents)
    entry, final = [0.0] * n, [0.0] * n
    entry[0] = 1.0
    for u in range(n):  # breadth-first: a parent before its children
        weights, final[u], _ = node_stages(tree, u, p, q, entry[u])
        for c, wc in zip(tree.children(u), weights):
            entry[c] = wc
    final[0] = 1.0  # the root's weight stays 1 (up to rounding)
    return entry, final


def root_path(tree: DraftTree, v: int) -> list[int]:
    path = []
    while v > 0:
        path.append(v)
        v = tree.parents[v]
    return path[::-1]


def verdict_from_plan(
    tree: DraftTree, p: torch.Tensor, q, rng: torch.Generator, entry: list[float], final: list[float]
) -> Verdict:
    """Algorithm 1's loop: nodes in post-order, node v accepted with ``final[v]`` (the root
    always); then a token from v's final target row (entered with ``entry[v]``)."""
    for v in post_order(tree):
        if v == 0 or float(torch.rand((), generator=rng, dtype=torch.float64)) < final[v]:
            return Verdict(root_path(tree, v), sample(node_stages(tree, v, p, q, entry[v])[2], rng))
    raise AssertionError("unreachable: the root is always accepted")


def law_from_plan(tree: DraftTree, final: list[float]) -> list[float]:
    """reach[v] = P(v on the accepted path) = sum over its subtree of P(the path ends there),
    for the post-order scan of ``verdict_from_plan``."""
    reach, alive = [0.0] * len(tree.parents), 1.0
    for v in post_order(tree):
        end = alive if v == 0 else alive * final[v]
        alive -= end
        while v >= 0:  # the path to v goes through its ancestors
            reach[v] += end
            v = tree.parents[v]
    reach[0] = 1.0
    return reach


def traversal(tree: DraftTree, p: torch.Tensor, q, rng: torch.Generator, params) -> Verdict:
    """Traversal verification (Weng et al. 2025, Algorithm 1): leaves to root, each
    node accepted with its sequence-level weight; then a token from its final row."""
    return verdict_from_plan(tree, p, q, rng, *plan(tree, p, q))


def traversal_law(tree: DraftTree, p, q, params, need_next: bool = True) -> PathLaw:
    """P(node on the accepted path) = sum over its subtree of P(the path ends there)."""
    reach = law_from_plan(tree, plan(tree, p, q)[1])
    return PathLaw(reach, node_stages(tree, 0, p, q, 1.0)[2] if need_next else None)


def traversal_next(tree: DraftTree, p, q, params) -> list:
    """Law of the token emitted when the path ends at each node: its final target row."""
    entry, _ = plan(tree, p, q)
    return [node_stages(tree, u, p, q, entry[u])[2] for u in range(len(tree.parents))]


def block(tree: DraftTree, p: torch.Tensor, q, rng: torch.Generator, params) -> Verdict:
    """Block verification (Sun et al. 2025, Algorithm 2) on a chain."""
    return traversal(tree, p, q, rng, params)


register(
    ModeSpec(
        name="traversal",
        verdict=traversal,
        child_rule="sample",
        lossless_for=frozenset(SAMPLED),
        law=Law(traversal_law, SAMPLED, next_laws=traversal_next),
        needs_q=True,
        params_type=ChildrenParams,
        sibling_order="storage",
        doc="Traversal verification (Weng et al. 2025): leaves to root, sequence-level weights.",
    )
)
register(
    ModeSpec(
        name="block",
        verdict=block,
        child_rule="sample",
        lossless_for=frozenset(SAMPLED),
        law=Law(traversal_law, SAMPLED, next_laws=traversal_next),
        needs_q=True,
        chain_only=True,
        params_type=ChildrenParams,
        doc="Block verification (Sun et al. 2025) on a chain: the whole block jointly.",
    )
)
