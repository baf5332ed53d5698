"""EAGLE-2 dynamic draft trees (Li et al. 2024, "EAGLE-2"), on a plain draft LM.

Parameters (``Eagle2Params``, the option ``tree=eagle2``): ``budget`` N (draft tokens kept),
``width`` k (top-k per expansion and frontier size), ``depth`` D (maximum
tree depth = number of draft forwards per step).

1. ``begin()`` forwards the pending tokens; the root's top-k tokens are the
   depth-1 candidates.  The score of a candidate is its cumulative draft
   log-probability (its own log-prob + its parent's score), computed from the
   draft's softmax at temperature 1 (EAGLE-2's confidence), whatever the
   verify temperature.
2. Depths 2..D: ONE ``extend`` call forwards the current frontier (k nodes);
   each gets its top-k children as candidates; the k best-scoring new
   candidates form the next frontier.  (EAGLE-2's code: ``depth`` expansion
   steps after the root's top-k; our D counts the root step, so D = 6 here
   equals EAGLE-2's depth=5.)
3. Rerank all candidates and keep the N best.  Scores never increase along a
   path (log-probs <= 0) and ties are broken in favour of shallower, earlier
   candidates, so the kept set is prefix-closed: a connected tree.  It is
   re-listed breadth-first; forwarded nodes keep their draft-cache slot.

Children are always the draft's top-k, as in EAGLE-2: the tree's
``child_rule`` is "topk" whatever the verify mode asks, so job validation
refuses sampling modes that are lossless only for sampled children.

The policy (``policies.Eagle2Policy``) holds the parameters; a model drafter
grows it with ``grow`` + ``select`` over its ``begin`` / ``extend`` primitives.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..core.sampling import top_tokens
from ..core.tree import DraftTree
from .base import Params, positive

DEFAULT_WIDTH = 10
DEFAULT_DEPTH = 6


def check_params(budget: int, width: int, depth: int) -> None:
    if width < 1 or depth < 1:
        raise ValueError(f"eagle2: tree.width={width} and tree.depth={depth} must be >= 1")
    cap = width + (depth - 1) * width * width
    if budget > cap:
        raise ValueError(
            f"eagle2: tree.budget={budget} exceeds the {cap} candidates of width={width}, "
            f"depth={depth}: raise tree.width or tree.depth"
        )


@dataclass(frozen=True)
class Eagle2Params(Params):
    """Width k (frontier nodes expanded per depth) and depth D (draft forwards)."""

    width: int = positive(DEFAULT_WIDTH)
    depth: int = positive(DEFAULT_DEPTH)


@dataclass
class Candidates:
    """Every node EAGLE-2 scored in one step (the root is index -1)."""

    root_token: int
    root_slot: int
    parent: list[int] = field(default_factory=list)
    token: list[int] = field(default_factory=list)
    rank: list[int] = field(default_factory=list)
    score: list[float] = field(default_factory=list)
    depth: list[int] = field(default_factory=list)
    slot: list[int] = field(default_factory=list)  # -1 unless forwarded
    q_rows: dict = field(default_factory=dict)  # candidate (or -1) -> q row

    def add_children(self, parent: int, logits: torch.Tensor, k: int) -> list[int]:
        logp = torch.log_softmax(logits.double(), dim=-1)
        top = top_tokens(logp, k).tolist()  # = stable full argsort's first k, 15x cheaper
        base = 0.0 if parent < 0 else self.score[parent]
        d = 1 if parent < 0 else self.depth[parent] + 1
        new = []
        for r, tok in enumerate(top):
            new.append(len(self.token))
            self.parent.append(parent)
            self.token.append(int(tok))
            self.rank.append(r)
            self.score.append(base + float(logp[tok]))
            self.depth.append(d)
            self.slot.append(-1)
        return new

    def order(self) -> list[int]:
        """Candidates best first: score desc, then shallower, then earlier."""
        return sorted(range(len(self.token)), key=lambda c: (-self.score[c], self.depth[c], c))


def grow(drafter, width: int, depth: int):
    """Run the expansion phase: `depth` draft forwards, k nodes each after the first (a
    level generator over the drafter's ``begin`` / ``extend``; returns the Candidates)."""
    root_logits = yield from drafter.begin()
    cand = Candidates(root_token=int(drafter.pending[-1]), root_slot=drafter.root_slot)
    cand.q_rows[-1] = drafter.q(root_logits)
    frontier = cand.add_children(-1, root_logits, width)
    for _ in range(depth - 1):
        parent_slots = [cand.root_slot if cand.parent[c] < 0 else cand.slot[cand.parent[c]] for c in frontier]
        logits = yield from drafter.extend(parent_slots, [cand.token[c] for c in frontier])
        base = len(drafter.side_parents) - len(frontier)
        new: list[int] = []
        for j, c in enumerate(frontier):
            cand.slot[c] = base + j
            cand.q_rows[c] = drafter.q(logits[j])
            new += cand.add_children(c, logits[j], width)
        frontier = sorted(new, key=lambda c: (-cand.score[c], c))[:width]
    return cand


def select(cand: Candidates, n: int) -> DraftTree:
    """The N best candidates as a breadth-first DraftTree."""
    keep = cand.order()[:n]
    kept = set(keep)
    for c in keep:
        if cand.parent[c] >= 0 and cand.parent[c] not in kept:
            raise AssertionError("eagle2: the top-N candidates are not prefix-closed")
    order: list[int] = []  # breadth-first: by depth, parent position, rank
    pos = {-1: 0}
    for d in range(1, max((cand.depth[c] for c in keep), default=0) + 1):
        level = sorted((c for c in keep if cand.depth[c] == d), key=lambda c: (pos[cand.parent[c]], cand.rank[c]))
        for c in level:
            pos[c] = len(order) + 1
            order.append(c)
    has_kids = {cand.parent[c] for c in keep}
    vocab = cand.q_rows[-1].shape[-1]
    q = torch.zeros(len(order) + 1, vocab)
    if -1 in has_kids:
        q[0] = cand.q_rows[-1]
    for i, c in enumerate(order, start=1):
        if c in has_kids:
            q[i] = cand.q_rows[c]
    return DraftTree(
        parents=[-1] + [pos[cand.parent[c]] for c in order],
        tokens=torch.tensor([cand.root_token] + [cand.token[c] for c in order]),
        ranks=[0] + [cand.rank[c] for c in order],
        q=q,
        slots=[cand.root_slot] + [cand.slot[c] for c in order],
        child_rule="topk",
    )
