"""Memoised model forwards for many one-step draws at one fixed prompt.

``MemoModel(model)`` stands in for a causal LM where the engine calls one
(``drafters.prefill`` and ``kv.forward_nodes``, so the model drafter and the
``LiveVerifier`` alike).  For every query node it reads the node's *context*
from the tree mask (the tokens it attends to: the prompt, its ancestors and
itself) and serves that context's logits from a memo; contexts it has not seen
are computed together in one tree forward over a real KV cache of the prompt
(``kv.forward_nodes``), and every node of that forward is memoised.  Exact: a
node's logits depend only on its context.  The draws of the lossless check
(``study.lossless``) therefore pay one forward per *new* node, not per draw.

The caller's KV cache is never filled: the memo records on it the tokens each
call appended, and ``kv.keep`` on an empty cache changes nothing.  So a
``MemoModel`` serves decodes of ONE step per reset (``max_new_tokens=1``), which
is all the check needs.  A new prompt (a prefill of other tokens) clears the memo.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Sequence

import torch
from transformers import DynamicCache

from ..core import kv


class MemoModel:
    """A causal LM seen through a memo of logits by context (module docstring)."""

    def __init__(self, model):
        self.model = model
        self.base: tuple[int, ...] | None = None    # the prompt prefix held in base_cache
        self.base_cache: DynamicCache | None = None
        self.memo: dict[tuple[int, ...], torch.Tensor] = {}    # suffix after base -> logits [V]
        self.forwards = 0                                       # real tree forwards so far

    def __getattr__(self, name):                 # device, dtype, config, ...: the wrapped model's
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)

    # -- the prompt -------------------------------------------------------
    def set_base(self, tokens: Sequence[int]) -> None:
        """Hold a real KV cache of ``tokens`` (the prompt but its last token); a new
        prompt clears the memo."""
        tokens = tuple(int(t) for t in tokens)
        if tokens == self.base:
            return
        self.base, self.memo, self.base_cache = tokens, {}, DynamicCache()
        if tokens:
            with torch.inference_mode():
                self.model(input_ids=torch.tensor([list(tokens)], device=self.model.device),
                           past_key_values=self.base_cache, use_cache=True, logits_to_keep=1)

    def logits(self, suffixes: Sequence[tuple[int, ...]]) -> torch.Tensor:
        """Logits [k, V] after base + each suffix (one forward for the unseen ones)."""
        missing = sorted({s[:j] for s in suffixes if s not in self.memo for j in range(1, len(s) + 1)},
                         key=lambda s: (len(s), s))
        if missing:
            index = {s: i for i, s in enumerate(missing)}
            parents = [index.get(s[:-1], -1) for s in missing]
            out = kv.forward_nodes(self.model, self.base_cache, len(self.base), parents,
                                   [s[-1] for s in missing], 0, len(missing))
            kv.keep(self.base_cache, len(self.base), [])            # drop the tree again
            self.forwards += 1
            for s, row in zip(missing, out):
                self.memo[s] = row
        return torch.stack([self.memo[s] for s in suffixes])

    # -- the engine's calls -------------------------------------------------
    def __call__(self, input_ids, attention_mask=None, past_key_values=None, **_):
        ids = [int(t) for t in input_ids[0].tolist()]
        seen = getattr(past_key_values, "memo_tokens", None)
        if attention_mask is None:                   # drafters.prefill: the prompt but its last token
            if seen:
                raise ValueError("MemoModel serves one decode step per prefill (max_new_tokens=1)")
            past_key_values.memo_tokens = ids
            self.set_base(ids)
            return SimpleNamespace(logits=torch.zeros(1, 1, 1))     # prefill's logits are never read
        if seen is None:                             # a one-token prompt: nothing was prefilled
            seen = []
            self.set_base(())
        tokens = seen + ids
        past_key_values.memo_tokens = tokens
        allowed = attention_mask[0, 0] == 0                         # [queries, keys]
        n = len(self.base)
        suffixes = []
        for row in allowed:
            ctx = tuple(tokens[c] for c in row.nonzero().flatten().tolist())
            if ctx[:n] != self.base:
                raise ValueError("MemoModel: a context does not start with the prefilled prompt")
            suffixes.append(ctx[n:])
        return SimpleNamespace(logits=self.logits(suffixes)[None])
