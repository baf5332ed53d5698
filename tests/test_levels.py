"""Level-wise drafting driven by the loop (``drafting.levels``): every row's drafter is
a generator of levels, and one draft forward per depth serves every row; no threads."""

import pathlib
import re

import pytest
import torch

from specbench.core import kv
from specbench.drafting.drafters import ModelDrafter
from specbench.drafting.levels import run_levels
from specbench.drafting.merged import MergedDrafter
from specbench.drafting.ngram import NgramDrafter
from specbench.trees.policies import make_policy

TEXTS = (
    "def add(a, b):\n    return a + b\ndef add(a, b):",
    "x",
    "The quick brown fox. The quick",
    "for i in range(10):",
)
POLICIES = [
    ("chain", 5, {}),
    ("binary", 8, {}),
    ("kary", 9, {"width": 3}),
    ("topk_wide", 6, {"width": 3}),
    ("specinfer", 8, {"expansion": [1, 2, 2, 1]}),
    ("paths", 4, {"paths": [[0], [1], [0, 0], [1, 0]]}),
    ("eagle2", 8, {"width": 3, "depth": 3}),
    ("merged", 6, {"shape": "binary"}),
    ("none", 0, {}),
]
DRAFTERS = {
    "model": lambda d, shared: ModelDrafter(d, 1.0, kv=shared),
    "merged": lambda d, shared: MergedDrafter(ModelDrafter(d, 1.0, kv=shared)),
    "ngram": lambda d, shared: NgramDrafter(),
}


def same_tree(a, b) -> None:
    assert a.parents == b.parents and a.ranks == b.ranks and a.slots == b.slots
    assert torch.equal(a.tokens, b.tokens)
    assert (a.q is None) == (b.q is None)
    if a.q is not None:
        torch.testing.assert_close(a.q, b.q, atol=1e-5, rtol=1e-5)


def fits(drafter: str, policy: str) -> bool:
    if drafter == "merged":
        return policy in ("merged", "none")
    if drafter == "ngram":
        return policy in ("chain", "binary", "none")
    return policy != "merged"


CASES = [(d, *p) for d in sorted(DRAFTERS) for p in POLICIES if fits(d, p[0])]


@pytest.mark.parametrize("drafter,name,budget,params", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_lockstep_levels_equal_each_row_drafted_alone(tiny_draft, tiny_tokenizer, drafter, name, budget, params):
    """Two steps of every row: drafted together (one forward per depth over one shared
    slot cache) and each on its own cache, the same trees; then the same commits."""
    prompts = [tiny_tokenizer.encode(t) for t in TEXTS]
    shared = kv.SlotKV(tiny_draft)
    together = [DRAFTERS[drafter](tiny_draft, shared) for _ in prompts]
    alone = [DRAFTERS[drafter](tiny_draft, None) for _ in prompts]
    for d, e, p in zip(together, alone, prompts):
        d.reset(p)
        e.reset(p)
    for _ in range(2):
        policy = make_policy(name, budget, params)
        trees = run_levels([d.draft(policy, "topk", torch.Generator().manual_seed(0)) for d in together])
        for d, e, tree in zip(together, alone, trees):
            same_tree(tree, e.draft_now(policy, "topk", torch.Generator().manual_seed(0)))
            path = [c for c in tree.children(0)][:1]
            for x in (d, e):
                x.commit(tree, path, 7)
    if drafter != "ngram":
        depth = max(1, params.get("depth", 0))
        assert shared.forwards <= 1 + 2 * (budget + depth + 1)  # per level, never per row


def test_no_module_uses_threads():
    """The loop drives drafting: nothing in specbench starts threads or waits on them."""
    root = pathlib.Path(__file__).resolve().parents[1] / "specbench"
    pattern = re.compile(r"^\s*(import threading|from threading|from concurrent|import concurrent)", re.M)
    # the one exception, with its reason: a sweep's progress bar follows the job folders from the process
    # that launches the sweep (Hydra's callback), outside every decode; set-up converts the embedded models in
    # worker processes while the next model's packages download, before any decode starts
    allowed = {root / "study" / "job" / "progress.py", root / "inputs" / "embedded.py"}
    offenders = [str(p) for p in root.rglob("*.py") if p not in allowed and pattern.search(p.read_text())]
    assert offenders == []
