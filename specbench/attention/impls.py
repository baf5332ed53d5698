"""Tree-attention implementations timed by `specbench.attention.bench`.

Every implementation computes the same thing: the attention output of the
N+1 tree nodes (root = last committed token, plus N draft tokens) over a KV
cache of ``past_len`` prefix tokens followed by the tree nodes themselves, with
the tree mask of `specbench.core.tree.tree_attention_mask` (the only mask code;
boolean masks here are derived from it).  Shapes follow SDPA with GQA:
q [B, H, T, D], k/v [B, Hkv, past_len + T, D], T = N + 1.

An implementation is registered in ``IMPLS`` as ``prepare(case) -> Prepared``:
``prepare`` does the untimed set-up (masks, block masks, buffers, compilation)
and returns ``run`` (the timed call) and ``output`` (turns run's result into
[B, H, T, D] for the correctness check).
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from ..core.registry import Registry
from ..core.tree import ancestor_mask, depths, tree_attention_mask
from ..inputs.embedded import model_dir
from ..inputs.packages import STUDY_TARGET

IMPLS: Registry[Callable[..., Prepared]] = Registry("attention implementation")

# Qwen2.5(-Coder)-1.5B: used when the embedded target's config.json is not installed.
FALLBACK_DIMS = {"heads": 12, "kv_heads": 2, "head_dim": 128}


def target_dims(key: str = STUDY_TARGET) -> tuple[dict, str]:
    """(heads, kv_heads, head_dim) of the embedded target and where they came from."""
    path = model_dir(key) / "hf" / "config.json"
    if not path.is_file():
        return dict(FALLBACK_DIMS), "fallback-constants"
    c = json.loads(path.read_text())
    heads = int(c["num_attention_heads"])
    dims = {
        "heads": heads,
        "kv_heads": int(c.get("num_key_value_heads", heads)),
        "head_dim": int(c.get("head_dim") or c["hidden_size"] // heads),
    }
    return dims, str(path)


def branches(parents: Sequence[int]) -> list[list[int]]:
    """Root-to-leaf node lists (root first), one per leaf, leaves in index order."""
    has_child = {p for p in parents if p >= 0}
    anc = ancestor_mask(parents)
    return [anc[leaf].nonzero().flatten().tolist() for leaf in range(len(parents)) if leaf not in has_child]


def chain_parents(n: int) -> list[int]:
    """Parent pointers of an n-node chain: one branch seen as its own sequence."""
    return list(range(-1, n - 1))


@dataclass
class TreeCase:
    parents: list[int]
    past_len: int
    q: torch.Tensor  # [B, H, T, D]
    k: torch.Tensor  # [B, Hkv, past_len + T, D]
    v: torch.Tensor
    mask: torch.Tensor  # additive [1, 1, T, past_len + T] from tree_attention_mask

    @property
    def nodes(self) -> int:
        return len(self.parents)

    def describe(self) -> dict:
        br = branches(self.parents)
        return {
            "nodes": self.nodes,
            "depth": max(depths(self.parents)),
            "n_branches": len(br),
            "branch_tokens": sum(len(b) for b in br),
        }


def make_case(
    parents: Sequence[int], past_len: int, batch: int, dims: dict, dtype: torch.dtype, seed: int = 0
) -> TreeCase:
    if past_len < 0 or batch < 1:
        raise ValueError(f"kv_len={past_len}, batch={batch}: need kv_len >= 0 and batch >= 1")
    if dims["heads"] % dims["kv_heads"]:
        raise ValueError(f"heads={dims['heads']} is not a multiple of kv_heads={dims['kv_heads']}")
    g = torch.Generator().manual_seed(seed)
    t, d = len(parents), dims["head_dim"]
    q = torch.randn(batch, dims["heads"], t, d, generator=g).to(dtype)
    k = torch.randn(batch, dims["kv_heads"], past_len + t, d, generator=g).to(dtype)
    v = torch.randn(batch, dims["kv_heads"], past_len + t, d, generator=g).to(dtype)
    mask = tree_attention_mask(list(parents), past_len, dtype=dtype)
    return TreeCase(list(parents), past_len, q, k, v, mask)


def cost(case: TreeCase) -> dict:
    """Ideal bytes moved (q, k, v, out, mask read/written once) and dense FLOPs."""
    b, h, t, d = case.q.shape
    hkv, s = case.k.shape[1], case.k.shape[2]
    elt = case.q.element_size()
    nbytes = elt * (2 * b * h * t * d + 2 * b * hkv * s * d) + case.mask.numel() * case.mask.element_size()
    return {"bytes_moved": nbytes, "flops": 4 * b * h * t * s * d}


@dataclass
class Prepared:
    run: Callable[[], Any] | None  # None: the implementation is unavailable here
    output: Callable[[Any], torch.Tensor] = lambda out: out
    note: str = ""
    compile_s: float = float("nan")


# --------------------------------------------------------------------------
# implementations
# --------------------------------------------------------------------------
@IMPLS.register("reference")
def reference(case: TreeCase) -> Prepared:
    """Explicit matmul + additive mask + softmax in float32 (correctness only)."""

    def run():
        rep = case.q.shape[1] // case.k.shape[1]
        q, k, v = (x.float() for x in (case.q, case.k, case.v))
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5 + case.mask.float()
        return (scores.softmax(-1) @ v).to(case.q.dtype)

    return Prepared(run)


@IMPLS.register("fused")
def fused(case: TreeCase) -> Prepared:
    """One SDPA call over KV cache + tree with the additive tree mask."""
    return Prepared(
        lambda: F.scaled_dot_product_attention(case.q, case.k, case.v, attn_mask=case.mask, enable_gqa=True)
    )


@IMPLS.register("sequential")
def sequential(case: TreeCase) -> Prepared:
    """One SDPA call per root-to-leaf branch, as if each branch were its own
    sequence: shared ancestors are recomputed in every branch.  Each call appends
    its branch's keys/values after the shared prefix in one reused buffer (a small
    copy, timed) instead of holding a KV-cache copy per branch."""
    p, (b, hkv, _, d) = case.past_len, case.k.shape
    brs = branches(case.parents)
    longest = max(len(x) for x in brs)
    kbuf = case.k.new_empty(b, hkv, p + longest, d)
    vbuf = torch.empty_like(kbuf)
    kbuf[:, :, :p], vbuf[:, :, :p] = case.k[:, :, :p], case.v[:, :, :p]
    masks = {n: tree_attention_mask(chain_parents(n), p, dtype=case.q.dtype) for n in {len(x) for x in brs}}
    work = []
    for nodes in brs:
        idx = torch.tensor(nodes)
        work.append(
            (
                idx,
                case.q[:, :, idx].contiguous(),
                case.k[:, :, p + idx].contiguous(),
                case.v[:, :, p + idx].contiguous(),
                masks[len(nodes)],
            )
        )

    def run():
        outs = []
        for _, q, k, v, mask in work:
            n = q.shape[2]
            kbuf[:, :, p : p + n].copy_(k)
            vbuf[:, :, p : p + n].copy_(v)
            outs.append(
                F.scaled_dot_product_attention(
                    q, kbuf[:, :, : p + n], vbuf[:, :, : p + n], attn_mask=mask, enable_gqa=True
                )
            )
        return outs

    def output(outs):
        full = torch.zeros_like(case.q)
        for (idx, *_), o in zip(work, outs):
            full[:, :, idx] = o
        return full

    return Prepared(run, output)


def _block_mask(case: TreeCase):
    allowed = case.mask[0, 0] == 0  # bool, derived from tree_attention_mask

    def mask_mod(b, h, q_idx, kv_idx):
        return allowed[q_idx, kv_idx]

    return create_block_mask(mask_mod, None, None, allowed.shape[0], allowed.shape[1], device="cpu")


@IMPLS.register("flex")
def flex(case: TreeCase) -> Prepared:
    """flex_attention, eager (unfused: materialises the scores)."""
    bm = _block_mask(case)

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return flex_attention(case.q, case.k, case.v, block_mask=bm, enable_gqa=True)

    return Prepared(run)


@IMPLS.register("flex_compiled")
def flex_compiled(case: TreeCase, compiler: Callable | None = None) -> Prepared:
    """torch.compile(flex_attention), static shapes (dynamic=True fails to build
    its C++ kernel on this CPU torch).  Compile failure -> run=None + note."""
    import torch._dynamo  # heavy: the compiler stack (about 1 s), for flex_compiled only

    bm = _block_mask(case)
    torch._dynamo.reset()  # one compile per grid point, no recompile limit
    t0 = time.perf_counter()
    try:
        fn = (compiler or torch.compile)(flex_attention, dynamic=False)
        fn(case.q, case.k, case.v, block_mask=bm, enable_gqa=True)
    except Exception as e:  # noqa: BLE001 - any compiler failure is a data point, not a crash
        msg = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
        return Prepared(None, note=f"compile failed: {type(e).__name__}: {msg}")
    compile_s = time.perf_counter() - t0
    return Prepared(lambda: fn(case.q, case.k, case.v, block_mask=bm, enable_gqa=True), compile_s=compile_s)


TOLERANCE = {
    torch.float32: dict(atol=1e-4, rtol=1e-4),
    torch.bfloat16: dict(atol=3e-2, rtol=3e-2),
    torch.float16: dict(atol=5e-3, rtol=5e-3),
}


def max_abs_err(case: TreeCase, prep: Prepared, ref: torch.Tensor) -> float:
    assert prep.run is not None  # only available implementations are checked
    out = prep.output(prep.run())
    return (out.float() - ref.float()).abs().max().item()
