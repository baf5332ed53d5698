"""Serving engines' speculative-decoding settings for one study configuration (``study.export``).

Each format was checked against the engine's own source at the version in ``CHECKED``:

- ``vllm``: ``speculative_config`` (vllm/config/speculative.py): ``method`` ``draft_model`` or
  ``ngram`` (``prompt_lookup_min/max``), ``model``, ``num_speculative_tokens``, and the
  per-batch-size draft length ``num_speculative_tokens_per_batch_size`` ([start, end, K]
  ranges, from 0.24.0).  vLLM drafts chains only (its ``speculative_token_tree`` took EAGLE
  heads and was removed in 0.21.0).
- ``sglang``: server arguments (sglang/srt/server_args.py): ``--speculative-algorithm``
  STANDALONE (a separate draft model) or NGRAM, ``--speculative-num-steps`` (depth),
  ``--speculative-eagle-topk`` and ``--speculative-num-draft-tokens``, which counts the root
  (a chain of N is N + 1).  A chain and EAGLE-2's (depth, top-k, tokens) tree fit; a fixed
  tree of another shape does not.
- ``trtllm``: ``tensorrt_llm.llmapi`` decoding configs (llm_args.py): ``DraftTargetDecodingConfig``
  (``max_draft_len``, ``speculative_model``, ``draft_len_schedule``: {max batch size: draft
  length}, 0 = no speculation), ``EagleDecodingConfig`` (``use_dynamic_tree``,
  ``dynamic_tree_max_topK``, ``max_draft_len``, ``max_total_draft_tokens``; or a static tree
  as ``eagle_choices``, which needs an EAGLE head), ``NGramDecodingConfig``.

Engines verify greedily (T = 0) or by rejection sampling (T > 0): a study rule other than
``greedy`` or ``speculative``, a cross-vocabulary or layer-subset drafter, is refused in one
line naming what is missing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from ..drafting.ngram import MAX_NGRAM, MIN_NGRAM
from ..inputs import embedded
from ..trees.eagle2 import Eagle2Params
from ..trees.policies import policy_spec

CHECKED = {
    "vllm": "vLLM 0.24.0 (vllm/config/speculative.py; read in the 0.24.0 and 0.33.0 sdists)",
    "sglang": "SGLang 0.5.23 (sglang/srt/arg_groups/fields/spec.py; 0.5.10.post1 server_args.py)",
    "trtllm": "TensorRT-LLM 1.3 line (tensorrt_llm/llmapi/llm_args.py at commit 0004396720054fd8)",
}
ENGINE_RULES = ("greedy", "speculative")  # what engines verify with: argmax at T=0, rejection sampling at T>0


@dataclass(frozen=True)
class Choice:
    """One study configuration, as an engine needs it."""

    pair: str
    drafter: str  # model | ngram | tli | layerskip | merged
    draft: str | None  # the draft model an engine loads (its hub id where known), None without one
    tree: str
    budget: int
    params: dict
    verify: str
    temperature: float

    @classmethod
    def of_job(cls, job) -> Choice:
        d = job.pair.draft
        return cls(
            job.pair.name, job.pair.drafter, d and model_id(d.source, d.ref), job.tree.name, job.tree.budget,
            dict(job.tree.params), job.verify.name, float(job.verify.temperature),
        )  # fmt: skip

    @classmethod
    def of_row(cls, row) -> Choice:
        """From a committed summary row (its pair's conf/pair file names the drafter)."""
        from .launch import pair_config

        pair = pair_config(str(row["pair"]))
        d = pair.get("draft") or {}
        ref = d.get("path") or d.get("id")
        return cls(
            str(row["pair"]), pair.get("drafter", "model"), ref and model_id(d["source"], ref), str(row["tree"]),
            int(row["budget"]), json.loads(row["tree_params"] or "{}"), str(row["verify"]), float(row["temperature"]),
        )  # fmt: skip


def model_id(source: str, ref: str) -> str:
    """What an engine loads: an embedded model's hub id, else the hub id or the local folder."""
    return embedded.EMBEDDED.get(ref).hf_name if source == "embedded" else ref


def shape(c: Choice, paths) -> tuple[str, int, int]:
    """("chain" | "eagle2" | "tree", depth, top-k) of the configuration's trees."""
    if c.tree == "eagle2":
        p = Eagle2Params.parse("eagle2", c.params)  # its defaults filled in
        return "eagle2", int(p.depth), int(p.width)
    if policy_spec(c.tree).chain and c.tree != "adaptive_chain":
        return "chain", c.budget, 1
    p = paths(c)
    return "tree", max(len(x) for x in p), max(x[-1] for x in p) + 1


def check(c: Choice, fmt: str) -> None:
    """One-line refusal of what ``fmt`` cannot express."""
    if c.verify not in ENGINE_RULES:
        raise ValueError(
            f"format={fmt}: verify={c.verify} has no counterpart there ({CHECKED[fmt]} verifies greedily at T=0 "
            "and by rejection sampling at T>0): export a verify=greedy or verify=speculative configuration"
        )
    if c.drafter not in ("model", "ngram"):
        raise ValueError(
            f"format={fmt}: pair.drafter={c.drafter} ({c.pair}) has no counterpart there: it serves a separate "
            "draft model of the target's vocabulary or n-gram lookup"
        )
    if c.tree == "adaptive_chain":
        raise ValueError(f"format={fmt}: tree=adaptive_chain has no counterpart there; export tree=chain")


def vllm(c: Choice, paths, schedule=None) -> dict:
    check(c, "vllm")
    kind, depth, _ = shape(c, paths)
    if kind != "chain":
        raise ValueError(
            f"format=vllm: tree={c.tree} is a tree; vLLM drafts chains only (speculative_token_tree took EAGLE "
            "heads and was removed in 0.21.0): export a chain, or use format=paths / sglang / trtllm"
        )
    cfg: dict = {"num_speculative_tokens": depth}
    if c.drafter == "ngram":
        cfg.update(method="ngram", prompt_lookup_min=MIN_NGRAM, prompt_lookup_max=MAX_NGRAM)  # the study's sizes
    else:
        cfg.update(method="draft_model", model=c.draft)
    notes = []
    if schedule:
        ks = [k for _, k in schedule]
        if min(ks) >= 1:
            cfg["num_speculative_tokens_per_batch_size"] = ranges(schedule)
        else:
            stop = next(b for b, k in schedule if k == 0)
            notes.append(f"speculation stops paying at batch {stop} (the study's batch-size schedule); vLLM's "
                         "schedule carries K forward and takes no 0: serve those batch sizes without it")  # fmt: skip
    return wrap("vllm", c, {"speculative_config": cfg}, notes)


def sglang(c: Choice, paths, schedule=None) -> dict:
    check(c, "sglang")
    kind, depth, topk = shape(c, paths)
    if kind == "tree":
        raise ValueError(
            f"format=sglang: tree={c.tree} is a fixed tree; SGLang takes a chain or an EAGLE-style dynamic tree "
            "(depth, top-k, tokens): export tree=chain or tree=eagle2, or format=paths"
        )
    tokens = c.budget + 1  # SGLang counts the root among the draft tokens
    args: dict[str, object] = {
        "--speculative-num-steps": depth,
        "--speculative-eagle-topk": topk,
        "--speculative-num-draft-tokens": tokens,
    }
    if c.drafter == "ngram":
        args = {"--speculative-algorithm": "NGRAM", "--speculative-num-draft-tokens": tokens}
    else:
        args = {"--speculative-algorithm": "STANDALONE", "--speculative-draft-model-path": c.draft, **args}
    return wrap("sglang", c, {"server_args": args}, [])


def trtllm(c: Choice, paths, schedule=None) -> dict:
    check(c, "trtllm")
    kind, depth, topk = shape(c, paths)
    notes = []
    if c.drafter == "ngram":
        cfg: dict = {"decoding_type": "NGram", "max_draft_len": depth if kind == "chain" else c.budget,
                     "max_matching_ngram_size": MAX_NGRAM}  # fmt: skip
    elif kind == "chain":
        cfg = {"decoding_type": "Draft_Target", "max_draft_len": depth, "speculative_model": c.draft}
        if schedule and schedule[0][1] == depth:  # its smallest batch size must take max_draft_len
            cfg["draft_len_schedule"] = {str(b): k for b, k in schedule}
        elif schedule:
            notes.append(f"the batch-size study's schedule starts at N={schedule[0][1]} for batch {schedule[0][0]}: "
                         f"export tree.budget={schedule[0][1]} to take its draft_len_schedule")  # fmt: skip
    elif kind == "eagle2":
        cfg = {"decoding_type": "Eagle", "use_dynamic_tree": True, "dynamic_tree_max_topK": topk,
               "max_draft_len": depth, "max_total_draft_tokens": c.budget}  # fmt: skip
        notes.append("TensorRT-LLM drafts EAGLE-2 trees with an EAGLE head (speculative_model); the study's "
                     f"acceptance is for {c.pair}'s draft model")  # fmt: skip
    else:
        cfg = {"decoding_type": "Eagle", "eagle_choices": paths(c), "max_draft_len": depth}
        notes.append("a static tree takes an EAGLE head there (eagle_choices, deprecated for release 1.4); the "
                     f"study's acceptance is for {c.pair}'s draft model")  # fmt: skip
    return wrap("trtllm", c, {"speculative_config": cfg}, notes)


def ranges(schedule: list[tuple[int, int]]) -> list[list[int]]:
    """[(batch size, K), ...] (sizes ascending) -> vLLM's [start, end, K] ranges: each measured
    size's K holds up to the next measured size."""
    out = []
    for i, (b, k) in enumerate(schedule):
        start = 1 if i == 0 else schedule[i - 1][0] + 1
        out.append([start, b, k])
    return out


def wrap(engine: str, c: Choice, body: dict, notes: list[str]) -> dict:
    return {
        "engine": engine,
        "checked_against": CHECKED[engine],
        "study": {"pair": c.pair, "tree": c.tree, "budget": c.budget, "verify": c.verify, "temperature": c.temperature},
        **body,
        "notes": notes,
    }


FORMATS: dict[str, Callable[..., dict]] = {"vllm": vllm, "sglang": sglang, "trtllm": trtllm}
