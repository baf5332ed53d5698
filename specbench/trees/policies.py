"""Tree policies: what the drafter should build each step.  ONE registry (``base.POLICIES``).

A policy is made per prompt (``make_policy(name, budget, params)``; adaptive
policies are stateful).  Its registry entry (``base.PolicySpec``) declares its
parameters' dataclass, whether its trees are chains, and its ``kind``: the drafter
capability it needs (a drafter grows the kinds in its ``grows``):

* ``paths``: a rank-path list each step (``paths()``): the static shapes
  (``shapes``: chain, binary, kary, topk_wide, specinfer, paths, medusa63),
  ``sequoia`` (the DP-optimal tree) and ``adaptive_chain`` (a chain whose
  length changes in ``observe``);
* ``eagle2``: EAGLE-2's dynamic tree, grown from draft scores (``eagle2``);
* ``pmin_chain``: llama.cpp's draft chain, stopped by the draft's confidence (``pmin_chain``);
* ``ngram_trie``: the n-gram drafter's own multi-continuation token trie;
* ``merged``: SpecInfer's merged tree (a model ``shape`` + n-gram trie, one budget);
* ``none``: no draft tokens (budget 0), plain decoding through the same loop.

A drafter refuses a kind it does not grow with a one-line error naming the
policies it supports (``drafters.check_supported``).
Importing this module registers every policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

from ..core.tree import RankPath
from . import shapes  # noqa: F401  (registration of the static shapes)
from .base import (
    POLICIES,
    Params,
    PathsPolicy,
    PolicySpec,
    StaticShape,
    TreePolicy,
    param_checks,
    positive,
    register_policy,
)
from .eagle2 import Eagle2Params, check_params
from .sequoia import SequoiaParams

__all__ = [
    "POLICIES",
    "Params",
    "PolicySpec",
    "StaticShape",
    "TreePolicy",
    "param_checks",
    "make_policy",
    "policy_spec",
    "shape_paths",
    "as_budget",
    "resolved_params",
    "SequoiaParams",
    "PathsPolicy",
]


@dataclass(frozen=True)
class StartParams(Params):
    start: int | None = positive(4)  # the first step's length (at most the budget)


@dataclass
class AdaptiveChain(TreePolicy):
    """A top-1 chain whose length adapts per step (HF assisted generation's
    "heuristic" schedule, seed 002): +2 after a step that accepted every draft
    token, -1 otherwise; floor 1, cap = ``budget``.  Starts at ``params.start``
    (default 4, at most the budget); a fresh policy per prompt restarts it."""

    params: StartParams = field(default_factory=StartParams)
    length: int = 0

    def __post_init__(self) -> None:
        start = int(self.params.start or min(self.budget, 4))
        self.length = max(1, min(int(self.budget), start))

    def paths(self) -> list[RankPath]:
        return [(0,) * d for d in range(1, self.length + 1)]

    def observe(self, accepted: int, tree_size: int) -> None:
        self.length = min(self.budget, self.length + 2) if accepted >= tree_size else max(1, self.length - 1)


@dataclass
class Eagle2Policy(TreePolicy):
    """EAGLE-2: width k, depth D (``eagle2.Eagle2Params``), checked against the budget."""

    params: Eagle2Params = field(default_factory=Eagle2Params)
    kind: ClassVar[str] = "eagle2"

    def __post_init__(self) -> None:
        self.width, self.depth = self.params.width, self.params.depth
        check_params(int(self.budget), self.width, self.depth)


@dataclass(frozen=True)
class PminParams(Params):
    """llama.cpp's draft rule (``--spec-draft-p-min`` / ``-n-min``; common/speculative.cpp, draft-simple)."""

    p_min: float = 0.0  # stop when the draft's top token has less than this share of its top_k softmax
    n_min: int = 0  # a chain shorter than this is dropped (that step drafts nothing)
    top_k: int | None = positive(10)  # llama.cpp's draft sampler keeps its 10 best tokens


@dataclass
class PminChain(TreePolicy):
    """A top-1 chain of at most ``budget`` tokens (llama.cpp's n_max) that stops before the first
    token whose probability among the draft's ``top_k`` best (softmax of their logits, no temperature)
    is below ``p_min``; a chain shorter than ``n_min`` is dropped.  The model drafter grows it."""

    params: PminParams = field(default_factory=PminParams)
    kind: ClassVar[str] = "pmin_chain"

    def __post_init__(self) -> None:
        self.p_min, self.n_min, self.top_k = float(self.params.p_min), self.params.n_min, int(self.params.top_k or 10)
        if not 0.0 <= self.p_min <= 1.0:
            raise ValueError(f"tree.p_min={self.params.p_min!r}: must be in [0, 1], e.g. tree.p_min=0.75")
        if isinstance(self.n_min, bool) or not isinstance(self.n_min, int) or not 0 <= self.n_min <= self.budget:
            raise ValueError(
                f"tree.n_min={self.n_min!r}: must be a whole number in [0, tree.budget], e.g. tree.n_min=0"
            )


@dataclass(frozen=True)
class DepthParams(Params):
    depth: int | None = positive()


@dataclass
class NgramTrie(TreePolicy):
    """The n-gram drafter's token trie of every match's continuation, best first,
    until it holds ``budget`` nodes; no node deeper than ``depth`` (default: budget)."""

    params: DepthParams = field(default_factory=DepthParams)
    kind: ClassVar[str] = "ngram_trie"

    @property
    def depth(self) -> int:
        return int(self.params.depth or self.budget)


MODEL_KINDS = ("paths", "eagle2")  # the policies a merged tree's model part may be


@dataclass(frozen=True)
class MergedParams(Params):
    """The n-gram share of the budget, the model part's policy and that policy's own
    parameters (every other ``tree.*`` key, checked by the model policy)."""

    ngram_share: float = 0.5
    shape: str = "chain"
    model: Mapping[str, Any] = field(default_factory=dict)
    nests: ClassVar[bool] = True

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """``ngram_share``, ``shape`` and every key a model part's policy takes (unset: null)."""
        return {"ngram_share": cls.ngram_share, "shape": cls.shape, **dict.fromkeys(sorted(cls.optional_keys()))}

    @classmethod
    def optional_keys(cls) -> set[str]:
        """The model part's keys: those of every policy it may be (a static shape or eagle2)."""
        return {k for s in POLICIES.entries() if s.kind in MODEL_KINDS for k in s.params.schema()}

    @classmethod
    def parse(cls, policy: str, given: Mapping[str, Any]) -> MergedParams:
        own = {k: v for k, v in given.items() if k in ("ngram_share", "shape") and v is not None}
        return cls(**own, model={k: v for k, v in given.items() if k not in ("ngram_share", "shape")})

    @classmethod
    def nested(cls, given: Mapping[str, Any]) -> str | None:
        return str(given.get("shape", cls.shape))


@dataclass
class Merged(TreePolicy):
    """SpecInfer's merged tree: the n-gram trie claims up to ``ngram_share`` of the
    budget (as many nodes as its matches supply), the draft model grows ``shape``
    (any paths or eagle2 policy, with the remaining parameters) with the rest."""

    params: MergedParams = field(default_factory=MergedParams)
    kind: ClassVar[str] = "merged"

    def __post_init__(self) -> None:
        self.share = float(self.params.ngram_share)
        if not 0.0 <= self.share < 1.0:
            raise ValueError(f"tree.ngram_share={self.share}: must be in [0, 1) so the model drafts >= 1 node")
        self.shape = str(self.params.shape)
        self._model: dict[int, TreePolicy] = {}
        self.model_policy(self.budget)  # validate the model shape now

    def model_policy(self, budget: int) -> TreePolicy:
        """The model part's policy at this step's model budget (made once per budget)."""
        if budget not in self._model:
            sub = make_policy(self.shape, budget, self.params.model)
            if sub.kind not in MODEL_KINDS:
                raise ValueError(f"tree.shape={self.shape}: the merged model part must be a static shape or eagle2")
            self._model[budget] = sub
        return self._model[budget]


@dataclass
class NoTree(TreePolicy):
    """Budget 0: the target alone (plain decoding), the baseline for measured speedup."""

    kind: ClassVar[str] = "none"


register_policy("adaptive_chain", AdaptiveChain, StartParams, chain=True)
register_policy("eagle2", Eagle2Policy, Eagle2Params)
register_policy("pmin_chain", PminChain, PminParams, chain=True, budget=4)
register_policy("ngram_trie", NgramTrie, DepthParams)
register_policy("merged", Merged, MergedParams)
register_policy("none", NoTree, chain=True, budget=0)


def policy_spec(name: str) -> PolicySpec:
    """The registry entry of tree policy ``name`` (an unknown name lists the valid ones)."""
    return POLICIES.get(name)


def make_policy(name: str, budget, params: Mapping[str, Any] | None = None) -> TreePolicy:
    """The policy for one prompt (call again per prompt: adaptive policies are stateful);
    ``params`` (the ``tree.*`` keys) are parsed into the policy's dataclass here."""
    spec = POLICIES.get(name)
    budget = as_budget(budget)
    if spec.kind == "none" and budget != 0:
        raise ValueError(f"tree=none has no draft tokens: set tree.budget=0 (got {budget})")
    if spec.kind != "none" and budget < 1:
        raise ValueError(f"tree.budget={budget}: the budget (number of draft tokens) must be >= 1")
    return spec.make(name, budget, spec.params.parse(name, dict(params or {})))


def resolved_params(name: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``tree.*`` parameters of policy ``name`` with its defaults filled in (parsed by its
    ``Params``); a nested policy's (merged: its model part's) under ``model``, resolved the
    same way.  What every row carries as ``tree_resolved`` (``study.job.describe``)."""
    spec = policy_spec(name)
    given = dict(params or {})
    out = spec.params.parse(name, given).as_dict()
    inner = spec.params.nested(given)
    if inner is not None:
        out["model"] = resolved_params(inner, out.get("model"))
    return out


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
    spec = POLICIES.get(name)
    if not spec.rank_replayable:
        raise ValueError(f"tree={name} is not a static shape (kind {spec.kind})")
    return cast(PathsPolicy, make_policy(name, budget, params)).paths()
