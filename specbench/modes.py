"""TEMPORARY bridge from the engine to today's verify / distshift API (replaced by
the mode-spec registry when it lands)."""
from __future__ import annotations

from types import SimpleNamespace

from . import distshift
from .verify import MODES


class _Spec:
    def __init__(self, name: str):
        self.name = name
        self.fn = MODES.get(name)
        meta = MODES.meta(name)
        self.child_rule, self.lossless, self.chain_only = meta["children"], meta["lossless"], meta["chain_only"]

    def verdict(self, tree, p, q, rng, params):
        return self.fn(tree, p, q, rng, params)


def get_mode(name: str) -> _Spec:
    return _Spec(name)


law = SimpleNamespace(
    first_token_tv=lambda spec, tree, p, q, params: distshift.first_token_tv(spec.name, tree, p, q, params),
    expected_accepted=lambda spec, tree, p, q, params: distshift.expected_accepted(spec.name, tree, p, q, params))
