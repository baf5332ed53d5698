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
content (``diskcache``); ``keys`` says what identifies them, and ``batch_keys`` the batched run a
record was computed in (a padded bf16 batch can resolve a near-tie other than a batch of one).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

import torch

from ..core import kv
from ..core.diskcache import DiskCache, ids_digest
from ..core.sampling import probs, token_ranks
from ..drafting.drafters import SAME_VOCAB
from ..trees.pminchain import top_share
from .loop import NAN, continuations
from .records import PromptResult, StepRecord


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
    while i < limit and tuple(ranks[t : t + i + 1]) in paths:
        i += 1
    return i


def replay_prompt(
    prompt_id: str, ranks: Sequence[int], policy, widths: Sequence[int] | None = None
) -> list[StepRecord]:
    """The live engine's step records for one prompt, from the draft ranks of c.

    ``len(ranks) == len(c)``; c already stops at EOS (inclusive) or at
    max_new_tokens, exactly where the live loop stops.  ``policy.observe`` is
    called after every step like the live loop does (adaptive shapes).  ``widths[j]``:
    the draft tokens c[j] becomes (``draft_sequence``; default 1), for ``scored``."""
    n, t, pending = len(ranks), 0, 1
    records: list[StepRecord] = []
    while t < n:
        paths = policy.paths()
        shape = set(map(tuple, paths))
        size, depth = len(paths), max((len(p) for p in paths), default=0)
        i = accept_run(ranks, t, shape, n - t)  # beyond c, live would truncate anyway
        kids = Counter(p[:-1] for p in shape)  # rank prefix -> number of children
        rec = greedy_record(prompt_id, len(records), size, depth, ranks[t : t + i], n - t, kids)
        rec.scored = scored(pending, kids) if size else ""
        records.append(rec)
        policy.observe(i, size)
        leaf = rec.accepted > 0 and kids[tuple(ranks[t : t + rec.accepted])] == 0
        bonus = widths[t + rec.emitted - 1] if widths else 1
        pending = bonus + int(leaf)  # an accepted leaf was never forwarded: it goes with the bonus token
        t += rec.emitted
    return records


def scored(pending: int, kids: Counter) -> str:
    """What the live model drafter forwards for a static shape (``DraftTree.scored``): the
    ``pending`` committed tokens not yet in its cache (the bonus token, and an accepted
    leaf, which was never forwarded), then each depth's nodes that have children."""
    per_depth = Counter(len(prefix) for prefix in kids if prefix)
    return ".".join(map(str, [pending, *(per_depth[d] for d in sorted(per_depth))]))


def greedy_record(
    prompt_id: str, step: int, size: int, depth: int, run_ranks: Sequence[int], left: int, kids: Counter
) -> StepRecord:
    """A replayed greedy step: the tree accepted the draft run with these sibling
    ranks, ``left`` tokens of c remain; emitted/accepted are capped like live's.
    ``kids[prefix]``: the number of children of the shape's node at that rank prefix."""
    emitted = min(len(run_ranks) + 1, left)
    accepted = min(len(run_ranks), emitted)
    run = tuple(run_ranks[:accepted])
    return StepRecord(
        prompt_id=prompt_id,
        step=step,
        tree_size=size,
        tree_depth=depth,
        accepted=accepted,
        emitted=emitted,
        accept_path=".".join(map(str, run)),
        path_children=".".join(str(kids[run[:d]]) for d in range(accepted + 1)),
        draft_s=NAN,
        verify_s=NAN,
        first_token_tv=0.0,  # greedy is lossless: no shift
        expected_accepted=float(accepted),
    )


def draft_ranks(
    model,
    prompt_ids: Sequence[int],
    cont: Sequence[int],
    temperature: float = 0.0,
    top_p: float = 1.0,
    vocab=SAME_VOCAB,
) -> list[int]:
    """Ranks of cont[j] under the draft given prompt + cont[:j] (``draft_ranks_many``, one prompt)."""
    return draft_ranks_many(model, [prompt_ids], [cont], temperature, top_p, vocab=vocab)[0]


def draft_ranks_many(
    model,
    prompts: Sequence[Sequence[int]],
    conts: Sequence[Sequence[int]],
    temperature: float = 0.0,
    top_p: float = 1.0,
    batch_size: int = 1,
    chunk: int = 256,
    vocab=SAME_VOCAB,
) -> list[list[int]]:
    """Draft ranks of every continuation, ``batch_size`` prompts per teacher-forced
    forward: each prompt is prefilled, then prompt[-1] + cont[:-1] goes through as a
    chain (in the draft's tokens: ``vocab``), in chunks of ``chunk // batch_size``
    positions (bounded [rows, chunk, V] logits)."""
    out: list[list[int]] = []
    for s in range(0, len(prompts), batch_size):
        out += teacher_forced_ranks(
            model,
            prompts[s : s + batch_size],
            conts[s : s + batch_size],
            temperature,
            top_p,
            max(1, chunk // batch_size),
            vocab,
        )
    return out


def teacher_forced_ranks(
    model, prompts, conts, temperature: float, top_p: float, chunk: int, vocab=SAME_VOCAB
) -> list[list[int]]:
    """One batch of ``draft_ranks_many``: ``teacher_forced`` measuring each row's rank under
    ``sampling.probs`` at the draft temperature / top-p."""

    def rank(logits: torch.Tensor, tokens: list[int]) -> list[int]:
        return ranks_from_probs(probs(logits, temperature, top_p), tokens)

    return teacher_forced(model, prompts, conts, rank, chunk, vocab)


@torch.inference_mode()
def teacher_forced(model, prompts, conts, measure, chunk: int = 256, vocab=SAME_VOCAB) -> list[list]:
    """``measure(logits [k, V], cont tokens [k]) -> k values`` of the draft's logits (in target
    tokens) at each position of every continuation, teacher-forced: one batch, per-row slot caches
    and masks (``kv.SlotKV``).  ``vocab`` says how the draft model reads target tokens
    (``Drafter.rank_vocab``): row j is the draft position that ends prompt + cont[:j] in its own tokens."""
    rows = kv.SlotKV(model)
    heads = [vocab.draft_prompt(p) for p in prompts]
    ids = [rows.add(h) for h in heads]
    fed = [draft_sequence(vocab, h, c) for h, c in zip(heads, conts)]
    out: list[list] = [[] for _ in prompts]
    for s in range(0, max((len(seq) for seq, _ in fed), default=0), chunk):
        parts = [(r, seq[s : s + chunk], b) for b, (r, (seq, _)) in enumerate(zip(ids, fed)) if seq[s : s + chunk]]
        logits = rows.forward([(r, kv.chain(len(part)), part, 0) for r, part, _ in parts])
        for (r, part, b), row_logits in zip(parts, logits):
            at = fed[b][1]
            js = [j for j in range(len(out[b]), len(at)) if at[j] < s + len(part)]
            rows_at = torch.as_tensor([at[j] - s for j in js], dtype=torch.long, device=row_logits.device)
            out[b] += measure(vocab.to_target(row_logits[rows_at]), [conts[b][j] for j in js])
            rows.commit(r, range(len(part)))
    return out


def pmin_marks(top_k: int = 10):
    """The ``teacher_forced`` measure of llama.cpp's draft rule (``trees.pminchain``): per position,
    (the rank of c[j] under the draft's logits, the draft's best token's ``top_share``)."""

    def measure(logits: torch.Tensor, tokens: list[int]) -> list[tuple[int, float]]:
        return list(zip(ranks_from_probs(logits, tokens), top_share(logits, top_k).tolist()))

    return measure


class PminStep(NamedTuple):
    """One step of ``pmin_steps``: whether it drafted, the tokens accepted, the least and the most it drafted,
    and its room (the most it may draft; 0 where it may not)."""

    drafts: bool
    accepted: int
    least: int
    most: int
    room: int


def pmin_walk(marks: Sequence[tuple[int, float]], n_max: int, p_min: float, start: int = 0, reserve: int = 0):
    """``pmin_steps`` as the live loop records them: per step (drafted, accepted)."""
    return [(s.drafts, s.accepted) for s in pmin_steps(marks, n_max, p_min, start, reserve)]


def pmin_steps(
    marks: Sequence[tuple[int, float]], n_max: int, p_min: float, start: int = 0, reserve: int = 0
) -> list[PminStep]:
    """The steps of a greedy decode of c (``len(marks)`` tokens) with ``tree=pmin_chain`` (n_min <= 1).  A
    step at t drafts while the draft's share >= p_min, at most n_max tokens; it accepts while c[t + i] is the
    draft's best (rank 0) and emits one more (fewer at the end of c).  Along c the draft's state is c's, so
    this is exact up to a chain's first rejected token; past it (the draft's best is not c's) the chain
    drafted that token and went on along its own tokens, unseen here, hence n_min <= 1 and a drafted length
    of at least a + 1, at most its room (exactly its room at p_min 0, where no share stops it; as after c's
    end).  Exact where the chain stopped at an unsure token (share < p_min) or at its room.  llama.cpp:
    ``start=1`` (its first token comes from the prompt's forward) and ``reserve=1`` (a draft leaves one token
    of n_predict: server's ``get_n_draft_max``)."""
    n, t, out = len(marks), 0, []
    while t < n:
        room = max(0 if t < start else min(n_max, n - t - reserve) if reserve else n_max, 0)
        if room == 0 or marks[t][1] < p_min:
            out.append(PminStep(False, 0, 0, 0, room))
            t += 1
            continue
        a = 0
        while a < room and t + a < n and marks[t + a][1] >= p_min and marks[t + a][0] == 0:
            a += 1
        emitted = min(a + 1, n - t)
        if a == room or p_min <= 0:  # the chain ran to its room (no share stops it at p_min 0)
            least = most = room
        elif t + a < n and marks[t + a][1] < p_min:  # stopped before its first unsure token
            least = most = a
        else:  # rejected at t + a (drafted it, the rest unseen), or c ended
            least, most = a + (t + a < n), room
        out.append(PminStep(True, min(a, emitted), least, most, room))
        t += emitted
    return out


def draft_samples(drafted: int, room: int) -> int:
    """The draft's one-token forwards of a llama.cpp draft-simple step that drafted ``drafted`` of at most
    ``room`` (``common/speculative.cpp``, ``draft()``): one per token it sampled, the one below p_min included,
    none where it may not draft."""
    return drafted + (drafted < room)


def draft_sequence(vocab, head: Sequence[int], cont: Sequence[int]) -> tuple[list[int], list[int]]:
    """(the draft tokens fed after the cached ``head[:-1]``, and for each j the index among
    them whose logits predict cont[j]): head[-1], then each of cont[:-1] in draft tokens."""
    if not cont:
        return [], []
    seq, at = [int(head[-1])], [0]
    for t in cont[:-1]:
        seq += vocab.draft_tokens(t)
        at.append(len(seq) - 1)
    return seq, at


def replay_by_ranks(
    prompts, ranks_and_conts: Sequence[tuple[list[int], list[int]]], new_policy, vocab=SAME_VOCAB
) -> list[PromptResult]:
    """Rank replay of every prompt, from its (ranks, c) (``cached_ranks_many``)."""
    return [
        PromptResult(pr.id, replay_prompt(pr.id, ranks, new_policy(), widths(vocab, cont)), list(cont))
        for pr, (ranks, cont) in zip(prompts, ranks_and_conts)
    ]


def widths(vocab, cont: Sequence[int]) -> list[int]:
    """How many draft tokens each token of ``cont`` becomes (``vocab.draft_tokens``)."""
    return [len(vocab.draft_tokens(t)) for t in cont]


# --------------------------------------------------------------------------
# cached records: keys are plain dicts built by the study layer
# --------------------------------------------------------------------------
def prompt_key(key: dict, prompt_ids: Sequence[int]) -> dict:
    return {**key, "prompt": ids_digest(prompt_ids), "prompt_len": len(prompt_ids)}


def batch_keys(key: dict, prompts: Sequence[Sequence[int]], batch_size: int) -> list[dict]:
    """Each prompt's record key.  A padded batch of B > 1 prompts can resolve a near-tie (bf16) other
    than a batch of one, and the loop refills a finished row's slot with the next prompt, so a record
    computed in a batched run depends on every prompt of that run: it is keyed by the run (its batch
    size and all its prompts, in order); batch 1 is not."""
    if batch_size <= 1:
        return [prompt_key(key, ids) for ids in prompts]
    of = ids_digest([t for c in prompts for t in (*c, -1)])  # -1: no token id, the prompts' separator
    return [{**prompt_key(key, ids), "batch": batch_size, "batch_of": of} for ids in prompts]


def whole_batches(compute, n: int, batch_size: int):
    """``compute(indices) -> values`` widened to the whole run when a batched record is missing, so a
    record is computed in the run its key names (``batch_keys``); batch 1 computes what is missing."""

    def missing(miss: list[int]) -> list:
        todo = sorted(miss) if batch_size <= 1 else list(range(n))
        got = dict(zip(todo, compute(todo)))
        return [got[i] for i in miss]

    return missing


def cached_continuations(
    store: DiskCache, model, key: dict, prompts: Sequence[Sequence[int]], batch_size: int = 1, progress=None
) -> list[list[int]]:
    """The target's greedy continuations of ``prompts``, cached on disk by the batch that computed
    them (``batch_keys``); the missing ones computed ``batch_size`` per forward
    (``engine.continuations``; batch_size=1: bit-exact with batch-1 live decoding)."""
    if float(key["temperature"]) != 0:
        raise ValueError(f"verify.temperature={key['temperature']}: cached continuations are greedy (temperature 0)")

    def compute(todo: list[int]) -> list:
        n, eos = int(key["max_new_tokens"]), key["eos"]
        ids = [prompts[i] for i in todo]
        return continuations(model, ids, n, eos, 0.0, key["top_p"], batch_size=batch_size, progress=progress)

    keys = batch_keys(key, prompts, batch_size)
    return store.get_or_compute_many("continuation", keys, whole_batches(compute, len(prompts), batch_size))


def cached_ranks_many(
    store: DiskCache,
    target,
    draft,
    key: dict,
    draft_key: dict,
    prompts: Sequence[Sequence[int]],
    batch_size: int = 1,
    progress=None,
    vocab=SAME_VOCAB,
) -> list[tuple[list[int], list[int]]]:
    """(draft ranks of c, c) of every prompt, both cached, the missing ones computed
    ``batch_size`` prompts per forward; ``draft_key`` adds the draft's identity and its
    temperature / top-p to ``key``; ``vocab``: how the draft reads target tokens."""
    conts = cached_continuations(store, target, key, prompts, batch_size, progress)

    def compute(todo: list[int]) -> list:
        t, p = draft_key["draft_temperature"], draft_key["draft_top_p"]
        return draft_ranks_many(
            draft, [prompts[i] for i in todo], [conts[i] for i in todo], t, p, batch_size, vocab=vocab
        )

    keys = batch_keys({**key, **draft_key}, prompts, batch_size)
    ranks = store.get_or_compute_many("ranks", keys, whole_batches(compute, len(prompts), batch_size))
    return list(zip(ranks, conts))
