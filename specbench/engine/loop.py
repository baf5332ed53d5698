"""The engine: ONE decode loop, with the verifier and drafter plugged in.

Per step (``decode_prompt``)::

    tree    = drafter.draft(policy, mode.child_rule, rng)    # drafting + trees
    p       = verifier.score(tree)                           # target rows after every node
    verdict = mode.verdict(tree, p, tree.q, rng, params)     # verify: accepted path + next token
    emitted = truncate(path tokens + next token)             # EOS / max_new_tokens
    record a StepRecord; verifier.commit(path); drafter.commit(tree, path, next); policy.observe(...)

Verifiers (same protocol ``reset / score / commit``):

* ``LiveVerifier``: the target model; one forward over prefix cache + tree per
  step (tree mask and position ids from ``trees``), keeps only the accepted
  path's KV.  Sampling modes and wall-clock figures need it.
* ``ContinuationVerifier``: replay.  Under greedy verification the output is the
  target's own greedy continuation c, so the target's argmax after a node is
  known wherever the node lies on the tree path spelling c; p is one-hot there
  (rows off that path are never read by greedy).  No target forward.

Paired verdicts (``Decoding.paired``): the same drafted tree and the same target
rows are also verified by each extra mode, with its own generator; the decode
follows the primary mode only (see ``paired_generators``).

``continuation`` (the target's own continuation of a prompt: greedy or sampled)
is this same loop with ``tree=none``; replay, calibration and costs use it.
``decode`` runs a prompt set through the loop: the public entry point.
Definitions (accepted / emitted / bonus) are in ``StepRecord``.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from ..verify import distshift as law
from ..core import kv
from ..drafting.drafters import Drafter, prefill
from ..trees.policies import make_policy
from ..core.sampling import probs
from ..core.tree import DraftTree
from ..verify.modes import get_mode

NAN = float("nan")


@dataclass
class StepRecord:
    """One decode step of one prompt (a row of steps.csv)."""
    prompt_id: str
    step: int
    tree_size: int         # draft tokens N verified this step (the root is not counted)
    tree_depth: int
    accepted: int          # draft tokens accepted AND emitted (bonus / correction token excluded)
    emitted: int           # tokens appended this step (accepted + 1, less only at EOS/limit)
    accept_path: str       # sibling ranks of the accepted nodes, e.g. "0.0.1"
    path_children: str = ""  # children counts of the root and each accepted node, e.g. "2.2.1"
    draft_s: float = float("nan")
    verify_s: float = float("nan")
    first_token_tv: float = float("nan")
    expected_accepted: float = float("nan")


@dataclass
class PromptResult:
    prompt_id: str
    records: list[StepRecord]
    tokens: list[int]      # the new tokens, in order
    paired: list[list[StepRecord]] = field(default_factory=list)   # per ``Decoding.paired`` mode


@dataclass(frozen=True)
class Decoding:
    """What a job decodes with, besides drafter, verifier and tree policy."""
    mode: object                       # a verify mode spec (``verify.get_mode``)
    params: dict                       # ``mode.params(...)``: temperature, top_p, ...
    max_new_tokens: int
    eos: frozenset = frozenset()
    seed: int = 0
    measure_shift: bool = True         # exact first_token_tv / expected_accepted per step
    paired: tuple = ()                 # ((mode spec, params), ...) verified on the same trees


class LiveVerifier:
    """The target model's side: its KV cache and the one tree forward per step."""
    timed = True                       # verify_s is the target's time (NaN for replay)

    def __init__(self, model, temperature: float = 0.0, top_p: float = 1.0):
        self.model, self.temperature, self.top_p = model, temperature, top_p

    def reset(self, prompt_ids: Sequence[int]) -> None:
        self.cache, self.past_len = prefill(self.model, prompt_ids)

    def score(self, tree: DraftTree) -> torch.Tensor:
        """Target distributions after every node [N+1, V], in one forward."""
        logits = kv.forward_nodes(self.model, self.cache, self.past_len, tree.parents,
                                  tree.tokens.tolist(), 0, len(tree.parents))
        return probs(logits, self.temperature, self.top_p)

    def commit(self, path: Sequence[int]) -> None:
        self.past_len = kv.keep(self.cache, self.past_len, [0, *path])


class ContinuationVerifier:
    """Replay: the target's greedy continuation c stands in for the target."""
    timed = False

    def __init__(self, continuation_of: Callable[[Sequence[int]], list[int]], vocab_size: int):
        self.continuation_of, self.vocab_size = continuation_of, vocab_size

    def reset(self, prompt_ids: Sequence[int]) -> None:
        self.cont, self.t = list(self.continuation_of(prompt_ids)), 0

    def score(self, tree: DraftTree) -> torch.Tensor:
        """One-hot target rows along the tree path spelling c[t:] (zero rows elsewhere)."""
        rest = self.cont[self.t:]
        nodes = [0, *follow(tree, rest)]
        p = torch.zeros(len(tree.parents), self.vocab_size)
        for j, node in enumerate(nodes[:len(rest)]):
            p[node, rest[j]] = 1.0
        return p

    def commit(self, path: Sequence[int]) -> None:
        self.t += len(path) + 1


def follow(tree: DraftTree, tokens: Sequence[int]) -> list[int]:
    """Node ids of the longest root path of tree spelling a prefix of tokens
    (the first such child at each level): what greedy accepts when the target's
    continuation is tokens."""
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


PAIRED_SEED_OFFSET = 0x9E3779B9 << 20     # paired generators never share the drafting stream


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


def step_record(prompt_id: str, step: int, tree: DraftTree, p: torch.Tensor, verdict, new: list[int],
                mode, params: dict, measure_shift: bool) -> StepRecord:
    """The record of one verdict on one tree (timing left NaN); ``new`` = tokens appended."""
    accepted = min(len(verdict.path), len(new))
    path = verdict.path[:accepted]
    rec = StepRecord(prompt_id=prompt_id, step=step, tree_size=tree.size, tree_depth=tree.depth,
                     accepted=accepted, emitted=len(new), accept_path=tree.rank_path(path),
                     path_children=".".join(str(len(tree.children(n))) for n in [0, *path]))
    if measure_shift:
        rec.first_token_tv = law.first_token_tv(mode, tree, p, tree.q, params)
        # capped like `accepted` at the tokens emitted (EOS / length limit): exact for
        # greedy, a bound on a sampling mode's last step
        rec.expected_accepted = min(float(len(new)), law.expected_accepted(mode, tree, p, tree.q, params))
    return rec


def appended(tree: DraftTree, verdict, remaining: int, eos: frozenset) -> list[int]:
    """The tokens a verdict appends: its path's tokens and next token, truncated."""
    return truncate([int(tree.tokens[n]) for n in verdict.path] + [verdict.next_token], remaining, eos)


def decode_prompt(prompt_id: str, prompt_ids: Sequence[int], drafter: Drafter, verifier, policy,
                  run: Decoding, rng: torch.Generator) -> PromptResult:
    """Speculatively decode one prompt: the one loop (see the module docstring)."""
    drafter.reset(prompt_ids)
    verifier.reset(prompt_ids)
    out: list[int] = []
    records: list[StepRecord] = []
    gens, paired = paired_generators(rng, len(run.paired)), [[] for _ in run.paired]
    while len(out) < run.max_new_tokens and not (out and out[-1] in run.eos):
        t0 = time.perf_counter()
        tree = drafter.draft(policy, run.mode.child_rule, rng)
        t1 = time.perf_counter()
        p = verifier.score(tree)
        verdict = run.mode.verdict(tree, p, tree.q, rng, run.params)
        new = appended(tree, verdict, run.max_new_tokens - len(out), run.eos)
        verifier.commit(verdict.path)
        drafter.commit(tree, verdict.path, verdict.next_token)
        t2 = time.perf_counter()
        rec = step_record(prompt_id, len(records), tree, p, verdict, new, run.mode, run.params, run.measure_shift)
        rec.draft_s, rec.verify_s = t1 - t0, t2 - t1 if verifier.timed else NAN
        for (mode, params), g, recs in zip(run.paired, gens, paired):
            v = mode.verdict(tree, p, tree.q, g, params)
            recs.append(step_record(prompt_id, rec.step, tree, p, v, appended(tree, v, run.max_new_tokens - len(out),
                                    run.eos), mode, params, run.measure_shift))
        records.append(rec)
        out += new
        policy.observe(len(verdict.path), tree.size)
    return PromptResult(prompt_id, records, out, paired)


def decode(prompts, drafter: Drafter, verifier, new_policy: Callable[[], object], run: Decoding,
           progress: Callable | None = None) -> list[PromptResult]:
    """Every prompt (objects with ``.id`` and ``.ids``) through the one loop, with a
    fresh policy and the prompt's own generator each.  ``progress`` wraps the
    prompt iterator (e.g. a tqdm partial)."""
    items = list(enumerate(prompts))
    it = progress(items) if progress else items
    return [decode_prompt(pr.id, pr.ids, drafter, verifier, new_policy(), run, prompt_rng(run.seed, i))
            for i, pr in it]


def continuation(model, prompt_ids: Sequence[int], max_new_tokens: int, eos, temperature: float = 0.0,
                 top_p: float = 1.0, rng: torch.Generator | None = None) -> list[int]:
    """The target's own continuation: greedy at temperature 0, else sampled with
    ``rng`` at the temperature / top-p: the one loop with ``tree=none``."""
    mode = get_mode("greedy" if float(temperature) == 0 else "naive")
    run = Decoding(mode, mode.params({"temperature": float(temperature), "top_p": float(top_p)}), int(max_new_tokens),
                   frozenset(int(e) for e in eos), measure_shift=False)
    verifier = LiveVerifier(model, float(temperature), float(top_p))
    rng = rng if rng is not None else torch.Generator().manual_seed(0)
    return decode_prompt("c", prompt_ids, Drafter(), verifier, make_policy("none", 0), run, rng).tokens


def accept_histogram(records: Sequence[StepRecord]) -> list[int]:
    """Count of steps by accepted length: index i = steps that accepted i tokens."""
    counts = Counter(r.accepted for r in records)
    return [counts.get(i, 0) for i in range(max(counts, default=-1) + 1)]


__all__ = ["StepRecord", "PromptResult", "Decoding", "LiveVerifier", "ContinuationVerifier", "decode",
           "decode_prompt", "continuation", "prompt_rng", "prompt_seed", "truncate", "follow",
           "paired_generators", "step_record", "appended",
           "accept_histogram"]
