"""Static shapes: each a rank-path function ``fn(budget, params)`` registered as a tree
policy with its parameters' dataclass (``base.static_shape``).  A function may return
more paths than the budget (the budget rule of ``core.tree.fit_budget`` trims them) or
fewer (it pads the top-1 chain)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.tree import RankPath
from .base import RANK_COUNTS, RANK_PATHS, Params, checked, positive, static_shape


def _full_tree(expansion: Sequence[int], budget: int) -> list[RankPath]:
    """All paths of a tree whose level-d nodes have expansion[d] children,
    stopping once a level would already exceed the budget."""
    paths: list[RankPath] = []
    level: list[RankPath] = [()]
    for k in expansion:
        level = [p + (r,) for p in level for r in range(int(k))]
        paths += level
        if len(paths) >= budget or not level:
            break
    return paths


@static_shape("chain", chain=True, budget=4)
def chain(budget: int, params: Params) -> list[RankPath]:
    return [(0,) * d for d in range(1, budget + 1)]


@dataclass(frozen=True)
class Width(Params):
    width: int = positive(3)  # children per node (width 2 is binary)


@dataclass(frozen=True)
class WideParams(Params):
    width: int = positive(4)


def kary_paths(budget: int, width: int) -> list[RankPath]:
    levels = budget if width == 1 else math.ceil(math.log(budget * (width - 1) + 1, width)) + 1
    return _full_tree([width] * levels, budget)


@static_shape("kary", Width)
def kary(budget: int, params: Width) -> list[RankPath]:
    return kary_paths(budget, params.width)


@static_shape("binary")
def binary(budget: int, params: Params) -> list[RankPath]:
    return kary_paths(budget, 2)


@static_shape("topk_wide", WideParams)
def topk_wide(budget: int, params: WideParams) -> list[RankPath]:
    """The top-`width` first tokens, each continued as a top-1 chain."""
    length = math.ceil(budget / params.width)
    return [(r,) + (0,) * d for r in range(params.width) for d in range(length)]


@dataclass(frozen=True)
class Expansion(Params):
    expansion: Sequence[int] = checked((1, 1, 3, 1, 1, 1, 1, 1), RANK_COUNTS, "tree.expansion=[2,2,1]")


@static_shape("specinfer", Expansion)
def specinfer(budget: int, params: Expansion) -> list[RankPath]:
    expansion = params.expansion
    if not expansion or any(int(k) < 1 for k in expansion):
        raise ValueError(f"tree.expansion={list(expansion)}: needs one or more factors >= 1")
    return _full_tree(list(expansion), budget)


@dataclass(frozen=True)
class PathList(Params):
    paths: Sequence[Sequence[int]] = checked((), RANK_PATHS, "tree.paths=[[0],[1],[0,0]]")


@static_shape("medusa63", PathList, listed_order=True, budget=63)  # conf/tree/medusa63.yaml: its path list
@static_shape("paths", PathList, listed_order=True)
def explicit_paths(budget: int, params: PathList) -> list[RankPath]:
    """The list as given: its order is the priority order the budget trims by."""
    if not params.paths:
        raise ValueError("tree=paths needs tree.paths, a rank-path list such as [[0],[1],[0,0]]")
    return [tuple(int(r) for r in p) for p in params.paths]
