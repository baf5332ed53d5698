"""N-gram (prompt-lookup) drafting, and the token trie that merges drafts.

``ngram`` drafter (PLD / HF prompt lookup, as a tree):
  * the history is the prompt plus every committed token; its last token is the
    tree root;
  * for n = ``max_ngram`` .. ``min_ngram`` (4..1, longest first) find every
    earlier occurrence of the history's last n tokens, most recent first, and
    take the tokens that followed it as a proposed continuation;
  * the continuations, in that priority order, are inserted into a token trie
    (identical prefixes are shared, a new token makes a new branch); a node's
    sibling rank is its insertion order (0 = from the highest-priority match);
  * a static shape (``tree=chain``, ``binary``, ...: rank paths) keeps exactly
    the trie nodes whose rank path is in the shape, so ``binary`` has at most 2
    children per node ranked by match priority and ``chain`` follows the best
    match (extended by later matches that share it);
  * ``tree=ngram_trie`` (its own policy) inserts continuations until the trie
    holds ``budget`` nodes, no node deeper than ``tree.depth`` (default: budget);
  * No match -> a tree with 0 draft nodes: the step then emits only the
    target's own token.

There is no draft model: ``DraftTree.q`` is None, the tree's child rule is
"fixed" (candidates not drawn from any q: only greedy and other fixed-candidate
modes verify it losslessly) and every node's draft-cache slot is -1.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from ..core.tree import DraftTree, RankPath
from .drafters import DRAFTERS, Drafter
from .levels import Levels

MAX_NGRAM, MIN_NGRAM = 4, 1  # the n-gram sizes matched, longest first


def continuations(
    history: Sequence[int], max_len: int, max_ngram: int = MAX_NGRAM, min_ngram: int = MIN_NGRAM
) -> list[list[int]]:
    """Continuations of the history's suffix n-grams, best first, deduplicated.

    Longer n-grams come first; for one n, the most recent occurrence first.
    """
    return list(iter_continuations(history, max_len, max_ngram, min_ngram))


def iter_continuations(
    history: Sequence[int], max_len: int, max_ngram: int = MAX_NGRAM, min_ngram: int = MIN_NGRAM
) -> Iterator[list[int]]:
    """``continuations``, one at a time (a trie that fills stops drawing them).  An occurrence of
    any suffix n-gram ends where the history's last token occurs, so those positions are found
    once and each n compares only there."""
    if not 1 <= min_ngram <= max_ngram:
        raise ValueError(f"ngram sizes min={min_ngram} max={max_ngram}: need 1 <= min <= max")
    h = list(history)
    if not h:
        return
    ends = [j for j in range(len(h) - 2, -1, -1) if h[j] == h[-1]]  # most recent first, a token after each
    seen: set[tuple[int, ...]] = set()
    for n in range(max_ngram, min_ngram - 1, -1):
        if len(h) <= n:
            continue
        suffix = h[-n:]
        for j in ends:
            if j >= n - 1 and h[j - n + 1 : j + 1] == suffix:
                cont = tuple(h[j + 1 : j + 1 + max_len])
                if cont not in seen:
                    seen.add(cont)
                    yield list(cont)


class Trie:
    """A draft tree under construction, keyed by token; nodes keep a payload.

    Node 0 is the root.  ``meta[i]`` holds per-node data carried over from a
    model-drafted tree (its slot and q row index); n-gram nodes have none.
    """

    def __init__(self, root_token: int):
        self.parents = [-1]
        self.tokens = [int(root_token)]
        self.ranks = [0]
        self.meta: list[int | None] = [0]
        self.kids: list[dict[int, int]] = [{}]

    @property
    def size(self) -> int:
        return len(self.parents) - 1

    def add(self, parent: int, token: int, meta: int | None = None) -> int:
        token = int(token)
        if token in self.kids[parent]:
            return self.kids[parent][token]
        i = len(self.parents)
        self.parents.append(parent)
        self.tokens.append(token)
        self.ranks.append(len(self.kids[parent]))  # dropped siblings (-1) count too
        self.meta.append(meta)
        self.kids.append({})
        self.kids[parent][token] = i
        return i

    def insert(self, seq: Sequence[int], limit: int, max_depth: int, shape: set | None = None) -> None:
        """Walk/extend the path spelled by seq while the trie has < limit nodes.
        With ``shape`` (a set of rank paths) a new node is kept only if its rank
        path is in the shape; a dropped node still takes its sibling rank."""
        node = 0
        path: tuple[int, ...] = ()
        for tok in seq[:max_depth]:
            nxt = self.kids[node].get(int(tok))
            if nxt is None:
                if self.size >= limit:
                    return
                rank = len(self.kids[node])
                if shape is not None and path + (rank,) not in shape:
                    self.kids[node][int(tok)] = -1  # a rank taken by a node outside the shape
                    return
                nxt = self.add(node, tok)
            if nxt < 0:
                return
            node, path = nxt, path + (self.ranks[nxt],)

    @classmethod
    def from_tree(cls, tree: DraftTree) -> Trie:
        """A trie holding a drafted tree; meta[i] = the node's index in `tree`."""
        t = cls(int(tree.tokens[0]))
        index = {0: 0}
        for i in range(1, len(tree.parents)):
            j = t.add(index[tree.parents[i]], int(tree.tokens[i]), meta=i)
            t.ranks[j] = tree.ranks[i]
            index[i] = j
        return t

    def bfs_order(self) -> list[int]:
        """Node ids breadth-first; siblings by rank."""
        order, level = [0], [0]
        while level:
            level = [
                c
                for n in level
                for c in sorted((c for c in self.kids[n].values() if c >= 0), key=lambda c: self.ranks[c])
            ]
            order += level
        return order

    def to_tree(
        self, q_source: torch.Tensor | None = None, slot_source: Sequence[int] | None = None, root_slot: int = -1
    ) -> DraftTree:
        """Breadth-first DraftTree.  Nodes with meta m copy q_source[m] and
        slot_source[m] (a model-drafted tree's rows); other nodes get zero q
        rows and slot -1."""
        order = self.bfs_order()
        new = {old: k for k, old in enumerate(order)}
        parents = [-1] + [new[self.parents[o]] for o in order[1:]]
        tokens = torch.tensor([self.tokens[o] for o in order], dtype=torch.long)
        ranks = [self.ranks[o] for o in order]
        slots = [root_slot] + [-1] * (len(order) - 1)
        q = None
        if q_source is not None:
            q = torch.zeros(len(order), q_source.shape[-1], dtype=q_source.dtype)
        for k, o in enumerate(order):
            m = self.meta[o]
            if m is None:
                continue
            if q is not None and q_source is not None and any(c >= 0 for c in self.kids[o].values()):
                q[k] = q_source[m]
            if slot_source is not None:
                slots[k] = slot_source[m]
        return DraftTree(parents=parents, tokens=tokens, ranks=ranks, q=q, slots=slots, child_rule="fixed")


def ngram_trie(
    history: Sequence[int],
    limit: int,
    max_depth: int,
    max_ngram: int = MAX_NGRAM,
    min_ngram: int = MIN_NGRAM,
    into: Trie | None = None,
    shape: Sequence[RankPath] | None = None,
) -> Trie:
    """Insert the history's n-gram continuations into `into` (or a new trie
    rooted at the last history token) until it holds `limit` nodes; with
    ``shape``, only nodes whose rank path is in it."""
    trie = into if into is not None else Trie(history[-1])
    allowed = None if shape is None else set(map(tuple, shape))
    for c in iter_continuations(history, max_depth, max_ngram, min_ngram):
        if trie.size >= limit:
            break
        trie.insert(c, limit, max_depth, allowed)
    return trie


@DRAFTERS.register("ngram")
class NgramDrafter(Drafter):
    """Prompt-lookup drafting: no model, a token trie of n-gram continuations (its draft
    cost is its measured lookup time: ``forward_model`` is None)."""

    def __init__(self, max_ngram: int = MAX_NGRAM, min_ngram: int = MIN_NGRAM):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"ngram sizes min={min_ngram} max={max_ngram}: need 1 <= min <= max")
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    @classmethod
    def from_pair(cls, pair, temperature: float = 0.0, top_p: float = 1.0, kv=None) -> NgramDrafter:
        return cls()

    @classmethod
    def child_rule(cls, kind: str, rule: str) -> str:
        return rule if kind == "none" else "fixed"

    def grow_paths(self, policy, rule: str, rng: torch.Generator) -> Levels:
        yield from ()  # no model: no level to score
        paths = policy.paths()
        return ngram_trie(
            self.history, len(paths), max(map(len, paths)), self.max_ngram, self.min_ngram, shape=paths
        ).to_tree()

    def grow_ngram_trie(self, policy, rule: str, rng: torch.Generator) -> Levels:
        yield from ()
        return ngram_trie(self.history, policy.budget, policy.depth, self.max_ngram, self.min_ngram).to_tree()

    grows = {**Drafter.grows, "paths": grow_paths, "ngram_trie": grow_ngram_trie}
