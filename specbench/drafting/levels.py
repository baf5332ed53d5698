"""Level-wise drafting, driven by the loop: no threads.

A drafter grows its tree as a *level generator*: ``drafter.draft(policy, rule, rng)``
returns a generator that yields a ``Forward`` (the nodes it needs scored at this
depth), receives their logits, and finally returns the ``DraftTree``.  Drafters
that need no model (n-gram, ``tree=none``) return a generator that yields nothing.

``run_levels`` advances every row's generator one level at a time and serves each
level's requests with ONE forward per draft cache (``kv.SlotKV``): the rows of a
batch draft in lockstep, one draft-model forward per depth for all of them.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import torch

from ..core.kv import SlotKV
from ..core.tree import DraftTree


@dataclass(frozen=True)
class Forward:
    """One row's nodes to score: nodes ``start:`` of its step tree (``SlotKV.forward``)."""

    kv: SlotKV
    row: int
    parents: list[int]
    tokens: list[int]
    start: int


R = TypeVar("R")
LevelGen = Generator[Forward, torch.Tensor, R]  # yields Forward, receives logits, returns R
Levels = LevelGen[DraftTree]  # a drafter's step: returns its tree


def run_levels(gens: Sequence[Levels]) -> list[DraftTree]:
    """Run every generator to its return value; each level's forwards batched per cache.
    A generator receives logits [len(parents) - start, V] for its ``Forward``; each tree
    comes back with ``scored``, the tokens its generator had scored per forward."""
    out: list = [None] * len(gens)
    scored: list[list[int]] = [[] for _ in gens]
    sends: dict[int, torch.Tensor | None] = {i: None for i in range(len(gens))}
    while sends:
        asks: dict[int, Forward] = {}
        for i, value in sends.items():
            try:
                asks[i] = next(gens[i]) if value is None else gens[i].send(value)
            except StopIteration as stop:
                done = stop.value  # a drafter's tree, or a level generator's other result (EAGLE-2's candidates)
                out[i] = replace(done, scored=tuple(scored[i])) if isinstance(done, DraftTree) else done
        sends = {}
        by_kv: dict[int, list[int]] = {}
        for i, ask in asks.items():
            by_kv.setdefault(id(ask.kv), []).append(i)
        for members in by_kv.values():
            kv = asks[members[0]].kv
            logits = kv.forward([(asks[i].row, asks[i].parents, asks[i].tokens, asks[i].start) for i in members])
            for b, i in enumerate(members):
                k = len(asks[i].parents) - asks[i].start
                scored[i].append(k)
                sends[i] = logits[b, :k]
    return out


def drafted(gen: Levels) -> DraftTree:
    """One generator run on its own (batch 1): its return value."""
    return run_levels([gen])[0]
