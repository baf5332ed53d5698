"""The public entry point for scripts and notebooks: a loaded pair + prompts through the
one loop, without wiring drafter, verifier and policy by hand.

    from specbench import api
    from specbench.inputs import data, models
    pair = models.load_pair({"draft": {"source": "embedded", ...}, "target": {...}}, "bfloat16", "cpu")
    done = api.decode_prompts(pair, prompts, {"name": "chain", "budget": 4}, {"name": "greedy"}, 64)
    tokens = done[0].tokens; records = done[0].records

Live engine only (wall-clock figures); the study job (``specbench.run``) adds replay and
caching.  Built like a study job, from typed specs through the job context
(``specbench.study.job.context.DecodePlan``): a bad tree or verify key is a one-line
``ConfigError`` naming it.
"""

from __future__ import annotations

from .engine.records import PromptResult
from .inputs.models import eos_ids
from .study.job.context import DecodePlan
from .study.job.jobspec import tree_spec, verify_spec

__all__ = ["decode_prompts", "eos_ids", "plan"]


def plan(
    tree: dict, verify: dict, max_new_tokens: int, seed: int = 0, measure_shift: bool = True, batch_size: int = 1
) -> DecodePlan:
    """The decode plan of a tree policy ``tree`` ({"name", "budget" (default 0), ...}) and a
    verify mode ``verify`` ({"name", ...mode parameters})."""
    return DecodePlan(
        tree_spec({"budget": 0, **tree}),
        verify_spec(verify),
        int(max_new_tokens),
        int(seed),
        int(batch_size),
        measure_shift,
    )


def decode_prompts(
    pair,
    prompts,
    tree: dict,
    verify: dict,
    max_new_tokens: int,
    seed: int = 0,
    measure_shift: bool = True,
    progress=None,
    batch_size: int = 1,
) -> list[PromptResult]:
    """Decode ``prompts`` (objects with ``.id`` and ``.ids``) live with the pair's drafter,
    the tree policy ``tree`` and the verify mode ``verify`` (see ``plan``), ``batch_size``
    prompts per target forward."""
    p = plan(tree, verify, max_new_tokens, seed, measure_shift, batch_size)
    return p.run(pair, prompts, p.live_verifier(pair), progress)
