"""The live engine: real speculative decoding, one target forward per step.

    draft a tree -> score every node in ONE target forward -> verify -> keep the
    accepted path in both KV caches -> the bonus token becomes the next root
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import torch

from . import distshift, kv
from .drafters import Drafter, prefill
from .sampling import probs
from .trees import DraftTree, TreePlan
from .verify import MODES


@dataclass
class StepRecord:
    prompt_id: str
    step: int
    tree_size: int
    tree_depth: int
    accepted: int          # draft tokens accepted AND emitted (bonus excluded)
    emitted: int           # tokens appended this step (accepted + bonus, less at EOS/limit)
    accept_path: str       # sibling ranks of the accepted nodes, e.g. "0.0.1"
    draft_s: float = float("nan")
    verify_s: float = float("nan")
    first_token_tv: float = float("nan")
    expected_accepted: float = float("nan")


class TargetVerifier:
    """The target model's side: its KV cache and the one tree forward per step."""

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


def prompt_seed(seed: int, i: int) -> int:
    """The random seed of the i-th prompt of a job."""
    return int(seed) * 100_003 + i


def prompt_rng(seed: int, i: int) -> torch.Generator:
    """The generator of the i-th prompt of a job (live and replay engines alike)."""
    return torch.Generator().manual_seed(prompt_seed(seed, i))


def truncate(tokens: Sequence[int], remaining: int, eos: set[int]) -> list[int]:
    """The tokens actually appended: up to the length limit and the first EOS."""
    out = []
    for t in tokens[:remaining]:
        out.append(int(t))
        if t in eos:
            break
    return out


def decode_prompt(prompt_id: str, prompt_ids: Sequence[int], drafter: Drafter,
                  target: TargetVerifier, plan: TreePlan, verify_cfg, max_new_tokens: int,
                  eos: set[int], rng: torch.Generator,
                  measure_shift: bool = True) -> tuple[list[StepRecord], list[int]]:
    """Speculatively decode one prompt.  Returns the step records and the new tokens.

    ``measure_shift`` computes the exact first_token_tv / expected_accepted of
    every step (analysis work outside draft_s/verify_s; off for pure speed runs)."""
    mode = MODES.get(verify_cfg.name)
    children = MODES.meta(verify_cfg.name)["children"]
    drafter.reset(prompt_ids)
    target.reset(prompt_ids)
    out: list[int] = []
    records: list[StepRecord] = []
    while len(out) < max_new_tokens and not (out and out[-1] in eos):
        t0 = time.perf_counter()
        tree = drafter.draft(plan, children, rng)
        t1 = time.perf_counter()
        p = target.score(tree)
        verdict = mode(tree, p, tree.q, rng, verify_cfg)
        proposal = [int(tree.tokens[n]) for n in verdict.path] + [verdict.next_token]
        new = truncate(proposal, max_new_tokens - len(out), eos)
        accepted = min(len(verdict.path), len(new))
        target.commit(verdict.path)
        drafter.commit(tree, verdict.path, verdict.next_token)
        t2 = time.perf_counter()
        rec = StepRecord(
            prompt_id=prompt_id, step=len(records), tree_size=tree.size, tree_depth=tree.depth,
            accepted=accepted, emitted=len(new), accept_path=tree.rank_path(verdict.path[:accepted]),
            draft_s=t1 - t0, verify_s=t2 - t1)
        if measure_shift:
            rec.first_token_tv = distshift.first_token_tv(verify_cfg.name, tree, p, tree.q, verify_cfg)
            # capped like `accepted` at the tokens emitted (EOS / length limit): exact for
            # greedy, a bound on a sampling mode's last step
            rec.expected_accepted = min(float(len(new)), distshift.expected_accepted(
                verify_cfg.name, tree, p, tree.q, verify_cfg))
        records.append(rec)
        out += new
        plan.observe(len(verdict.path), tree.size)
    return records, out


def accept_histogram(records: Sequence[StepRecord]) -> list[int]:
    """Count of steps by accepted length: index i = steps that accepted i tokens."""
    counts = Counter(r.accepted for r in records)
    return [counts.get(i, 0) for i in range(max(counts, default=-1) + 1)]
