"""llama.cpp's draft chain (``--spec-type draft-simple``), as a tree policy a model drafter grows.

llama.cpp drafts a chain (common/speculative.cpp, ``common_speculative_impl_draft_simple``): from the
last committed token, the draft model's best token, again and again, until ``n_max`` tokens, stopping
*before* the first token whose probability is below ``p_min``; a chain shorter than ``n_min`` is
dropped.  The probability is the draft sampler's: ``top_k`` (10) keeps the best tokens and the
``dist`` sampler's softmax over their logits gives their shares (no temperature).  Here ``budget``
is n_max; ``PminParams`` holds the rest (``tree=pmin_chain``).

``grow`` is the level generator over the drafter's ``begin`` / ``extend`` (one forward per token, as
llama.cpp); ``top_share`` is the rule's probability, shared with the replay (``engine.replay``).
The children are the draft's top-1, whatever the verify mode asks (``child_rule`` "topk").
"""

from __future__ import annotations

import torch

from ..core.tree import DraftTree


def top_share(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """The best token's share of the softmax over the ``top_k`` largest logits (per row)."""
    best = torch.topk(logits.float(), min(top_k, logits.shape[-1]), dim=-1).values
    return 1.0 / torch.exp(best - best[..., :1]).sum(-1)


def grow(drafter, policy):
    """The chain for one step (a level generator; returns the ``DraftTree``): one draft forward per
    token, stopped by ``policy.p_min`` or ``policy.budget``; shorter than ``policy.n_min``: the root alone."""
    logits = yield from drafter.begin()
    parents, tokens, slots, q_rows = [-1], [int(drafter.pending[-1])], [drafter.root_slot], {}
    while len(tokens) <= policy.budget and float(top_share(logits, policy.top_k)) >= policy.p_min:
        q_rows[len(tokens) - 1] = drafter.q(logits)
        parents.append(len(tokens) - 1)
        tokens.append(int(torch.argmax(logits)))  # the first of equal maxima: the smallest id
        slots.append(-1)
        if len(tokens) <= policy.budget:  # the last token of a full chain is never forwarded
            logits = (yield from drafter.extend([slots[-2]], [tokens[-1]]))[0]
            slots[-1] = len(drafter.side_parents) - 1
    if len(tokens) - 1 < policy.n_min:
        parents, tokens, slots, q_rows = [-1], tokens[:1], slots[:1], {}
    vocab = logits.shape[-1]
    q = torch.zeros(len(tokens), vocab)
    for i, row in q_rows.items():
        q[i] = row
    ranks = [0] * len(tokens)
    return DraftTree(parents=parents, tokens=torch.tensor(tokens), ranks=ranks, q=q, slots=slots, child_rule="topk")
