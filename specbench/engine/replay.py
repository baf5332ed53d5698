"""Replay: exact greedy figures without a target forward per step.

Under greedy verification the output is the target's own greedy continuation c
of the prompt, whatever the tree.  Two ways use that:

* **drafted replay** (any drafter and policy): the one loop (``engine``) with a
  ``ContinuationVerifier`` in place of the target; the drafter runs for real.
* **rank replay** (static shapes over one model drafter: the pure fast path):
  a static shape is a prefix-closed set of draft rank paths, so at position t
  the tree accepts the longest run (rank_t, ..., rank_{t+i-1}) that is a path
  of the shape, where rank_j is the rank of c[j] under the draft given
  prompt + c[:j].  The step then emits c[t : t+i+1] (fewer at EOS / the length
  limit).  Per prompt: one cached target continuation plus ONE cached
  teacher-forced draft forward; every shape and budget is then a walk over the
  ranks.  A test keeps it equal to the loop.

Ranks use the live drafter's arithmetic: ``sampling.probs`` at the draft
temperature / top-p, ties broken by token id.  Exact in float32 (bf16 tree and
teacher-forced forwards round differently).  Records are cached on disk by
content (``diskcache``); ``keys`` says what identifies them.
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import torch

from ..core import kv
from ..core.diskcache import DiskCache, ids_digest
from ..drafting.drafters import prefill
from .loop import NAN, PromptResult, StepRecord, continuation
from ..core.sampling import probs, token_ranks



# --------------------------------------------------------------------------
# the pure part: ranks and the decode trajectory
# --------------------------------------------------------------------------
def ranks_from_probs(q: torch.Tensor, tokens: Sequence[int]) -> list[int]:
    """Row j: the rank of tokens[j] under q[j] in ``choose_children(..., "topk")``
    order, i.e. #(strictly more likely tokens) + #(equally likely, smaller id)."""
    tok = torch.as_tensor(list(tokens), dtype=torch.long, device=q.device)[:, None]
    return token_ranks(q, tok)[:, 0].tolist()


def accept_run(ranks: Sequence[int], t: int, paths: set, limit: int) -> int:
    """Longest i <= limit with (ranks[t], ..., ranks[t+i-1]) a path of the shape."""
    i = 0
    while i < limit and tuple(ranks[t:t + i + 1]) in paths:
        i += 1
    return i


def replay_prompt(prompt_id: str, ranks: Sequence[int], policy) -> list[StepRecord]:
    """The live engine's step records for one prompt, from the draft ranks of c.

    ``len(ranks) == len(c)``; c already stops at EOS (inclusive) or at
    max_new_tokens, exactly where the live loop stops.  ``policy.observe`` is
    called after every step like the live loop does (adaptive shapes)."""
    n, t, records = len(ranks), 0, []
    while t < n:
        paths = policy.paths()
        shape = set(map(tuple, paths))
        size, depth = len(paths), max((len(p) for p in paths), default=0)
        i = accept_run(ranks, t, shape, n - t)       # beyond c, live would truncate anyway
        kids = Counter(p[:-1] for p in shape)        # rank prefix -> number of children
        rec = greedy_record(prompt_id, len(records), size, depth, ranks[t:t + i], n - t, kids)
        records.append(rec)
        policy.observe(i, size)
        t += rec.emitted
    return records


def greedy_record(prompt_id: str, step: int, size: int, depth: int, run_ranks: Sequence[int],
                  left: int, kids: Counter) -> StepRecord:
    """A replayed greedy step: the tree accepted the draft run with these sibling
    ranks, ``left`` tokens of c remain; emitted/accepted are capped like live's.
    ``kids[prefix]``: the number of children of the shape's node at that rank prefix."""
    emitted = min(len(run_ranks) + 1, left)
    accepted = min(len(run_ranks), emitted)
    run = tuple(run_ranks[:accepted])
    return StepRecord(prompt_id=prompt_id, step=step, tree_size=size, tree_depth=depth,
                      accepted=accepted, emitted=emitted, accept_path=".".join(map(str, run)),
                      path_children=".".join(str(kids[run[:d]]) for d in range(accepted + 1)),
                      draft_s=NAN, verify_s=NAN, first_token_tv=0.0,   # greedy is lossless: no shift
                      expected_accepted=float(accepted))


@torch.inference_mode()
def draft_ranks(model, prompt_ids: Sequence[int], cont: Sequence[int],
                temperature: float = 0.0, top_p: float = 1.0, chunk: int = 256) -> list[int]:
    """Ranks of cont[j] under the draft given prompt + cont[:j], from one
    teacher-forced forward over prompt + cont[:-1] (the prompt part keeps no logits)."""
    if not cont:
        return []
    prompt_ids = [int(x) for x in prompt_ids]
    cache, past = prefill(model, prompt_ids)
    seq = [prompt_ids[-1]] + [int(x) for x in cont[:-1]]
    ranks: list[int] = []
    for s in range(0, len(seq), chunk):                 # bounded [chunk, V] logits
        part = seq[s:s + chunk]
        logits = kv.forward_nodes(model, cache, past + s, list(range(-1, len(part) - 1)), part, 0, len(part))
        ranks += ranks_from_probs(probs(logits, temperature, top_p), cont[s:s + len(part)])
    return ranks


def replay_by_ranks(prompts, ranks_and_cont, new_policy) -> list[PromptResult]:
    """Rank replay of every prompt: ``ranks_and_cont(prompt_ids) -> (ranks, c)``."""
    out = []
    for pr in prompts:
        ranks, cont = ranks_and_cont(pr.ids)
        out.append(PromptResult(pr.id, replay_prompt(pr.id, ranks, new_policy()), list(cont)))
    return out


# --------------------------------------------------------------------------
# cached records: keys are plain dicts built by the study layer
# --------------------------------------------------------------------------
def cached_continuation(store: DiskCache, model, key: dict, prompt_ids: Sequence[int]) -> list[int]:
    """The target's greedy continuation (``engine.continuation``), cached on disk.
    ``key`` identifies the target and the decoding (max_new_tokens, dtype, eos, ...)."""
    ckey = {**key, "prompt": ids_digest(prompt_ids), "prompt_len": len(prompt_ids)}
    return store.get_or_compute("continuation", ckey, lambda: continuation(
        model, prompt_ids, int(key["max_new_tokens"]), key["eos"], key["temperature"], key["top_p"]))


def cached_ranks(store: DiskCache, target, draft, key: dict, draft_key: dict,
                 prompt_ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """(draft ranks of c, c), both cached; ``draft_key`` adds the draft's identity and
    its temperature / top-p to ``key``."""
    cont = cached_continuation(store, target, key, prompt_ids)
    rkey = {**key, **draft_key, "prompt": ids_digest(prompt_ids), "prompt_len": len(prompt_ids)}
    ranks = store.get_or_compute("ranks", rkey, lambda: draft_ranks(
        draft, prompt_ids, cont, draft_key["draft_temperature"], draft_key["draft_top_p"]))
    return ranks, cont

