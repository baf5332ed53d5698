"""Model forwards over tree nodes, and keeping only the accepted path in a KV cache.

Both the drafter and the target verifier use these two functions; the mask
and position ids come from `trees.py`.
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
    logits = out.logits[0].float()
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
