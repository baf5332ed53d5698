"""Verification-mode specs: everything about one mode in one frozen object.

A ``ModeSpec`` holds a mode's verdict function, how the drafter must choose children
for it, the tree child rules it is lossless for, its flags, its parameter defaults
(the only place they live) and its exact law (used by ``distshift``).  ``MODES`` is
the registry of specs; adding a mode is one ``register(ModeSpec(...))`` call next to
its verdict (modes.py: token-level lossless modes; lossy.py: lossy rules;
block.py: block and traversal verification; seqlevel.py: hsd and gbv).

Conventions shared by every mode
--------------------------------
``verdict(tree, p, q, rng, params) -> Verdict(path, next_token)``

* ``p[i]``: target next-token probabilities after node i (temperature / top-p already
  applied with ``sampling.probs``); ``q[i]``: the draft distribution node i's children
  were chosen from (zero rows where not expanded; None for drafters without q).  A mode
  declaring ``argmax`` (greedy) may be given a ``TargetArgmax`` for p instead: the target's
  argmax token after each node, all replay knows (``argmax_ids`` reads either).
* ``rng``: a CPU ``torch.Generator``; every random choice uses it.
* ``params``: the mode's ``ModeParams`` dataclass (declared at registration, read as a
  mapping too), ``spec.params(overrides)`` (the ``verify`` config group minus ``name``,
  over the dataclass's defaults), validated once there.
* ``Verdict.path``: the accepted draft nodes (root excluded) in depth order; their
  tokens are the *accepted* tokens.  ``Verdict.next_token``: the token appended after
  the path, the *bonus* token when the path ends at a leaf that was fully accepted and
  the *correction* (recovered) token when it ends after a rejection; either way one
  token from the target side, so a step emits ``len(path) + 1`` tokens.

Child rules (``sampling.TREE_CHILD_RULES``; ``DraftTree.child_rule`` records the one a
tree was drafted with): "topk", "sample" (i.i.d. from q), "sample_noreplace" (Sequoia),
"fixed" (candidates not drawn from q: n-gram, merged).  A sampling verifier is lossless
only on trees drawn by the rule it was derived for; ``check_compatible`` refuses the rest.

Two job-level parameters choose how a mode drafts and tries siblings:

* ``children`` (modes lossless on several random rules: traversal, block, gbv):
  the child rule the drafter uses, "sample" (default) or "sample_noreplace", so the
  mode can verify the same drafted trees as mss or sequoia (``verify.paired_with``).
  ``spec.configured(params)`` is the spec with that ``child_rule``; ``get_mode(name,
  params)`` returns it.
* ``order`` (mss): the order siblings are tried in, "random" (SpecInfer's published
  rule, the default) or "storage" (the drafter's draw order).  A mode with a fixed
  order records it in ``sibling_order`` ("storage" for sequoia and traversal).

``row_tags(spec, params)`` is what every CSV row carries about both (``child_rule``,
``sibling_order``), so the report can name a baseline and its order.

A mode's role in the report's comparisons is declared on its spec (``Role``), and every
row carries it (``role_tags``: its family, lossless or lossy, and the baselines it is), so
the report (no torch) reads roles from the rows, a plugin mode's like a built-in one's.

``register`` also stores the mode's config option (``verify=<name>``: its parameters and their
defaults) in Hydra's ConfigStore; no YAML is needed.  Imports: torch, ``core.registry``,
``core.sampling``, ``core.tree`` and ``core.options`` (hydra).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, NamedTuple

import torch

from ..core import options
from ..core.registry import Registry
from ..core.sampling import CHILD_RULES, TREE_CHILD_RULES, check_temperature
from ..core.tree import DraftTree

MODES: Registry[ModeSpec] = Registry("verify mode")
RANDOM_RULES = ("sample", "sample_noreplace")  # child rules with draft randomness
SIBLING_ORDERS = ("random", "storage")


@dataclass(frozen=True, eq=False)
class ModeParams(Mapping[str, Any]):
    """A mode's parameters, the ``verify.*`` keys: the ones every mode has; a mode with
    more declares a subclass (``ModeSpec.params_type``).  Read as a mapping as well
    (``params["temperature"]``, equal to a dict of the same items)."""

    temperature: float = 1.0
    draft_temperature: float = 1.0
    top_p: float = 1.0

    def __getitem__(self, key: str) -> Any:
        if key not in self.names():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, key: object) -> bool:
        return key in self.names()

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def __len__(self) -> int:
        return len(fields(self))


COMMON_DEFAULTS = MappingProxyType(dict(ModeParams()))


@dataclass(frozen=True, eq=False)
class ChildrenParams(ModeParams):
    """``children``: the random child rule the drafter uses (a mode lossless on several)."""

    children: str = "sample"


ROLE_KINDS = ("chain", "tree")  # the report's two kinds of drafted tree (tree=chain, or any other)
LOSSY_BASELINE = "lossy"  # Role.baseline_of: the rule each lossy rule is compared with on its trees


@dataclass(frozen=True)
class Role:
    """What a mode is in the report's comparisons at T > 0 (declared on its ``ModeSpec``; every
    row carries it, ``role_tags``).  ``baseline_of``: the comparisons it is the fixed baseline
    of: a kind of ``ROLE_KINDS`` (the token-level reference every other rule on that kind is
    compared with: speculative on chains, mss on trees) or ``LOSSY_BASELINE`` (the rule each
    lossy rule is compared with on the same drafted trees: naive).  ``token_level``: the kinds
    on which it is a token-level rule, a baseline for a rule that verified the same trees."""

    baseline_of: tuple[str, ...] = ()
    token_level: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        bad = set(self.baseline_of) - {*ROLE_KINDS, LOSSY_BASELINE} | set(self.token_level) - set(ROLE_KINDS)
        if bad:
            raise ValueError(
                f"role: unknown kinds {sorted(bad)}; kinds: {', '.join(ROLE_KINDS)} (and {LOSSY_BASELINE})"
            )


class Verdict(NamedTuple):
    path: list[int]  # accepted node indices, root excluded, in depth order
    next_token: int  # bonus / correction token appended after the path


@dataclass(frozen=True)
class TargetArgmax:
    """The target's argmax token after each node of a tree (``ids[i]``, node i; [N+1]): all
    that a mode declaring ``argmax`` reads of the target, given in place of the [N+1, V]
    rows p where that is all the verifier knows (replay: ``engine.verifiers``)."""

    ids: list[int]


TargetRows = torch.Tensor | TargetArgmax  # what a verifier gives a verdict per row


def argmax_ids(p: TargetRows) -> list[int]:
    """The target's argmax token after every node: ``TargetArgmax.ids``, else ``p.argmax(-1)``."""
    return p.ids if isinstance(p, TargetArgmax) else p.argmax(-1).tolist()


class PathLaw(NamedTuple):
    """A mode's exact law on one drafted tree, over the verifier's randomness.

    ``reach[i]`` = P(node i is on the accepted path) (``reach[0] = 1``); so the expected
    number of accepted tokens is ``sum(reach[1:])``.  ``root_next``: distribution
    (float64 [V]) of the token emitted when the path ends at the root; None unless asked.
    """

    reach: list[float]
    root_next: torch.Tensor | None


@dataclass(frozen=True)
class Law:
    """How ``distshift`` computes a mode's exact law.

    ``path(tree, p, q, params, need_next) -> PathLaw``: conditional on the drawn tokens.
    ``marginal``: child rule -> ``fn(p_row, q_row, k, params)``, the first-token law
    averaged over the drafter's draw of the root's k children under that rule.
    ``draw_free``: the conditional first-token law does not depend on the drawn tokens
    (greedy, naive), so it is also the marginal under every rule.
    ``next_laws``: with ``path``, the law of the whole step (``distshift.path_end_law``).
    """

    path: Callable[..., PathLaw]
    marginal: Mapping[str, Callable[..., torch.Tensor]] = field(default_factory=dict)
    draw_free: bool = False
    next_laws: Callable[..., list] | None = None  # (tree, p, q, params) -> per node: law of the
    # token emitted when the path ends there


RULE_NUMBERS = {"eps": 1.0, "delta": float("inf"), "factor": float("inf")}  # each one's upper bound (>= 0 all)


def rule_number(value, key: str, most: float, default) -> float:
    """A lossy rule's number as a float in [0, ``most``], or a one-line ValueError naming ``key``."""
    try:
        x = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        x = math.nan
    if not (math.isfinite(x) and 0 <= x <= most):
        bound = "" if math.isinf(most) else f" and <= {most:g}"
        raise ValueError(f"{key}={value!r}: must be a finite number >= 0{bound}; e.g. {key}={default:g}")
    return x


@dataclass(frozen=True)
class ModeSpec:
    """One verification mode (see the module docstring for the conventions)."""

    name: str
    verdict: Callable[..., Verdict]
    child_rule: str  # how the drafter must choose children for this mode
    lossless_for: frozenset  # tree child rules this mode is lossless on (empty: lossy)
    law: Law
    needs_q: bool = False
    chain_only: bool = False
    params_type: type[ModeParams] = ModeParams  # its parameters and their defaults
    doc: str = ""
    sibling_order: str = ""  # fixed order siblings are tried in ("" = none / a parameter)
    argmax: bool = False  # the verdict is the target's argmax at any temperature (greedy):
    # refused at T > 0; the target's continuation can stand in (replay)
    role: Role = Role()  # its role in the report's comparisons

    def __post_init__(self) -> None:
        if self.child_rule not in CHILD_RULES:
            raise ValueError(f"mode {self.name}: child_rule '{self.child_rule}' not in {CHILD_RULES}")
        bad = set(self.lossless_for) - set(TREE_CHILD_RULES)
        if bad:
            raise ValueError(f"mode {self.name}: unknown child rules {sorted(bad)}")
        if self.lossless_for and self.child_rule not in self.lossless_for:
            raise ValueError(f"mode {self.name}: not lossless on its own child rule")
        object.__setattr__(self, "lossless_for", frozenset(self.lossless_for))  # a set given as a list
        if "children" in self.defaults and self.defaults["children"] not in self.draft_rules:
            raise ValueError(f"mode {self.name}: children={self.defaults['children']} not in {self.draft_rules}")

    def checked_verdict(self, tree: DraftTree, p: TargetRows, rng: torch.Generator, params: Mapping) -> Verdict:
        """``check_tree`` (one line when this mode cannot verify the tree at all), then the
        registered ``verdict`` on the tree's own q: what the engine's loop calls.  Only a
        mode declaring ``argmax`` takes a ``TargetArgmax`` for p."""
        self.check_tree(tree, tree.q)
        if isinstance(p, TargetArgmax) and not self.argmax:
            fit = ", ".join(n for n in MODES.names() if MODES.get(n).argmax)
            raise ValueError(f"verify={self.name} needs the target's distributions, not only its argmax; use {fit}")
        return self.verdict(tree, p, tree.q, rng, params)

    @property
    def defaults(self) -> Mapping[str, Any]:
        """The parameters' defaults (``params_type``'s)."""
        return MappingProxyType(dict(self.params_type()))

    @property
    def lossless(self) -> bool:
        return bool(self.lossless_for)

    @property
    def family(self) -> str:
        """The mode's family: "lossless" (lossless on some child rule) or "lossy"."""
        return "lossless" if self.lossless else "lossy"

    @property
    def draft_rules(self) -> tuple:
        """Child rules ``verify.children`` may ask the drafter for (random rules the mode
        is lossless on); empty when the mode has no ``children`` parameter."""
        if "children" not in self.defaults:
            return ()
        return tuple(r for r in RANDOM_RULES if r in self.lossless_for)

    def configured(self, params: Mapping) -> ModeSpec:
        """This spec with ``child_rule`` = ``params["children"]`` where the mode has that
        parameter (resolved params, ``spec.params(...)``); else the spec itself."""
        rule = params.get("children") if "children" in self.defaults else None
        if rule is None or rule == self.child_rule:
            return self
        return replace(self, child_rule=rule)

    def params(self, overrides: Mapping | None = None) -> ModeParams:
        """``defaults`` updated with ``overrides`` (a mapping, e.g. the job spec's ``verify`` params;
        ``name`` and None values are ignored).  Unknown keys and bad temperatures give
        a one-line ValueError naming the key."""
        out = dict(self.defaults)
        overrides = overrides or {}
        for key in overrides:
            val = overrides[key]
            if key == "name" or val is None:
                continue
            if key not in out:
                raise ValueError(
                    f"verify.{key}: not a parameter of verify={self.name}; valid: {', '.join(sorted(out))}"
                )
            out[key] = val
        for key in ("temperature", "draft_temperature"):
            out[key] = check_temperature(out[key], f"verify.{key}")
        for key in RULE_NUMBERS.keys() & out.keys():  # a lossy rule's own numbers (eps, delta, factor)
            out[key] = rule_number(out[key], f"verify.{key}", RULE_NUMBERS[key], self.defaults[key])
        if "order" in out and out["order"] not in SIBLING_ORDERS:
            raise ValueError(f"verify.order={out['order']}: must be one of {', '.join(SIBLING_ORDERS)}")
        if "children" in out and out["children"] not in self.draft_rules:
            raise ValueError(
                f"verify.children={out['children']}: verify={self.name} drafts with {' or '.join(self.draft_rules)}"
            )
        return self.params_type(**out)

    def check_tree(self, tree: DraftTree, q: torch.Tensor | None) -> None:
        """One-line ValueError when the tree cannot be verified by this mode at all."""
        if self.needs_q and q is None:
            fit = ", ".join(n for n in MODES.names() if not MODES.get(n).needs_q)
            raise ValueError(
                f"verify={self.name} needs the draft distributions q (tree.q is None, "
                f"e.g. an n-gram drafter); use verify={fit} with that drafter"
            )
        if self.chain_only:
            for i in range(len(tree.parents)):
                k = len(tree.children(i))
                if k > 1:
                    raise ValueError(
                        f"verify={self.name} works on a chain only, but node {i} has "
                        f"{k} children; use tree=chain (or a tree mode)"
                    )


def row_tags(spec: ModeSpec, params: Mapping) -> dict:
    """The columns a CSV row carries about how the mode drafts and tries siblings:
    ``child_rule`` (the rule it asks the drafter for) and ``sibling_order`` ("random",
    "storage", or "" where siblings are not tried one by one)."""
    spec = spec.configured(params)
    return {"child_rule": spec.child_rule, "sibling_order": str(params.get("order", spec.sibling_order))}


def role_tags(spec: ModeSpec) -> dict:
    """The columns a CSV row carries about the mode's declared role: ``mode_family`` ("lossless"
    or "lossy"), ``baseline_of`` and ``token_level_on`` (``Role``'s kinds, comma-separated)."""
    return {
        "mode_family": spec.family,
        "baseline_of": ",".join(spec.role.baseline_of),
        "token_level_on": ",".join(spec.role.token_level),
    }


def register(spec: ModeSpec) -> ModeSpec:
    """Add a mode to ``MODES`` and store its config option ``verify=<name>`` in Hydra's ConfigStore
    (``core.options``): ``name``, its parameters' defaults and ``paired_with`` (the modes also
    verifying the same drafted trees; none by default)."""
    MODES.add(spec.name, spec)
    options.store("verify", spec.name, {"name": spec.name, **spec.defaults, "paired_with": []})
    return spec


def fits(spec: ModeSpec, tree_child_rule: str) -> bool:
    """Whether ``spec`` may verify trees drafted by ``tree_child_rule``: a lossless mode
    only on the rules it is lossless for; a mode that needs q never on "fixed" trees."""
    if tree_child_rule not in TREE_CHILD_RULES:
        raise ValueError(f"unknown child rule '{tree_child_rule}'. Valid: {', '.join(TREE_CHILD_RULES)}")
    if spec.needs_q and tree_child_rule == "fixed":
        return False
    return not spec.lossless or tree_child_rule in spec.lossless_for


def modes_for(tree_child_rule: str, chain: bool = True) -> list[str]:
    """Names of the modes that may verify trees drafted by ``tree_child_rule`` (``chain``: the
    policy drafts chains, so chain-only modes fit too)."""
    return [n for n in MODES.names() if fits(MODES.get(n), tree_child_rule) and (chain or not MODES.get(n).chain_only)]


def check_compatible(spec: ModeSpec, tree_child_rule: str, chain: bool = True) -> None:
    """One-line ValueError when a drafter that builds ``tree_child_rule`` trees cannot
    feed ``spec`` (e.g. mss on eagle2's top-k trees); it names the modes that fit (on a
    tree policy, ``chain`` false: not the chain-only ones)."""
    if not fits(spec, tree_child_rule):
        why = (
            f"is lossless only on trees drafted by {'/'.join(sorted(spec.lossless_for))}"
            if spec.lossless
            else "needs the draft distributions q"
        )
        raise ValueError(
            f"verify={spec.name} {why}, but this drafter builds '{tree_child_rule}' "
            f"trees; modes that fit: {', '.join(modes_for(tree_child_rule, chain))}"
        )


def children_by_rank(tree: DraftTree, node: int) -> list[int]:
    """Children of ``node`` in sibling-rank order (stable by index)."""
    kids = tree.children(node)
    return sorted(kids, key=lambda c: tree.ranks[c]) if tree.ranks else kids


def target_dist(p_row: torch.Tensor, params: ModeParams) -> torch.Tensor:
    """Law of the target's own token (float64): one-hot argmax at temperature 0, else p."""
    pr = p_row.double()
    if float(params.temperature) == 0:
        return torch.zeros_like(pr).scatter_(0, pr.argmax().view(1), 1.0)
    return pr


def target_token(p_row: torch.Tensor, rng: torch.Generator, params: ModeParams) -> int:
    """The target's own token: argmax at temperature 0, else a sample from p."""
    if float(params.temperature) == 0:
        return int(p_row.argmax())
    return int(torch.multinomial(p_row.double(), 1, generator=rng))
