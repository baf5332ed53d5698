"""Cross-vocabulary drafting by Token-Level Intersection (TLI): Timor et al.,
"Accelerating LLM Inference with Lossless Speculative Decoding Algorithms for
Heterogeneous Vocabularies", ICML 2025 (arXiv 2502.05202).

Owns the map between a drafter's vocabulary and the target's (``VocabMap``) and
the ``tli`` drafter (``pair.drafter=tli``).

Token identity is the BYTE STRING a token stands for (``token_bytes``):
* byte-level BPE (GPT-2, Qwen, SmolLM2): each character of the token string is
  one byte through GPT-2's ``bytes_to_unicode`` table ('Ġ' = b' ', 'Ċ' = b'\\n');
* SentencePiece-style (Gemma, Llama): '▁' is a space, a byte-fallback token
  '<0xNN>' is the single byte NN, other text is UTF-8;
* an added token that is not special (Gemma's '\\n\\n' tokens) stands for its
  literal UTF-8 content;
* special tokens (BOS/EOS, chat and control tokens, '<unusedN>') stand for no
  text and are never in the intersection.
When several ids of one tokenizer stand for the same bytes, the one its encoder
produces is kept: an added token, else the vocabulary token, else the byte
fallback (lowest id on ties).  The intersection is then a bijection
target id <-> draft id over the byte strings both vocabularies have.

The drafter is a ``ModelDrafter`` whose ``chain`` / ``begin`` / ``extend`` speak
the drafter's vocabulary inside and the target's outside, so its tree builders
(static shapes, eagle2) and every verify mode work unchanged:
* ``begin``/``extend`` return logits over the TARGET vocabulary: the drafter's
  logit of each intersection token at its target id, -inf elsewhere.  Their
  softmax (``q``) is the drafter's distribution masked to the intersection and
  renormalised, so top-k and sampled children are always intersection tokens.
  (The one exception: Sequoia's uniform fallback, when a node asks for more
  children than q has support, may pick any target token; such a node is
  forwarded as the first drafter token of its bytes.)
* Tree nodes, ``pending`` and ``history`` are target ids; the drafter forwards
  their drafter ids (``chain`` holds the uncached text in drafter ids).
* The drafter keeps its own context in its own tokenization: the prompt is the
  drafter tokenizer's encoding of the target prompt's text (with the drafter's
  own BOS); a committed intersection token maps 1:1; a committed target token
  outside it (the target's bonus/correction token) is re-encoded from its bytes
  on its own (``VocabMap.draft_tokens``).  Token by token, so the drafter's context
  is a function of the committed tokens alone, whatever the steps were: under
  greedy verification its static trees replay from ONE teacher-forced pass over
  that context (``rank_replay``; ``engine.replay``).
Verification sees only target-vocabulary tokens and q rows, so every lossless
mode stays lossless.  ``outside_share`` measures how many of the target's
emitted tokens lie outside the intersection (those are never drafted).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .drafters import DRAFTERS, ModelDrafter
from .levels import LevelGen

SPACE = "\u2581"  # SentencePiece's '▁'
BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
ADDED, VOCAB, FALLBACK = 0, 1, 2  # precedence among ids spelling the same bytes


@functools.lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode`` table, inverted: character -> byte."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs, n = list(bs), 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def scheme(tokenizer) -> str:
    """'bytelevel' or 'sentencepiece', read from the fast tokenizer's decoder."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = f"{getattr(backend, 'decoder', '')} {getattr(backend, 'pre_tokenizer', '')}"
    if "ByteLevel" in text:
        return "bytelevel"
    if SPACE in text or "ByteFallback" in text or "Metaspace" in text:
        return "sentencepiece"
    raise ValueError(
        f"tokenizer {type(tokenizer).__name__} is neither byte-level BPE nor "
        "SentencePiece-style: pair.drafter=tli cannot map its tokens by string"
    )


def token_bytes(tokenizer) -> list[tuple[bytes, int] | None]:
    """Per id: (the bytes it stands for, precedence ADDED/VOCAB/FALLBACK), or None
    for special tokens and strings that are not text."""
    kind, dec = scheme(tokenizer), byte_decoder()
    added = tokenizer.added_tokens_decoder
    special = set(tokenizer.all_special_ids) | {i for i, a in added.items() if a.special}
    vocab = tokenizer.get_vocab()
    out: list[tuple[bytes, int] | None] = [None] * (max(vocab.values()) + 1)
    for s, i in vocab.items():
        if i in special:
            continue
        if i in added:
            out[i] = (added[i].content.encode("utf-8"), ADDED)
        elif kind == "bytelevel":
            if all(c in dec for c in s):
                out[i] = (bytes(dec[c] for c in s), VOCAB)
        elif m := BYTE_FALLBACK.match(s):
            out[i] = (bytes([int(m[1], 16)]), FALLBACK)
        else:
            out[i] = (s.replace(SPACE, " ").encode("utf-8"), VOCAB)
    return [e if e and e[0] else None for e in out]


def canonical_ids(entries: Sequence[tuple[bytes, int] | None]) -> dict[bytes, int]:
    """bytes -> the one id its tokenizer would produce for them (precedence, then lowest id)."""
    best: dict[bytes, tuple[int, int]] = {}  # bytes -> (precedence, id)
    for i, e in enumerate(entries):
        if e is not None and (e[0] not in best or e[1] < best[e[0]][0]):
            best[e[0]] = (e[1], i)
    return {data: i for data, (_, i) in best.items()}


@dataclass
class VocabMap:
    """The intersection of a drafter's and a target's vocabularies, by byte string."""

    draft_tokenizer: Any
    target_tokenizer: Any
    target_vocab: int  # length of a target q row (the target's output size)
    target_ids: torch.Tensor = field(init=False)  # intersection, ascending target id
    draft_ids: torch.Tensor = field(init=False)  # the matching drafter ids

    def __post_init__(self):
        self.draft_entries = token_bytes(self.draft_tokenizer)
        self.draft_index = canonical_ids(self.draft_entries)
        self.target_entries = token_bytes(self.target_tokenizer)
        pairs = sorted(
            (t, self.draft_index[b])
            for b, t in canonical_ids(self.target_entries).items()
            if b in self.draft_index and t < self.target_vocab
        )
        self.target_ids = torch.tensor([t for t, _ in pairs], dtype=torch.long)
        self.draft_ids = torch.tensor([d for _, d in pairs], dtype=torch.long)
        self.t2d = dict(pairs)
        self.max_len = max(map(len, self.draft_index), default=1)
        self.filler = next(
            i for i in (self.draft_tokenizer.unk_token_id, self.draft_tokenizer.eos_token_id, 0) if i is not None
        )

    @property
    def size(self) -> int:
        return len(self.t2d)

    def mask(self) -> torch.Tensor:
        """[target_vocab] bool: True on intersection tokens."""
        m = torch.zeros(self.target_vocab, dtype=torch.bool)
        m[self.target_ids] = True
        return m

    def to_target(self, logits: torch.Tensor) -> torch.Tensor:
        """Drafter logits [..., Vd], or a sliced head's [..., size] (``slice_head``: the
        intersection in target-id order) -> target-vocabulary logits [..., Vt] (-inf off it)."""
        out = logits.new_full((*logits.shape[:-1], self.target_vocab), float("-inf"))
        ours = logits if logits.shape[-1] == self.size else logits[..., self.draft_ids.to(logits.device)]
        out[..., self.target_ids.to(logits.device)] = ours
        return out

    def slice_head(self, model) -> None:
        """Keep only the LM-head rows of the intersection, in target-id order (once per model):
        a draft forward then computes ``size`` logits, not the drafter's whole vocabulary
        (Gemma-3: 95,968 of 262,144 rows).  ``to_target`` reads either kind of row."""
        head = model.get_output_embeddings()
        if head.weight.shape[0] == self.size:
            return
        w = head.weight
        sliced = torch.nn.Linear(w.shape[1], self.size, bias=head.bias is not None, device=w.device, dtype=w.dtype)
        with torch.no_grad():
            sliced.weight.copy_(w[self.draft_ids.to(w.device)])
            if head.bias is not None:
                sliced.bias.copy_(head.bias[self.draft_ids.to(w.device)])
        model.set_output_embeddings(sliced)

    def target_text(self, t: int) -> bytes:
        """The bytes of target token t (a special token: its literal content)."""
        e = self.target_entries[t] if t < len(self.target_entries) else None
        if e is not None:
            return e[0]
        return (self.target_tokenizer.convert_ids_to_tokens(int(t)) or "").encode("utf-8")

    def node_ids(self, target_ids: Sequence[int]) -> list[int]:
        """Drafter ids to forward for tree nodes (one each; see the module docstring)."""
        return [
            self.t2d[t] if t in self.t2d else (self.encode_bytes(self.target_text(t)) or [self.filler])[0]
            for t in map(int, target_ids)
        ]

    def to_draft(self, target_ids: Sequence[int]) -> list[int]:
        """Committed target tokens -> the drafter's tokens, token by token (``draft_tokens``),
        so the drafter's context is a function of the committed tokens alone (rank replay)."""
        return [d for t in target_ids for d in self.draft_tokens(t)]

    def draft_tokens(self, t: int) -> list[int]:
        """One committed target token in the drafter's tokens: its intersection twin, else
        its bytes re-encoded (``encode_bytes``), else (no bytes it can spell) the filler."""
        t = int(t)
        return [self.t2d[t]] if t in self.t2d else (self.encode_bytes(self.target_text(t)) or [self.filler])

    def draft_prompt(self, prompt_ids: Sequence[int]) -> list[int]:
        """The drafter's prompt: its own tokenizer's encoding of the prompt's text (its own BOS)."""
        text = b"".join(self.target_text(t) for t in prompt_ids).decode("utf-8", "replace")
        return self.draft_tokenizer.encode(text) or [self.filler]

    def encode_bytes(self, data: bytes) -> list[int]:
        """The drafter's tokens for ``data``: its tokenizer's encoding of the text when
        that spells exactly these bytes, else greedy longest match over its byte strings
        (a byte it cannot spell is dropped)."""
        if not data:
            return []
        try:
            ids = self.draft_tokenizer.encode(data.decode("utf-8"), add_special_tokens=False)
            if b"".join(self.draft_entries[i][0] if self.draft_entries[i] else b"\0" for i in ids) == data:
                return ids
        except UnicodeDecodeError:
            pass
        out, i = [], 0
        while i < len(data):
            for n in range(min(self.max_len, len(data) - i), 0, -1):
                if (j := self.draft_index.get(data[i : i + n])) is not None:
                    out.append(j)
                    i += n
                    break
            else:
                i += 1
        return out

    def outside_share(self, token_ids: Iterable[int]) -> float:
        """Share of the given target tokens (e.g. a job's emitted tokens) outside the
        intersection: tokens no TLI draft can propose.  NaN for no tokens."""
        ids = [int(t) for t in token_ids]
        return sum(t not in self.t2d for t in ids) / len(ids) if ids else float("nan")


@functools.lru_cache(maxsize=4)
def vocab_map(draft_tokenizer, target_tokenizer, target_vocab: int) -> VocabMap:
    """One VocabMap per (drafter tokenizer, target tokenizer, target output size)."""
    return VocabMap(draft_tokenizer, target_tokenizer, int(target_vocab))


def output_size(model) -> int:
    """Rows of the model's LM head (may exceed its tokenizer's length: padding rows)."""
    return int(model.get_output_embeddings().weight.shape[0])


@DRAFTERS.register("tli")
class TLIDrafter(ModelDrafter):
    """A drafter with its own vocabulary, restricted to the tokens it shares with the target."""

    own_tokenizer = True
    rank_replay = True  # its context is the committed tokens mapped one by one (``VocabMap.to_draft``)
    teacher_forced = False  # its children are mapped from the draft vocabulary, not pair.draft's over the target's

    def __init__(self, model, vocab: VocabMap, temperature: float = 1.0, top_p: float = 1.0, kv=None):
        super().__init__(model, temperature, top_p, kv)
        self.vocab = vocab

    @classmethod
    def from_pair(cls, pair, temperature: float = 1.0, top_p: float = 1.0, kv=None) -> TLIDrafter:
        if pair.draft is None or getattr(pair, "draft_tokenizer", None) is None:
            raise ValueError(
                f"pair={pair.name}: pair.drafter=tli needs a draft model with its own tokenizer (pair.draft)"
            )
        return cls(pair.draft, cls.rank_vocab(pair), temperature, top_p, kv)

    @classmethod
    def prepare(cls, pair) -> None:
        """At pair loading: the pair's vocabulary map (``pair.vocab``), and the draft model's
        head sliced to it (``slice_head``; once per model)."""
        pair.vocab = vocab_map(pair.draft_tokenizer, pair.tokenizer, output_size(pair.target))
        pair.vocab.slice_head(pair.draft)

    @classmethod
    def rank_vocab(cls, pair) -> VocabMap:
        """The pair's vocabulary map (``prepare``)."""
        if getattr(pair, "vocab", None) is None:
            raise ValueError(f"pair={pair.name}: drafter=tli needs the pair's vocabulary map (load it with load_pair)")
        return pair.vocab

    def reset(self, prompt_ids: Sequence[int]) -> None:
        super().reset(self.vocab.draft_prompt(prompt_ids))
        self.draft_chain = self.pending  # the drafter's last prompt token (not cached yet)
        self.history = list(prompt_ids)  # the committed history stays in target ids
        self.pending = [int(prompt_ids[-1])]

    def chain(self) -> list[int]:
        return self.draft_chain

    def begin(self) -> LevelGen[torch.Tensor]:
        return self.vocab.to_target((yield from super().begin()))

    def extend(self, parents: Sequence[int], tokens: Sequence[int]) -> LevelGen[torch.Tensor]:
        return self.vocab.to_target((yield from super().extend(parents, self.vocab.node_ids(tokens))))

    def commit(self, tree, path: Sequence[int], next_token: int) -> None:
        forwarded = tree.slots is not None
        super().commit(tree, path, next_token)  # keeps the accepted path's drafter KV
        new = self.vocab.to_draft(self.pending if forwarded else [next_token])
        self.draft_chain = new if forwarded else self.draft_chain + new
