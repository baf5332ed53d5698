"""The typed job spec: the resolved Hydra config, read ONCE, checked before any model loads.

Imports: yaml, omegaconf, ``core.options``, ``inputs`` and the dataset, drafter, tree and verify registries
(their registration stores options and schemas in Hydra's ConfigStore: importing this makes them composable).

``from_config(cfg) -> JobSpec``: the composed config as frozen dataclasses, with one-line ``ConfigError``s naming the
key and the fix. Defaults: conf/config.yaml's top-level ones (``DEFAULTS``, written nowhere else), the group option's
schema (a tree policy's, verify mode's, dataset's registry entry; a pair's drafter, under its conf/pair/ file). A key
a group's schema lacks (``+group.key``, which Hydra adds to a closed node) is refused here too
(``study.job.schema.unknown_key``). ``tree_spec`` / ``verify_spec`` read one group alone; ``checks.validate(job)`` adds
the cross-field checks. Modules below the study layer take the spec's plain fields, never ``cfg``.
``JobSpec.to_dict()`` is the normalised config: what the config hash covers (with the content identity,
``identity.py``) and what ``config.yaml`` holds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ... import CONF_DIR
from ...drafting.drafters import DRAFTERS, PAIR_COMMON
from ...inputs import data as _data  # noqa: F401  (registers the dataset loaders: their options)
from ...inputs import datasets
from ...inputs.machine import resolve_dtype
from ...inputs.models import DTYPES, SOURCES, WEIGHTS, ref_key
from ...trees.base import POSITIVE, RANK_PATHS
from ...trees.policies import POLICIES, param_checks
from ...verify.modes import get_mode
from .errors import ConfigError, as_bool, as_float, as_int, as_names
from .plugins import import_plugins
from .schema import unknown_key
from .toolopts import Option, read

ENGINES = ("live", "replay", "auto")
MAX_PROMPTS = 100_000  # dataset.limit: past any prompt set a study decodes (100,000 prompts are weeks on a CPU)
MAX_BUDGET = 4096  # draft tokens in one tree: far past any model's useful tree, short of a static shape's memory
GROUPS = ("pair", "tree", "verify", "dataset")
OPTIONAL = {"replay_cache": None}  # top-level keys config.yaml leaves out (set with +key=VALUE)
# the top-level keys' kinds and ranges (their defaults: conf/config.yaml's, ``DEFAULTS``); dtype after ``resolve_dtype``
TOP: dict[str, Option] = {
    "max_new_tokens": Option("int", lo=1, hi=1 << 20, fix="e.g. max_new_tokens=64"),
    "seed": Option("int", lo=0, fix="e.g. seed=0"),
    "dtype": Option("choice", words=tuple(DTYPES)),
    "engine": Option("choice", words=ENGINES),
    "batch_size": Option("int", lo=1, hi=4096, fix="prompts per target forward, e.g. batch_size=1"),
    **{k: Option("bool") for k in ("resume", "progress", "exact_continuations")},
}


def _defaults() -> dict[str, Any]:
    """conf/config.yaml's top-level values (groups and Hydra's keys aside) and ``OPTIONAL``: their one place."""
    with open(os.path.join(CONF_DIR, "config.yaml"), encoding="utf-8") as fh:
        top = yaml.safe_load(fh)
    return {**{k: v for k, v in top.items() if k not in (*GROUPS, "defaults", "hydra")}, **OPTIONAL}


DEFAULTS: dict[str, Any] = _defaults()
# not part of a job's identity (exact_continuations: how missing replay records are computed;
# the records' cache keys do not say it either; plugins: the modules imported, whose entries'
# names and parameters the groups carry, see study/job/plugins.py)
RUN_LOCATION = ("resume", "out_root", "progress", "replay_cache", "exact_continuations")
NOT_IDENTITY = (*RUN_LOCATION, "plugins")


@dataclass(frozen=True)
class ModelSpec:
    source: str  # embedded | hub | local
    ref: str  # the embedded/hub id, or the local folder
    key: str  # its config key, e.g. pair.target (for messages)
    weights: str = "pretrained"  # or random: the architecture alone, for timing (models.load_model)

    def as_dict(self) -> dict:
        out = {"source": self.source, ref_key(self.source): self.ref}
        return out if self.weights == "pretrained" else {**out, "weights": self.weights}


@dataclass(frozen=True)
class PairSpec:
    name: str
    draft: ModelSpec | None  # None for a drafter without a draft model (ngram)
    target: ModelSpec
    drafter: str = "model"
    drafter_params: dict = field(default_factory=dict)
    chat_template: bool = False

    @property
    def weights(self) -> str:
        """random if any of the pair's models is built with random weights (timing only), else pretrained."""
        return (
            "random"
            if any(m is not None and m.weights == "random" for m in (self.draft, self.target))
            else "pretrained"
        )

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "draft": self.draft.as_dict() if self.draft else None,
            "target": self.target.as_dict(),
            "drafter": self.drafter,
            "chat_template": self.chat_template,
            **self.drafter_params,
        }


@dataclass(frozen=True)
class TreeSpec:
    name: str
    budget: int
    params: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"name": self.name, "budget": self.budget, **self.params}

    def __hash__(self) -> int:  # a key (``study.tools.lossless_check.groups``): by its content, params included
        return hash(yaml.safe_dump(self.as_dict(), sort_keys=True))


@dataclass(frozen=True)
class VerifySpec:
    name: str
    temperature: float
    draft_temperature: float
    top_p: float
    params: dict = field(default_factory=dict)  # every key, the three above included
    paired_with: tuple = ()  # modes verified on the same drafted trees

    def as_dict(self) -> dict:
        extra = {"paired_with": list(self.paired_with)} if self.paired_with else {}
        return {"name": self.name, **self.params, **extra}


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    limit: int | None
    max_prompt_tokens: int | None
    config: dict = field(default_factory=dict)  # every key, for the loader

    def as_dict(self) -> dict:
        return dict(self.config)

    def loader_spec(self) -> datasets.DatasetSpec:
        """The typed spec the dataset's loader reads (inputs/datasets.py)."""
        return datasets.DatasetSpec.of(self.config)


@dataclass(frozen=True)
class JobSpec:
    pair: PairSpec
    tree: TreeSpec
    verify: VerifySpec
    dataset: DatasetSpec
    max_new_tokens: int = DEFAULTS["max_new_tokens"]
    seed: int = DEFAULTS["seed"]
    device: str = DEFAULTS["device"]
    dtype: str = DEFAULTS["dtype"]
    engine: str = DEFAULTS["engine"]
    batch_size: int = DEFAULTS["batch_size"]
    resume: bool = DEFAULTS["resume"]
    out_root: str = DEFAULTS["out_root"]
    progress: bool = DEFAULTS["progress"]
    replay_cache: str | None = DEFAULTS["replay_cache"]
    exact_continuations: bool = DEFAULTS["exact_continuations"]
    plugins: tuple = ()  # modules imported first (study/job/plugins.py)
    extra: dict = field(default_factory=dict)  # other top-level keys (e.g. costs_*), kept verbatim

    def to_dict(self, identity_only: bool = False) -> dict:
        """The normalised config; ``identity_only`` drops the keys that are not the job's identity
        (``NOT_IDENTITY``: where it runs and writes, and the plugin modules)."""
        d = {
            "pair": self.pair.as_dict(),
            "tree": self.tree.as_dict(),
            "verify": self.verify.as_dict(),
            "dataset": self.dataset.as_dict(),
            **self.extra,
        }
        d.update({k: getattr(self, k) for k in DEFAULTS}, plugins=list(self.plugins))
        return {k: v for k, v in d.items() if not (identity_only and k in NOT_IDENTITY)}

    @property
    def continuation_batch(self) -> int:
        """Prompts per forward for replay's continuations and draft ranks (1: bit-exact
        with batch-1 live decoding, ``exact_continuations=true``)."""
        return 1 if self.exact_continuations else self.batch_size


# --------------------------------------------------------------------------
# the groups, each read once (the typed reads of one value: ``errors``)
# --------------------------------------------------------------------------
def _section(d: Mapping, key: str) -> dict:
    value = d.get(key)
    if not isinstance(value, Mapping) or not value.get("name"):
        raise ConfigError(f"{key} has no name: pick one with {key}=<option> (see conf/{key}/)")
    return dict(value)


def _model(spec, key: str) -> ModelSpec:
    if not isinstance(spec, Mapping):
        raise ConfigError(
            f"{key}={spec!r}: must be a model spec {{source: local, path: DIR}} or {{source: embedded|hub, id: NAME}}"
        )
    source = spec.get("source")
    if source not in SOURCES:
        raise ConfigError(f"{key}.source={source!r}: must be one of {', '.join(SOURCES)}")
    field_ = ref_key(source)
    ref = spec.get(field_)
    if not ref:
        raise ConfigError(
            f"{key}.{field_} is not set: add {key}.{field_}="
            + ("DIR (a Hugging Face model folder)" if source == "local" else "NAME")
        )
    weights = spec.get("weights") or "pretrained"
    if weights not in WEIGHTS:
        raise ConfigError(f"{key}.weights={weights!r}: must be one of {', '.join(WEIGHTS)}")
    return ModelSpec(str(source), str(ref), key, str(weights))


def _drafter(name: str, params: dict):
    """The drafter class of pair.drafter, its own pair.* keys checked (no model needed)."""
    if name not in DRAFTERS:
        raise ConfigError(f"pair.drafter={name!r}: must be one of {', '.join(DRAFTERS.names())}")
    cls = DRAFTERS.get(name)
    try:
        cls.check_params(params)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return cls


def _pair(d: Mapping) -> PairSpec:
    p = _section(d, "pair")
    drafter = str(p.get("drafter") or "model")
    params = {k: v for k, v in p.items() if k not in PAIR_COMMON}
    needs_draft = _drafter(drafter, params).draft_model
    draft = p.get("draft")
    if needs_draft and draft is None:
        raise ConfigError(f"pair.draft is not set: pair.drafter={drafter} needs a draft model spec")
    return PairSpec(
        name=str(p["name"]),
        draft=_model(draft, "pair.draft") if needs_draft else None,
        target=_model(p.get("target"), "pair.target"),
        drafter=drafter,
        drafter_params=params,
        chat_template=as_bool(p.get("chat_template", False), "pair.chat_template"),
    )


def _rank_lists(value, key: str, fix: str, nested: bool) -> None:
    """tree.paths (``nested``): distinct non-empty lists of ranks >= 0; tree.expansion: counts >= 0."""
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{key}={value!r}: must be a non-empty list; e.g. {fix}")
    for i, row in enumerate(value):
        items = row if nested else [row]
        if (
            not isinstance(items, list)
            or not items
            or any(isinstance(r, bool) or not isinstance(r, int) or r < 0 for r in items)
        ):
            raise ConfigError(f"{key}[{i}]={row!r}: must be integers >= 0; e.g. {fix}")
        if nested and row in value[:i]:
            raise ConfigError(f"{key}[{i}]={row!r} repeats {key}[{value.index(row)}]: give each path once; e.g. {fix}")


def tree_spec(tree: Mapping) -> TreeSpec:
    """The typed spec of one tree group ({"name", "budget", ...shape parameters})."""
    return _tree({"tree": tree})


def verify_spec(verify: Mapping) -> VerifySpec:
    """The typed spec of one verify group ({"name", ...mode parameters}), the mode's defaults filled in."""
    return _verify({"verify": verify})


def _tree(d: Mapping) -> TreeSpec:
    t = _section(d, "tree")
    # >= 0 here (tree=none is budget 0); whether a policy accepts 0 is the registry's call
    budget = as_int(t.get("budget"), "tree.budget", 0, "the number of draft tokens, e.g. tree.budget=16", MAX_BUDGET)
    # an unset optional key (``trees.base.optional``) is no part of the job's identity
    unset = POLICIES.get(t["name"]).params.optional_keys() if t["name"] in POLICIES else set()
    params = {k: v for k, v in t.items() if k not in ("name", "budget") and not (v is None and k in unset)}
    for k, check in param_checks().items():  # as the policies declare their parameters
        if check["check"] == POSITIVE and params.get(k) is not None:
            # a width, depth or fan-out past the largest budget shapes nothing more (and would allocate it)
            params[k] = as_int(params[k], f"tree.{k}", 1, f"set tree.{k} to 1 or more (null = default)", MAX_BUDGET)
        elif check["check"] != POSITIVE and k in params:
            _rank_lists(params[k], f"tree.{k}", check["example"], check["check"] == RANK_PATHS)
    return TreeSpec(str(t["name"]), budget, params)


def _verify(d: Mapping) -> VerifySpec:
    """The verify group merged over the mode spec's defaults (the only place they live)."""
    v = _section(d, "verify")
    name = str(v.pop("name"))
    paired = as_names(v.pop("paired_with", None), "verify.paired_with")
    try:
        params = dict(get_mode(name).params(v))  # a plain dict: the config hash covers it
    except ValueError as e:
        raise ConfigError(str(e)) from None
    top_p = as_float(params["top_p"], "verify.top_p", 0.0, 1.0, "use a value in (0, 1], e.g. verify.top_p=1")
    if top_p == 0:
        raise ConfigError("verify.top_p=0: must be in (0, 1]; e.g. verify.top_p=1")
    return VerifySpec(name, params["temperature"], params["draft_temperature"], top_p, params, paired)


def _dataset(d: Mapping) -> DatasetSpec:
    ds = _section(d, "dataset")
    limit, mpt = ds.get("limit"), ds.get("max_prompt_tokens")
    limit = (
        None
        if limit is None
        else as_int(limit, "dataset.limit", 1, "use a positive number, or null for all", MAX_PROMPTS)
    )
    mpt = None if mpt is None else as_int(mpt, "dataset.max_prompt_tokens", 1, "or null for no check")
    ds = datasets.identity({**ds, "limit": limit, "max_prompt_tokens": mpt})  # an unset kind: none of it
    return DatasetSpec(str(ds["name"]), limit, mpt, ds)


def _missing(node, prefix: str = "") -> list[str]:
    """Dotted keys whose value is ??? (interpolations left unresolved)."""
    out = []
    for key in node.keys() if isinstance(node, DictConfig) else []:
        if key == "hydra":
            continue
        child = node._get_node(key)
        if OmegaConf.is_missing(node, key):
            out.append(f"{prefix}{key!s}")
        elif isinstance(child, DictConfig) and not child._is_interpolation():
            out += _missing(child, f"{prefix}{key!s}.")
    return out


def resolved(cfg) -> dict:
    """The config as a plain dict; a key its group's schema lacks, ??? or a broken interpolation: ConfigError."""
    if isinstance(cfg, Mapping) and not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(dict(cfg))
    for group in GROUPS:
        if (line := unknown_key(group, cfg.get(group))) is not None:
            raise ConfigError(line)
    if "hydra" in cfg:  # compose(..., return_hydra_config=True)
        cfg = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    missing = _missing(cfg)
    if missing:
        k = missing[0]
        hint = "DIR (a Hugging Face model folder)" if k.endswith(".path") else "VALUE"
        raise ConfigError(f"{k} is not set: add {k}={hint}")
    try:
        d = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", "") or "config"
        raise ConfigError(f"{key}: {str(e).splitlines()[0]}") from None
    if not isinstance(d, dict):
        raise ConfigError(f"config: a mapping of keys expected, got {type(d).__name__}")
    return d


def from_config(cfg) -> JobSpec:
    """The typed spec of a composed config (DictConfig or dict)."""
    d = resolved(cfg)
    plugins = import_plugins(d.get("plugins"))  # before any registry name is read (study/job/plugins.py)
    top = {**DEFAULTS, **{k: d[k] for k in DEFAULTS if k in d and d[k] is not None}}
    groups: dict[str, Any] = {"pair": _pair(d), "tree": _tree(d), "verify": _verify(d), "dataset": _dataset(d)}
    typed: dict[str, Any] = {}
    for key, option in TOP.items():  # in the table's order: the first bad key is the one refused
        given = resolve_dtype(top[key], str(top["device"]), top["replay_cache"]) if key == "dtype" else top[key]
        typed[key] = read(option, given, key)
    return JobSpec(
        **groups,
        **typed,
        device=str(top["device"]),
        out_root=str(top["out_root"]),
        replay_cache=None if top["replay_cache"] is None else str(top["replay_cache"]),
        plugins=plugins,
        extra={k: v for k, v in d.items() if k not in DEFAULTS and k not in GROUPS},
    )
