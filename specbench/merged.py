"""SpecInfer-style merged drafting: the token-trie union of a model draft and an
n-gram draft under ONE budget N.

Budget split (fixed rule, reported in the README):
  1. the n-gram drafter claims up to s = floor(ngram_share * N) nodes
     (default share 0.5), but only as many as its matches supply;
  2. the model drafter drafts the configured tree (static shape trimmed by the
     budget rule, or a dynamic tree such as eagle2) with the remaining N - s;
  3. the two trees are merged by token (a node is identified by its token path
     from the root); where the n-gram branch repeats model nodes they collapse,
     and the freed nodes are refilled with further n-gram continuations.
  So a step verifies exactly N nodes unless the n-gram matches run out
  (e.g. 0 matches: the plain model tree of N nodes).

Merged trees keep the model's q rows on model-drafted nodes that have
children and zero rows elsewhere; n-gram-only nodes have slot -1 (the draft
model re-reads them after the verdict).  Children from the n-gram side are
not drawn from q, so merged drafting is exact only under greedy
verification; sampling modes run but are not lossless with it.
"""
from __future__ import annotations

import math

import torch

from .drafters import DRAFTERS, Drafter, ModelDrafter
from .ngram import Trie, ngram_trie
from .trees import DraftTree, TreePlan


@DRAFTERS.register("merged")
class MergedDrafter(Drafter):
    """Model drafter + n-gram drafter, merged into one tree."""

    def __init__(self, model_drafter: ModelDrafter, ngram_share: float = 0.5,
                 max_ngram: int = 4, min_ngram: int = 1):
        if not 0.0 <= ngram_share < 1.0:
            raise ValueError(f"ngram_share={ngram_share}: must be in [0, 1) so the model drafts >= 1 node")
        self.model = model_drafter
        self.share, self.max_ngram, self.min_ngram = ngram_share, max_ngram, min_ngram

    @classmethod
    def from_pair(cls, pair, temperature: float = 0.0, top_p: float = 1.0) -> "MergedDrafter":
        if pair.draft is None:
            raise ValueError("pair.drafter=merged needs a draft model (pair.draft)")
        return cls(ModelDrafter(pair.draft, temperature, top_p))

    def reset(self, prompt_ids) -> None:
        super().reset(prompt_ids)
        self.model.reset(prompt_ids)

    def split(self, budget: int, plan: TreePlan) -> tuple[int, int]:
        """(n-gram nodes s, model nodes N - s) for this step's history."""
        cap = math.floor(self.share * budget)
        s = ngram_trie(self.history, plan, cap, self.max_ngram, self.min_ngram).size if cap else 0
        return s, budget - s

    def draft(self, plan: TreePlan, children: str, rng: torch.Generator) -> DraftTree:
        n = int(plan.budget)
        _, model_budget = self.split(n, plan)
        if plan.dynamic:
            sub = TreePlan(plan.name, model_budget, dict(plan.params), dynamic=True)
            mtree = self.model.draft(sub, children, rng)
        else:
            # the first b rank paths breadth-first are the shape at budget b (budget rule)
            mtree = self.model.expand_static(plan.paths()[:model_budget], children, rng)
        trie = Trie.from_tree(mtree)
        ngram_trie(self.history, plan, n, self.max_ngram, self.min_ngram, into=trie)
        return trie.to_tree(q_source=mtree.q, slot_source=mtree.slots, root_slot=mtree.slots[0])

    def commit(self, tree: DraftTree, path, next_token: int) -> None:
        super().commit(tree, path, next_token)
        self.model.commit(tree, path, next_token)
