"""A tiny GGUF model for llama.cpp: the smoke run that proves a built binary and the tests of the
managed server, with no real model installed.

``write(path, layers=2, seed=0, quantized=False)`` writes a Llama-architecture model (``layers``
blocks, 64-wide, 4 heads, float32 weights; ``quantized``: the attention matrices in Q8_0 and the MLP's
in Q5_0, the types of the embedded draft's GGUF, so a run goes through llama.cpp's quantized dot
products, not only its float ones) with a small SentencePiece vocabulary (``<unk>``, ``<s>``, ``</s>``, the 256
byte tokens, the word-start marker and the letters), so any text tokenizes by byte fallback.  The
same ``seed`` gives the same weights: two files of one seed are a draft and target whose drafts are
always accepted.  Written atomically (``core.atomic``); a few hundred kilobytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.atomic import atomic_write

EMBD, HEADS, FF, CTX = 64, 4, 128, 2048
SPECIAL = ["<unk>", "<s>", "</s>"]
WORDS = ["\u2581", *"abcdefghijklmnopqrstuvwxyz", *("\u2581" + c for c in "abcdefghijklmnopqrstuvwxyz")]


def vocab() -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, token types) of the tiny SentencePiece vocabulary."""
    import gguf  # heavy: ~0.2 s to import; only writing the model needs it

    t = gguf.TokenType
    tokens = [*SPECIAL, *(f"<0x{b:02X}>" for b in range(256)), *WORDS]
    types = [int(t.UNKNOWN), int(t.CONTROL), int(t.CONTROL)] + [int(t.BYTE)] * 256 + [int(t.NORMAL)] * len(WORDS)
    scores = [0.0] * (3 + 256) + [-float(len(w)) for w in WORDS]
    return tokens, scores, types


def _tensors(layers: int, n_vocab: int, seed: int) -> dict[str, np.ndarray]:
    """Weights by GGUF name (numpy shape = GGML shape reversed); scaled so the logits are peaked."""
    rng = np.random.default_rng(seed)

    def w(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    out = {"token_embd.weight": w(n_vocab, EMBD, scale=1.0), "output_norm.weight": np.ones(EMBD, np.float32)}
    out["output.weight"] = w(n_vocab, EMBD, scale=1.0)
    for i in range(layers):
        b = f"blk.{i}."
        out |= {
            b + "attn_norm.weight": np.ones(EMBD, np.float32), b + "ffn_norm.weight": np.ones(EMBD, np.float32),
            b + "attn_q.weight": w(EMBD, EMBD), b + "attn_k.weight": w(EMBD, EMBD), b + "attn_v.weight": w(EMBD, EMBD),
            b + "attn_output.weight": w(EMBD, EMBD), b + "ffn_gate.weight": w(FF, EMBD), b + "ffn_up.weight": w(FF, EMBD),
            b + "ffn_down.weight": w(EMBD, FF),
        }  # fmt: skip
    return out


def _types(name: str, quantized: bool):
    """The GGML type a block matrix is stored in (None: float32)."""
    import gguf  # heavy: ~0.2 s to import; only writing the model needs it

    if not quantized or not name.startswith("blk.") or name.endswith("norm.weight"):
        return None
    return gguf.GGMLQuantizationType.Q8_0 if ".attn_" in name else gguf.GGMLQuantizationType.Q5_0


def write(path: str | Path, layers: int = 2, seed: int = 0, quantized: bool = False) -> Path:
    """The tiny model at ``path`` (replaced atomically); returns the path."""
    import gguf  # heavy: ~0.2 s to import; only writing the model needs it
    from gguf.quants import quantize  # heavy: as above

    path = Path(path)
    tokens, scores, types = vocab()

    def _write(tmp: str) -> None:
        g = gguf.GGUFWriter(tmp, "llama")
        g.add_name("specbench-tiny")
        g.add_context_length(CTX)
        g.add_embedding_length(EMBD)
        g.add_block_count(layers)
        g.add_feed_forward_length(FF)
        g.add_head_count(HEADS)
        g.add_head_count_kv(HEADS)
        g.add_rope_dimension_count(EMBD // HEADS)
        g.add_layer_norm_rms_eps(1e-5)
        g.add_file_type(int(gguf.LlamaFileType.ALL_F32))
        g.add_tokenizer_model("llama")
        g.add_token_list(tokens)
        g.add_token_scores(scores)
        g.add_token_types(types)
        g.add_unk_token_id(0)
        g.add_bos_token_id(1)
        g.add_eos_token_id(2)
        for name, arr in _tensors(layers, len(tokens), seed).items():
            qtype = _types(name, quantized)
            if qtype is None:
                g.add_tensor(name, arr)
            else:
                g.add_tensor(name, quantize(arr, qtype), raw_dtype=qtype)
        g.write_header_to_file()
        g.write_kv_data_to_file()
        g.write_tensors_to_file()
        g.close()

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(str(path), _write)
    return path
