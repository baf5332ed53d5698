"""KV caches as slots: every row's keys and values preallocated, written in place.

``SlotKV(model)`` holds the caches of several rows (prompts) of one model in ONE
``SlotCache``, a transformers ``Cache`` whose layers are preallocated tensors
[rows, heads, slots, dim] (grown by doubling when a forward needs more).  Per row:

* slots ``0:lens[r]`` hold its committed tokens (positions ``0:lens[r]``);
* a ``forward`` writes the row's new tree nodes in place, right after its
  committed tokens and the nodes it already forwarded this step (``ext[r]``);
  node i of the step's tree sits in slot ``lens[r] + i``, position ``lens[r] + depth(i)``;
* ``commit(row, nodes)`` keeps those nodes of the step's tree (in order): only the
  kept entries move, next to the row's prefix; the rest is overwritten later;
* ``add`` prefills a prompt into a free row (refilled in place), ``drop`` frees one.

Prefills and commits are queued and applied together at the next forward (one
batched prefill forward; one gather/scatter per layer for every row's commit), so
nothing copies a whole cache per step and a batch of rows costs one call per layer.
The attention mask over slots comes from ``tree.compiled`` (the one mask construction):
a query sees its row's committed slots, and its ancestors and itself among the
step's nodes.  Caches and masks live on the model's device.

Batch-1 helpers over a plain ``DynamicCache`` (``forward_nodes``, ``keep``) remain for
the memo of the lossless check and the attention benchmark's model view.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import torch
from transformers import DynamicCache
from transformers.cache_utils import Cache, CacheLayerMixin

from .tree import compiled, tree_attention_mask, tree_position_ids

MIN_SLOTS = 64
PACK = 1024  # prompt tokens per packed prefill forward (bounds its [PACK, PACK] mask)

Request = tuple[int, Sequence[int], Sequence[int], int]  # (row, parents, tokens, start): ``SlotKV.forward``


class CausalLM(Protocol):
    """What ``SlotKV`` calls: a transformers causal LM or a stand-in (``engine.memo.MemoModel``,
    ``drafting.layerskip.layer_view``)."""

    @property
    def device(self) -> torch.device: ...

    @property
    def dtype(self) -> torch.dtype: ...

    def get_decoder(self) -> Callable[..., Any]: ...

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


@dataclass
class Plan:
    """What the forward in progress writes and reads (shared by every layer)."""

    rows: torch.Tensor | None = None  # cache row of every new node [b, T] (or [b, 1]: one row per batch row)
    span: slice | None = None  # the batch's rows as a slice, when contiguous (a view, no copy)
    write: torch.Tensor | None = None  # slot of every new node [b, T]
    width: int = 0  # slots the queries may see
    past: list[int] = field(default_factory=list)  # committed tokens of each batch row
    need: tuple[int, int] = (0, 0)  # (rows, slots) the layers must hold
    packed: bool = False  # a packed prefill: the queries see only this forward's nodes


class SlotLayer(CacheLayerMixin):
    """One decoder layer's slots; ``update`` writes the plan's nodes in place."""

    is_compileable = False

    def __init__(self, plan: Plan):
        super().__init__()
        self.plan = plan

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        self.keys = key_states.new_zeros(0, key_states.shape[1], 0, key_states.shape[-1])
        self.values = value_states.new_zeros(0, value_states.shape[1], 0, value_states.shape[-1])
        self.is_initialized = True

    def reserve(self, rows: int, slots: int) -> None:
        """Hold at least rows x slots (slots grow by doubling), keeping the contents."""
        keys, values = self.keys, self.values
        assert keys is not None and values is not None  # set by lazy_initialization (update calls it first)
        have_r, have_s = keys.shape[0], keys.shape[2]
        if rows <= have_r and slots <= have_s:
            return
        new_r = max(rows, have_r)
        new_s = have_s if slots <= have_s else max(slots, 2 * have_s, MIN_SLOTS)

        def grown(t: torch.Tensor) -> torch.Tensor:
            out = t.new_zeros(new_r, t.shape[1], new_s, t.shape[-1])
            out[:have_r, :, :have_s] = t
            return out

        self.keys, self.values = grown(keys), grown(values)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        plan = self.plan
        self.reserve(*plan.need)
        keys, values, rows = self.keys, self.values, plan.rows
        assert keys is not None and values is not None and rows is not None  # set above / by the plan's forward
        at = (rows, slice(None), plan.write)
        keys[at] = key_states.transpose(1, 2).to(keys.dtype)
        values[at] = value_states.transpose(1, 2).to(values.dtype)
        if plan.packed:
            return key_states, value_states
        if plan.span is not None:
            return keys[plan.span, :, : plan.width], values[plan.span, :, : plan.width]
        rows = rows[:, 0]
        return keys[rows, :, : plan.width], values[rows, :, : plan.width]

    def move(self, rows: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> None:
        """Entries (rows[i], src[i]) to (rows[i], dst[i]) (the sources are read first)."""
        if self.is_initialized:
            keys, values = self.keys, self.values
            assert keys is not None and values is not None  # set by lazy_initialization
            keys[rows, :, dst] = keys[rows, :, src]
            values[rows, :, dst] = values[rows, :, src]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.plan.width, 0

    def get_seq_length(self) -> int:
        return 0  # positions are passed explicitly (position_ids)

    def get_max_length(self) -> int:
        return -1


class SlotCache(Cache):
    """The transformers-facing cache: one ``SlotLayer`` per decoder layer, added lazily."""

    def __init__(self, plan: Plan):
        # a factory, not a class: Cache only calls it (its annotation asks for a layer class)
        super().__init__(layer_class_to_replicate=lambda: SlotLayer(plan))  # type: ignore[arg-type]
        self.plan = plan


@dataclass
class SlotKV:
    """The slot caches of every row of one model (module docstring)."""

    model: CausalLM
    plan: Plan = field(default_factory=Plan)
    lens: list[int] = field(default_factory=list)  # committed tokens per row (-1: free)
    ext: list[int] = field(default_factory=list)  # nodes forwarded this step per row
    prefills: dict[int, list[int]] = field(default_factory=dict)  # queued: row -> tokens
    commits: dict[int, list[int]] = field(default_factory=dict)  # queued: row -> kept nodes
    forwards: int = 0  # model calls (a profile count)

    def __post_init__(self):
        self.cache = SlotCache(self.plan)

    # -- rows ---------------------------------------------------------------
    def add(self, prompt_ids: Sequence[int]) -> int:
        """A row holding every prompt token but the last (the first tree root); a free
        row is refilled first.  The prefill runs with the next forward (or ``flush``)."""
        if len(prompt_ids) == 0:
            raise ValueError("empty prompt: every prompt needs at least one token")
        row = self.lens.index(-1) if -1 in self.lens else len(self.lens)
        if row == len(self.lens):
            self.lens.append(0)
            self.ext.append(0)
        self.lens[row], self.ext[row] = 0, 0
        if len(prompt_ids) > 1:
            self.prefills[row] = [int(t) for t in prompt_ids[:-1]]
        return row

    def drop(self, row: int) -> None:
        """The row is free (its queued work is cancelled)."""
        self.lens[row], self.ext[row] = -1, 0
        self.prefills.pop(row, None)
        self.commits.pop(row, None)

    def commit(self, row: int, nodes: Sequence[int]) -> None:
        """Keep these nodes of the row's step tree (node indices, in order) after its prefix."""
        self.commits[row] = [int(n) for n in nodes]

    # -- forwards -----------------------------------------------------------
    def forward(self, requests: Sequence[Request]) -> torch.Tensor:
        """ONE forward for ``(row, parents, tokens, start)`` requests: nodes ``start:`` of
        each row's step tree are new (``0:start`` were forwarded earlier this step).
        Returns float32 logits [len(requests), T, V] (request order; T = the most new
        nodes of any request; a row's first ``len(parents) - start`` are its nodes)."""
        self.flush()
        return self.run(requests)

    def flush(self) -> None:
        """Apply queued commits, then run queued prefills, packed: the prompts of several
        rows in one sequence (no padding), up to ``PACK`` tokens per forward."""
        if self.commits:
            self.apply_commits()
        todo, self.prefills = self.prefills, {}
        chunk: dict[int, list[int]] = {}
        for r, ids in todo.items():
            if chunk and sum(map(len, chunk.values())) + len(ids) > PACK:
                self.prefill(chunk)
                chunk = {}
            chunk[r] = ids
        if chunk:
            self.prefill(chunk)

    @torch.inference_mode()
    def prefill(self, prompts: dict[int, list[int]]) -> None:
        """One forward of every row's prompt tokens, packed in one sequence: a block-diagonal
        causal mask (``tree.compiled`` of each row's chain), each token written to its row's slot."""
        n = sum(map(len, prompts.values()))
        allowed = torch.zeros(n, n, dtype=torch.bool)
        rows: list[int] = []
        slots: list[int] = []
        at = 0
        for r, ids in prompts.items():
            k = len(ids)
            allowed[at : at + k, at : at + k] = compiled(tuple(chain(k)))[0]
            rows += [r] * k
            slots += range(k)
            at += k
        device, dtype = self.model.device, self.model.dtype
        self.plan.rows = torch.tensor([rows], dtype=torch.long, device=device)
        self.plan.write = torch.tensor([slots], dtype=torch.long, device=device)
        self.plan.span, self.plan.width, self.plan.past, self.plan.packed = None, n, [0], True
        self.plan.need = (max(rows) + 1, max(slots) + 1)
        mask = torch.zeros(n, n, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
        self.model.get_decoder()(  # no LM head: a prefill's logits are never read
            input_ids=torch.tensor([[t for ids in prompts.values() for t in ids]], device=device),
            attention_mask=mask[None, None].to(device),
            position_ids=self.plan.write,
            past_key_values=self.cache,
            use_cache=True,
        )
        self.forwards += 1
        self.plan.packed = False
        for r, ids in prompts.items():
            self.lens[r], self.ext[r] = len(ids), 0

    @torch.inference_mode()
    def apply_commits(self) -> None:
        rows, src, dst = [], [], []
        for r, nodes in self.commits.items():
            base = self.lens[r]
            for j, n in enumerate(nodes):
                if n != j:
                    rows.append(r)
                    src.append(base + n)
                    dst.append(base + j)
            self.lens[r], self.ext[r] = base + len(nodes), 0
        self.commits = {}
        if rows:
            device = self.model.device
            idx = [torch.tensor(x, dtype=torch.long, device=device) for x in (rows, src, dst)]
            for layer in cast("list[SlotLayer]", self.cache.layers):  # SlotCache makes only SlotLayers
                layer.move(*idx)

    @torch.inference_mode()
    def run(self, requests: Sequence[Request]) -> torch.Tensor:
        order = sorted(range(len(requests)), key=lambda i: requests[i][0])
        reqs = [requests[i] for i in order]
        for r, _parents, _, start in reqs:
            if self.lens[r] < 0 or start != self.ext[r]:
                raise IndexError(
                    f"SlotKV row {r}: start={start} but {self.ext[r]} nodes forwarded this step (lens {self.lens[r]})"
                )
        ids, mask, pos = self.inputs(reqs)
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=self.cache, use_cache=True
        )
        self.forwards += 1
        for r, parents, _, _ in reqs:
            self.ext[r] = len(parents)
        out = checked(out.logits.float())
        return out if order == sorted(order) else out[torch.tensor(order).argsort().to(out.device)]

    def inputs(self, reqs: Sequence[Request]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Token ids [b, T], the additive slot mask [b, 1, T, width] and position ids [b, T];
        sets the plan (rows, write slots, width) the layers read."""
        t = max(max(len(p) - s for _, p, _, s in reqs), 1)
        base = [self.lens[r] for r, *_ in reqs]
        width = max(n + s + t for n, (_, _, _, s) in zip(base, reqs))
        allowed = torch.zeros(len(reqs), t, width, dtype=torch.bool)
        pos = torch.zeros(len(reqs), t, dtype=torch.long)
        ids = torch.zeros(len(reqs), t, dtype=torch.long)
        for b, (n, (_, parents, tokens, start)) in enumerate(zip(base, reqs)):
            anc, dep = compiled(tuple(int(p) for p in parents))
            new = len(parents) - start
            allowed[b, :, :n] = True
            allowed[b, :new, n : n + len(parents)] = anc[start:]
            pad = torch.arange(new, t)
            allowed[b, pad, n + start + pad] = True  # padding nodes: roots seeing the prefix
            pos[b, :new] = n + dep[start:]
            pos[b, new:] = n
            ids[b, :new] = torch.as_tensor([int(x) for x in tokens[start:]], dtype=torch.long)
        rows = [r for r, *_ in reqs]
        device, dtype = self.model.device, self.model.dtype
        self.plan.rows = torch.tensor(rows, dtype=torch.long, device=device)[:, None]
        self.plan.span = slice(rows[0], rows[-1] + 1) if rows == list(range(rows[0], rows[-1] + 1)) else None
        self.plan.write = (torch.tensor([n + s for n, (*_, s) in zip(base, reqs)])[:, None] + torch.arange(t)).to(
            device
        )
        self.plan.width, self.plan.past = width, base
        self.plan.need = (rows[-1] + 1, width)
        mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
        return ids.to(device), mask[:, None].to(device), pos.to(device)


def chain(n: int) -> list[int]:
    """Parent pointers of an n-token chain (a prefill)."""
    return list(range(-1, n - 1))


def checked(logits: torch.Tensor) -> torch.Tensor:
    if not torch.isfinite(logits).all():
        raise FloatingPointError("the model produced NaN/inf logits: try dtype=float32 or check the model files")
    return logits


# ---------------------------------------------------------------------------
# batch-1 helpers over a DynamicCache (the lossless check's memo, the attention model view)
# ---------------------------------------------------------------------------
@torch.inference_mode()
def forward_nodes(
    model, cache: DynamicCache, past_len: int, parents: Sequence[int], tokens: Sequence[int], start: int, stop: int
) -> torch.Tensor:
    """One forward over tree nodes ``start:stop``; nodes ``0:start`` are already in
    ``cache`` right after the ``past_len`` prefix tokens.  Returns float32 logits
    [stop-start, V] and appends the new nodes' keys/values to ``cache``."""
    device = model.device
    ids = torch.as_tensor(list(tokens[start:stop]), dtype=torch.long, device=device)[None]
    mask = tree_attention_mask(parents, past_len, start, stop, dtype=model.dtype, device=device)
    pos = tree_position_ids(parents, past_len, start, stop, device=device)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True)
    return checked(out.logits[0].float())


def keep(cache: DynamicCache, past_len: int, slots: Sequence[int]) -> int:
    """Keep the ``past_len`` prefix plus the tree entries at ``slots`` (offsets
    after the prefix, in order); drop everything else.  Returns the new length."""
    idx = None
    for layer in cast("list[CacheLayerMixin]", cache.layers):  # attention layers (a DummyLayer's keys are None)
        if not getattr(layer, "is_initialized", True) or layer.keys is None:
            continue
        keys, values = layer.keys, layer.values
        assert values is not None  # set with the keys
        if idx is None:
            idx = torch.as_tensor([past_len + s for s in slots], dtype=torch.long, device=keys.device)
        layer.keys = torch.cat([keys[..., :past_len, :], keys.index_select(-2, idx)], dim=-2)
        layer.values = torch.cat([values[..., :past_len, :], values.index_select(-2, idx)], dim=-2)
    return past_len + len(slots)


def prefill(model, prompt_ids: Sequence[int]) -> tuple[DynamicCache, int]:
    """A fresh DynamicCache holding every prompt token but the last (the first root)."""
    if len(prompt_ids) == 0:
        raise ValueError("empty prompt: every prompt needs at least one token")
    cache, n = DynamicCache(), len(prompt_ids) - 1
    if n:  # a plain causal forward; only the cache is kept
        with torch.inference_mode():
            model(
                input_ids=torch.tensor([list(prompt_ids[:-1])], device=model.device),
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
    return cache, n
