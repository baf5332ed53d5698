"""Model forwards over tree nodes, and keeping only the accepted path in a KV cache.

Batch 1 (the drafter): ``prefill``, ``forward_nodes`` and ``keep`` over one
DynamicCache.  Batched (the target verifier, teacher-forced draft ranks):
``BatchKV``, the per-row prefix caches of several prompts in one cache, one
forward for every row's tree.  The mask and position ids come from ``tree.py``
(the one mask function) in both.
"""
from __future__ import annotations

from typing import Sequence

import torch
from transformers import DynamicCache

from .tree import tree_attention_mask, tree_position_ids


@torch.inference_mode()
def forward_nodes(model, cache: DynamicCache, past_len: int, parents: Sequence[int],
                  tokens: Sequence[int], start: int, stop: int) -> torch.Tensor:
    """One forward over tree nodes ``start:stop``; nodes ``0:start`` are already in
    ``cache`` right after the ``past_len`` prefix tokens.  Returns float32 logits
    [stop-start, V] and appends the new nodes' keys/values to ``cache``."""
    device = model.device
    ids = torch.as_tensor(list(tokens[start:stop]), dtype=torch.long, device=device)[None]
    mask = tree_attention_mask(parents, past_len, start, stop, dtype=model.dtype, device=device)
    pos = tree_position_ids(parents, past_len, start, stop, device=device)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos,
                past_key_values=cache, use_cache=True)
    return checked(out.logits[0].float())


def checked(logits: torch.Tensor) -> torch.Tensor:
    if not torch.isfinite(logits).all():
        raise FloatingPointError("the model produced NaN/inf logits: try dtype=float32 "
                                 "or check the model files")
    return logits


def keep(cache: DynamicCache, past_len: int, slots: Sequence[int]) -> int:
    """Keep the ``past_len`` prefix plus the tree entries at ``slots`` (offsets
    after the prefix, in order); drop everything else.  Returns the new length."""
    idx = None
    for layer in cache.layers:
        if not getattr(layer, "is_initialized", True) or layer.keys is None:
            continue
        if idx is None:
            idx = torch.as_tensor([past_len + s for s in slots], dtype=torch.long,
                                  device=layer.keys.device)
        layer.keys = torch.cat([layer.keys[..., :past_len, :],
                                layer.keys.index_select(-2, idx)], dim=-2)
        layer.values = torch.cat([layer.values[..., :past_len, :],
                                  layer.values.index_select(-2, idx)], dim=-2)
    return past_len + len(slots)


def prefill(model, prompt_ids: Sequence[int]) -> tuple[DynamicCache, int]:
    """A fresh cache holding every prompt token but the last (the first root)."""
    if len(prompt_ids) == 0:
        raise ValueError("empty prompt: every prompt needs at least one token")
    cache, n = DynamicCache(), len(prompt_ids) - 1
    if n:                       # a plain causal forward; only the cache is kept
        with torch.inference_mode():
            model(input_ids=torch.tensor([list(prompt_ids[:-1])], device=model.device),
                  past_key_values=cache, use_cache=True, logits_to_keep=1)
    return cache, n


def filled(cache: DynamicCache) -> list:
    """The cache layers that hold tensors [rows, heads, len, dim] (none: an empty cache)."""
    return [layer for layer in cache.layers if getattr(layer, "is_initialized", True)
            and layer.keys is not None and layer.keys.dim() == 4]


def blank(layers, rows: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) of ``rows`` rows and no slots, shaped like ``layers``."""
    def empty(t):
        return t.new_zeros(rows, t.shape[1], 0, t.shape[-1])
    return [(empty(x.keys), empty(x.values)) for x in layers]


def pad_left(t: torch.Tensor, width: int) -> torch.Tensor:
    """Zero slots in front along the sequence axis, up to ``width`` slots."""
    return torch.nn.functional.pad(t, (0, 0, width - t.shape[-2], 0))


class BatchKV:
    """The per-row prefix caches of several prompts in ONE DynamicCache, so that one
    model forward scores a tree for every row (``forward``).

    Layout: left padding.  Row b's ``lens[b]`` cached tokens (its position count)
    are the LAST ``lens[b]`` of the cache's ``width`` slots; the slots in front of
    them are masked out.  ``add`` splices a new row in (a batch-1 prefill); after
    each forward ``keep`` keeps or drops rows and compacts the cache (also on its
    own, to trim rows).  With one row and no padding this is exactly ``forward_nodes``
    and ``keep`` on a batch-1 cache."""

    def __init__(self, model):
        self.model, self.cache, self.lens, self.width, self.fresh = model, DynamicCache(), [], 0, 0

    def add(self, prompt_ids: Sequence[int]) -> None:
        """A new last row holding every prompt token but the last (``prefill``)."""
        row, n = prefill(self.model, prompt_ids)
        if not self.lens:                    # the first row: its prefill cache is the batch's
            self.cache, self.width = row, n
        else:
            old, new, width = filled(self.cache), filled(row), max(self.width, n)
            if old or new:
                old_kv = [(x.keys, x.values) for x in old] or blank(new, len(self.lens))
                new_kv = [(x.keys, x.values) for x in new] or blank(old, 1)
                self.cache = DynamicCache([(torch.cat([pad_left(ko, width), pad_left(kn, width)]),
                                            torch.cat([pad_left(vo, width), pad_left(vn, width)]))
                                           for (ko, vo), (kn, vn) in zip(old_kv, new_kv)])
            self.width = width
        self.lens.append(n)

    @torch.inference_mode()
    def forward(self, trees: Sequence[tuple[Sequence[int], Sequence[int], int]]) -> torch.Tensor:
        """One forward over every row's new tree nodes: ``(parents, tokens, start)`` per
        row (row order) names nodes ``0:len(parents)`` of the row's tree, of which
        ``start:`` are new (``0:start`` are already the last ``start`` of its cached
        tokens).  New nodes are padded to the most any row has, T.  Returns float32
        logits [rows, T, V] (row b's first len(parents_b) - start_b are its nodes); the
        cache gains T slots per row, read by ``keep`` as the row's next logical slots."""
        if len(trees) != len(self.lens):
            raise ValueError(f"{len(trees)} trees for {len(self.lens)} cache rows")
        t = max(max(len(parents) - start for parents, _, start in trees), 1)
        dtype, device = self.model.dtype, self.model.device
        masks, pos, ids = [], [], []
        for n, (parents, tokens, start) in zip(self.lens, trees):
            pad = t - (len(parents) - start)
            padded = list(parents) + [-1] * pad                 # padding nodes: roots
            mask = tree_attention_mask(padded, n - start, start, start + t, dtype=dtype)
            masks.append(torch.nn.functional.pad(mask, (self.width - n, 0), value=torch.finfo(dtype).min))
            pos.append(tree_position_ids(padded, n - start, start, start + t))
            ids.append([int(x) for x in tokens[start:]] + [0] * pad)
        out = self.model(input_ids=torch.tensor(ids, device=device), attention_mask=torch.cat(masks).to(device),
                         position_ids=torch.cat(pos).to(device), past_key_values=self.cache, use_cache=True)
        self.fresh = t
        return checked(out.logits.float())

    def keep(self, rows: Sequence[tuple[int, Sequence[int]]]) -> None:
        """The rows are now ``rows`` = [(old row, kept logical slots)], in that order.
        A row's logical slots are its cached tokens 0..lens-1, then (right after a
        ``forward``) its T new nodes.  Rows not listed are dropped; the cache is compacted."""
        fresh, self.fresh = self.fresh, 0
        index = [[self.width - self.lens[b] + k if k < self.lens[b] else self.width + k - self.lens[b]
                  for k in map(int, slots)] for b, slots in rows]
        if any(k >= self.width + fresh for ix in index for k in ix):
            raise IndexError("BatchKV.keep: a slot past the row's cached and new tokens")
        width = max(map(len, index), default=0)
        layers = filled(self.cache)
        device = layers[0].keys.device if layers else None
        idx = torch.tensor([[0] * (width - len(ix)) + ix for ix in index], dtype=torch.long,
                           device=device).view(len(rows), width)
        pick = torch.tensor([b for b, _ in rows], dtype=torch.long, device=device)

        def take(t):
            return t.index_select(0, pick).gather(2, idx[:, None, :, None].expand(-1, t.shape[1], -1, t.shape[-1]))
        for layer in layers:
            layer.keys, layer.values = take(layer.keys), take(layer.values)
        self.lens, self.width = [len(ix) for ix in index], width
        if not rows:
            self.cache = DynamicCache()
