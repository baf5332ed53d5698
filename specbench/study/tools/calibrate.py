"""`python -m specbench.study.tools.calibrate [--ranks K] [--out CSV] [hydra overrides]`

Measures Sequoia's *acceptance vector* for one pair / dataset / verify mode:
p_accept[k] = probability that, at an accepted node, the child of sibling
rank k is the one the verifier accepts (Sequoia's ``test_accept``).  The
overrides are the study's own (``conf/config.yaml``), e.g.

    flock /tmp/specbench-real.lock python -m specbench.study.tools.calibrate \
        pair=qwen_coder dataset=humaneval dataset.limit=8 max_new_tokens=64 verify=greedy

For sampling modes, per prompt, the target generates its continuation (``engine.continuations``,
``batch_size`` prompts per forward: sampled at the verify temperature/top-p with the prompt's
generator); one teacher-forced forward of each model over
prompt + continuation then gives the target and draft distributions at every
position.
* greedy: the accepted sibling is the draft rank of the target's greedy token
  (ties by token id), exactly -- taken from the replay engine's rank cache
  (``replay.cached_ranks_many``: computed once, shared with replay study jobs of
  the same pair / dataset / max_new_tokens / dtype).  A drafter that does not declare
  ``Drafter.teacher_forced`` (its drafts are not ``pair.draft``'s alone: ``tli``,
  ``layerskip``, ``ngram``, ``merged``) is measured by the one loop's drafted replay of
  a one-level tree of K children (``star_job``): the rank of the accepted child at each
  step's root, so at the positions a star decode visits (a position right after an
  accepted child is skipped), not at every position.
* other modes (``teacher_forced`` drafters only): at every position a one-level tree of
  K children is drawn the way that mode's drafts are (``children`` meta: top-k / sampling
  with or without replacement) and the mode itself verifies it; the recorded rank is
  the accepted child's position among its siblings (the order in which a tree
  stores them, which is what a static shape's rank paths address).
n = the number of positions measured; ranks with no acceptance get 0.

Calibration prompts are the dataset's LAST ``max(dataset.limit, MIN_PROMPTS)`` prompts (16 at
least: a vector from fewer ranks no Sequoia row); a study scores its first ones, and a calibration
that would take any of the first ``n_prompts`` a summary.csv row of the dataset scored (beside ``--out``) is
refused in one line before a model loads (the report checks each row's own prompts again). They are
recorded in the column ``prompt_ids`` (``;``-joined).

Writes results/acceptance_vector.csv (columns pair, pair_id, dataset, verify,
temperature, rank, p_accept, n, prompt_ids) atomically, replacing the rows of the same
(pair_id, dataset, verify, temperature): a pair is its draft + target content
(``identity.pair_id``), its config name only a label.  ``tree=sequoia`` reads
the rows of its own job's pair_id.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tqdm import tqdm

from ...core.args import Parser, number, refuse
from ...core.sampling import choose_children, probs
from ...core.tree import DraftTree
from ...drafting.drafters import DRAFTERS
from ...engine.loop import continuations, prompt_seed
from ...inputs.models import eos_ids
from ...results.files import read_vector
from ...results.upsert import read_text, replace_rows, upsert
from ...verify.modespec import ModeSpec
from ..job import checks, identity
from ..job.argv import check_out
from ..job.context import context
from ..job.launch import checked_job

ROOT = Path(__file__).resolve().parents[3]
COLUMNS = ["pair", "pair_id", "dataset", "verify", "temperature", "rank", "p_accept", "n", "prompt_ids"]
KEY = ("pair_id", "dataset", "verify", "temperature")  # a vector's identity; pair is its label


@torch.inference_mode()
def position_logits(model, prompt_ids, cont) -> torch.Tensor:
    """Logits [len(cont), V] predicting each continuation token (teacher forcing)."""
    ids = torch.tensor([list(prompt_ids) + list(cont)], device=model.device)
    out = model(input_ids=ids, use_cache=False).logits[0].float()
    return out[len(prompt_ids) - 1 : len(prompt_ids) - 1 + len(cont)]


def star_trial(
    mode: ModeSpec,
    params: Mapping[str, Any],
    k: int,
    root: int,
    p_row: torch.Tensor,
    q_row: torch.Tensor,
    rng: torch.Generator,
) -> int | None:
    """Draw k children of one node as the mode's drafts would, verify; the
    accepted child's sibling position, or None."""
    toks, ranks = choose_children(q_row, k, mode.child_rule, rng)
    v = p_row.shape[-1]
    q = torch.zeros(k + 1, v)
    q[0] = q_row
    tree = DraftTree(
        parents=[-1] + [0] * k,
        tokens=torch.tensor([root] + list(toks)),
        ranks=[0] + list(ranks),
        q=q,
        slots=[-1] * (k + 1),
        child_rule=mode.child_rule,
    )
    p = p_row.expand(k + 1, v).clone()
    verdict = mode.checked_verdict(tree, p, rng, params)  # tree.q is q
    return verdict.path[0] - 1 if verdict.path else None


def measure(job, ident, pair, prompts, ranks: int, eos) -> tuple[list[float], int]:
    ctx = context(job)
    mode, params = ctx.plan.mode, ctx.plan.params
    temp, top_p = params["temperature"], params["top_p"]
    bar = partial(tqdm, desc=f"calibrate {pair.name}/{mode.name}", disable=not job.progress)
    if mode.name == "greedy" and not DRAFTERS.get(job.pair.drafter).teacher_forced:
        got = [
            [int(r.accept_path.split(".")[0]) if r.accepted else None for r in res.records]
            for res in context(star_job(job, ranks)).decode(pair, prompts, "replay", ident)
        ]
    elif mode.name == "greedy":  # the replay engine's (cached) ranks: exact for greedy
        got = [[r if r < ranks else None for r in rk] for rk, _ in ctx.draft_ranks(pair, prompts, ident, eos, bar)]
    else:
        conts = continuations(
            pair.target,
            [pr.ids for pr in prompts],
            job.max_new_tokens,
            eos,
            temp,
            top_p,
            job.seed,
            job.continuation_batch,
            bar,
        )
        got = [
            star_ranks(mode, params, pair, pr.ids, cont, ranks, trial_rng(job.seed, i))
            for i, (pr, cont) in enumerate(zip(prompts, conts))
            if cont
        ]
    n = sum(map(len, got))
    counts = Counter(r for g in got for r in g if r is not None)
    if n == 0:
        raise ValueError("calibrate: no positions measured (empty continuations): raise max_new_tokens")
    return [counts.get(k, 0) / n for k in range(ranks)], n


def star_job(job, ranks: int):
    """The job with a one-level tree of ``ranks`` children (rank paths [0] .. [ranks-1])."""
    star = replace(job.tree, name="paths", budget=ranks, params={"paths": [[k] for k in range(ranks)]})
    return replace(job, tree=star, engine="replay")


def trial_rng(seed: int, i: int) -> torch.Generator:
    """Prompt i's generator for the star trials: a stream apart from its continuation's
    (``prompt_rng``), which the batched continuations consume on their own."""
    return torch.Generator().manual_seed(prompt_seed(seed, i) + 2**40)


def star_ranks(
    mode: ModeSpec, params: Mapping[str, Any], pair, prompt_ids, cont, ranks: int, rng: torch.Generator
) -> list[int | None]:
    """A one-level tree of ``ranks`` children verified at every position of ``cont``."""
    temp, dtemp, top_p = params["temperature"], params["draft_temperature"], params["top_p"]
    dlog = position_logits(pair.draft, prompt_ids, cont)
    tlog = position_logits(pair.target, prompt_ids, cont)
    roots = [prompt_ids[-1]] + cont[:-1]
    return [
        star_trial(mode, params, ranks, roots[j], probs(tlog[j], temp, top_p), probs(dlog[j], dtemp, top_p), rng)
        for j in range(len(cont))
    ]


def write_vector(path: Path, key: dict, vector: list[float], n: int, prompt_ids: str = "") -> None:
    """Replace the rows of `key` (its pair_id, dataset, verify, temperature) in the CSV (``results.upsert``:
    under the folder's lock, journalled), every cell kept as its text; rows written before pair ids (no
    pair_id) are dropped."""
    new = pd.DataFrame(
        [{**key, "rank": k, "p_accept": f"{p:.6f}", "n": n, "prompt_ids": prompt_ids} for k, p in enumerate(vector)]
    )

    def merge(old: pd.DataFrame | None) -> pd.DataFrame:
        if old is not None and len(old):
            old = old[old.get("pair_id", pd.Series("", index=old.index)) != ""]
        return replace_rows(old, new, list(KEY))

    def writer(df: pd.DataFrame):
        def write(tmp: str) -> None:
            with open(tmp, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=COLUMNS, restval="")
                w.writeheader()
                w.writerows(df.astype(object).where(df.notna(), "").to_dict("records"))

        return write

    upsert(path, merge, read_text, writer)


MIN_PROMPTS = 16  # a vector from fewer calibration prompts ranks no Sequoia row (report.tables.MIN_CALIB)


def calibration_prompts(ctx) -> list:
    """The dataset's last ``max(dataset.limit, MIN_PROMPTS)`` prompts (all of them without a limit)."""
    every = ctx.prompts(ctx.tokenizer(), whole=True)
    limit = ctx.job.dataset.limit
    return every[-max(limit, MIN_PROMPTS) :] if limit else every


def scored_count(summary: Path, dataset: str) -> int:
    """The most prompts any study row of ``dataset`` scored (its first ones), from a summary.csv; 0 without one."""
    if not summary.exists():
        return 0
    with open(summary, newline="") as f:
        return max((int(r.get("n_prompts") or 0) for r in csv.DictReader(f) if r.get("dataset") == dataset), default=0)


def check_disjoint(ids: list[str], calib: list[str], scored: int) -> None:
    """Refuse calibration prompts that a study scores (the dataset's first ``scored`` of ``ids``), in one line."""
    shared = sorted(set(calib) & set(ids[:scored]))
    if shared:
        raise ValueError(
            f"calibration prompts {shared[0]}.. ({len(shared)}) are among the first {scored} the study scores "
            f"(results/summary.csv): lower dataset.limit below {len(ids) - scored + 1}"
        )


def main(argv=None) -> None:
    ap = Parser(prog="python -m specbench.study.tools.calibrate", description=__doc__.split("\n\n")[1])
    ap.add_argument("--ranks", type=number(int, 1, 1024), default=16, help="sibling ranks measured (K)")
    ap.add_argument("--out", default="results/acceptance_vector.csv", help="CSV (relative: repo root)")
    args, overrides = ap.parse_known_args(argv)

    out = Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out
    job = checked_job(overrides)  # as run checks it: one line, no model yet
    check_out(str(out), "--out")
    try:
        if not DRAFTERS.get(job.pair.drafter).teacher_forced and job.verify.name != "greedy":
            raise ValueError(
                f"pair={job.pair.name} drafts with '{job.pair.drafter}': calibrate it with "
                "verify=greedy (sampling modes need a draft model of the target's vocabulary)"
            )
        if out.exists():  # its rows are kept: a cut or garbled one is refused before the measuring
            read_vector(str(out), "--out")
        ident = identity.job_identity(job)
        ctx = context(job)
        prompts = calibration_prompts(ctx)
        every = [pr.id for pr in ctx.prompts(ctx.tokenizer(), whole=True)]
        check_disjoint(every, [pr.id for pr in prompts], scored_count(out.parent / "summary.csv", job.dataset.name))
        checks.check_context(job, ctx.positions(), prompts)  # lengths vs the models' positions: no weights yet
        pair = ctx.load_pair()
        vector, n = measure(job, ident, pair, prompts, args.ranks, eos_ids(pair))
    except (ValueError, KeyError, FileNotFoundError) as e:  # a bad input: one line, exit 2
        refuse((str(e).strip().splitlines() or [type(e).__name__])[0])
    key = {
        "pair": job.pair.name,
        "pair_id": identity.pair_id(ident, job.pair.drafter, job.pair.drafter_params),
        "dataset": job.dataset.name,
        "verify": job.verify.name,
        "temperature": job.verify.temperature,
    }
    write_vector(out, key, vector, n, ";".join(pr.id for pr in prompts))
    print(f"specbench: acceptance vector ({n} positions) -> {out}")
    print("  " + " ".join(f"{k}:{p:.3f}" for k, p in enumerate(vector)))


if __name__ == "__main__":
    main()
