"""Load draft/target models and their tokenizer from a pair config.

A model spec is ``{source: embedded|hub|local, id|path}``:
- ``embedded``: ``id`` is a key of ``specbench.inputs.embedded.EMBEDDED`` (installed by
  ``bash scripts/setup.sh``; loads the cached de-quantized safetensors);
- ``hub``: ``id`` is a Hugging Face hub id, passed to ``from_pretrained``;
- ``local``: ``path`` is a folder in Hugging Face format.
Optional ``weights: random`` (``WEIGHTS``): the architecture from the folder's config.json with
seeded random weights, for timing only.

Models are loaded in eval mode with SDPA attention (which honours the 4-D
additive tree mask) and kept in a process-wide cache keyed by
(spec, dtype, device), so the jobs of one multirun reuse them.

Draft and target must share a tokenizer (``check_same_tokenizer``).  Their output
layers may still differ in size (Qwen2.5 0.5B has 151936 rows, 7B 152064): the rows
past the tokenizer are padding ids with no text.  ``load_pair`` then gives the pair a
draft seen through the target's vocabulary (``TargetVocab``): its logits are cut or
padded (padding ids the draft lacks get probability 0) to the target's rows, and a
target padding id the draft cannot embed is fed to it as the tokenizer's unk/pad/eos
id.  The draft's distribution q is defined on the target's ids, so every lossless mode
stays lossless.  A tokenizer larger than either output layer is refused in one line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from ..core import forwards
from ..drafting.drafters import DRAFTERS
from . import embedded
from .machine import resolve_device

log = logging.getLogger(__name__)

DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}
SOURCES = ("embedded", "hub", "local")
# ``weights: random`` builds the model from its config.json alone (seeded random weights): the
# same layers, shapes and kernels, so the same forward time, for timing where the weights cannot
# be (``study.tools.costs`` on a machine without the model files); its rows say so
WEIGHTS = ("pretrained", "random")

_MODELS: dict[tuple, Any] = {}
_TOKENIZERS: dict[tuple, Any] = {}


@dataclass
class Pair:
    name: str
    draft_name: str  # spec id/path, the drafter name (ngram), or "<target>@layers=<subset>"
    target_name: str
    draft: Any | None  # None for a drafter without a draft model (ngram, layerskip)
    target: Any
    tokenizer: Any  # the target's tokenizer (the draft's too, checked, unless drafter=tli)
    chat_template: bool
    drafter: str = "model"
    draft_tokenizer: Any = None  # the draft model's own tokenizer (drafter=tli reads it)
    layers: tuple[int, ...] | None = None  # pair.layers resolved on the target (drafter=layerskip)
    vocab: Any = None  # the draft-to-target vocabulary map (drafter=tli, ``Drafter.prepare``)


def eos_ids(pair) -> frozenset[int]:
    """The target's EOS token ids (generation config, else the tokenizer's)."""
    eos = pair.target.generation_config.eos_token_id
    if eos is None:
        eos = pair.tokenizer.eos_token_id
    return frozenset(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}


# --------------------------------------------------------------------------
# spec / dtype / device resolution
# --------------------------------------------------------------------------
def _get(spec: Mapping | None, key: str, default=None):
    return spec.get(key, default) if spec is not None else default


def ref_key(source: str) -> str:
    """The key that names a model of ``source``: ``path`` (local) or ``id`` (embedded, hub)."""
    return "path" if source == "local" else "id"


def spec_key(spec: Mapping) -> tuple[str, str]:
    """(source, id-or-path) with a one-line error for a malformed spec."""
    source = _get(spec, "source")
    if source not in SOURCES:
        raise ValueError(f"model source '{source}' is not one of {', '.join(SOURCES)}")
    field = ref_key(source)
    ref = _get(spec, field)
    if not ref:
        raise ValueError(f"a model spec with source={source} needs '{field}' (got {dict(spec)})")
    return source, str(ref)


def spec_name(spec: Mapping) -> str:
    return spec_key(spec)[1]


def resolve_dtype(dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype '{dtype}' is not one of {', '.join(DTYPES)}")
    return DTYPES[dtype]


def _location(source: str, ref: str, dtype: torch.dtype = torch.float32, key: str = "the model") -> str:
    if source == "embedded":  # one-line error if missing/corrupt
        return str(embedded.hf_path(ref, str(dtype).removeprefix("torch.")))
    if source == "local":
        p = Path(ref).expanduser()
        if not (p / "config.json").is_file():
            raise ValueError(f"{key}.path={p}: the folder has no config.json; point it at a Hugging Face model folder")
        return str(p)
    return ref


def model_folder(source: str, ref: str, dtype="float32", key: str = "the model") -> str | None:
    """The folder a model loads from (local/embedded), or None for a hub id
    (identified by its id only).  One-line ValueError naming ``key`` if absent."""
    if source == "hub":
        return None
    return _location(source, ref, resolve_dtype(dtype), key)


CONTEXT_ATTRS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def target_config(spec: Mapping, dtype="float32"):
    """A model's config (config.json; no weights load)."""
    return AutoConfig.from_pretrained(_location(*spec_key(spec), resolve_dtype(dtype)))


def context_length(spec: Mapping, dtype="float32") -> int | None:
    """The number of positions a model was built for, read from its config (config.json; an
    embedded model's de-quantized folder carries its GGUF's) without loading any weights;
    None if the config does not say."""
    config = target_config(spec, dtype)
    for attr in CONTEXT_ATTRS:
        n = getattr(config, attr, None)
        if isinstance(n, int) and n > 0:
            return n
    return None


def pair_contexts(pair_spec: Mapping, dtype="float32") -> dict[str, int | None]:
    """{"target": n, "draft": n}: the positions of the pair's models (the draft only where the
    drafter loads a draft model), from their configs: no weights load."""
    out = {"target": context_length(_get(pair_spec, "target"), dtype)}
    if DRAFTERS.get(_get(pair_spec, "drafter", "model")).draft_model:
        out["draft"] = context_length(_get(pair_spec, "draft"), dtype)
    return out


# --------------------------------------------------------------------------
# loading
# --------------------------------------------------------------------------
def load_model(spec: Mapping, dtype="bfloat16", device="cpu"):
    """A causal LM in eval mode with SDPA attention, cached per (spec, dtype, device)."""
    source, ref = spec_key(spec)
    tdtype, tdevice = resolve_dtype(dtype), resolve_device(device)
    random = _get(spec, "weights", "pretrained") == "random"
    key = (source, ref, tdtype, str(tdevice), random)
    if key in _MODELS:
        return _MODELS[key]
    where = _location(source, ref, tdtype)
    t0 = time.perf_counter()

    try:
        if random:
            model = _random(where, tdtype, tdevice)
        else:
            model = AutoModelForCausalLM.from_pretrained(where, dtype=tdtype, attn_implementation="sdpa")
    except (OSError, ValueError, RuntimeError, SafetensorError) as e:
        raise ValueError(
            f"cannot load model {where}: {str(e).splitlines()[0] if str(e) else type(e).__name__}; "
            "re-save or re-download it, or fix the pair's draft/target path"
        ) from e
    if tdevice.type != "cpu":
        model = model.to(tdevice)
    model.eval().requires_grad_(False)
    forwards.count(model.get_decoder(), ref)  # every forward, the LM-head-less prefill's too
    log.info("loaded %s model %s (%s, %s) in %.1fs", source, ref, dtype, tdevice, time.perf_counter() - t0)
    _MODELS[key] = model
    return model


def _random(where: str, dtype: torch.dtype, device: torch.device):
    """The folder's architecture with seeded random weights (``WEIGHTS``), made on ``device``."""
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(where)
    with device:
        return AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")


def load_tokenizer(spec: Mapping):
    """The tokenizer stored with a model spec, cached per spec."""
    key = spec_key(spec)
    if key not in _TOKENIZERS:
        t0 = time.perf_counter()
        _TOKENIZERS[key] = AutoTokenizer.from_pretrained(_location(*key))
        log.info("loaded tokenizer of %s in %.1fs", key[1], time.perf_counter() - t0)
    return _TOKENIZERS[key]


def check_same_tokenizer(draft_tok, target_tok, draft_name: str, target_name: str) -> None:
    """ValueError unless the two tokenizers map the same strings to the same ids."""
    if draft_tok is target_tok:
        return
    dv, tv = draft_tok.get_vocab(), target_tok.get_vocab()
    if dv == tv:
        return
    if len(dv) != len(tv):
        why = f"vocab sizes {len(dv)} vs {len(tv)}"
    else:
        tok = next(t for t in sorted(dv) if dv[t] != tv.get(t))
        why = f"token {tok!r} is id {dv[tok]} vs {tv.get(tok)}"
    raise ValueError(
        f"draft tokenizer {draft_name} and target tokenizer {target_name} differ "
        f"({why}): pick a pair that shares a tokenizer"
    )


def output_rows(model) -> int:
    return int(model.get_output_embeddings().weight.shape[0])


class TargetVocab:
    """A draft model seen through the target's vocabulary (see the module docstring).
    Behaves as the wrapped model for everything the engine calls."""

    def __init__(self, model, vocab: int, unknown_id: int):
        self.model, self.vocab, self.unknown_id = model, int(vocab), int(unknown_id)
        self.own = output_rows(model)

    def __getattr__(self, name):  # device, dtype, config, ...: the wrapped model's
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)

    def __call__(self, input_ids, **kw):
        ids = torch.where(input_ids < self.own, input_ids, torch.full_like(input_ids, self.unknown_id))
        out = self.model(input_ids=ids, **kw)
        logits = out.logits[..., : self.vocab]
        if logits.shape[-1] < self.vocab:  # ids the draft lacks: the lowest finite logit (p = 0)
            pad = logits.new_full((*logits.shape[:-1], self.vocab - logits.shape[-1]), torch.finfo(logits.dtype).min)
            logits = torch.cat([logits, pad], dim=-1)
        out.logits = logits
        return out


def fit_draft_vocab(draft, target, tokenizer, draft_name: str, target_name: str):
    """The draft as the engine should use it: itself when both output layers have the same
    rows, else a ``TargetVocab``; ValueError if the tokenizer has ids either model lacks."""
    d, t, n = output_rows(draft), output_rows(target), len(tokenizer)
    if n > min(d, t):
        role, name, rows = ("draft", draft_name, d) if d < n else ("target", target_name, t)
        raise ValueError(
            f"pair.{role} {name} has {rows} output rows but the shared tokenizer has {n} "
            f"tokens: the {role} cannot score every token; pick a pair whose models cover "
            "the tokenizer"
        )
    if d == t:
        return draft
    unknown = next(
        (i for i in (tokenizer.unk_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id) if i is not None), 0
    )
    log.info(
        "draft %s has %d output rows, target %s %d: draft logits mapped onto the target's",
        draft_name,
        d,
        target_name,
        t,
    )
    return TargetVocab(draft, t, unknown)


def load_pair(pair_spec: Mapping, dtype="bfloat16", device="cpu") -> Pair:
    """The target, the draft model if the drafter needs one (``draft_model``), and the
    tokenizers: the draft's must equal the target's unless the drafter keeps its own
    (``own_tokenizer``, drafter=tli).  The drafter's own pair keys (``pair_keys``, e.g.
    layerskip's ``pair.layers``) are resolved on the target's config before any weights load
    (``pair_inputs``); what the drafter sets up on the loaded pair, once, is ``Drafter.prepare``."""
    drafter = _get(pair_spec, "drafter", "model")
    if drafter not in DRAFTERS:
        raise ValueError(f"pair.drafter '{drafter}' is not one of {', '.join(DRAFTERS.names())}")
    cls = DRAFTERS.get(drafter)
    tspec = _get(pair_spec, "target")
    if tspec is None:
        raise ValueError("pair config has no 'target' model spec")
    target_name = spec_name(tspec)
    tokenizer = draft_tokenizer = load_tokenizer(tspec)
    draft, draft_name = None, drafter
    if cls.draft_model:
        dspec = _get(pair_spec, "draft")
        if dspec is None:
            raise ValueError(f"pair.drafter={drafter} needs a 'draft' model spec")
        draft_name, draft_tokenizer = spec_name(dspec), load_tokenizer(dspec)
        if not cls.own_tokenizer:
            check_same_tokenizer(draft_tokenizer, tokenizer, draft_name, target_name)
        draft = load_model(dspec, dtype, device)
    own = {k: pair_spec[k] for k in cls.pair_keys if _get(pair_spec, k) is not None}
    extra = {
        "draft_name": draft_name,
        **(cls.pair_inputs(own, target_config(tspec, dtype), target_name) if own else {}),
    }
    target = load_model(tspec, dtype, device)
    if draft is not None and not cls.own_tokenizer:
        draft = fit_draft_vocab(draft, target, tokenizer, draft_name, target_name)
    pair = Pair(
        name=_get(pair_spec, "name", f"{extra['draft_name']}->{target_name}"),
        target_name=target_name,
        draft=draft,
        target=target,
        tokenizer=tokenizer,
        chat_template=bool(_get(pair_spec, "chat_template", False)),
        drafter=drafter,
        draft_tokenizer=draft_tokenizer,
        **extra,
    )
    cls.prepare(pair)
    return pair


def clear_cache() -> None:
    """Forget every loaded model and tokenizer (tests; freeing memory)."""
    _MODELS.clear()
    _TOKENIZERS.clear()
