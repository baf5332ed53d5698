"""A typed name -> entry registry with a decorator (lm-evaluation-harness style).

``Registry[T]`` holds entries of one type (a spec object, or a class of one base);
what an entry can do is declared ON the entry (its fields or class attributes), never
beside the registration.  A registry made with ``name_attr`` writes the registered
name onto the entry, so the name is not repeated in the entry's body; one made with ``on_add``
calls it with each new entry (the drafters store their pairs' config schema so).  An unknown
name raises a one-line error that lists the valid names and suggests the closest one.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar, cast

T = TypeVar("T")
E = TypeVar("E")


class UnknownName(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; we want plain text
        return str(self.args[0])


class Registry(Generic[T]):
    def __init__(self, kind: str, name_attr: str | None = None, on_add: Callable[[str, T], None] | None = None):
        self.kind = kind
        self.name_attr = name_attr
        self.on_add = on_add
        self._items: dict[str, T] = {}

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` under ``name`` (twice is an error); returns it."""
        if name in self._items:
            raise ValueError(f"{self.kind} '{name}' is registered twice")
        if self.name_attr is not None:
            setattr(entry, self.name_attr, name)
        self._items[name] = entry
        if self.on_add is not None:
            self.on_add(name, entry)
        return entry

    def register(self, name: str) -> Callable[[E], E]:
        """Decorator form of ``add`` (the decorated object is returned unchanged)."""

        def deco(entry: E) -> E:
            self.add(name, cast(T, entry))
            return entry

        return deco

    def get(self, name: str) -> T:
        if name not in self._items:
            close = difflib.get_close_matches(str(name), self.names(), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise UnknownName(f"unknown {self.kind} '{name}'. Valid: {', '.join(self.names())}.{hint}")
        return self._items[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def entries(self) -> Iterator[T]:
        """Every entry, by name."""
        return (self._items[n] for n in self.names())

    def __contains__(self, name: object) -> bool:
        return name in self._items
