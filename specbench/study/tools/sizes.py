"""The models' sizes the default run's plan and the acceptance sample's cheapest-row rule estimate
from (billions of parameters per pair's draft and target).  Below ``estimates`` and ``recheck``, which
both read it, the batched run a committed row is re-derived in and the strata the sample covers (``STRATA``:
``recheck`` samples by them, ``budget`` names those a plan leaves unrepresented); imports nothing.
"""

from __future__ import annotations

STRATA = ("pair", "tree", "frontier_rule", "dataset")  # the acceptance sample represents every value of each
# billions of parameters the forward multiplies through (the embeddings' lookup is free)
PARAMS_B = {"qwen1.5b": 1.54, "qwen0.5b": 0.49, "smollm": 0.135, "gemma": 0.17, "tiny": 0.0001}
PAIRS = {  # pair: (draft model or None, target model); a layer-skip draft is half its target
    "qwen_coder": ("qwen0.5b", "qwen1.5b"),
    "merged_qwen": ("qwen0.5b", "qwen1.5b"),
    "ngram_qwen": (None, "qwen1.5b"),
    "smollm_qwen": ("smollm", "qwen1.5b"),
    "gemma_qwen": ("gemma", "qwen1.5b"),
    "qwen_skip": ("qwen1.5b/2", "qwen1.5b"),
    "smollm_qwen05": ("smollm", "qwen0.5b"),
    "gemma_qwen05": ("gemma", "qwen0.5b"),
    "ngram_qwen05": (None, "qwen0.5b"),
    "qwen05_skip": ("qwen0.5b/2", "qwen0.5b"),
    "local": ("tiny", "tiny"),
}
# study.tools.costs' forward widths: every draft frontier and verify width of the dense budget grid (N and N + 1
# for N in 1..6, 8, 12, 16, 24, 32, 48, 64) is a measured point: a cost curve need not be monotone (a one-row
# kernel can cost more than two rows), so nothing is interpolated across a kernel change the repeats agree on
COST_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 24, 25, 32, 33, 48, 49, 64, 65, 96, 128)


def cost_sizes(max_tokens: int | None = None) -> tuple[int, ...]:
    """The forward widths ``+costs_max_tokens`` keeps (all where None): a narrow curve for a machine whose whole
    grid would leave its run no time for its speed benchmark (``budget.plan``)."""
    return tuple(n for n in COST_SIZES if max_tokens is None or n <= max_tokens)


# the speed benchmark's untimed warm-up decode per candidate (study.tools.speed.bench), in new tokens: a whole
# 64-token decode was a fifth of a 4-prompt run (the default run's); 16 run each candidate's drafter, trees
# and forwards over several steps
WARM_TOKENS = 16


def params(model: str | None) -> float:
    if model is None:
        return 0.0
    name, _, half = model.partition("/")
    return PARAMS_B[name] / (2 if half else 1)


def models(pair: str) -> tuple[str | None, str]:
    return PAIRS.get(pair, ("qwen0.5b", "qwen1.5b"))


def run_prompts(row) -> int:
    """The prompts a row is re-derived on: its first at batch 1 (each prompt decodes alone), else every
    prompt of its committed run (a batched run's continuations depend on all its prompts)."""
    b = int(row["batch_size"])
    return 1 if b == 1 else int(row.get("n_prompts", b))


def continuation_key(row) -> tuple:
    """What one target continuation serves: the rows of one target, dataset, batched run, length and dtype."""
    b, n = int(row["batch_size"]), run_prompts(row)
    return (models(row["pair"])[1], row["dataset"], b, n, int(row["max_new_tokens"]), row["dtype"])
