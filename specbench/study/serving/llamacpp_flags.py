"""``format=llamacpp``: a study configuration as ``llama-server``'s speculative flags (``engines.FORMATS``).

Checked against the llama.cpp that ``llama-cpp-python==0.3.36`` vendors (``inputs.llamacpp``):
``common/arg.cpp`` (the flags), ``common/speculative.cpp`` (draft-simple drafts greedily, the draft's
top token, a chain of at most ``--spec-draft-n-max`` tokens that stops where that token's
probability is below ``--spec-draft-p-min`` and is dropped where it is shorter than
``--spec-draft-n-min``; ngram-simple continues the most recent earlier occurrence of the last
``--spec-ngram-simple-size-n`` tokens with at most ``--spec-ngram-simple-size-m``), and
``tools/server`` (a draft is also capped by the tokens the request has left; per-request
speculative settings are compiled out, so the flags are the server's start-up settings).

- A draft model (``drafter=model``) on a chain of ``tree.budget`` K: ``--spec-type draft-simple``,
  ``--spec-draft-model`` (the draft's GGUF), n_max K, n_min 0, p_min 0: every step drafts K tokens
  (fewer only where the request ends), as the study's static chain.
- n-gram lookup (``drafter=ngram``) on a chain of K: ``--spec-type ngram-simple`` with size-n
  ``MAX_NGRAM`` and size-m K (the study backs off to shorter n-grams; llama.cpp does not).

The server verifies a T=0 request by argmax match (``verify=greedy``) and a T>0 one by sampling the
target and keeping a draft token equal to the sample (drafts one-hot: ``verify=naive``); trees and
``verify=speculative`` are refused with the nearest exportable configuration.
"""

from __future__ import annotations

from ...drafting.ngram import MAX_NGRAM
from ...inputs import llamacpp
from ..job.launch import pair_config
from .engine_rules import Choice, Refusal, chain_of, check, one_hot_rule, rule_note, schedule_note, shape, wrap


def draft_gguf(c: Choice) -> str:
    """The draft's GGUF file: an embedded model's in the cache (``inputs.llamacpp.gguf_path``),
    else what the pair names (a GGUF the user gives)."""
    d = pair_config(c.pair).get("draft") or {}
    if d.get("source") == "embedded":
        return str(llamacpp.gguf_path(d["id"]))
    return str(d.get("path") or d.get("id") or c.draft)


def llamacpp_flags(c: Choice, paths, schedule=None, eagle_head=None) -> dict:
    check(c, "llamacpp", ("model", "ngram"))
    kind, depth, _ = shape(c, paths)
    if kind != "chain":
        raise Refusal("llamacpp", f"tree={c.tree} is a tree and llama-server drafts chains only", chain_of(depth))
    why = "llama-server keeps a draft token where the target's sample equals it (drafts one-hot): no min(1, p/q) rule"
    rule = one_hot_rule(c, "llamacpp", why)
    notes = [rule_note(rule, c)]
    if c.drafter == "ngram":
        args: dict[str, object] = {"--spec-type": "ngram-simple", "--spec-ngram-simple-size-n": MAX_NGRAM,
                                   "--spec-ngram-simple-size-m": depth}  # fmt: skip
        notes.append(
            f"ngram-simple matches the last {MAX_NGRAM} tokens only and drafts only where at least {MAX_NGRAM} tokens "
            f"follow the match; the study backs off to {MAX_NGRAM - 1}..1-grams: acceptance may differ"
        )
    else:
        args = {"--spec-type": "draft-simple", "--spec-draft-model": draft_gguf(c), "--spec-draft-n-max": depth,
                "--spec-draft-n-min": 0, "--spec-draft-p-min": 0.0}  # fmt: skip
        notes.append(
            f"p_min 0 and n_min 0: every step drafts {depth} tokens (fewer only where the request ends), as the "
            "study's static chain; the draft runs on the GGUF's quantized weights, the study on de-quantized ones"
        )
    notes.append(
        "per-request speculative settings are compiled out of llama-server: start one server per setting; "
        "serve the target's GGUF with -m, one slot (-np 1)"
    )
    if schedule:
        notes.append(f"{schedule_note(schedule)}; llama-server has no per-batch-size draft length: not exported")
    argv = [str(x) for k, v in args.items() for x in (k, v)]
    return wrap("llamacpp", c, {"server_args": args, "argv": argv, "engine_version": llamacpp.engine_version()}, notes)
