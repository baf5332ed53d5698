"""Memoised model forwards for many one-step draws at one fixed prompt.

``MemoModel(model)`` stands in for a causal LM where the engine calls one
(a ``kv.SlotKV`` forward, so the model drafter and the ``LiveVerifier`` alike).  For every query
node it reads the node's *context*
from the tree mask (the tokens it attends to: the prompt, its ancestors and
itself) and serves that context's logits from a memo; contexts it has not seen
are computed together in one tree forward over a real KV cache of the prompt
(``kv.forward_nodes``), and every new node of that forward is memoised.  A node's
logits depend only on its context, up to rounding: in bf16 the batch of a forward moves
them (by up to ~0.05 in L1 of the softmax), so a context keeps the logits of its first
forward and an ancestor re-forwarded for its keys is not overwritten; every draw then
sees one fixed target law per context, the law the check compares against.  The draws of the lossless check
(``study.tools.lossless``) therefore pay one forward per *new* node, not per draw.

The caller's KV cache is never filled: the memo records on it the token each
call wrote into each slot, and a commit (which would move entries) is never seen.
So a ``MemoModel`` serves decodes of ONE step per prefill (``max_new_tokens=1``,
checked), which is all the check needs, of any number of rows of one prompt (the check's
draws, batched: their new nodes share one forward).  The prompt is set once (``set_base``).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import torch
from transformers import DynamicCache

from ..core import kv


class MemoModel:
    """A causal LM seen through a memo of logits by context (module docstring)."""

    def __init__(self, model):
        self.model = model
        self.base: tuple[int, ...] | None = None  # the prompt prefix held in base_cache
        self.base_cache: DynamicCache | None = None
        self.memo: dict[tuple[int, ...], torch.Tensor] = {}  # suffix after base -> logits [V]
        self.forwards = 0  # real tree forwards so far

    def __getattr__(self, name):  # device, dtype, config, ...: the wrapped model's
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
                self.model(
                    input_ids=torch.tensor([list(tokens)], device=self.model.device),
                    past_key_values=self.base_cache,
                    use_cache=True,
                    logits_to_keep=1,
                )

    def logits(self, suffixes: Sequence[tuple[int, ...]]) -> torch.Tensor:
        """Logits [k, V] after base + each suffix (one forward for the unseen ones)."""
        missing = sorted(
            {s[:j] for s in suffixes if s not in self.memo for j in range(1, len(s) + 1)}, key=lambda s: (len(s), s)
        )
        if missing:
            base, cache = self.base, self.base_cache
            assert base is not None and cache is not None  # set_base ran (the engine's prefill)
            index = {s: i for i, s in enumerate(missing)}
            parents = [index.get(s[:-1], -1) for s in missing]
            out = kv.forward_nodes(self.model, cache, len(base), parents, [s[-1] for s in missing], 0, len(missing))
            kv.keep(cache, len(base), [])  # drop the tree again
            self.forwards += 1
            for s, row in zip(missing, out):  # an ancestor re-forwarded for its keys keeps its
                self.memo.setdefault(s, row)  # first logits: in bf16 a forward's batch moves them
        return torch.stack([self.memo[s] for s in suffixes])

    # -- the engine's calls -------------------------------------------------
    def get_decoder(self):
        """The prefill calls the decoder alone (no LM head): served here, too."""
        return self

    def __call__(self, input_ids, attention_mask, past_key_values, **_):
        """A ``kv.SlotKV`` forward: the tokens it writes are recorded by slot, and each
        query's context is read from the mask (its visible slots, in slot order =
        position order)."""
        plan = past_key_values.plan
        slots = past_key_values.__dict__.setdefault("memo_slots", {})  # row -> {slot: token}
        for r, s, t in zip(
            plan.rows.expand_as(plan.write).flatten().tolist(),
            plan.write.flatten().tolist(),
            input_ids.flatten().tolist(),
        ):
            slots.setdefault(r, {})[s] = t
        if plan.packed:  # SlotKV's prefill: the prompt but its last token
            prompts: dict[int, list[int]] = {}  # several rows must prefill the same prompt
            for r, t in zip(plan.rows.flatten().tolist(), input_ids.flatten().tolist()):
                prompts.setdefault(r, []).append(t)
            if len({tuple(v) for v in prompts.values()} | ({self.base} if self.base else set())) != 1:
                raise ValueError("MemoModel serves one prompt at a time (rows of one prefix only)")
            self.set_base(next(iter(prompts.values())))
            return SimpleNamespace(logits=torch.zeros(1, 1, 1))  # never read
        if plan.past == [0] * len(plan.past):  # a one-token prompt: nothing was prefilled
            self.set_base(())
        base = self.base
        assert base is not None  # set by the prefill (or just above)
        if any(past != len(base) for past in plan.past):
            raise ValueError("MemoModel serves one decode step per prefill (max_new_tokens=1)")
        allowed = attention_mask[:, 0] == 0  # [rows, queries, slots]
        n, suffixes = len(base), []
        for r, row in zip(plan.rows[:, 0].tolist(), allowed):
            for query in row:
                ctx = tuple(slots[r][c] for c in query.nonzero().flatten().tolist())
                if ctx[:n] != base:
                    raise ValueError("MemoModel: a context does not start with the prefilled prompt")
                suffixes.append(ctx[n:])
        return SimpleNamespace(logits=self.logits(suffixes).view(len(input_ids), input_ids.shape[1], -1))
