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

from ..core.options import not_a_parameter, schema_keys


def fields(group: str, cfg: Any) -> tuple[str, list[str]] | None:
    """(its option's name, its keys) of composed group node ``cfg`` whose type is a stored schema
    (``core.options.node``), or a pair's drafter's; None for a plain mapping (an open YAML file)."""
    if not isinstance(cfg, DictConfig):
        return None
    drafter = cfg.get("drafter") if group == "pair" else None
    if isinstance(drafter, str) and (keys := schema_keys("pair", drafter)) is not None:
        return f"pair.drafter={drafter}", keys
    kind = OmegaConf.get_type(cfg)
    if kind is None or not dataclasses.is_dataclass(kind) or "=" not in kind.__name__:
        return None
    return kind.__name__, [f.name for f in dataclasses.fields(kind)]


def unknown_key(group: str, cfg: Any) -> str | None:
    """The one line for the first key of composed group node ``cfg`` that its schema lacks;
    None if none or no schema."""
    known = fields(group, cfg)
    if known is None:
        return None
    extra = sorted(str(k) for k in cfg if k not in known[1])
    return not_a_parameter(f"{group}.{extra[0]}", known[0], known[1]) if extra else None
