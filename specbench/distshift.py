"""Exact distribution shift of a verify mode, per decode step.

``first_token_dist(mode, tree, p, q, cfg)`` is the exact distribution of the
FIRST emitted token of one step (the first accepted child of the root, or the
correction token when the root's children are all rejected), computed by
enumerating the randomness analytically; no Monte Carlo.
``first_token_tv`` = 0.5 * |dist - p[0]|_1.  ``expected_accepted`` is the exact
expectation of the number of accepted tokens over the verifier's coins and
child orders for THIS drafted tree.

What is enumerated (``marginal=True``, the default)
---------------------------------------------------
Losslessness of speculative / mss / sequoia holds on average over the draft's
draw of the children, not conditionally on the drawn tokens (with q == p a
single drafted token x is always accepted, so the output is x, not p).  So for
the sampling modes the first-token distribution also averages over the
drafter's draw of the root's k children (k = the tree's root child count,
drawn from q[0] by the mode's child rule) -- the distribution a user of the
decoder actually gets at this context.  Deeper nodes cannot affect the first
token.  Deterministic (top-k) modes have no draft randomness and use the
tree's actual tokens.  ``marginal=False`` conditions on the actual tokens
for every mode (verifier randomness only).

* mss / speculative, marginal: children i.i.d. from q, so the i-th tried child
  accepts y with prob min(p_i, q)(y), where p_{i+1} = norm(max(0, p_i - q)) does
  not depend on which token was rejected: dist = sum_i R_i min(p_i, q) + R_k p_k.
* mss, conditional: the random child order is handled exactly by a dynamic
  programme over the SET of children already rejected (p_i depends only on how
  many were rejected, and each untried child is next with prob 1/#untried);
  2^k states, fine for k <= 16 (NaN beyond).  Duplicate tokens are handled.
* sequoia, marginal: enumerate the ordered draws without replacement over
  tokens that can be rejected (q > p); the last two levels need no branching.  Branches with
  probability < 1e-12 are skipped and their (tiny) mass assigned to the current
  residual; if more than 1e-7 mass would be skipped, or more than 20000 branches
  are needed, the result is NaN.
* typical, ratio, conservative, epsilon, greedy: deterministic paths; the token
  after the path is the target's (argmax at temperature 0).  naive: x ~ p either way.

Caveat: from any state (p_i, q_i) a last child emits min(p_i, q_i) + max(p_i - q_i, 0)
= p_i; applied level by level this IS the losslessness proof, so for a correctly
wired drafter (children really drawn from the q rows the verifier is given) the
lossless modes' marginal TV is ~1e-16 by construction: it certifies the
arithmetic and the rows' normalisation, not the drafter.  The conditional
(``marginal=False``) values and ``expected_accepted`` do depend on the drawn tokens.
``expected_accepted`` is exact for every mode (NaN: mss node with > 16 children,
or a mode that needs q when q is None).
"""
from __future__ import annotations

import math

import torch

from .sampling import accept_prob, as_dist, residual, sequoia_next_q
from .trees import DraftTree
from .verify import MODES, check_chain, param, seed_child, typical_next, typical_path

MAX_DP_CHILDREN = 16
SEQUOIA_TOL, SEQUOIA_MAX_DROP, SEQUOIA_MAX_BRANCHES = 1e-12, 1e-7, 20000


class _TooBig(Exception):
    pass


def _target_dist(p_row: torch.Tensor, cfg) -> torch.Tensor:
    pr = p_row.double()
    if float(param(cfg, "temperature", 1.0)) == 0:
        return torch.zeros_like(pr).scatter_(0, pr.argmax().view(1), 1.0)
    return pr


# --------------------------------------------------------------------------
# one node, conditional on its children's tokens:
#   -> ({child: P(accepted)}, distribution of the token emitted if none is, P(none))
# --------------------------------------------------------------------------
def _node_mss(tree, node, p, q, cfg, final=True):
    kids = tree.children(node)
    xs = [int(tree.tokens[c]) for c in kids]
    k = len(kids)
    if k > MAX_DP_CHILDREN:
        raise _TooBig
    qr = q[node].double()
    ps = [p[node].double()]
    for _ in range(k if final else k - 1):      # p_k only matters for the emitted token
        ps.append(residual(ps[-1], qr))
    a = [[accept_prob(ps[i], qr, x) for x in xs] for i in range(k)]
    f = [0.0] * (1 << k)
    f[0] = 1.0
    acc = dict.fromkeys(kids, 0.0)
    for s in range(1 << k):
        if f[s] == 0.0:
            continue
        n = bin(s).count("1")
        if n == k:
            continue
        share = f[s] / (k - n)
        for j in range(k):
            if not s >> j & 1:
                acc[kids[j]] += share * a[n][j]
                f[s | 1 << j] += share * (1.0 - a[n][j])
    return acc, ps[-1], f[-1]


def _node_sequoia(tree, node, p, q, cfg, final=True):
    kids = tree.children(node)
    pr = p[node].double()
    qr = sequoia_next_q(q[node].double(), torch.zeros(pr.numel(), dtype=torch.bool))
    rejected = torch.zeros(pr.numel(), dtype=torch.bool)
    acc, reach = {}, 1.0
    for c in kids:
        x = int(tree.tokens[c])
        a = accept_prob(pr, qr, x)
        acc[c] = reach * a
        reach *= 1.0 - a
        if len(acc) == len(kids) and not final:
            break
        pr = residual(pr, qr)
        rejected[x] = True
        if len(acc) < len(kids):
            qr = sequoia_next_q(qr, rejected)
    return acc, pr, reach


def _node_greedy(tree, node, p, q, cfg, final=True):
    best = int(p[node].argmax())
    hit = [c for c in tree.children(node) if int(tree.tokens[c]) == best]
    final = torch.zeros(p.shape[-1], dtype=torch.float64)
    final[best] = 1.0
    return ({hit[0]: 1.0}, final, 0.0) if hit else ({}, final, 1.0)


def _node_naive(tree, node, p, q, cfg, final=True):
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


def _node_seed(name):
    def node_fn(tree, node, p, q, cfg, final=True):
        c = seed_child(name, tree, node, p, q, cfg)
        return ({c: 1.0}, _target_dist(p[node], cfg), 0.0) if c is not None \
            else ({}, _target_dist(p[node], cfg), 1.0)
    return node_fn


NODE = {"greedy": _node_greedy, "naive": _node_naive, "mss": _node_mss, "speculative": _node_mss,
        "sequoia": _node_sequoia, "ratio": _node_seed("ratio"),
        "conservative": _node_seed("conservative"), "epsilon": _node_seed("epsilon")}


# --------------------------------------------------------------------------
# marginals over the drafter's draw of the root's children
# --------------------------------------------------------------------------
def _mss_marginal(p_row: torch.Tensor, q_row: torch.Tensor, k: int) -> torch.Tensor:
    pr, qr = p_row.double(), q_row.double()
    out, reach = torch.zeros_like(pr), 1.0
    for _ in range(k):
        acc = torch.minimum(pr, qr)
        out += reach * acc
        reach *= max(0.0, 1.0 - float(acc.sum()))
        pr = residual(pr, qr)
    return out + reach * pr


def _sequoia_marginal(p_row: torch.Tensor, q_row: torch.Tensor, k: int) -> torch.Tensor:
    """Enumerate the ordered draws without replacement (only rejected tokens branch).

    The last child needs no branching: from any state (p_i, q_i) it emits
    min(p_i, q_i) + (1 - sum min) * norm(max(p_i - q_i, 0)) = p_i exactly (elementary
    algebra), so the second-to-last level adds (reject mass) * p_{i+1} directly.
    """
    v = p_row.numel()
    out = torch.zeros(v, dtype=torch.float64)
    state = {"drop": 0.0, "branches": 0}

    def rec(pr, qr, rejected, m, w):
        acc = torch.minimum(pr, qr)            # P(draw y and accept y)
        out.add_(w * acc)
        rej = w * (qr - acc)                   # P(reach, draw y and reject y)
        pn = residual(pr, qr)
        if m <= 2:
            out.add_(float(rej.sum()) * pn)
            return
        big = rej >= SEQUOIA_TOL
        small = float(rej[~big].sum())
        state["drop"] += small
        out.add_(small * pn)                   # skipped branches, error <= SEQUOIA_MAX_DROP
        ys = torch.nonzero(big).flatten().tolist()
        state["branches"] += len(ys)
        if state["branches"] > SEQUOIA_MAX_BRANCHES or state["drop"] > SEQUOIA_MAX_DROP:
            raise _TooBig
        for y in ys:
            rj = rejected.clone()
            rj[y] = True
            rec(pn, sequoia_next_q(qr, rj), rj, m - 1, float(rej[y]))

    rec(p_row, sequoia_next_q(q_row, torch.zeros(v, dtype=torch.bool)),
        torch.zeros(v, dtype=torch.bool), k, 1.0)
    return out


# --------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------
def first_token_dist(mode: str, tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None,
                     cfg=None, marginal: bool = True) -> torch.Tensor:
    """Exact distribution (float64 [V]) of the step's first emitted token; NaNs when
    the exact computation is too large (see the module docstring)."""
    fn = MODES.get(mode)
    if MODES.meta(mode).get("chain_only"):
        check_chain(tree, mode)
    k = len(tree.children(0))
    p = _rows(p)
    q = None if q is None else _rows(q)
    try:
        if mode == "typical":
            path = typical_path(tree, p, cfg)
            if path:
                return _onehot(int(tree.tokens[path[0]]), p.shape[-1])
            return _target_dist(typical_next(p[0], cfg), cfg)
        if mode not in NODE:
            raise NotImplementedError(f"no exact first-token distribution for verify={mode} ({fn})")
        if q is None and mode not in ("greedy", "naive"):
            raise ValueError(f"verify={mode} needs the draft distributions q")
        if marginal and k and MODES.meta(mode)["children"] == "sample":
            return _mss_marginal(p[0], q[0], k)
        if marginal and k and MODES.meta(mode)["children"] == "sample_noreplace":
            return _sequoia_marginal(p[0], q[0], k)
        acc, final, none = NODE[mode](tree, 0, p, q, cfg)
    except _TooBig:
        return torch.full((p.shape[-1],), math.nan, dtype=torch.float64)
    out = none * final
    for c, a in acc.items():
        out[int(tree.tokens[c])] += a
    return out


def _rows(x: torch.Tensor) -> torch.Tensor:
    """float64 rows renormalised to sum 1 (zero rows stay zero): float32 rows of a
    150k vocabulary are off by ~1e-6, which would otherwise show up as TV."""
    x = x.double()
    s = x.sum(-1, keepdim=True)
    return torch.where(s > 0, x / s.clamp_min(1e-300), x)


def _onehot(x: int, v: int) -> torch.Tensor:
    out = torch.zeros(v, dtype=torch.float64)
    out[x] = 1.0
    return out


def first_token_tv(mode: str, tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None,
                   cfg=None, marginal: bool = True) -> float:
    """Total variation 0.5 * |first_token_dist - p[0]|_1 (NaN when not computable)."""
    dist = first_token_dist(mode, tree, p, q, cfg, marginal)
    return 0.5 * float((dist - as_dist(p[0])).abs().sum())


def expected_accepted(mode: str, tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None,
                      cfg=None) -> float:
    """Exact E[#accepted draft tokens] over the verifier's randomness for this tree."""
    MODES.get(mode)
    if mode == "typical":
        return float(len(typical_path(tree, p, cfg)))
    if mode not in NODE or (q is None and mode not in ("greedy", "naive")):
        return math.nan
    node_fn = NODE[mode]
    p = _rows(p)
    q = None if q is None else _rows(q)

    def e(node: int) -> float:
        if not tree.children(node):
            return 0.0
        acc, _, _ = node_fn(tree, node, p, q, cfg, final=False)
        return sum(a * (1.0 + e(c)) for c, a in acc.items() if a > 0)

    try:
        return e(0)
    except _TooBig:
        return math.nan
