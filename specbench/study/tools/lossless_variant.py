"""A mode variant of the empirical lossless check (``study.tools.lossless``; ``--modes`` / ``--control``:
``name[key=value;...]``), parsed once into a ``ModeVariant`` that the check passes down.  The check's power
(the N it picks, what it can detect) is ``results.power``'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MODE_VARIANT = re.compile(r"^([a-z_0-9]+)(?:\[([^\]]*)\])?$")


def parse_variant(text: str) -> tuple[str, dict]:
    """``mss[order=storage]`` -> ("mss", {"order": "storage"}); ``name`` -> (name, {});
    several parameters are separated by ``;``.  A one-line ValueError otherwise."""
    m = MODE_VARIANT.match(text.strip())
    if not m:
        raise ValueError(f"--modes: {text!r} is not NAME or NAME[key=value;...]")
    params = {}
    for item in filter(None, (m.group(2) or "").split(";")):
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--modes: {text!r}: parameter {item!r} is not key=value")
        params[key.strip()] = val.strip()
    return m.group(1), params


@dataclass(frozen=True)
class ModeVariant:
    """One ``--modes`` / ``--control`` entry, parsed once: ``text`` as given (``mss[order=storage]``),
    the mode's ``name`` ("mss") and its ``own`` parameters ({"order": "storage"})."""

    text: str
    name: str
    own: dict[str, str]

    @classmethod
    def parse(cls, text: str) -> ModeVariant:
        """The variant ``text`` spells (``parse_variant``; a one-line ValueError otherwise)."""
        name, own = parse_variant(text)
        return cls(text, name, own)

    def params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The check's sampling ``params`` with the variant's own on top."""
        return {**params, **self.own}
