"""Verification modes: one registered function per mode, one signature.

``fn(tree, p, q, rng, cfg) -> Verdict(path, next_token)``

* ``p[i]``: target next-token probabilities after node i (temperature / top-p
  already applied with ``sampling.probs``); ``q[i]``: the draft distribution
  node i's children were chosen from (zero rows where not expanded).
* ``rng``: a CPU ``torch.Generator``; every random choice uses it.
* ``cfg``: the ``verify`` config group (DictConfig, dict or None); mode
  parameters are read with ``cfg.get(key, default)``.

Registry meta: ``children`` (how the drafter picks children: "topk", "sample",
"sample_noreplace"), ``lossless`` and ``chain_only``.

Lossless: greedy (w.r.t. the greedy target), speculative, mss, sequoia, naive.
Lossy: typical, ratio, conservative, epsilon.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .registry import Registry
from .sampling import accept_prob, as_dist, residual, sample, sequoia_next_q
from .trees import DraftTree

MODES: Registry = Registry("verify mode")


class Verdict(NamedTuple):
    path: list[int]       # accepted node indices, root excluded, in depth order
    next_token: int       # bonus / correction token appended after the path


def get_mode(name: str):
    """The mode function; an unknown name lists the valid ones."""
    return MODES.get(name)


def mode_info(name: str) -> dict:
    """{"name", "children", "lossless", "chain_only", "doc"} for a mode."""
    fn = MODES.get(name)
    return {"name": name, **MODES.meta(name), "doc": (fn.__doc__ or "").strip().splitlines()[0]}


def param(cfg, key: str, default):
    """cfg.get(key, default) for a DictConfig / dict / None."""
    if cfg is None:
        return default
    val = cfg.get(key, default)
    return default if val is None else val


def children_by_rank(tree: DraftTree, node: int) -> list[int]:
    """Children of ``node`` in sibling-rank order (stable by index)."""
    kids = tree.children(node)
    return sorted(kids, key=lambda c: tree.ranks[c]) if tree.ranks else kids


def need_q(tree: DraftTree, q: torch.Tensor | None, mode: str) -> torch.Tensor:
    if q is None:
        raise ValueError(f"verify={mode} needs the draft distributions q (tree.q is None, e.g. an "
                         "n-gram drafter); use verify=greedy, naive or typical with that drafter")
    return q


def check_chain(tree: DraftTree, mode: str) -> None:
    for i in range(len(tree.parents)):
        k = len(tree.children(i))
        if k > 1:
            raise ValueError(f"verify={mode} works on a chain only, but node {i} has {k} children; "
                             f"use tree=chain (or verify=mss / sequoia for trees)")


def target_token(p_row: torch.Tensor, rng: torch.Generator, cfg) -> int:
    """The target's own token: argmax at temperature 0, else a sample from p."""
    if float(param(cfg, "temperature", 1.0)) == 0:
        return int(p_row.argmax())
    return sample(p_row, rng)


# --------------------------------------------------------------------------
# lossless
# --------------------------------------------------------------------------
@MODES.register("greedy", children="topk", lossless=True, chain_only=False)
def greedy(tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None,
           rng: torch.Generator, cfg=None) -> Verdict:
    """Longest path whose tokens equal the target's argmax, then the argmax bonus."""
    best = p.argmax(-1).tolist()
    tokens = tree.tokens.tolist()
    node, path = 0, []
    while True:
        nxt = [c for c in tree.children(node) if tokens[c] == best[node]]
        if not nxt:
            return Verdict(path, best[node])
        node = nxt[0]
        path.append(node)


def _multi_step(tree: DraftTree, p: torch.Tensor, q: torch.Tensor, rng: torch.Generator,
                shuffle: bool, update_q: bool) -> Verdict:
    """Multi-step speculative sampling down the tree.

    At each node try the children (random order if ``shuffle``, else storage
    order), accept child x with prob min(1, p(x)/q(x)); on rejection
    p <- norm(max(0, p - q)) and, if ``update_q`` (Sequoia), q[x] <- 0 renormalised
    (uniform over not-yet-rejected tokens once q has no mass).  When every child is
    rejected, or at a leaf, the next token is drawn from the current p.
    """
    tokens = tree.tokens.tolist()
    node, path = 0, []
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


@MODES.register("speculative", children="sample", lossless=True, chain_only=True)
def speculative(tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None,
                rng: torch.Generator, cfg=None) -> Verdict:
    """Speculative sampling (Leviathan et al.; Chen et al.) on a chain."""
    check_chain(tree, "speculative")
    return _multi_step(tree, p, need_q(tree, q, "speculative"), rng, shuffle=False, update_q=False)


@MODES.register("mss", children="sample", lossless=True, chain_only=False)
def mss(tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None,
        rng: torch.Generator, cfg=None) -> Verdict:
    """SpecInfer multi-step speculative sampling (children i.i.d. from q, random order)."""
    return _multi_step(tree, p, need_q(tree, q, "mss"), rng, shuffle=True, update_q=False)


@MODES.register("sequoia", children="sample_noreplace", lossless=True, chain_only=False)
def sequoia(tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None,
            rng: torch.Generator, cfg=None) -> Verdict:
    """Sequoia (children without replacement; p and q both updated on rejection)."""
    return _multi_step(tree, p, need_q(tree, q, "sequoia"), rng, shuffle=False, update_q=True)


@MODES.register("naive", children="topk", lossless=True, chain_only=False)
def naive(tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None,
          rng: torch.Generator, cfg=None) -> Verdict:
    """SpecInfer naive sampling: draw x ~ p; accept it if it is a child, else emit it."""
    tokens = tree.tokens.tolist()
    node, path = 0, []
    while True:
        x = sample(p[node], rng)
        hit = [c for c in tree.children(node) if tokens[c] == x]
        if not hit:
            return Verdict(path, x)
        node = hit[0]
        path.append(node)


# --------------------------------------------------------------------------
# lossy
# --------------------------------------------------------------------------
def typical_set(p_row: torch.Tensor, cfg) -> torch.Tensor:
    """Medusa's typical tokens: p(x) > min(eps, delta * exp(-H(p))) (bool mask).

    H uses 0 log 0 = 0.  The argmax is always typical (max p >= exp(-H)).
    """
    eps, delta = float(param(cfg, "eps", 0.09)), float(param(cfg, "delta", 0.3))
    pr = p_row.double()
    ent = -(pr * pr.clamp_min(1e-300).log()).sum()
    thr = min(eps, delta * float(torch.exp(-ent)))
    return pr > thr


def typical_path(tree: DraftTree, p: torch.Tensor, cfg) -> list[int]:
    """Longest root path whose every token is typical under its parent's p
    (Medusa picks the longest accepted candidate); ties go to the lower rank path."""
    tokens = tree.tokens.tolist()
    masks: dict[int, torch.Tensor] = {}
    best: list[int] = []

    def walk(node: int, path: list[int]) -> None:
        nonlocal best
        if len(path) > len(best):
            best = list(path)
        kids = children_by_rank(tree, node)
        if kids and node not in masks:
            masks[node] = typical_set(p[node], cfg)
        for c in kids:
            if masks[node][tokens[c]]:
                walk(c, path + [c])

    walk(0, [])
    return best


def typical_next(p_row: torch.Tensor, cfg) -> torch.Tensor:
    """Distribution of typical's next token: p restricted to its typical set."""
    keep = typical_set(p_row, cfg)
    pr = p_row.double() * keep
    return pr / pr.sum()


@MODES.register("typical", children="topk", lossless=False, chain_only=False)
def typical(tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None,
            rng: torch.Generator, cfg=None) -> Verdict:
    """Medusa typical acceptance (lossy): longest typical path, then a token from
    p restricted to the typical set (argmax at temperature 0)."""
    path = typical_path(tree, p, cfg)
    last = path[-1] if path else 0
    return Verdict(path, target_token(typical_next(p[last], cfg), rng, cfg))


def seed_rule(name: str) -> tuple[str, float]:
    """(kind, constant) of the seeds' lossy rules."""
    return {"ratio": ("factor", 1.0), "conservative": ("factor", 0.5),
            "epsilon": ("eps", 0.05)}[name]


def seed_accepts(name: str, px: float, qx: float, cfg) -> bool:
    """ratio: p >= factor*q (1.0); conservative: same with factor 0.5; epsilon: q >= p - eps."""
    kind, default = seed_rule(name)
    c = float(param(cfg, kind, default))
    return px >= c * qx if kind == "factor" else qx >= px - c


def seed_child(name: str, tree: DraftTree, node: int, p: torch.Tensor, q: torch.Tensor,
               cfg=None) -> int | None:
    """The first child of ``node`` in rank order that the rule accepts, or None."""
    for c in children_by_rank(tree, node):
        x = int(tree.tokens[c])
        if seed_accepts(name, float(p[node, x]), float(q[node, x]), cfg):
            return c
    return None


def seed_path(name: str, tree: DraftTree, p: torch.Tensor, q: torch.Tensor, cfg=None) -> list[int]:
    """Walk down taking ``seed_child``; stop at the first node with none (or a leaf)."""
    node, path = 0, []
    while (node := seed_child(name, tree, node, p, q, cfg)) is not None:
        path.append(node)
    return path


_SEED_DOCS = {"ratio": "accept x if p(x) >= q(x)", "conservative": "accept x if p(x) >= 0.5 q(x)",
              "epsilon": "accept x if q(x) >= p(x) - 0.05"}


def _seed_mode(name: str):
    def fn(tree: DraftTree, p: torch.Tensor, q: torch.Tensor | None,
           rng: torch.Generator, cfg=None) -> Verdict:
        path = seed_path(name, tree, p, need_q(tree, q, name), cfg)
        return Verdict(path, target_token(p[path[-1] if path else 0], rng, cfg))
    fn.__name__ = name
    fn.__doc__ = (f"Seed rule '{name}' (lossy): {_SEED_DOCS[name]}; children tried in rank order, "
                  "stop at the first rejection, then the target's token (argmax at temperature 0).")
    return fn


for _name in ("ratio", "conservative", "epsilon"):
    MODES.register(_name, children="topk", lossless=False, chain_only=False)(_seed_mode(_name))
