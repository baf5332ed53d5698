"""Tree policies: what the drafter should build each step.  ONE registry.

A policy is made per prompt (``make_policy(name, budget, params)``; adaptive
policies are stateful) and has a ``kind`` that says how a drafter grows it:

* ``paths``: a rank-path list each step (``paths()``): the static shapes of
  ``trees`` (chain, binary, kary, topk_wide, specinfer, paths, medusa63),
  ``sequoia`` (the DP-optimal tree) and ``adaptive_chain`` (a chain whose
  length changes in ``observe``);
* ``eagle2``: EAGLE-2's dynamic tree, grown from draft scores (``eagle2``);
* ``ngram_trie``: the n-gram drafter's own multi-continuation token trie;
* ``merged``: SpecInfer's merged tree (a model ``shape`` + n-gram trie, one budget);
* ``none``: no draft tokens (budget 0), plain decoding through the same loop.

A drafter grows the kinds it has a ``grow_<kind>`` method for and refuses the
others with a one-line error naming what it supports (``drafters.check_supported``).
Importing this module registers every policy.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from ..core.registry import Registry
from ..core.tree import SHAPE_FNS, RankPath, static_paths
from . import eagle2, sequoia  # noqa: F401  (registration of eagle2 / sequoia)

POLICIES: Registry = Registry("tree policy")   # name -> factory(name, budget, params) -> TreePolicy
KINDS = ("paths", "eagle2", "ngram_trie", "merged", "none")


@dataclass
class TreePolicy:
    """Base policy: a name, the budget N (draft tokens per step) and its parameters."""
    name: str
    budget: int
    params: dict = field(default_factory=dict)
    kind: ClassVar[str] = "paths"

    def observe(self, accepted: int, tree_size: int) -> None:
        """Called after every step (adaptive policies change here)."""


@dataclass
class StaticShape(TreePolicy):
    """A fixed rank-path shape at exactly ``budget`` nodes (the budget rule of ``trees``)."""
    shape: Callable = None
    listed_order: bool = False

    def __post_init__(self) -> None:
        self._paths = static_paths(self.shape, self.name, self.budget, self.listed_order, **self.params)

    def paths(self) -> list[RankPath]:
        return self._paths


@dataclass
class AdaptiveChain(TreePolicy):
    """A top-1 chain whose length adapts per step (HF assisted generation's
    "heuristic" schedule, seed 002): +2 after a step that accepted every draft
    token, -1 otherwise; floor 1, cap = ``budget``.  Starts at ``params.start``
    (default min(budget, 4)); a fresh policy per prompt restarts it."""
    length: int = 0

    def __post_init__(self) -> None:
        start = int(self.params.get("start") or min(self.budget, 4))
        self.length = max(1, min(int(self.budget), start))

    def paths(self) -> list[RankPath]:
        return [(0,) * d for d in range(1, self.length + 1)]

    def observe(self, accepted: int, tree_size: int) -> None:
        self.length = min(self.budget, self.length + 2) if accepted >= tree_size else max(1, self.length - 1)


@dataclass
class Eagle2Policy(TreePolicy):
    """EAGLE-2: width k, depth D (``eagle2.params_of`` validates them)."""
    kind: ClassVar[str] = "eagle2"

    def __post_init__(self) -> None:
        self.width, self.depth = eagle2.params_of(self.budget, self.params)


@dataclass
class NgramTrie(TreePolicy):
    """The n-gram drafter's token trie of every match's continuation, best first,
    until it holds ``budget`` nodes; no node deeper than ``depth`` (default: budget)."""
    kind: ClassVar[str] = "ngram_trie"

    @property
    def depth(self) -> int:
        return int(self.params.get("depth") or self.budget)


@dataclass
class Merged(TreePolicy):
    """SpecInfer's merged tree: the n-gram trie claims up to ``ngram_share`` of the
    budget (as many nodes as its matches supply), the draft model grows ``shape``
    (any paths or eagle2 policy, with the remaining parameters) with the rest."""
    kind: ClassVar[str] = "merged"

    def __post_init__(self) -> None:
        self.share = float(self.params.get("ngram_share", 0.5))
        if not 0.0 <= self.share < 1.0:
            raise ValueError(f"tree.ngram_share={self.share}: must be in [0, 1) so the model drafts >= 1 node")
        self.shape = str(self.params.get("shape", "chain"))
        self.model_params = {k: v for k, v in self.params.items() if k not in ("shape", "ngram_share")}
        self._model: dict[int, TreePolicy] = {}
        self.model_policy(self.budget)                 # validate the model shape now

    def model_policy(self, budget: int) -> TreePolicy:
        """The model part's policy at this step's model budget (made once per budget)."""
        if budget not in self._model:
            sub = make_policy(self.shape, budget, self.model_params)
            if sub.kind not in ("paths", "eagle2"):
                raise ValueError(f"tree.shape={self.shape}: the merged model part must be a static shape or eagle2")
            self._model[budget] = sub
        return self._model[budget]


@dataclass
class NoTree(TreePolicy):
    """Budget 0: the target alone (plain decoding), the baseline for measured speedup."""
    kind: ClassVar[str] = "none"


def register_shape(name: str, fn: Callable, listed_order: bool = False) -> None:
    POLICIES.register(name, kind="paths")(
        lambda n, budget, params: StaticShape(n, budget, params, shape=fn, listed_order=listed_order))


for _name, _cls in (("adaptive_chain", AdaptiveChain), ("eagle2", Eagle2Policy), ("ngram_trie", NgramTrie),
                    ("merged", Merged), ("none", NoTree)):
    POLICIES.register(_name, kind=_cls.kind)(_cls)


for _name, (_fn, _listed) in SHAPE_FNS.items():
    register_shape(_name, _fn, _listed)


def make_policy(name: str, budget, params: dict | None = None) -> TreePolicy:
    """The policy for one prompt (call again per prompt: adaptive policies are stateful)."""
    factory = POLICIES.get(name)
    kind = POLICIES.meta(name)["kind"]
    budget = as_budget(budget)
    if kind == "none" and budget != 0:
        raise ValueError(f"tree=none has no draft tokens: set tree.budget=0 (got {budget})")
    if kind != "none" and budget < 1:
        raise ValueError(f"tree.budget={budget}: the budget (number of draft tokens) must be >= 1")
    return factory(name, budget, dict(params or {}))


def as_budget(budget) -> int:
    """tree.budget as an int; 2.5 or 'abc' is an error, never silently truncated."""
    try:
        value = float(budget)
    except (TypeError, ValueError):
        value = float("nan")
    if isinstance(budget, bool) or not value.is_integer():
        raise ValueError(f"tree.budget={budget!r}: must be a whole number of draft tokens, e.g. tree.budget=16")
    return int(value)


def shape_paths(name: str, budget: int, **params) -> list[RankPath]:
    """The rank paths of a static shape (a ``paths`` policy) at ``budget`` nodes."""
    if POLICIES.get(name) and policy_kind(name) != "paths":
        raise ValueError(f"tree={name} is not a static shape (kind {policy_kind(name)})")
    return make_policy(name, budget, params).paths()


def policy_kind(name: str) -> str:
    return POLICIES.meta(name)["kind"]
