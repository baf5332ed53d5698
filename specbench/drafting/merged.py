"""SpecInfer-style merged drafting (``tree=merged``): the token-trie union of a
model draft and an n-gram draft under ONE budget N.

Budget split (fixed rule, reported in docs/trees.md):
  1. the n-gram drafter claims up to s = floor(tree.ngram_share * N) nodes
     (default share 0.5), but only as many as its matches supply;
  2. the model drafter grows ``tree.shape`` (a static shape trimmed by the
     budget rule, or eagle2) with the remaining N - s;
  3. the two trees are merged by token (a node is identified by its token path
     from the root); where the n-gram branch repeats model nodes they collapse,
     and the freed nodes are refilled with further n-gram continuations.
  So a step verifies exactly N nodes unless the n-gram matches run out
  (e.g. 0 matches: the plain model tree of N nodes).

Merged trees keep the model's q rows on model-drafted nodes that have
children and zero rows elsewhere; n-gram-only nodes have slot -1 (the draft
model re-reads them after the verdict).  Children from the n-gram side are
not drawn from q, so a merged tree's child rule is "fixed": only greedy and
other fixed-candidate modes verify it losslessly (job validation refuses the rest).
"""

from __future__ import annotations

import math

import torch

from ..core.tree import DraftTree
from .drafters import DRAFTERS, Drafter, ModelDrafter
from .levels import Levels
from .ngram import Trie, ngram_trie


@DRAFTERS.register("merged")
class MergedDrafter(Drafter):
    """Model drafter + n-gram drafter, merged into one tree (``tree=merged``)."""

    draft_model = True
    vector_drafter = "model"  # tree.shape=sequoia is grown by the model part: its pair's vector

    def __init__(self, model_drafter: ModelDrafter, max_ngram: int = 4, min_ngram: int = 1):
        self.model = model_drafter
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    @classmethod
    def from_pair(cls, pair, temperature: float = 1.0, top_p: float = 1.0, kv=None) -> MergedDrafter:
        return cls(ModelDrafter.from_pair(pair, temperature, top_p, kv))

    @classmethod
    def shared_kv(cls, pair):
        return ModelDrafter.shared_kv(pair)

    def close(self) -> None:
        self.model.close()

    @classmethod
    def child_rule(cls, kind: str, rule: str) -> str:
        return rule if kind == "none" else "fixed"

    def forward_model(self):
        return self.model.forward_model()

    def reset(self, prompt_ids) -> None:
        super().reset(prompt_ids)
        self.model.reset(prompt_ids)

    def split(self, budget: int, share: float) -> tuple[int, int]:
        """(n-gram nodes s, model nodes N - s) for this step's history."""
        cap = math.floor(share * budget)
        s = ngram_trie(self.history, cap, budget, self.max_ngram, self.min_ngram).size if cap else 0
        return s, budget - s

    def grow_merged(self, policy, rule: str, rng: torch.Generator) -> Levels:
        n = int(policy.budget)
        _, model_budget = self.split(n, policy.share)
        mtree = yield from self.model.draft(policy.model_policy(model_budget), rule, rng)
        assert mtree.slots is not None  # a model tree: every node has its slot
        trie = Trie.from_tree(mtree)
        ngram_trie(self.history, n, n, self.max_ngram, self.min_ngram, into=trie)
        return trie.to_tree(q_source=mtree.q, slot_source=mtree.slots, root_slot=mtree.slots[0])

    grows = {**Drafter.grows, "merged": grow_merged}

    def commit(self, tree: DraftTree, path, next_token: int) -> None:
        super().commit(tree, path, next_token)
        self.model.commit(tree, path, next_token)
