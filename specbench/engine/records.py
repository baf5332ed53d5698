"""What the engine's loop (``engine.loop``) records: ``StepRecord``, one decode step of one prompt (a row
of steps.csv, with the definitions of accepted / emitted), ``PromptResult``, one prompt's records and
tokens, ``step_record``, the record of one verdict on one tree, and ``measure_shift``, which adds the
exact ``first_token_tv`` / ``expected_accepted`` of ``verify.distshift`` (run outside the step's clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.tree import DraftTree
from ..verify import distshift as law
from ..verify.modespec import ModeParams, ModeSpec, TargetArgmax, TargetRows, Verdict


@dataclass
class StepRecord:
    """One decode step of one prompt (a row of steps.csv)."""

    prompt_id: str
    step: int
    tree_size: int  # draft tokens N verified this step (the root is not counted)
    tree_depth: int
    accepted: int  # draft tokens accepted AND emitted (bonus / correction token excluded)
    emitted: int  # tokens appended this step (accepted + 1, less only at EOS/limit)
    accept_path: str  # sibling ranks of the accepted nodes, e.g. "0.0.1"
    path_children: str = ""  # children counts of the root and each accepted node, e.g. "2.2.1"
    scored: str = ""  # draft-model tokens per draft forward this step (``DraftTree.scored``), e.g. "1.2.2"
    draft_s: float = float("nan")
    verify_s: float = float("nan")
    first_token_tv: float = float("nan")
    expected_accepted: float = float("nan")


@dataclass
class PromptResult:
    prompt_id: str
    records: list[StepRecord]
    tokens: list[int]  # the new tokens, in order
    paired: list[list[StepRecord]] = field(default_factory=list)  # per ``Decoding.paired`` mode
    analysis_s: float = 0.0  # seconds of exact-law analysis and paired verdicts: not decoding time


def step_record(prompt_id: str, step: int, tree: DraftTree, verdict: Verdict, new: list[int]) -> StepRecord:
    """The record of one verdict on one tree (timing and the law left NaN); ``new`` = tokens appended."""
    accepted = min(len(verdict.path), len(new))
    path = verdict.path[:accepted]
    return StepRecord(
        prompt_id=prompt_id,
        step=step,
        tree_size=tree.size,
        tree_depth=tree.depth,
        accepted=accepted,
        emitted=len(new),
        accept_path=tree.rank_path(path),
        path_children=".".join(str(len(tree.children(n))) for n in [0, *path]),
        scored=".".join(map(str, tree.scored)),
    )


def measure_shift(rec: StepRecord, tree: DraftTree, p: TargetRows, mode: ModeSpec, params: ModeParams) -> None:
    """Fill ``rec``'s exact ``first_token_tv`` and ``expected_accepted`` (``verify.distshift``)."""
    if mode.lossless_for and params.get("temperature", 1.0) == 0:
        # a lossless verdict at T = 0 (greedy) is the target's argmax: no shift, and its one
        # path is the expectation (what rank replay records; the law would say the same)
        rec.first_token_tv, rec.expected_accepted = 0.0, float(rec.accepted)
        return
    if isinstance(p, TargetArgmax):
        raise ValueError(f"verify={mode.name}: its exact law needs the target's distributions, not only its argmax")
    rec.first_token_tv = law.first_token_tv(mode, tree, p, tree.q, params)
    # capped like `accepted` at the tokens emitted (EOS / length limit): exact for
    # greedy, a bound on a sampling mode's last step
    rec.expected_accepted = min(float(rec.emitted), law.expected_accepted(mode, tree, p, tree.q, params))


__all__ = ["StepRecord", "PromptResult", "step_record", "measure_shift"]
