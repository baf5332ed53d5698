"""The tree-policy registry and its entry type: what a policy declares where it is registered.

A ``PolicySpec`` (an entry of ``POLICIES``) says everything the other layers ask about
a policy: the policy class made per prompt, its parameters' dataclass (``Params``:
typed, validated once, a bad key is one line naming it), the drafter capability it
needs (``kind``, a key of a drafter's ``grows``), whether its trees are always chains
(chain-only modes may verify them) and, for static shapes, the rank-path function.
Adding a shape is one ``@static_shape(name, Params)`` function; adding another policy
is one ``register_policy(name, Class, Params)`` call.  Either stores the policy's option
``tree=<name>`` in Hydra's ConfigStore (``core.options``): its ``Params`` fields with their
defaults, ``name`` and the policy's default ``budget``; no YAML is needed.

Imports: ``core.registry``, ``core.tree`` and ``core.options`` (hydra's ConfigStore).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Protocol, TypeVar

from ..core import options
from ..core.registry import Registry
from ..core.tree import RankPath, fit_budget

# parameter checks a Params field may declare (``field(metadata={"check": ...})``); the
# study layer applies them to the config before the policy is made (``param_checks``)
POSITIVE, RANK_PATHS, RANK_COUNTS = "positive", "rank_paths", "rank_counts"
P = TypeVar("P", bound="Params")


def positive(default: int | None = None) -> Any:
    """A parameter that is a whole number >= 1 (null = the policy's default)."""
    return field(default=default, metadata={"check": POSITIVE})


def optional(default: Any = None) -> Any:
    """An extra parameter: while it is unset (null) it is no part of a job's identity (the config
    hash hashes only the keys that are set), so adding one leaves every committed hash valid."""
    return field(default=default, metadata={"optional": True})


def checked(default: Any, check: str, example: str) -> Any:
    """A parameter with a declared check (``RANK_PATHS`` / ``RANK_COUNTS``) and an example fix."""
    return field(default=default, metadata={"check": check, "example": example})


@dataclass(frozen=True)
class Params:
    """A policy's parameters (subclass: one field per ``tree.*`` key).  ``parse`` takes the
    config's keys once: an unknown key, or a bad positive integer, is one line naming it;
    a null value keeps the default."""

    nests: ClassVar[bool] = False  # takes the keys of the policy it nests too (``nested``)

    @classmethod
    def parse(cls: type[P], policy: str, given: Mapping[str, Any]) -> P:
        known = {f.name: f for f in fields(cls)}
        kw = {}
        for key, value in given.items():
            if key not in known:
                raise ValueError(
                    f"tree.{key}: not a parameter of tree={policy}; valid: {', '.join(sorted(known)) or 'none'}"
                )
            if value is None:
                continue
            if known[key].metadata.get("check") == POSITIVE:
                value = as_positive(value, f"tree.{key}")
            kw[key] = value
        return cls(**kw)

    @classmethod
    def nested(cls, given: Mapping[str, Any]) -> str | None:
        """The policy whose ``tree.*`` keys these parameters take as well (None: none)."""
        return None

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The ``tree.*`` keys of the policy's config option and their defaults."""
        return cls().as_dict()

    @classmethod
    def optional_keys(cls) -> set[str]:
        """Keys that are no part of a job's identity while unset (``optional``)."""
        return {f.name for f in fields(cls) if f.metadata.get("optional")}


def as_positive(value: Any, key: str) -> int:
    """A whole number >= 1 (2.0 is 2); else a one-line ValueError naming ``key``."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, float) and value.is_integer():
        value, ok = int(value), True
    if not ok or value < 1:
        raise ValueError(f"{key}={value!r}: must be an integer >= 1")
    return int(value)


@dataclass
class TreePolicy:
    """Base policy: a name, the budget N (draft tokens per step) and its typed parameters.
    ``kind`` is the drafter capability it needs (``Drafter.grows``)."""

    name: str
    budget: int
    params: Params = field(default_factory=Params)
    kind: ClassVar[str] = "paths"

    def observe(self, accepted: int, tree_size: int) -> None:
        """Called after every step (adaptive policies change here)."""


class PathsPolicy(Protocol):
    """A policy of kind ``paths``: this step's rank-path list."""

    name: str
    budget: int

    def paths(self) -> list[RankPath]: ...

    def observe(self, accepted: int, tree_size: int) -> None: ...


@dataclass(frozen=True)
class PolicySpec:
    """One registered tree policy (see the module docstring)."""

    name: str
    make: Callable[[str, int, Any], TreePolicy]  # (name, budget, params) -> a fresh policy
    params: type[Params] = Params
    chain: bool = False  # every tree it drafts is a single chain
    shape: Callable[..., list[RankPath]] | None = None  # static shapes: fn(budget, params) -> paths
    listed_order: bool = False  # a static shape's list is trimmed in its listed order
    kind: str = "paths"
    budget: int = 16  # the default tree.budget of its config option

    def option(self) -> dict[str, Any]:
        """Its config option's keys and defaults (``name``, ``budget``, its ``Params``')."""
        return {"name": self.name, "budget": self.budget, **self.params.schema()}

    @property
    def rank_replayable(self) -> bool:
        """Its trees are rank-path lists: rank replay can follow them (``engine.replay``)."""
        return self.kind == "paths"


POLICIES: Registry[PolicySpec] = Registry("tree policy")


def register_policy(
    name: str,
    cls: type[TreePolicy],
    params: type[Params] = Params,
    chain: bool = False,
    budget: int = 16,
) -> None:
    """Register policy ``name`` (made as ``cls(name, budget, params)``) and store its option."""
    add(PolicySpec(name, cls, params, chain, kind=cls.kind, budget=budget))


def add(spec: PolicySpec) -> None:
    """Add ``spec`` to ``POLICIES`` and store its config option (``core.options``); the options of
    policies that take other policies' keys (``Params.nests``: merged) are stored again, with
    the new policy's keys."""
    POLICIES.add(spec.name, spec)
    for entry in POLICIES.entries():
        if entry is spec or entry.params.nests:
            options.store("tree", entry.name, entry.option())


@dataclass
class StaticShape(TreePolicy):
    """A fixed rank-path shape at exactly ``budget`` nodes (the budget rule of ``core.tree``), or
    at most ``budget`` where its parameters choose the size (``Params.chooses_size``)."""

    spec: PolicySpec | None = None

    def __post_init__(self) -> None:
        assert self.spec is not None and self.spec.shape is not None
        self._paths = static_paths(self.spec.shape, self.name, self.budget, self.params, self.spec.listed_order)

    def paths(self) -> list[RankPath]:
        return self._paths


def static_paths(
    fn: Callable[..., list[RankPath]], name: str, budget: int, params: Params, listed_order: bool = False
) -> list[RankPath]:
    """The rank paths of the static shape ``fn`` at exactly ``budget`` nodes."""
    if budget is None or int(budget) < 1:
        raise ValueError(f"tree.budget={budget}: the budget (number of draft tokens) must be >= 1")
    paths = fn(int(budget), params)
    for p in paths:
        if any(int(r) < 0 for r in p):
            raise ValueError(f"tree={name}: rank path {list(p)} has a negative rank; ranks are 0, 1, 2, ...")
    if getattr(params, "chooses_size", False):  # the budget is the largest size it may choose
        return list(paths)
    return fit_budget(paths, int(budget), listed_order)


def static_shape(
    name: str, params: type[Params] = Params, listed_order: bool = False, chain: bool = False, budget: int = 16
) -> Callable:
    """Register a static shape ``fn(budget, params) -> rank paths`` (possibly more than the
    budget: the budget rule trims them) as the tree policy ``name`` (``budget``: its option's
    default)."""

    def deco(fn: Callable[..., list[RankPath]]) -> Callable[..., list[RankPath]]:
        spec: PolicySpec

        def make(n: str, budget: int, p: Params) -> TreePolicy:
            return StaticShape(n, budget, p, spec=spec)

        spec = PolicySpec(name, make, params, chain, fn, listed_order, budget=budget)
        add(spec)
        return fn

    return deco


def param_checks() -> dict[str, dict]:
    """key -> the metadata of its declared check, over every registered policy (the study
    layer checks ``tree.*`` config values with them before any policy is made)."""
    out: dict[str, dict] = {}
    for spec in POLICIES.entries():
        for f in fields(spec.params):
            if "check" in f.metadata:
                if out.setdefault(f.name, dict(f.metadata)) != dict(f.metadata):
                    raise ValueError(f"tree.{f.name}: declared with two different checks")
    return out
