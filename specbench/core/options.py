"""A registry entry's config-group option: its structured config in Hydra's ``ConfigStore``.

Each tree policy, verify mode and dataset loader stores, when it is registered, one node whose
fields are its parameters with their defaults (``store(group, name, values)``): the option
``group=name`` (``tree=kary``, ``verify=mss``, ``dataset=humaneval``), so a plugin's entries are
options without any YAML.  A drafter stores only the schema of the pairs it drafts for
(``schema/pair/<drafter>``, ``option=False``): a pair is a named variant carrying data (model ids).
Hydra's structured configs are closed: an unknown key (``tree.widht=3``) fails composition, and
``study.job.argv`` names it in one line (``hydra_line``); a ``+`` key, which Hydra adds to a closed
node, is refused by ``study.job.schema.unknown_key`` on the composed node (before Hydra starts, ``study.job.argv``;
on every job's config, ``study.job.jobspec``).

The node is also stored as ``schema/<group>/<name>``; a YAML file of the same name in conf/
(a named variant carrying data the entry's defaults do not, e.g. conf/tree/medusa63.yaml's path
list) takes the option's place and extends that node (``defaults: [/schema/tree/medusa63@_here_]``),
so it is closed and typed the same way.  Every field is typed ``Any``: the job spec
(``study.job.jobspec``) checks values and says in one line what is wrong.

Imports: hydra's ``ConfigStore`` and ``specbench.CONF_DIR`` only (a composed config is read
against these nodes in the study layer, ``study.job.schema``).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping
from typing import Any, Optional, TypeGuard

from hydra.core.config_store import ConfigStore

from .. import CONF_DIR

NODE = "_specbench_node"  # the class attribute that marks a node's class
SCHEMA = "schema"  # the group the nodes are also stored under (schema/<group>/<name>)
NODES: dict[tuple[str, str], type] = {}  # (group, name) -> the node class ``store`` stored


def plain(value: Any) -> Any:
    """A default as a config holds it (tuples as lists, mappings as dicts)."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


def node(label: str, values: Mapping[str, Any]) -> type:
    """A dataclass with one ``Any`` field per key of ``values`` (its default), named ``label``
    (``group=name``: what the one-line errors call the option).  A value that is itself a node
    (a class this made) is a nested node, unset by default: ``pair.draft``'s model spec."""
    optional = Optional  # omegaconf reads Optional[...], not X | None
    fields = [(key, optional[v] if is_node(v) else Any, _field(v)) for key, v in values.items()]
    return dataclasses.make_dataclass(label, fields, namespace={NODE: True})


def is_node(kind: Any) -> TypeGuard[Any]:
    """Whether ``kind`` is a node's class (``node``)."""
    return isinstance(kind, type) and getattr(kind, NODE, False)


def _field(value: Any) -> Any:
    """A field of default ``value`` (a list or mapping through a factory, as dataclasses ask;
    None for a nested node)."""
    if is_node(value):
        return dataclasses.field(default=None)
    value = plain(value)
    if isinstance(value, (list, dict)):
        return dataclasses.field(default_factory=lambda: plain(value))
    return dataclasses.field(default=value)


def store(group: str, name: str, values: Mapping[str, Any], option: bool = True, label: str = "") -> None:
    """Store entry ``name``'s node (named ``label``, default ``group=name``) as
    ``schema/<group>/<name>`` and, where ``option`` and unless conf/<group>/<name>.yaml (a named
    variant that extends it) exists, as the option ``<group>/<name>``."""
    store_ = ConfigStore.instance()
    cls = node(label or f"{group}={name}", values)
    NODES[(group, name)] = cls
    store_.store(group=f"{SCHEMA}/{group}", name=name, node=cls)
    if option and not os.path.isfile(os.path.join(CONF_DIR, group, f"{name}.yaml")):
        store_.store(group=group, name=name, node=cls)


def _group(path: str) -> dict:
    repo: Any = ConfigStore.instance().repo
    for part in path.split("/"):
        repo = repo.get(part, {}) if isinstance(repo, dict) else {}
    return repo if isinstance(repo, dict) else {}


def stored(group: str) -> list[str]:
    """The options of ``group`` stored in the ConfigStore (named variants in conf/ aside)."""
    return sorted(k.removesuffix(".yaml") for k in _group(group) if k.endswith(".yaml"))


def schema_node(group: str, name: str) -> type | None:
    """Entry ``name``'s node class (``store``), None if none is stored."""
    return NODES.get((group, name))


def schema_keys(group: str, name: str) -> list[str] | None:
    """The keys of entry ``name``'s node (its parameters and ``name``), None if none is stored."""
    kind = schema_node(group, name)
    return None if kind is None else sorted(f.name for f in dataclasses.fields(kind))


def closest(word: str, valid) -> str:
    near = difflib.get_close_matches(word, sorted(valid), n=1)
    return f" (did you mean {near[0]}?)" if near else ""


def not_a_parameter(key: str, option: str, valid) -> str:
    """The one line for a key that option ``option`` (``group=name``) does not have."""
    name = key.rpartition(".")[2]
    return f"{key}: not a parameter of {option}{closest(name, valid)}; remove it (valid: {', '.join(sorted(valid))})"
