"""The public entry point for scripts and notebooks: a loaded pair + prompts through the
one loop, without wiring drafter, verifier and policy by hand.

    from specbench.engine import api
    from specbench.inputs import data
    from specbench.inputs import models
    pair = models.load_pair({"draft": {"source": "embedded", ...}, "target": {...}}, "bfloat16", "cpu")
    done = api.decode_prompts(pair, prompts, {"name": "chain", "budget": 4}, {"name": "greedy"}, 64)
    tokens = done[0].tokens; records = done[0].records

Live engine only (wall-clock figures); the study job (``run``) adds replay and caching.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..drafting.drafters import DRAFTERS
from ..trees.policies import make_policy
from ..verify.modes import get_mode
from .loop import Decoding, LiveVerifier, PromptResult, decode


def eos_ids(pair) -> frozenset[int]:
    """The target's EOS token ids (generation config, else the tokenizer's)."""
    eos = pair.target.generation_config.eos_token_id
    if eos is None:
        eos = pair.tokenizer.eos_token_id
    return frozenset(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}


def decode_prompts(pair, prompts, tree: dict, verify: dict, max_new_tokens: int, seed: int = 0,
                   measure_shift: bool = True, progress=None, batch_size: int = 1) -> list[PromptResult]:
    """Decode ``prompts`` (objects with ``.id`` and ``.ids``) live with the pair's drafter,
    the tree policy ``tree`` ({"name", "budget", ...}) and the verify mode ``verify``
    ({"name", ...mode parameters}), ``batch_size`` prompts per target forward."""
    tree, verify = dict(tree), dict(verify)
    name, budget = tree.pop("name"), tree.pop("budget", 0)
    mode = get_mode(verify.pop("name"))
    params = mode.params(verify)
    run = Decoding(mode, params, int(max_new_tokens), eos_ids(pair), int(seed), measure_shift)
    verifier = LiveVerifier(pair.target, params["temperature"], params["top_p"])
    return decode(prompts, drafter_factory(pair, params), verifier, lambda: make_policy(name, budget, tree), run,
                  progress, batch_size)


def drafter_factory(pair, params: Mapping[str, Any]):
    """New drafters of the pair's kind (``pair.drafter``), every one a row of one shared
    draft cache, so that a batch of rows drafts in lockstep."""
    cls = DRAFTERS.get(getattr(pair, "drafter", "model"))
    kv = cls.shared_kv(pair)
    return lambda: cls.from_pair(pair, params["draft_temperature"], params["top_p"], kv)
