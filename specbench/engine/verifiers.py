"""The target side of the engine's loop (``engine.loop``): ``Verifier``, ``start / score / commit``,
rows in flight order.

* ``LiveVerifier``: the target model; one forward over every row's slot cache
  + tree per step (per-row tree mask and position ids from ``core.tree``, padded
  to the largest tree: ``kv.SlotKV``), keeps only each row's accepted path.
  Sampling modes and wall-clock figures need it.
* ``ContinuationVerifier``: replay.  Under greedy verification the output is the
  target's own greedy continuation c, so the target's argmax after a node is
  known wherever the node lies on the tree path spelling c: each row gets a
  ``TargetArgmax`` of token ids (``verify.modespec``), all a mode declaring
  ``argmax`` reads, in place of [N+1, V] rows.  No target forward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import torch

from ..core import kv
from ..core.sampling import probs
from ..core.tree import DraftTree
from ..verify.modespec import TargetArgmax, TargetRows


class Verifier(Protocol):
    """The target side of the loop (rows in flight order): ``LiveVerifier`` or ``ContinuationVerifier``."""

    timed: bool  # verify_s is the target's time (NaN for replay)

    def start(self, prompt_ids: Sequence[int]) -> None: ...

    def score(self, trees: Sequence[DraftTree]) -> Sequence[TargetRows]: ...

    def commit(self, paths: Sequence[Sequence[int] | None]) -> None: ...


class LiveVerifier:
    """The target model's side: the rows' slot caches (``kv.SlotKV``) and ONE tree
    forward per step for every row in flight; each row keeps only its accepted path."""

    timed = True  # verify_s is the target's time (NaN for replay)

    def __init__(self, model, temperature: float = 0.0, top_p: float = 1.0):
        self.model, self.temperature, self.top_p = model, temperature, top_p
        self.kv = kv.SlotKV(model)
        self.rows: list[int] = []  # the cache row of each row in flight

    def start(self, prompt_ids: Sequence[int]) -> None:
        """A new last row: the prompt prefilled (with the next forward)."""
        self.rows.append(self.kv.add(prompt_ids))

    def score(self, trees: Sequence[DraftTree]) -> list[torch.Tensor]:
        """Target distributions after every node of each row's tree ([N_b+1, V] per
        row), all rows in one forward."""
        logits = self.kv.forward([(r, tree.parents, tree.tokens.tolist(), 0) for r, tree in zip(self.rows, trees)])
        p = probs(logits, self.temperature, self.top_p)
        return [p[b, : len(tree.parents)] for b, tree in enumerate(trees)]

    def commit(self, paths: Sequence[Sequence[int] | None]) -> None:
        """Row b keeps its root and accepted path ``paths[b]``; None drops a finished row."""
        for r, path in zip(self.rows, paths):
            if path is None:
                self.kv.drop(r)
            else:
                self.kv.commit(r, [0, *path])
        self.rows = [r for r, path in zip(self.rows, paths) if path is not None]


class ContinuationVerifier:
    """Replay: the target's greedy continuation c of each row's prompt stands in for the target.
    Its rows are ``TargetArgmax`` token ids, so only a mode declaring ``argmax`` (greedy) can
    read them (``ModeSpec.checked_verdict`` refuses the rest)."""

    timed = False

    def __init__(self, continuation_of: Callable[[Sequence[int]], list[int]], vocab_size: int | None = None):
        self.continuation_of = continuation_of
        self.vocab_size = vocab_size  # the target's vocabulary (no [N+1, V] rows are built)
        self.rows: list[tuple[list[int], int]] = []  # (c, tokens of c emitted so far)

    def start(self, prompt_ids: Sequence[int]) -> None:
        self.rows.append((list(self.continuation_of(prompt_ids)), 0))

    def score(self, trees: Sequence[DraftTree]) -> list[TargetArgmax]:
        return [self.argmax(tree, cont[t:]) for (cont, t), tree in zip(self.rows, trees)]

    @staticmethod
    def argmax(tree: DraftTree, rest: Sequence[int]) -> TargetArgmax:
        """The target's argmax after each node: ``rest[j]`` at the j-th node of the tree path
        spelling ``rest``; 0 elsewhere (a zero row's argmax: off that path greedy reads
        it only past the end of c, which the loop truncates)."""
        ids = [0] * len(tree.parents)
        for j, node in enumerate([0, *follow(tree, rest)][: len(rest)]):
            ids[node] = int(rest[j])
        return TargetArgmax(ids)

    def commit(self, paths: Sequence[Sequence[int] | None]) -> None:
        self.rows = [(cont, t + len(path) + 1) for (cont, t), path in zip(self.rows, paths) if path is not None]


def follow(tree: DraftTree, tokens: Sequence[int]) -> list[int]:
    """Node ids of the longest root path of tree spelling a prefix of tokens
    (the first such child at each level): what greedy accepts when the target's
    continuation is tokens."""
    kids: dict[tuple[int, int], int] = {}
    for i in range(1, len(tree.parents)):
        kids.setdefault((tree.parents[i], int(tree.tokens[i])), i)
    path, node = [], 0
    for tok in tokens:
        node = kids.get((node, int(tok)), -1)
        if node < 0:
            break
        path.append(node)
    return path


__all__ = ["Verifier", "LiveVerifier", "ContinuationVerifier", "follow"]
