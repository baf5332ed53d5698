"""`make_plan(tree_cfg) -> TreePlan`: the tree config group as a per-prompt plan.

* a static shape (``trees.SHAPES``: chain, binary, kary, topk_wide, specinfer,
  paths, sequoia) -> ``TreePlan(name, budget, params)``;
* a dynamic tree (``drafters.DYNAMIC``: eagle2) -> ``TreePlan(..., dynamic=True)``;
* a stateful plan (``PLANS``: adaptive_chain) -> its own TreePlan subclass.

``params`` is every key of the tree config except ``name`` and ``budget``.
Importing this module registers every advanced drafter and shape (ngram,
merged, eagle2, sequoia).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import eagle2, merged, ngram, sequoia_tree  # noqa: F401  (registration)
from .drafters import DYNAMIC
from .registry import Registry, UnknownName
from .trees import SHAPES, RankPath, TreePlan

PLANS: Registry = Registry("tree plan")      # name -> fn(name, budget, params) -> TreePlan


@dataclass
class AdaptiveChainPlan(TreePlan):
    """A top-1 chain whose length adapts per step (HF assisted generation's
    "heuristic" schedule, seed 002): +2 after a step that accepted every draft
    token, -1 otherwise; floor 1, cap = ``budget``.  Starts at ``params.start``
    (default min(budget, 4)).  The run creates a fresh plan per prompt, so the
    length restarts at ``start`` on every prompt."""
    length: int = 0

    def __post_init__(self) -> None:
        start = int(self.params.get("start") or min(self.budget, 4))
        self.length = max(1, min(int(self.budget), start))

    def paths(self) -> list[RankPath]:
        return [(0,) * d for d in range(1, self.length + 1)]

    def observe(self, accepted: int, tree_size: int) -> None:
        if accepted >= tree_size:
            self.length = min(int(self.budget), self.length + 2)
        else:
            self.length = max(1, self.length - 1)


@PLANS.register("adaptive_chain")
def _adaptive_chain(name: str, budget: int, params: dict) -> TreePlan:
    return AdaptiveChainPlan(name, budget, params)


@PLANS.register("eagle2")
def _eagle2(name: str, budget: int, params: dict) -> TreePlan:
    plan = TreePlan(name, budget, params, dynamic=True)
    eagle2.params_of(plan)                  # validate width/depth/budget now
    return plan


def _plain(cfg: Any) -> dict:
    try:
        from omegaconf import DictConfig, OmegaConf
        if isinstance(cfg, DictConfig):
            return OmegaConf.to_container(cfg, resolve=True)
    except ImportError:  # pragma: no cover
        pass
    return dict(cfg)


def make_plan(tree_cfg) -> TreePlan:
    """The plan for one prompt (call again per prompt: adaptive plans are stateful)."""
    params = _plain(tree_cfg)
    name = params.pop("name", None)
    budget = params.pop("budget", None)
    if budget is None or int(budget) < 1:
        raise ValueError(f"tree.budget={budget}: the budget (number of draft tokens) must be >= 1")
    budget = int(budget)
    if name in PLANS:
        return PLANS.get(name)(name, budget, params)
    if name in DYNAMIC:
        return TreePlan(name, budget, params, dynamic=True)
    if name not in SHAPES:
        valid = sorted(set(SHAPES.names()) | set(DYNAMIC.names()) | set(PLANS.names()))
        raise UnknownName(f"unknown tree '{name}'. Valid: {', '.join(valid)}")
    plan = TreePlan(name, budget, params)
    plan.paths()                            # bad params / missing calibration fail here
    return plan
