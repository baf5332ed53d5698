"""Serving engines' speculative-decoding settings for one study configuration (``study.serving.export``).

Each format emits what the engine's own validation accepts, checked key by key against its
source at ``CHECKED`` (docs/serving.md lists the keys, their types and the refusals):

- ``vllm``: ``speculative_config`` (``SpeculativeConfig``): ``method`` ``draft_model`` (``model``)
  or ``ngram`` (``prompt_lookup_min``/``max``: the study's n-gram sizes), ``num_speculative_tokens``
  (> 0), ``use_heterogeneous_vocab`` for a cross-vocabulary draft (vLLM's TLI, draft_model only,
  greedy draft sampling only), ``draft_sample_method`` / ``rejection_sample_method`` at T > 0,
  and ``num_speculative_tokens_per_batch_size``: inclusive [start, end, K] ranges from 1, K >= 0,
  the last K carried to larger batches.  vLLM drafts chains only.
- ``sglang``: server arguments: ``--speculative-algorithm`` STANDALONE (a separate draft
  model: ``--speculative-num-steps`` = depth, ``--speculative-eagle-topk``,
  ``--speculative-num-draft-tokens``, which counts the root) or NGRAM (a chain: topk is
  ``--speculative-ngram-max-bfs-breadth``, set to 1).  A chain and EAGLE-2's (depth, top-k,
  tokens) tree fit; no per-batch-size draft length.
- ``trtllm``: ``speculative_config`` of the LLM API: ``Draft_Target`` (a chain of the draft
  model; ``draft_len_schedule`` {max batch size: K}, its smallest key's K = ``max_draft_len``,
  0 beyond its largest key), ``NGram`` (linear only), ``Eagle3`` (EAGLE-2's dynamic tree or a
  static ``eagle_choices`` tree; it drafts with an EAGLE-3 head, ``speculative_model``, which
  the export takes as ``eagle_head=``), ``use_rejection_sampling`` at T > 0.
- ``llamacpp``: ``llama-server``'s start-up flags (``llamacpp_flags``): draft-simple (n_max, n_min,
  p_min) of a chain of the draft model's GGUF, or ngram-simple.

What an engine cannot run as the study ran it is a ``Refusal`` (``engine_rules``); ``settings``
with ``nearest=True`` exports the nearest configuration instead, labelled.
"""

from __future__ import annotations

from collections.abc import Callable

from ...drafting.ngram import MAX_NGRAM, MIN_NGRAM
from .engine_rules import (
    CHECKED,
    ENGINE,
    Choice,
    Refusal,
    chain_of,
    check,
    engine_rule,
    nearest_choice,
    one_hot_rule,
    overrides,
    ranges,
    rule_note,
    schedule_note,
    shape,
    wrap,
)
from .llamacpp_flags import llamacpp_flags

__all__ = ["CHECKED", "ENGINE", "Choice", "FORMATS", "Refusal", "ranges", "settings"]
TLI_NOTE = (
    "use_heterogeneous_vocab: vLLM intersects the vocabularies' token strings (the word-initial space marker "
    "normalised) and hands the draft a target token outside the intersection as its unk token; the study "
    "intersects byte strings and re-encodes such a token from its bytes, so acceptance may differ"
)


def vllm(c: Choice, paths, schedule=None, eagle_head=None) -> dict:
    check(c, "vllm", ("model", "ngram", "tli"))
    kind, depth, _ = shape(c, paths)
    if kind != "chain":
        raise Refusal("vllm", f"tree={c.tree} is a tree and vLLM drafts chains only", chain_of(depth))
    rule = engine_rule(c, "vllm")
    cfg: dict = {"num_speculative_tokens": depth}
    notes = [rule_note(rule, c)]
    if c.drafter == "ngram":
        cfg.update(method="ngram", prompt_lookup_min=MIN_NGRAM, prompt_lookup_max=MAX_NGRAM)  # the study's sizes
        notes.append(
            f"vLLM's n-gram proposer matches the last {MIN_NGRAM}..{MAX_NGRAM} tokens in the request's own tokens, as "
            "the study; which earlier occurrence it continues is its own rule (the study's: the most recent)"
        )
    else:
        cfg.update(method="draft_model", model=c.draft)
        if c.drafter == "tli":
            if rule == "speculative":
                raise Refusal("vllm", "use_heterogeneous_vocab takes greedy draft sampling only", {"verify": "naive"})
            cfg["use_heterogeneous_vocab"] = True
            notes.append(TLI_NOTE)
        if rule != "greedy":
            cfg["draft_sample_method"] = "probabilistic" if rule == "speculative" else "greedy"
    if rule != "greedy":
        cfg["rejection_sample_method"] = "standard"
    if schedule:
        cfg["num_speculative_tokens_per_batch_size"] = ranges(schedule)
        last_b, last_k = schedule[-1]
        notes.append(
            f"{schedule_note(schedule)}; vLLM carries the last K ({last_k}) to every batch size above {last_b}, "
            f"beyond the measured range, and caps each K at num_speculative_tokens ({depth})"
        )
    return wrap("vllm", c, {"speculative_config": cfg}, notes)


def sglang(c: Choice, paths, schedule=None, eagle_head=None) -> dict:
    check(c, "sglang", ("model", "ngram"))
    kind, depth, topk = shape(c, paths)
    if c.drafter == "ngram" and kind != "chain":
        raise Refusal(
            "sglang", f"tree={c.tree}: SGLang's n-gram drafts its own BFS trie, not this tree", chain_of(depth)
        )
    if kind == "tree":
        raise Refusal(
            "sglang", f"tree={c.tree} is a fixed tree; SGLang drafts a chain or an EAGLE-style dynamic tree",
            {"tree": "eagle2", "budget": c.budget, "params": {"depth": depth, "width": topk}},
        )  # fmt: skip
    if kind == "eagle2" and topk == 1 and c.budget != depth:
        raise Refusal("sglang", "with top-k 1 SGLang drafts num_steps + 1 tokens, a chain", chain_of(depth))
    rule = one_hot_rule(
        c, "sglang", "--speculative-use-rejection-sampling takes EAGLE/EAGLE3/NEXTN heads with top-k 1 only; "
        "STANDALONE and NGRAM verify T>0 requests with drafts as one-hot",
    )  # fmt: skip
    tokens = c.budget + 1  # SGLang counts the root among the draft tokens
    notes = [rule_note(rule, c)]
    if c.drafter == "ngram":
        args: dict[str, object] = {
            "--speculative-algorithm": "NGRAM", "--speculative-num-draft-tokens": tokens,
            "--speculative-ngram-min-bfs-breadth": 1, "--speculative-ngram-max-bfs-breadth": 1,
        }  # fmt: skip
        notes.append(
            "SGLang's n-gram cache is shared by all requests and matches suffixes up to "
            "--speculative-ngram-max-trie-depth (default 18) tokens; the study's looks up the request's own "
            f"tokens with suffixes of {MIN_NGRAM}..{MAX_NGRAM}: acceptance may differ"
        )
    else:
        args = {
            "--speculative-algorithm": "STANDALONE", "--speculative-draft-model-path": c.draft,
            "--speculative-num-steps": depth, "--speculative-eagle-topk": topk, "--speculative-num-draft-tokens": tokens,
        }  # fmt: skip
    if topk > 1:
        notes.append("top-k > 1 needs --page-size 1 or attention backend flashinfer, fa3 or triton (not trtllm_mha)")
    if schedule:
        notes.append(f"{schedule_note(schedule)}; SGLang has no per-batch-size draft length: not exported")
    return wrap("sglang", c, {"server_args": args}, notes)


def trtllm(c: Choice, paths, schedule=None, eagle_head=None) -> dict:
    check(c, "trtllm", ("model", "ngram"))
    kind, depth, topk = shape(c, paths)
    rule = engine_rule(c, "trtllm")
    notes = [rule_note(rule, c)]
    if c.drafter == "ngram":
        if kind != "chain":
            raise Refusal("trtllm", f"tree={c.tree}: TensorRT-LLM's NGram drafts linear chains only", chain_of(depth))
        cfg: dict = {"decoding_type": "NGram", "max_draft_len": depth, "max_matching_ngram_size": MAX_NGRAM,
                     "is_public_pool": False, "is_use_oldest": False}  # fmt: skip
        notes.append("a private pool per request, the most recent match first, as the study's n-gram lookup")
    elif kind == "chain":
        cfg = {"decoding_type": "Draft_Target", "max_draft_len": depth, "speculative_model": c.draft}
        notes += draft_len_schedule(cfg, schedule, depth)
    else:
        cfg = eagle3(c, paths, kind, depth, topk, eagle_head)
        notes.append(
            f"Eagle3 drafts with the EAGLE-3 head {eagle_head}: the study's acceptance is {c.pair}'s draft model's"
        )
    if rule != "greedy":
        cfg["use_rejection_sampling"] = rule == "speculative"
    return wrap("trtllm", c, {"speculative_config": cfg}, notes)


def eagle3(c: Choice, paths, kind: str, depth: int, topk: int, eagle_head) -> dict:
    """TensorRT-LLM's Eagle3 config of an EAGLE-2 or static tree (refused without an EAGLE-3 head)."""
    if not eagle_head:
        raise Refusal(
            "trtllm", f"tree={c.tree} runs there as Eagle3, which drafts with an EAGLE-3 head of the target "
            f"('Draft model must be provided for EAGLE'), not {c.pair}'s draft model: give eagle_head=HUB_ID_OR_DIR",
            chain_of(depth),
        )  # fmt: skip
    if kind == "tree":
        p = paths(c)
        return {"decoding_type": "Eagle3", "speculative_model": eagle_head, "eagle_choices": p,
                "max_draft_len": depth, "max_total_draft_tokens": len(p)}  # fmt: skip
    if not depth <= c.budget <= topk * depth:
        raise Refusal("trtllm", f"max_total_draft_tokens={c.budget} is outside [depth, top-k x depth]", chain_of(depth))
    return {"decoding_type": "Eagle3", "speculative_model": eagle_head, "use_dynamic_tree": True,
            "dynamic_tree_max_topK": topk, "max_draft_len": depth, "max_total_draft_tokens": c.budget}  # fmt: skip


def draft_len_schedule(cfg: dict, schedule, depth: int) -> list[str]:
    """Sets Draft_Target's draft_len_schedule where TensorRT-LLM's validation takes it (its
    smallest key's K = max_draft_len, every K <= max_draft_len); the notes say what it means."""
    if not schedule:
        return []
    ks = [k for _, k in schedule]
    if ks[0] != depth or max(ks) > depth:
        return [
            f"{schedule_note(schedule)}; not exported: TensorRT-LLM needs the smallest batch size's K to equal "
            f"max_draft_len ({depth}) and no K above it (export tree.budget={ks[0]} where it is the largest)"
        ]
    cfg["draft_len_schedule"] = {str(b): k for b, k in schedule}
    return [
        f"{schedule_note(schedule)}; TensorRT-LLM runs every batch size above {schedule[-1][0]}, beyond the "
        "measured range, without speculation (draft_len_schedule's implicit 0)"
    ]


FORMATS: dict[str, Callable[..., dict]] = {"vllm": vllm, "sglang": sglang, "trtllm": trtllm, "llamacpp": llamacpp_flags}


def settings(fmt: str, c: Choice, paths, schedule=None, eagle_head=None, nearest: bool = False) -> dict:
    """``fmt``'s settings for ``c``; with ``nearest``, a refused configuration's nearest exportable
    one, labelled ("nearest": what was asked, what changed and why)."""
    asked, changes, why = c, list[str](), list[str]()
    for _ in range(6):  # each step moves to a simpler configuration; a few suffice
        try:
            out = FORMATS[fmt](c, paths, schedule, eagle_head)
        except Refusal as r:
            if not (nearest and r.nearest):
                raise
            c, changes, why = nearest_choice(c, r), [*changes, overrides(r.nearest)], [*why, r.reason]
            continue
        if changes:
            out["nearest"] = {"asked": wrap(fmt, asked, {}, [])["study"], "changed": changes, "why": why}
            out["notes"].insert(0, f"NEAREST exportable configuration, not the one asked: {'; '.join(changes)}")
        return out
    raise Refusal(fmt, "no exportable configuration near this one")
