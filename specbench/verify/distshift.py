"""Exact law of a verification mode on one decode step: the exact-law module.

Every function takes the mode's SPEC (``modespec.ModeSpec``), never a mode name, and
chooses its formula from the TREE's actual ``child_rule`` (how its children were
drawn), never from the mode's.

``first_token_dist(spec, tree, p, q, params)`` is the exact distribution of the FIRST
emitted token of one step (the first accepted child of the root, or the correction
token when the path ends at the root); no Monte Carlo.  ``first_token_tv`` =
0.5 * |dist - p[0]|_1.  ``expected_accepted`` is the exact expectation of the number
of accepted tokens over the verifier's randomness for THIS drafted tree, and
``path_law`` gives P(node on the accepted path) for every node.

What is averaged (``marginal=True``, the default)
-------------------------------------------------
Losslessness of the sampling modes holds on average over the draft's draw of the
children, not conditionally on the drawn tokens (with q == p a single drafted token x
is always accepted, so the output is x, not p).  So when the tree's child rule is
random ("sample", "sample_noreplace") the first-token law also averages over the
drafter's draw of the root's k children: the spec's ``law.marginal[tree.child_rule]``
gives it in closed form.  A random rule the spec has no formula for gives NaN (those
combinations are refused by ``modespec.check_compatible``).  Deterministic rules
("topk", "fixed") have no draft randomness: the conditional law (verifier randomness
only, ``spec.law.path``) is the exact law.  ``marginal=False`` conditions on the
drawn tokens for every rule.

What it is not: for random child rules the marginal is the closed-form first-stage law
(``marginal_sample`` / ``marginal_noreplace``) that every lossless sampling rule here
shares at the root.  It is computed from p[0] and q[0] alone, NOT from the mode's own
path law (that would need the law of every drawable tree, i.e. every token of the
vocabulary at every node): it checks the rows (normalisation, temperatures), and a
broken rule would read ~1e-16 too.  The mode's own law is checked by enumerating every
drawable tree of a small world (``tests/test_lossless_modes.py``: ``path_end_law`` below
gives the law of the accepted path and the token after it) and empirically by
``study.tools.lossless``.  The conditional values and ``expected_accepted`` do come from the
mode's own law.  NaN: an mss node (random order) with more than ``MAX_DP_CHILDREN``
children.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import overload

import torch

from ..core.sampling import as_dist, residual, sequoia_next_q
from ..core.tree import DraftTree
from .modespec import RANDOM_RULES, ModeSpec, PathLaw

MAX_DP_CHILDREN = 16


class TooBig(Exception):
    """The exact computation is too large (the result becomes NaN)."""


# --------------------------------------------------------------------------
# law builders used by the mode registrations
# --------------------------------------------------------------------------
def top_down(node_fn: Callable) -> Callable[..., PathLaw]:
    """The path law of a mode that verifies from the root down, node by node.

    ``node_fn(tree, node, p, q, params, final) -> (acc, final_dist, none)``, conditional
    on reaching ``node``: ``acc`` = {child: P(it is accepted)}, ``none`` = P(no child
    is), ``final_dist`` = law of the token emitted then (only needed when ``final``).
    """

    def path(tree: DraftTree, p, q, params, need_next: bool = True) -> PathLaw:
        reach = [0.0] * len(tree.parents)
        reach[0], root_next = 1.0, None
        for u in range(len(tree.parents)):  # breadth-first: parents come first
            if u and (reach[u] == 0.0 or not tree.children(u)):
                continue
            acc, final, _ = node_fn(tree, u, p, q, params, u == 0 and need_next)
            for c, a in acc.items():
                reach[c] = reach[u] * a
            if u == 0 and need_next:
                root_next = final
        return PathLaw(reach, root_next)

    return path


def top_down_next(node_fn: Callable) -> Callable[..., list]:
    """``Law.next_laws`` of a top-down mode: at a node with children, the law
    ``node_fn`` gives for the token emitted after every child is rejected; at a leaf, p."""

    def next_laws(tree: DraftTree, p, q, params) -> list:
        return [
            node_fn(tree, u, p, q, params, True)[1] if tree.children(u) else as_dist(p[u])
            for u in range(len(tree.parents))
        ]

    return next_laws


def fixed_next(next_fn: Callable) -> Callable[..., list]:
    """``Law.next_laws`` of a deterministic mode: ``next_fn(p_row, params)`` at every node."""

    def next_laws(tree: DraftTree, p, q, params) -> list:
        return [next_fn(p[u], params) for u in range(len(tree.parents))]

    return next_laws


def fixed_path(path_fn: Callable, next_fn: Callable) -> Callable[..., PathLaw]:
    """The path law of a deterministic mode: ``path_fn(tree, p, q, params)`` is its
    accepted path; ``next_fn(p_row, params)`` the law of the token after it."""

    def path(tree: DraftTree, p, q, params, need_next: bool = True) -> PathLaw:
        reach = [0.0] * len(tree.parents)
        reach[0] = 1.0
        for n in path_fn(tree, p, q, params):
            reach[n] = 1.0
        return PathLaw(reach, next_fn(p[0], params) if need_next else None)

    return path


# --------------------------------------------------------------------------
# marginals over the drafter's draw of the root's children
# --------------------------------------------------------------------------
def _first_stage(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """min(p, q) + (1 - sum min(p, q)) * norm(max(0, p - q))."""
    acc = torch.minimum(p, q)
    return acc + max(0.0, 1.0 - float(acc.sum())) * residual(p, q)


def marginal_sample(p_row: torch.Tensor, q_row: torch.Tensor, k: int = 1, params=None) -> torch.Tensor:
    """First-token law averaged over k children drawn i.i.d. from q (rule "sample").

    Exact for any k and vocabulary by this lemma: from a verifier state (p, q) whose
    next child is drawn from q, the rest of the node emits exactly p.  Induction on the
    children left: the child x ~ q is accepted with mass min(p, q)(x); a rejection
    (mass 1 - sum min(p, q) = sum max(0, p - q)) leads to the state (p', q'') with
    p' = norm(max(0, p - q)), which emits p' (one child left: the correction is drawn
    from p'); min(p, q) + max(0, p - q) = p.  q'' is q for i.i.d. children (mss tries
    them in random order, and i.i.d. children are exchangeable) and q without the
    rejected token for draws without replacement (Sequoia): the induction holds for
    any q''.  So only the first stage is computed: no enumeration, never NaN.
    Block and traversal verification behave the same way at the root (its weight
    stays 1; see verify/block.py).  The brute-force test over every drafted tuple
    (tests/test_distshift.py) checks the conditional laws independently.
    """
    return _first_stage(p_row.double(), as_dist(q_row))


def marginal_noreplace(p_row: torch.Tensor, q_row: torch.Tensor, k: int = 1, params=None) -> torch.Tensor:
    """As ``marginal_sample`` for children drawn without replacement (rule
    "sample_noreplace"): the first draw is from q (uniform when q has no mass)."""
    q = sequoia_next_q(q_row.double(), torch.zeros(q_row.numel(), dtype=torch.bool))
    return _first_stage(p_row.double(), q)


# --------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------
@overload
def _rows(x: torch.Tensor) -> torch.Tensor: ...


@overload
def _rows(x: None) -> None: ...


def _rows(x: torch.Tensor | None) -> torch.Tensor | None:
    """float64 rows renormalised to sum 1 (zero rows stay zero): float32 rows of a
    150k vocabulary are off by ~1e-6, which would otherwise show up as TV."""
    if x is None:
        return None
    x = x.double()
    return x / x.sum(-1, keepdim=True).clamp_min(1e-300)  # a zero row stays zero


def path_law(
    spec: ModeSpec, tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None, params: Mapping, need_next: bool = False
) -> PathLaw:
    """P(node on the accepted path) for every node, conditional on the drawn tokens
    (NaNs when too large to compute exactly)."""
    spec.check_tree(tree, q)
    try:
        return spec.law.path(tree, _rows(p), _rows(q), params, need_next)
    except TooBig:
        nan = torch.full((p.shape[-1],), math.nan, dtype=torch.float64)
        return PathLaw([1.0] + [math.nan] * (len(tree.parents) - 1), nan if need_next else None)


def first_token_dist(
    spec: ModeSpec, tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None, params: Mapping, marginal: bool = True
) -> torch.Tensor:
    """Exact distribution (float64 [V]) of the step's first emitted token; NaNs when it
    is not computable (see the module docstring)."""
    spec.check_tree(tree, q)
    kids = tree.children(0)
    v = p.shape[-1]
    if marginal and kids and tree.child_rule in RANDOM_RULES and not spec.law.draw_free:
        fn = spec.law.marginal.get(tree.child_rule)
        assert q is not None  # a random child rule's draw is from q
        try:
            if fn is None:
                raise TooBig
            return fn(_rows(p)[0], _rows(q)[0], len(kids), params)
        except TooBig:
            return torch.full((v,), math.nan, dtype=torch.float64)
    law = path_law(spec, tree, p, q, params, need_next=True)
    assert law.root_next is not None  # asked for (need_next)
    out = law.root_next * max(0.0, 1.0 - sum(law.reach[c] for c in kids))
    for c in kids:
        out[int(tree.tokens[c])] += law.reach[c]
    return out


def first_token_tv(
    spec: ModeSpec, tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None, params: Mapping, marginal: bool = True
) -> float:
    """Total variation 0.5 * |first_token_dist - p[0]|_1 (NaN when not computable)."""
    dist = first_token_dist(spec, tree, p, q, params, marginal)
    return 0.5 * float((dist - as_dist(p[0])).abs().sum())


def expected_accepted(
    spec: ModeSpec, tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None, params: Mapping
) -> float:
    """Exact E[#accepted draft tokens] over the verifier's randomness for this tree."""
    return float(sum(path_law(spec, tree, p, q, params).reach[1:]))


def path_end_law(
    spec: ModeSpec, tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None, params: Mapping
) -> list[tuple[int, float, torch.Tensor]]:
    """The mode's exact law of one step, conditional on the drawn tokens: (end node v,
    P(the accepted path ends at v), law of the token emitted after it) for every node
    with P > 0.  P(end at v) = reach[v] - sum of its children's reach."""
    if spec.law.next_laws is None:
        raise ValueError(f"verify={spec.name}: no next_laws in its Law")
    spec.check_tree(tree, q)
    p, q = _rows(p), _rows(q)
    reach = spec.law.path(tree, p, q, params, False).reach
    nxt = spec.law.next_laws(tree, p, q, params)
    out = []
    for v in range(len(tree.parents)):
        end = reach[v] - sum(reach[c] for c in tree.children(v))
        if end > 0:
            out.append((v, end, nxt[v]))
    return out
