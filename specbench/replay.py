"""The replay engine: exact greedy figures for every static shape, no model call per shape.

Under greedy verification the output is the target's own greedy continuation c
of the prompt, whatever the tree.  A static shape is a prefix-closed set of
draft rank paths, so at position t the tree accepts the longest run
(rank_t, ..., rank_{t+i-1}) that is a path of the shape, where rank_j is the
rank of c[j] under the draft given prompt + c[:j].  The step then emits
c[t : t+i+1] (fewer at EOS / the length limit) and t <- t + emitted.

Per prompt this costs one target greedy decode (cached on disk) plus ONE
teacher-forced draft forward over prompt + c (cached too); every shape and
budget is then a pure walk over the rank sequence.

Ranks use the live drafter's exact arithmetic: ``sampling.probs`` at the
draft temperature / top-p, ties broken by token id (``sampling.choose_children``
orders children with a stable descending argsort).  So replay equals live up to
floating-point differences between the teacher-forced forward and the drafter's
cached tree forwards (none observed in fp32; see tests/test_replay.py).

Drafters that are not a static shape over one model's ranks (n-gram, merged,
dynamic trees such as eagle2) replay *drafted*: the drafter runs as in the
live loop, but the target's verdict is read off c (greedy accepts the longest
root path of the tree that spells c[t:]), so no target forward is made.
"""
from __future__ import annotations

import glob
import os
import time
from typing import Sequence

import torch

from . import kv
from .decode import StepRecord, prompt_rng
from .drafters import Drafter, prefill
from .diskcache import DiskCache, cache_root, ids_digest
from .sampling import probs, token_ranks
from .trees import DraftTree

REPLAY_MODES = ("greedy",)      # verify modes whose output is the target's greedy continuation
NAN = float("nan")


# --------------------------------------------------------------------------
# when replay is exact
# --------------------------------------------------------------------------
def why_not_replayable(cfg) -> str | None:
    """None when replay is exact for this job config, else the reason."""
    if cfg.verify.name not in REPLAY_MODES:
        return f"verify={cfg.verify.name} is not greedy"
    if float(cfg.verify.get("temperature", 0.0) or 0.0) != 0.0:
        return "verify.temperature != 0 (first_token_tv would need the target's distributions)"
    if str(cfg.get("dtype", "float32")) != "float32":
        return (f"dtype={cfg.dtype}: replay equals live only in float32 (bf16 tree and "
                "teacher-forced forwards round differently and can reorder draft ranks)")
    return None


def replayable(cfg) -> bool:
    return why_not_replayable(cfg) is None


def by_ranks(cfg, drafter_kind: str | None = None) -> bool:
    """A static shape over a model drafter: replay from the rank sequence, no model
    call at all.  Anything else (n-gram, merged, dynamic trees) replays drafted."""
    from .plans import make_plan
    kind = drafter_kind or cfg.pair.get("drafter", "model")
    return kind == "model" and not make_plan(cfg.tree).dynamic


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


def replay_prompt(prompt_id: str, ranks: Sequence[int], plan) -> list[StepRecord]:
    """The live engine's step records for one prompt, from the draft ranks of c.

    ``len(ranks) == len(c)``; c already stops at EOS (inclusive) or at
    max_new_tokens, exactly where the live loop stops.  ``plan.observe`` is
    called after every step like the live loop does (adaptive shapes)."""
    n, t, records = len(ranks), 0, []
    while t < n:
        paths = plan.paths()
        shape = set(map(tuple, paths))
        size, depth = len(paths), max((len(p) for p in paths), default=0)
        i = accept_run(ranks, t, shape, n - t)       # beyond c, live would truncate anyway
        rec = greedy_record(prompt_id, len(records), size, depth, ranks[t:t + i], n - t)
        records.append(rec)
        plan.observe(i, size)
        t += rec.emitted
    return records


def greedy_record(prompt_id: str, step: int, size: int, depth: int, run_ranks: Sequence[int],
                  left: int, draft_s: float = NAN) -> StepRecord:
    """A replayed greedy step: the tree accepted the draft run with these sibling
    ranks, ``left`` tokens of c remain; emitted/accepted are capped like live's."""
    emitted = min(len(run_ranks) + 1, left)
    accepted = min(len(run_ranks), emitted)
    return StepRecord(prompt_id=prompt_id, step=step, tree_size=size, tree_depth=depth,
                      accepted=accepted, emitted=emitted,
                      accept_path=".".join(str(r) for r in run_ranks[:accepted]),
                      draft_s=draft_s, verify_s=NAN, first_token_tv=greedy_first_token_tv(),
                      expected_accepted=float(accepted))


def follow(tree: DraftTree, tokens: Sequence[int]) -> list[int]:
    """Node ids of the longest root path of tree spelling a prefix of tokens:
    what greedy verification accepts when the target's continuation is tokens."""
    kids: dict[tuple[int, int], int] = {}
    for i in range(1, len(tree.parents)):
        kids.setdefault((tree.parents[i], int(tree.tokens[i])), i)
    path, node = [], 0
    for tok in tokens:
        node = kids.get((node, int(tok)), -1)
        if node < 0:
            break
        path.append(node)
    return path


def replay_drafted(prompt_id: str, prompt_ids: Sequence[int], cont: Sequence[int], drafter: Drafter,
                   plan, children: str, rng: torch.Generator) -> list[StepRecord]:
    """The live engine's step records for one prompt with the drafter run for real
    and the target replaced by its continuation c (no target forward)."""
    drafter.reset(prompt_ids)
    n, t, records = len(cont), 0, []
    while t < n:
        t0 = time.perf_counter()
        tree = drafter.draft(plan, children, rng)
        draft_s = time.perf_counter() - t0
        path = follow(tree, cont[t:])
        rec = greedy_record(prompt_id, len(records), tree.size, tree.depth,
                            [tree.ranks[node] for node in path], n - t, draft_s)
        records.append(rec)
        plan.observe(len(path), tree.size)
        t += rec.emitted
        if t < n:
            drafter.commit(tree, path, int(cont[t - 1]))
    return records


def greedy_first_token_tv() -> float:
    """Greedy is lossless w.r.t. the greedy target: its first-token shift is 0."""
    return 0.0


# --------------------------------------------------------------------------
# the model part: c and the rank sequence (both cached on disk)
# --------------------------------------------------------------------------
@torch.inference_mode()
def greedy_continuation(model, prompt_ids: Sequence[int], max_new_tokens: int, eos: set[int],
                        temperature: float = 0.0, top_p: float = 1.0) -> list[int]:
    """The target's greedy continuation, computed like the live target scores a
    1-node tree each step: up to max_new_tokens, stopping after the first EOS."""
    prompt_ids = [int(x) for x in prompt_ids]
    cache, past = prefill(model, prompt_ids)
    root, out = prompt_ids[-1], []
    while len(out) < max_new_tokens and not (out and out[-1] in eos):
        logits = kv.forward_nodes(model, cache, past, [-1], [root], 0, 1)[-1]
        root = int(probs(logits, temperature, top_p).argmax())
        past += 1
        out.append(root)
    return out


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


def _model_key(spec) -> dict:
    """A model's identity inside a cache key: its resolved pair spec, plus for a
    local folder the size and mtime of its weight/config files (a retrained model
    saved over the same folder must not hit the old records)."""
    from omegaconf import OmegaConf
    key = OmegaConf.to_container(spec, resolve=True) if OmegaConf.is_config(spec) else dict(spec)
    if key.get("source") == "local" and key.get("path"):
        folder = os.path.abspath(os.path.expanduser(str(key["path"])))
        files = sorted(glob.glob(os.path.join(folder, "*.safetensors")) + glob.glob(os.path.join(folder, "*.bin"))
                       + glob.glob(os.path.join(folder, "config.json")))
        key["files"] = [[os.path.basename(f), os.stat(f).st_size, os.stat(f).st_mtime_ns] for f in files]
    return key


def continuation_key(cfg, prompt_ids, eos) -> dict:
    v = cfg.verify
    return {"target": _model_key(cfg.pair.target), "prompt": ids_digest(prompt_ids),
            "prompt_len": len(prompt_ids), "max_new_tokens": int(cfg.max_new_tokens),
            "dtype": str(cfg.dtype), "device": str(cfg.device), "eos": sorted(int(e) for e in eos),
            "temperature": float(v.get("temperature", 0.0) or 0.0), "top_p": float(v.get("top_p", 1.0) or 1.0)}


def ranks_key(cfg, ckey: dict) -> dict:
    v = cfg.verify
    t = v.get("draft_temperature", v.get("temperature", 0.0))
    return {**ckey, "draft": _model_key(cfg.pair.draft),
            "draft_temperature": float(t or 0.0), "draft_top_p": float(v.get("top_p", 1.0) or 1.0)}


def prompt_continuation(cfg, pair, prompt_ids, eos, store: DiskCache) -> list[int]:
    """Cached (or computed and cached) target continuation c of the prompt."""
    ckey = continuation_key(cfg, prompt_ids, eos)
    return store.get_or_compute("continuation", ckey, lambda: greedy_continuation(
        pair.target, prompt_ids, int(cfg.max_new_tokens), eos, ckey["temperature"], ckey["top_p"]))


def prompt_ranks(cfg, pair, prompt_ids, eos, store: DiskCache) -> list[int]:
    """Cached (or computed and cached) draft ranks of the target's continuation."""
    ckey = continuation_key(cfg, prompt_ids, eos)
    rkey = ranks_key(cfg, ckey)
    ranks = store.get("ranks", rkey)
    if ranks is not None:
        return ranks
    cont = prompt_continuation(cfg, pair, prompt_ids, eos, store)
    ranks = draft_ranks(pair.draft, prompt_ids, cont, rkey["draft_temperature"], rkey["draft_top_p"])
    store.put("ranks", rkey, ranks)
    return ranks


def decode_replay(cfg, pair, prompts, eos: set[int], drafter: Drafter | None = None) -> list[StepRecord]:
    """The replay engine's hook for run.py: the step records of every prompt.

    ``prompts``: objects with ``.id`` and ``.ids``; a fresh plan per prompt,
    like the live loop.  ``drafter`` None: from ranks (``by_ranks``); else drafted,
    with the live loop's per-prompt generator."""
    from tqdm import tqdm
    from .plans import make_plan
    from .verify import MODES
    store = DiskCache(cache_root(cfg))
    records: list[StepRecord] = []
    for i, pr in enumerate(tqdm(prompts, desc=f"replay {cfg.tree.name}/{cfg.tree.budget}",
                                disable=not cfg.get("progress", False))):
        if drafter is None:
            records += replay_prompt(pr.id, prompt_ranks(cfg, pair, pr.ids, eos, store), make_plan(cfg.tree))
        else:
            records += replay_drafted(pr.id, pr.ids, prompt_continuation(cfg, pair, pr.ids, eos, store),
                                      drafter, make_plan(cfg.tree), MODES.meta(cfg.verify.name)["children"],
                                      prompt_rng(cfg.seed, i))
    return records

