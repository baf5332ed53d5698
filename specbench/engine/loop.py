"""The engine: ONE decode loop, with the verifier and drafter plugged in.

The loop (``run_rows``) keeps up to ``batch_size`` prompts in flight as *rows*;
each row has its own drafter, tree policy and generator (``prompt_rng``), so a
row's result does not depend on the batch or its neighbours.  Per step
(``step``), control goes down to each part once and comes back::

    trees    = draft_rows(rows)                   # drafter: every row's tree (level generators)
    ps       = verifier.score(trees)              # verifier: ONE target forward for all rows
    verdicts = mode.checked_verdict(tree, p, ...) # mode: accepted path + next token per row
    commit(...)     # the one place state changes: target cache, drafter cache, policy, output
    step_record(...)                              # record: pure, one StepRecord per row
    analyse(...)    # off the clock: the exact law and the paired modes' verdicts

A finished row's slot is refilled with the next prompt; batch 1 is one row (``decode_prompt``).
The verifier (``engine.verifiers``) is the live target model, or replay of its continuation.

Paired verdicts (``Decoding.paired``): the same drafted tree and target rows are also verified
by each extra mode, with its own generator; the decode follows the primary mode only.
Drafting is level-wise (``drafting.levels``): every row's drafter yields the nodes it
needs scored at each depth, and rows whose drafters share a draft cache draft in
lockstep, one draft-model forward per depth for all of them; no threads.  Timing:
``draft_s`` is the step's shared draft phase and the drafters' cache commits;
``verify_s`` is the step's shared verification (the one target forward, every row's
verdict, the target's cache update), the same for every row of the step.  The
analysis (``analyse``) is timed apart: ``PromptResult.analysis_s``, which a job's
wall time leaves out.
``continuation(s)`` (the target's own continuation, greedy or sampled: for replay,
calibration, costs) are this loop with ``tree=none``.  ``decode`` runs a prompt set through
the loop (the entry point); definitions (accepted / emitted / bonus) are in ``engine.records.StepRecord``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch

from ..core.tree import DraftTree
from ..drafting.drafters import Drafter, DrafterProtocol
from ..drafting.levels import run_levels
from ..trees.policies import TreePolicy, make_policy
from ..verify.modes import get_mode
from ..verify.modespec import ModeParams, ModeSpec, TargetRows, Verdict
from .records import PromptResult, StepRecord, measure_shift, step_record
from .verifiers import LiveVerifier, Verifier

NAN = float("nan")


@dataclass(frozen=True)
class Decoding:
    """What a job decodes with, besides drafter, verifier and tree policy."""

    mode: ModeSpec  # a verify mode spec (``verify.get_mode``)
    params: ModeParams  # ``mode.params(...)``: temperature, top_p, ...
    max_new_tokens: int
    eos: frozenset[int] = frozenset()
    seed: int = 0
    measure_shift: bool = True  # exact first_token_tv / expected_accepted per step
    paired: tuple[tuple[ModeSpec, ModeParams], ...] = ()  # modes verified on the same trees


def prompt_seed(seed: int, i: int) -> int:
    """The random seed of the i-th prompt of a job."""
    return int(seed) * 100_003 + i


def prompt_rng(seed: int, i: int) -> torch.Generator:
    """The generator of the i-th prompt of a job (every engine alike)."""
    return torch.Generator().manual_seed(prompt_seed(seed, i))


def truncate(tokens: Sequence[int], remaining: int, eos: frozenset) -> list[int]:
    """The tokens actually appended: up to the length limit and the first EOS."""
    out = []
    for t in tokens[:remaining]:
        out.append(int(t))
        if t in eos:
            break
    return out


PAIRED_SEED_OFFSET = 0x9E3779B9 << 20  # paired generators never share the drafting stream


def paired_generators(rng: torch.Generator, n: int) -> list[torch.Generator]:
    """The generators of ``n`` paired modes for one prompt: all seeded alike
    (common random numbers across the paired modes) from the prompt's seed, apart
    from the drafting stream.

    Why paired verdicts ride on the primary's decode, not separate decodes: the
    modes' accepted paths differ, so separate decodes draft the same tree only
    until their first different step.  Here every step's tree and target rows
    are verified by every paired mode, so a paired difference is a difference
    per drafted tree (the papers' claim: block / traversal accept more from the
    very same draft), with no drafting noise.  Estimand: the mean over the
    trees the primary's decode drafts; a mode's own decode starts its steps at
    other contexts, so its own tokens_per_step can differ (run it as the
    primary for that).  A paired generator must not be the drafting stream
    (a verdict whose uniforms drew the tree would be biased); to share uniforms
    with the token-level rule as well, list that rule among the paired modes."""
    seed = rng.initial_seed() + PAIRED_SEED_OFFSET
    return [torch.Generator().manual_seed(seed) for _ in range(n)]


def appended(tree: DraftTree, verdict: Verdict, remaining: int, eos: frozenset) -> list[int]:
    """The tokens a verdict appends: its path's tokens and next token, truncated."""
    return truncate([int(tree.tokens[n]) for n in verdict.path] + [verdict.next_token], remaining, eos)


@dataclass
class Row:
    """One prompt in flight: its own drafter, tree policy and generator, and its output."""

    index: int  # the prompt's place in the job (results come back in this order)
    prompt_id: str
    drafter: DrafterProtocol
    policy: TreePolicy
    rng: torch.Generator
    out: list[int] = field(default_factory=list)
    records: list[StepRecord] = field(default_factory=list)
    gens: list[torch.Generator] = field(default_factory=list)  # one per ``Decoding.paired`` mode
    paired: list[list[StepRecord]] = field(default_factory=list)  # their records
    analysis_s: float = 0.0  # seconds spent off the clock (``analyse``)

    def result(self) -> PromptResult:
        return PromptResult(self.prompt_id, self.records, self.out, self.paired, self.analysis_s)

    def finished(self, run: Decoding, new: Sequence[int] = ()) -> bool:
        """Done once ``new`` is appended: the length limit or EOS reached."""
        n = len(self.out) + len(new)
        last = new[-1] if new else (self.out[-1] if self.out else None)
        return n >= run.max_new_tokens or last in run.eos


def run_rows(
    pending: Iterator[tuple[Row, Sequence[int]]], verifier: Verifier, run: Decoding, batch_size: int = 1
) -> list[PromptResult]:
    """THE loop: up to ``batch_size`` rows in flight, one ``step`` of all of them at a
    time; a finished row leaves and the next pending prompt takes its place."""
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}: must be >= 1 (prompts per target forward)")
    rows: list[Row] = []
    done: dict[int, PromptResult] = {}
    while True:
        while len(rows) < batch_size and (nxt := next(pending, None)) is not None:
            row, prompt_ids = nxt
            row.drafter.reset(prompt_ids)
            row.gens, row.paired = paired_generators(row.rng, len(run.paired)), [[] for _ in run.paired]
            if row.finished(run):
                done[row.index] = row.result()
                continue
            verifier.start(prompt_ids)
            rows.append(row)
        if not rows:
            return [done[i] for i in sorted(done)]
        finished = step(rows, verifier, run)
        for row, fin in zip(rows, finished):
            if fin:
                row.drafter.close()
                done[row.index] = row.result()
        rows = [row for row, fin in zip(rows, finished) if not fin]


def step(rows: Sequence[Row], verifier: Verifier, run: Decoding) -> list[bool]:
    """One decode step of every row, in order: drafter, verifier, mode, commit, record (see
    the module docstring); then the analysis, off the clock.  Returns which rows finished."""
    trees, draft_s = draft_rows(rows, run)
    t1 = time.perf_counter()
    ps = verifier.score(trees)  # every row's tree in one call ([N+1, V] rows, or replay's argmax ids)
    verdicts = [run.mode.checked_verdict(tree, p, row.rng, run.params) for row, tree, p in zip(rows, trees, ps)]
    left = [run.max_new_tokens - len(row.out) for row in rows]
    news = [appended(tree, v, n, run.eos) for tree, v, n in zip(trees, verdicts, left)]
    finished = [row.finished(run, new) for row, new in zip(rows, news)]
    commit_s = commit(rows, trees, verdicts, news, finished, verifier)
    verify_s = time.perf_counter() - t1 - commit_s if verifier.timed else NAN
    for row, tree, v, new, ds in zip(rows, trees, verdicts, news, draft_s):
        rec = step_record(row.prompt_id, len(row.records), tree, v, new)
        rec.draft_s, rec.verify_s = ds + commit_s, verify_s
        row.records.append(rec)
    analyse(rows, trees, ps, left, run)
    return finished


def draft_rows(rows: Sequence[Row], run: Decoding) -> tuple[list[DraftTree], list[float]]:
    """Every row's tree, level by level: rows sharing a draft cache batch their draft
    forwards, one per depth (``draft_s``: the phase's time, shared by the rows)."""
    t0 = time.perf_counter()
    trees = run_levels([row.drafter.draft(row.policy, run.mode.child_rule, row.rng) for row in rows])
    return trees, [time.perf_counter() - t0] * len(rows)


def commit(
    rows: Sequence[Row],
    trees: Sequence[DraftTree],
    verdicts: Sequence[Verdict],
    news: Sequence[list[int]],
    finished: Sequence[bool],
    verifier: Verifier,
) -> float:
    """The one place a step's verdicts change state: the target's cache keeps every unfinished
    row's accepted path, each drafter commits its path and next token, each policy observes
    the accepted length, each row's output grows.  Returns the drafters' commit seconds
    (draft-side time, added to ``draft_s``)."""
    verifier.commit([None if fin else v.path for v, fin in zip(verdicts, finished)])
    t0 = time.perf_counter()
    for row, tree, v in zip(rows, trees, verdicts):
        row.drafter.commit(tree, v.path, v.next_token)
    commit_s = time.perf_counter() - t0
    for row, tree, v, new in zip(rows, trees, verdicts, news):
        row.policy.observe(len(v.path), tree.size)
        row.out += new
    return commit_s


def analyse(
    rows: Sequence[Row], trees: Sequence[DraftTree], ps: Sequence[TargetRows], left: Sequence[int], run: Decoding
) -> None:
    """Off the decode's clock (its seconds go to ``Row.analysis_s``): each step record's exact
    law (``Decoding.measure_shift``) and each paired mode's verdict on the same tree and
    target rows, with its own record."""
    t0 = time.perf_counter()
    for row, tree, p, n in zip(rows, trees, ps, left):
        rec = row.records[-1]
        if run.measure_shift:
            measure_shift(rec, tree, p, run.mode, run.params)
        for (mode, params), g, recs in zip(run.paired, row.gens, row.paired):
            pv = mode.checked_verdict(tree, p, g, params)
            recs.append(step_record(row.prompt_id, rec.step, tree, pv, appended(tree, pv, n, run.eos)))
            if run.measure_shift:
                measure_shift(recs[-1], tree, p, mode, params)
    spent = (time.perf_counter() - t0) / max(len(rows), 1)
    for row in rows:
        row.analysis_s += spent


def decode(
    prompts,
    new_drafter: Callable[[], DrafterProtocol],
    verifier: Verifier,
    new_policy: Callable[[], TreePolicy],
    run: Decoding,
    progress: Callable | None = None,
    batch_size: int = 1,
) -> list[PromptResult]:
    """Every prompt (objects with ``.id`` and ``.ids``) through the one loop, ``batch_size``
    at a time, each with a fresh drafter and policy and the prompt's own generator
    (``prompt_rng``), so a prompt's result does not depend on the batch.  ``progress``
    wraps the prompt iterator (e.g. a tqdm partial)."""
    items = list(enumerate(prompts))
    it = progress(items) if progress else items
    pending = ((Row(i, pr.id, new_drafter(), new_policy(), prompt_rng(run.seed, i)), pr.ids) for i, pr in it)
    return run_rows(iter(pending), verifier, run, batch_size)


def decode_prompt(
    prompt_id: str,
    prompt_ids: Sequence[int],
    drafter: DrafterProtocol,
    verifier: Verifier,
    policy: TreePolicy,
    run: Decoding,
    rng: torch.Generator,
) -> PromptResult:
    """One prompt with the given generator: the one loop at batch 1."""
    return run_rows(iter([(Row(0, prompt_id, drafter, policy, rng), prompt_ids)]), verifier, run)[0]


def plain(max_new_tokens: int, eos, temperature: float, top_p: float, seed: int = 0) -> Decoding:
    """How the target continues a prompt on its own: greedy at temperature 0, else sampled."""
    mode = get_mode("greedy" if float(temperature) == 0 else "naive")
    return Decoding(
        mode,
        mode.params({"temperature": float(temperature), "top_p": float(top_p)}),
        int(max_new_tokens),
        frozenset(int(e) for e in eos),
        int(seed),
        measure_shift=False,
    )


def continuation(
    model,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    eos,
    temperature: float = 0.0,
    top_p: float = 1.0,
    rng: torch.Generator | None = None,
) -> list[int]:
    """The target's own continuation: greedy at temperature 0, else sampled with
    ``rng`` at the temperature / top-p: the one loop with ``tree=none``."""
    run = plain(max_new_tokens, eos, temperature, top_p)
    rng = rng if rng is not None else torch.Generator().manual_seed(0)
    return decode_prompt(
        "c",
        prompt_ids,
        Drafter(),
        LiveVerifier(model, float(temperature), float(top_p)),
        make_policy("none", 0),
        run,
        rng,
    ).tokens


def continuations(
    model,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    eos,
    temperature: float = 0.0,
    top_p: float = 1.0,
    seed: int = 0,
    batch_size: int = 1,
    progress: Callable | None = None,
) -> list[list[int]]:
    """The target's own continuations of many prompts, ``batch_size`` per forward (left
    padding, per-row EOS and length limit): the one loop with ``tree=none``.  Sampled
    at temperature > 0 with prompt i's generator ``prompt_rng(seed, i)``.  In float32 a
    batched greedy continuation can differ from the batch-1 one at exact near-ties."""
    run = plain(max_new_tokens, eos, temperature, top_p, seed)
    items = [SimpleNamespace(id=str(i), ids=list(ids)) for i, ids in enumerate(prompts)]
    done = decode(
        items,
        Drafter,
        LiveVerifier(model, float(temperature), float(top_p)),
        lambda: make_policy("none", 0),
        run,
        progress,
        batch_size,
    )
    return [d.tokens for d in done]


def accept_histogram(records: Sequence[StepRecord]) -> list[int]:
    """Count of steps by accepted length: index i = steps that accepted i tokens."""
    counts = Counter(r.accepted for r in records)
    return [counts.get(i, 0) for i in range(max(counts, default=-1) + 1)]


__all__ = [
    "Decoding",
    "decode",
    "decode_prompt",
    "run_rows",
    "continuation",
    "continuations",
    "prompt_rng",
    "prompt_seed",
    "truncate",
    "paired_generators",
    "appended",
    "accept_histogram",
]
