"""A composed config's group nodes read against their schemas (``core.options``).

``fields(group, cfg)``: the option's name and keys of a composed group node; a pair's are its
drafter's (``schema/pair/<pair.drafter>``, so ``pair.drafter=layerskip +pair.layers=2`` on a model
pair's file is read as a layer-skip pair).  ``unknown_key``: the one line for a key the schema
lacks (a ``+group.key=...`` override, which Hydra adds to a closed node).

Imports: omegaconf and ``core.options`` only.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..core.options import is_node, not_a_parameter, schema_keys


def fields(group: str, cfg: Any) -> tuple[str, list[str]] | None:
    """(its option's name, its keys) of composed group node ``cfg`` whose type is a stored schema
    (``core.options.node``), or a pair's drafter's; None for a plain mapping (an open YAML file)."""
    if not isinstance(cfg, DictConfig):
        return None
    drafter = cfg.get("drafter") if group == "pair" else None
    if isinstance(drafter, str) and (keys := schema_keys("pair", drafter)) is not None:
        return f"pair.drafter={drafter}", keys
    kind = OmegaConf.get_type(cfg)
    if not is_node(kind):
        return None
    return kind.__name__, [f.name for f in dataclasses.fields(kind)]


def unknown_key(group: str, cfg: Any) -> str | None:
    """The one line for the first key of composed group node ``cfg`` (or of a node nested in it)
    that its schema lacks; None if none or no schema."""
    known = fields(group, cfg)
    if known is None:
        return None
    extra = sorted(str(k) for k in cfg if k not in known[1])
    if extra:
        return not_a_parameter(f"{group}.{extra[0]}", known[0], known[1])
    nodes = [k for k in known[1] if not (OmegaConf.is_missing(cfg, k) or OmegaConf.is_interpolation(cfg, k))]
    nested = (unknown_key(f"{group}.{k}", cfg.get(k)) for k in nodes)  # pair.draft's model spec, unresolved
    return next((line for line in nested if line is not None), None)
