"""Lossy verification modes: Medusa's typical acceptance and the seeds' ratio rules.

Each is one ``ModeSpec`` registration (conventions in ``modespec``).  They accept a
deterministic path, so their exact law is that path plus the law of the token after
it; they are lossless for no child rule and report their drift as first_token_tv.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.tree import DraftTree
from .distshift import fixed_next, fixed_path
from .modespec import Law, ModeParams, ModeSpec, Verdict, children_by_rank, register, target_dist, target_token


# --------------------------------------------------------------------------
# Medusa typical acceptance
# --------------------------------------------------------------------------
def typical_set(p_row: torch.Tensor, params: TypicalParams) -> torch.Tensor:
    """Medusa's typical tokens: p(x) > min(eps, delta * exp(-H(p))) (bool mask).

    H uses 0 log 0 = 0.  The argmax is always typical (max p >= exp(-H)).
    """
    pr = p_row.double()
    ent = -(pr * pr.clamp_min(1e-300).log()).sum()
    thr = min(float(params.eps), float(params.delta) * float(torch.exp(-ent)))
    return pr > thr


def typical_path(tree: DraftTree, p: torch.Tensor, q=None, params=None) -> list[int]:
    """Medusa's choice: the longest root path whose every token is typical under its
    parent's p; among equally long ones the most likely (largest sum of log p, as
    Medusa's ``evaluate_posterior``); exact likelihood ties go to the lower rank path."""
    tokens = tree.tokens.tolist()
    best: tuple[int, float, list[int]] = (0, 0.0, [])

    def walk(node: int, path: list[int], loglik: float) -> None:
        nonlocal best
        if (len(path), loglik) > best[:2]:
            best = (len(path), loglik, list(path))
        kids = children_by_rank(tree, node)
        if not kids:
            return
        mask, logp = typical_set(p[node], params), p[node].double().clamp_min(1e-300).log()
        for c in kids:
            if mask[tokens[c]]:
                walk(c, path + [c], loglik + float(logp[tokens[c]]))

    walk(0, [], 0.0)
    return best[2]


def typical_next(p_row: torch.Tensor, params) -> torch.Tensor:
    """Law of typical's next token: p restricted to its typical set (argmax at T=0)."""
    pr = p_row.double() * typical_set(p_row, params)
    return target_dist(pr / pr.sum(), params)


def typical(tree: DraftTree, p: torch.Tensor, q, rng: torch.Generator, params) -> Verdict:
    """Medusa typical acceptance (lossy): longest typical path, then a token from
    p restricted to the typical set (argmax at temperature 0)."""
    path = typical_path(tree, p, q, params)
    return Verdict(path, target_token(typical_next(p[path[-1] if path else 0], params), rng, params))


@dataclass(frozen=True, eq=False)
class TypicalParams(ModeParams):
    eps: float = 0.09
    delta: float = 0.3


register(
    ModeSpec(
        name="typical",
        verdict=typical,
        child_rule="topk",
        lossless_for=frozenset(),
        law=Law(fixed_path(typical_path, typical_next), next_laws=fixed_next(typical_next)),
        params_type=TypicalParams,
        doc=(typical.__doc__ or "").splitlines()[0],
    )
)


# --------------------------------------------------------------------------
# the seeds' rules: ratio, conservative, epsilon
# --------------------------------------------------------------------------
def _factor_rule(px: float, qx: float, params: FactorParams) -> bool:
    return px >= float(params.factor) * qx


def _eps_rule(px: float, qx: float, params: EpsParams) -> bool:
    return qx >= px - float(params.eps)


def seed_path(accepts, tree: DraftTree, p: torch.Tensor, q: torch.Tensor, params) -> list[int]:
    """Walk down taking the first child (rank order) the rule ``accepts``; stop at
    the first node with none (or a leaf)."""
    node = 0
    path: list[int] = []
    while True:
        nxt = [
            c
            for c in children_by_rank(tree, node)
            if accepts(float(p[node, tree.tokens[c]]), float(q[node, tree.tokens[c]]), params)
        ]
        if not nxt:
            return path
        node = nxt[0]
        path.append(node)


def _seed_mode(name: str, accepts, params_type: type[ModeParams], rule: str) -> ModeSpec:
    def walk(tree, p, q, params):
        return seed_path(accepts, tree, p, q, params)

    def fn(tree: DraftTree, p: torch.Tensor, q, rng: torch.Generator, params) -> Verdict:
        path = walk(tree, p, q, params)
        return Verdict(path, target_token(p[path[-1] if path else 0], rng, params))

    fn.__name__ = name
    fn.__doc__ = (
        f"Seed rule '{name}' (lossy): {rule}; children tried in rank order, stop at "
        "the first rejection, then the target's token (argmax at temperature 0)."
    )
    return ModeSpec(
        name=name,
        verdict=fn,
        child_rule="topk",
        lossless_for=frozenset(),
        law=Law(fixed_path(walk, target_dist), next_laws=fixed_next(target_dist)),
        needs_q=True,
        params_type=params_type,
        doc=f"Seed rule (lossy): {rule}.",
    )


@dataclass(frozen=True, eq=False)
class FactorParams(ModeParams):
    factor: float = 1.0


@dataclass(frozen=True, eq=False)
class ConservativeParams(FactorParams):
    factor: float = 0.5


@dataclass(frozen=True, eq=False)
class EpsParams(ModeParams):
    eps: float = 0.05


register(_seed_mode("ratio", _factor_rule, FactorParams, "accept x if p(x) >= factor q(x) (1)"))
register(_seed_mode("conservative", _factor_rule, ConservativeParams, "accept x if p(x) >= factor q(x) (0.5)"))
register(_seed_mode("epsilon", _eps_rule, EpsParams, "accept x if q(x) >= p(x) - eps (0.05)"))
