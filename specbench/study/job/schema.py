"""A composed config's group nodes read against their schemas (``core.options``).

``fields(group, cfg)``: the option's name and node class of a composed group node; a pair's are its
drafter's (``schema/pair/<pair.drafter>``, so ``pair.drafter=layerskip +pair.layers=2`` on a model
pair's file is read as a layer-skip pair).  ``unknown_key``: the one line for a key the schema
lacks (a ``+group.key=...`` override, which Hydra adds to a closed node).

Imports: omegaconf and ``core.options`` only.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ...core.options import is_node, not_a_parameter, schema_node


def fields(group: str, cfg: Any, declared: Any = None) -> tuple[str, type] | None:
    """(its option's name, its node class) of composed group node ``cfg``: the stored schema its
    type is (``core.options.node``), a pair's drafter's, or else the node its parent ``declared``
    it as (a plugin's pair file that extends no schema keeps ``pair.draft`` a model spec); None
    for a plain mapping."""
    if not isinstance(cfg, DictConfig):
        return None
    drafter = cfg.get("drafter") if group == "pair" else None
    if isinstance(drafter, str) and (kind := schema_node("pair", drafter)) is not None:
        return f"pair.drafter={drafter}", kind
    kind = OmegaConf.get_type(cfg)
    kind = kind if is_node(kind) else declared
    return (kind.__name__, kind) if is_node(kind) else None


def declared_node(field: dataclasses.Field) -> type | None:
    """The node a field holds (``Optional[node]``, ``core.options.node``), or None."""
    return next((a for a in typing.get_args(field.type) if is_node(a)), None)


def unknown_key(group: str, cfg: Any, declared: Any = None) -> str | None:
    """The one line for the first key of composed group node ``cfg`` (or of a node nested in it)
    that its schema lacks; None if none or no schema."""
    known = fields(group, cfg, declared)
    if known is None:
        return None
    own = dataclasses.fields(known[1])
    keys = [f.name for f in own]
    extra = sorted(str(k) for k in cfg if k not in keys)
    if extra:
        return not_a_parameter(f"{group}.{extra[0]}", known[0], keys)
    set_ = [f for f in own if not (OmegaConf.is_missing(cfg, f.name) or OmegaConf.is_interpolation(cfg, f.name))]
    nested = (unknown_key(f"{group}.{f.name}", cfg.get(f.name), declared_node(f)) for f in set_)  # unresolved
    return next((line for line in nested if line is not None), None)
