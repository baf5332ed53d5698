"""Draft-tree shapes and the one tree-attention mask.

A tree is a list of parent pointers.  Node 0 is the *root*: the last committed
token, which is not yet in any KV cache.  Nodes 1..N are the N draft tokens
(the budget).  Nodes are stored breadth-first, so a parent always has a smaller
index than its children and each depth is a contiguous index range.

A *static shape* is a prefix-closed set of draft rank paths, Medusa style:
``(0,)`` is the draft's top-1 first token, ``(0, 1)`` the runner-up child of
that token, and so on.

Budget rule (documented in docs/trees.md): a generated shape lists its rank paths
breadth-first, ordered by (depth, rank path); a budget of N keeps the first N.
Because a parent is shorter than its children it always comes first, so the
kept set is still a tree.  An explicit list (``paths``, ``medusa63``) is
trimmed in its listed order instead (Medusa lists paths by priority); every
prefix of the kept list must be a tree.  A finite shape (``specinfer``, ``paths``,
``medusa63``) with fewer than N paths is padded by lengthening its all-zero
(top-1) chain until it has N nodes.  The shapes themselves are tree policies
(``trees.shapes``); this module applies the budget rule to their paths (``fit_budget``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import torch

RankPath = tuple[int, ...]


# --------------------------------------------------------------------------
# the mask, written once
# --------------------------------------------------------------------------
def depths(parents: Sequence[int]) -> list[int]:
    """Depth of every node; the root (parent -1) has depth 0."""
    out: list[int] = []
    for i, p in enumerate(parents):
        if p >= i:
            raise ValueError(f"node {i} has parent {p}: parents must precede children")
        out.append(0 if p < 0 else out[p] + 1)
    return out


@lru_cache(maxsize=512)
def compiled(parents: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """(ancestor mask [T, T] bool, depths [T] long) of one tree, built once per distinct
    tree: a static shape's buffers are compiled once per policy (as Medusa compiles its
    buffers once per choice set).  Read-only: callers copy before writing.

    EAGLE's construction: each node's mask row is its parent's row plus itself.
    """
    t = len(parents)
    mask = torch.zeros(t, t, dtype=torch.bool)
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i] = mask[p]
        mask[i, i] = True
    return mask, torch.tensor(depths(parents), dtype=torch.long)


def ancestor_mask(parents: Sequence[int], device=None) -> torch.Tensor:
    """Boolean [T, T]: row i is True at i and at every ancestor of i (``compiled``)."""
    mask = compiled(tuple(int(p) for p in parents))[0].clone()
    return mask.to(device) if device is not None else mask


def tree_attention_mask(
    parents: Sequence[int], past_len: int, start: int = 0, stop: int | None = None, dtype=torch.float32, device=None
) -> torch.Tensor:
    """Additive 4-D mask [1, 1, stop-start, past_len+stop] for the tree's nodes
    ``start:stop`` as queries.

    Keys are the ``past_len`` cached prefix tokens (always visible) followed by
    tree nodes ``0:stop`` in index order; a node sees itself and its ancestors.
    0 means "may attend", the dtype's minimum means "masked".
    """
    stop = len(parents) if stop is None else stop
    allowed = torch.ones(stop - start, past_len + stop, dtype=torch.bool)
    allowed[:, past_len:] = ancestor_mask(parents[:stop])[start:stop]
    mask = torch.zeros(allowed.shape, dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    mask = mask[None, None]
    return mask.to(device) if device is not None else mask


def tree_position_ids(
    parents: Sequence[int], past_len: int, start: int = 0, stop: int | None = None, device=None
) -> torch.Tensor:
    """Position ids [1, stop-start]: prefix length plus node depth."""
    d = depths(parents)[start:stop]
    return torch.tensor([[past_len + x for x in d]], dtype=torch.long, device=device)


# --------------------------------------------------------------------------
# rank paths <-> parent pointers
# --------------------------------------------------------------------------
def sort_paths(paths) -> list[RankPath]:
    """Deduplicate and order breadth-first by (depth, rank path)."""
    return sorted({tuple(int(r) for r in p) for p in paths}, key=lambda p: (len(p), p))


def check_prefix_closed(paths: Sequence[RankPath]) -> None:
    have = set(paths)
    for p in paths:
        if len(p) == 0:
            raise ValueError("empty rank path: the root is implicit, list only draft nodes")
        if len(p) > 1 and p[:-1] not in have:
            raise ValueError(f"rank path {list(p)} has no parent {list(p[:-1])}: a shape must be prefix-closed")


def fit_budget(paths, budget: int, listed_order: bool = False) -> list[RankPath]:
    """Apply the budget rule: keep the first N (breadth-first, or in the listed
    order for explicit path lists), or pad the top-1 chain; store breadth-first."""
    if budget < 1:
        raise ValueError(f"tree.budget={budget}: the budget (number of draft tokens) must be >= 1")
    ordered = list(dict.fromkeys(tuple(int(r) for r in p) for p in paths)) if listed_order else sort_paths(paths)
    if len(ordered) >= budget:
        kept = ordered[:budget]
        check_prefix_closed(kept)
        return sort_paths(kept)
    check_prefix_closed(ordered)
    have = set(ordered)
    chain: RankPath = ()
    while len(ordered) < budget:
        chain = chain + (0,)
        if chain not in have:
            ordered.append(chain)
    return sort_paths(ordered)


def paths_to_parents(paths: Sequence[RankPath]) -> list[int]:
    """Parent pointers with the root at index 0; node i+1 is paths[i]."""
    index: dict[RankPath, int] = {(): 0}
    parents = [-1]
    for i, p in enumerate(paths):
        parents.append(index[p[:-1]])
        index[p] = i + 1
    return parents


def max_depth(paths: Sequence[RankPath]) -> int:
    return max((len(p) for p in paths), default=0)


# --------------------------------------------------------------------------
# a drafted tree
# --------------------------------------------------------------------------


@dataclass
class DraftTree:
    """One drafted tree.  Index 0 is the root (the last committed token).

    ``q[i]`` is the draft distribution the children of node i were chosen from
    (after draft temperature); rows of nodes that were never expanded are zero.
    ``ranks[i]`` is node i's sibling rank (0 for the root).
    ``scored`` is what drafting this tree cost: the query tokens of each draft-model
    forward (the first holds the committed tokens not yet in the draft cache and the
    root; then one forward per expanded depth); empty when no model ran (n-gram).
    ``child_rule`` records how children were chosen (``sampling.CHILD_RULES``):
    "topk" (the draft's top-k of q), "sample" (i.i.d. from q, with replacement),
    "sample_noreplace" (from q without replacement, Sequoia), or "fixed"
    (candidates not drawn from q at all: n-gram or merged nodes).  Verification
    modes are lossless only for the child rules they were derived for.
    """

    parents: list[int]
    tokens: torch.Tensor  # LongTensor [N+1], tokens[0] = root
    ranks: list[int]
    q: torch.Tensor | None = None  # [N+1, V] float32, or None (n-gram drafts)
    slots: list[int] | None = None  # drafter-side cache slot per node, -1 if never forwarded
    child_rule: str = "topk"  # how children were chosen (see above)
    scored: tuple[int, ...] = ()  # tokens the drafter's model scored per draft forward this step

    @property
    def size(self) -> int:
        return len(self.parents) - 1

    @property
    def depth(self) -> int:
        return max(depths(self.parents))

    def children(self, i: int) -> list[int]:
        return [j for j, p in enumerate(self.parents) if p == i]

    def rank_path(self, nodes: Sequence[int]) -> str:
        return ".".join(str(self.ranks[n]) for n in nodes)

    @classmethod
    def root_only(cls, token: int, rule: str = "topk") -> DraftTree:
        """A tree with no draft nodes (tree=none, or a drafter with nothing to propose)."""
        return cls(parents=[-1], tokens=torch.tensor([int(token)]), ranks=[0], q=None, slots=None, child_rule=rule)
