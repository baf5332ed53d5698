"""A name -> object registry with a decorator (lm-evaluation-harness style).

An unknown name raises a one-line error that lists the valid names and
suggests the closest one.
"""
from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any


class UnknownName(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; we want plain text
        return str(self.args[0])


class Registry:
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, Any] = {}
        self._meta: dict[str, dict] = {}

    def register(self, name: str, **meta) -> Callable:
        def deco(obj):
            if name in self._items:
                raise ValueError(f"{self.kind} '{name}' is registered twice")
            self._items[name] = obj
            self._meta[name] = meta
            return obj
        return deco

    def get(self, name: str) -> Any:
        if name not in self._items:
            close = difflib.get_close_matches(str(name), self.names(), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise UnknownName(f"unknown {self.kind} '{name}'. Valid: {', '.join(self.names())}.{hint}")
        return self._items[name]

    def meta(self, name: str) -> dict:
        self.get(name)
        return self._meta[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: str) -> bool:
        return name in self._items
