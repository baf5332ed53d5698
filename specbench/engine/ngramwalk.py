"""Replay of n-gram drafting along a greedy continuation: llama.cpp's ``ngram-simple`` and specbench's own
``ngram`` chain, per step the tokens drafted and accepted (#84 item 4; pure, over token ids).

An n-gram draft depends only on the history (prompt + committed tokens), and along the target's greedy
continuation c the history at every step is c's own, so the replay is exact: no model is run.

llama.cpp's ``ngram-simple`` (``common_ngram_simple_draft``, common/ngram-map.cpp:49-112 of the vendored
llama.cpp 0.3.36; called from common/speculative.cpp:1777-1790 with the slot's tokens and its last sampled
token, tools/server/server-context.cpp:3005-3013), for lookup length N (``--spec-ngram-simple-size-n``,
default 12) and draft length M (``--spec-ngram-simple-size-m``, default 48): with T the history less its last
token s (``sampled``) and L = len(T),

  * no draft unless L > N + M + 1;
  * the pattern is the history's last N tokens (T's last N - 1, then s);
  * it is looked up in T at start positions L - N - 1 down to 1, most recent first, the first match taken
    (position 0 is never matched, nor the occurrence starting at L - N, one before the current one);
  * the draft is the (at most M) tokens of T that follow the match; none where fewer than N follow it, so
    M < N never drafts;
  * ``--spec-ngram-simple-min-hits`` is not read by this type (only ``ngram-map-*`` count hits).

The server truncates every draft to ``get_n_draft_max`` (server-context.cpp:453-472): n_predict less the
tokens generated, less one, so ``walk(..., start=1, reserve=1)``: no draft before the first token (it comes
from the prompt's forward) and a draft leaves one token to predict, as ``replay.pmin_walk``'s bounds.

specbench's ``ngram`` drafter under ``tree=chain`` of budget B (``drafting.ngram``: n = 4..1 longest first,
most recent occurrence first, the chain follows the best match, extended by later matches that share it)
is ``chain_draft``; the same walk gives its steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..drafting.ngram import ngram_trie

Draft = Callable[[Sequence[int]], list[int]]


def simple_draft(history: Sequence[int], size_n: int, size_m: int) -> list[int]:
    """llama.cpp's ``ngram-simple`` draft for ``history`` (prompt + committed tokens; module docstring)."""
    tokens, sampled = history[:-1], history[-1]
    cur = len(tokens)
    if cur <= size_n + size_m + 1:
        return []
    pattern = [*tokens[cur - size_n + 1 :], sampled]
    match = next((j for j in range(cur - size_n - 1, 0, -1) if list(tokens[j : j + size_n]) == pattern), 0)
    if not match:
        return []
    copy = min(size_m, cur - (match + size_n))
    return [] if copy < size_n else list(tokens[match + size_n : match + size_n + copy])


def chain_draft(history: Sequence[int], budget: int) -> list[int]:
    """specbench's ``ngram`` drafter's ``tree=chain`` of ``budget`` nodes: the chain's tokens, root excluded."""
    shape = [(0,) * d for d in range(1, budget + 1)]
    return [int(t) for t in ngram_trie(history, budget, budget, shape=shape).to_tree().tokens[1:]]


def walk(prompt: Sequence[int], cont: Sequence[int], draft: Draft, start: int = 1, reserve: int = 1):
    """The steps of a greedy decode of ``cont`` after ``prompt`` drafting ``draft(history)`` at each step: per
    step (tokens drafted, tokens accepted).  A step with t tokens committed drafts at most len(cont) - t -
    ``reserve`` tokens (none before ``start``), accepts while they equal cont's and emits one more."""
    h, n, t, steps = [*prompt, *cont], len(cont), 0, []
    while t < n:
        room = 0 if t < start else n - t - reserve
        d = draft(h[: len(prompt) + t])[: max(room, 0)]
        a = 0
        while a < len(d) and t + a < n and d[a] == cont[t + a]:
            a += 1
        emitted = min(a + 1, n - t)
        steps.append((len(d), min(a, emitted)))
        t += emitted
    return steps


def totals(steps) -> dict:
    """A walk's counts as acceptance_llamacpp.csv's columns: steps that drafted, tokens drafted, accepted."""
    return {"drafts": sum(d > 0 for d, _ in steps), "drafted": sum(d for d, _ in steps),
            "accepted": sum(a for _, a in steps)}  # fmt: skip
