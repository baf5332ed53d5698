"""bf16 replay against bf16 live decoding, on the same HumanEval prompts.

    .venv/bin/python scripts/bench_bf16_replay.py --prompts 16 --tokens 128
    .venv/bin/python scripts/bench_bf16_replay.py --pair local --pair-override draft.path=D \
        --pair-override target.path=T --dataset smoke --dtype float32 --prompts 2 --tokens 4 \
        --batch 2 --trees chain/2 --out /tmp/x.csv               # a tiny local pair, seconds

Replay defines the target's greedy output as its BATCHED continuation c (one batch of
all prompts, ``engine.loop.continuations``).  Live bf16 decoding forwards trees, whose
kernels round differently, so its tokens can leave c.  Per tree (--trees), on the same
prompts: how many live decodes diverge from c, where (first divergent position), the
target's logit margin there (top-1 minus top-2 after the common prefix: a near-tie
means rounding, not a bug), and tokens_per_step of replay (drafted replay against c),
of rank replay (one teacher-forced draft pass, where the drafter and shape declare it:
what the reference grids run) and of live, with the paired differences (bootstrap 95% CI
over prompts).  Writes --out (results/bf16_replay_divergence.csv; rows of other pairs and
trees are kept) and prints the summary LAST.
"""

from __future__ import annotations

import argparse
import sys
from types import SimpleNamespace

import pandas as pd
import torch

from specbench import api
from specbench.drafting.drafters import DRAFTERS
from specbench.engine import replay
from specbench.engine.loop import continuations
from specbench.engine.verifiers import ContinuationVerifier
from specbench.inputs import data
from specbench.results.upsert import replace_rows, upsert
from specbench.study.job import scriptargs
from specbench.trees.policies import make_policy, policy_spec


def first_divergence(a, b) -> int | None:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


@torch.inference_mode()
def margin(model, context) -> float:
    """The target's top-1 minus top-2 logit after ``context``."""
    logits = model(input_ids=torch.tensor([list(context)], device=model.device), use_cache=False).logits[0, -1]
    top = logits.float().topk(2).values
    return float(top[0] - top[1])


def replayed(pair, items, conts, tree: dict, n: int, batch: int):
    """Drafted replay of every prompt against its continuation (the replay engine's verifier),
    ``batch`` prompts drafting in one forward (a row's result does not depend on it)."""
    plan = api.plan(tree, {"name": "greedy", "temperature": 0.0}, n, measure_shift=False, batch_size=batch)
    table = {tuple(it.ids): c for it, c in zip(items, conts)}
    verifier = ContinuationVerifier(lambda ids: table[tuple(ids)], pair.target.get_output_embeddings().weight.shape[0])
    return plan.run(pair, items, verifier)


def rank_replayed(pair, items, conts, tree: dict) -> list | None:
    """Rank replay of every prompt (what the reference grids use for static shapes over a
    drafter that declares it): one teacher-forced bf16 draft pass, then a walk over the ranks;
    None where the drafter or the shape does not replay by ranks."""
    cls = DRAFTERS.get(pair.drafter)
    if not (cls.rank_replay and policy_spec(tree["name"]).rank_replayable):
        return None
    vocab = cls.rank_vocab(pair)
    ranks = replay.draft_ranks_many(cls.rank_model(pair), [it.ids for it in items], conts, 1.0, vocab=vocab)
    make = lambda: make_policy(tree["name"], tree["budget"])  # noqa: E731
    return [replay.replay_prompt(it.id, r, make(), replay.widths(vocab, c)) for it, r, c in zip(items, ranks, conts)]


def tps(result) -> float:
    records = getattr(result, "records", result)  # a PromptResult or a list of step records
    return sum(r.emitted for r in records) / max(len(records), 1)


def paired_ci(diff: list[float], draws: int = 2000) -> tuple[float, float]:
    g = torch.Generator().manual_seed(0)
    d = torch.tensor(diff, dtype=torch.float64)
    means = d[torch.randint(0, len(d), (draws, len(d)), generator=g)].mean(1)
    return float(means.quantile(0.025)), float(means.quantile(0.975))


def tree_row(pair, args, prompts, conts, spec: str) -> dict:
    """One --trees entry: live decodes against the batched continuations, and drafted replay."""
    items = [SimpleNamespace(id=p.id, ids=p.ids) for p in prompts]
    name, budget = spec.split("/")
    tree = {"name": name, "budget": int(budget)}
    live = api.decode_prompts(
        pair, items, tree, {"name": "greedy"}, args.tokens, measure_shift=False, batch_size=args.batch
    )
    rep = replayed(pair, items, conts, tree, args.tokens, args.batch)
    where = [first_divergence(lv.tokens, c) for lv, c in zip(live, conts)]
    margins = [margin(pair.target, p.ids + c[:w]) for p, c, w in zip(prompts, conts, where) if w is not None]
    diff = [tps(lv) - tps(r) for lv, r in zip(live, rep)]
    lo, hi = paired_ci(diff)
    hit = [w for w in where if w is not None]
    ranked = rank_replayed(pair, items, conts, tree)
    by_rank = [tps(lv) - tps(r) for lv, r in zip(live, ranked)] if ranked else []
    rank_lo, rank_hi = paired_ci(by_rank) if by_rank else (float("nan"), float("nan"))
    return {
        "pair": pair.name,
        "dtype": args.dtype,
        "tree": name,
        "budget": int(budget),
        "prompts": len(prompts),
        "max_new_tokens": args.tokens,
        "live_batch": args.batch,
        "diverged": len(hit),
        "first_divergence_mean": sum(hit) / len(hit) if hit else float("nan"),
        "margin_median": float(torch.tensor(margins).median()) if margins else float("nan"),
        "margin_max": max(margins) if margins else float("nan"),
        "tokens_per_step_live": sum(map(tps, live)) / len(live),
        "tokens_per_step_replay": sum(map(tps, rep)) / len(rep),
        "diff_live_minus_replay": sum(diff) / len(diff),
        "diff_ci_lo": lo,
        "diff_ci_hi": hi,
        "tokens_per_step_rank_replay": sum(map(tps, ranked)) / len(ranked) if ranked else float("nan"),
        "diff_live_minus_rank_replay": sum(by_rank) / len(by_rank) if by_rank else float("nan"),
        "rank_diff_ci_lo": rank_lo,
        "rank_diff_ci_hi": rank_hi,
    }


def kept_rows(old: pd.DataFrame | None, new: pd.DataFrame) -> pd.DataFrame:
    """The rows already in the table (another pair's, another tree's) with this run's replacing
    those of the same pair, dtype, tree and budget: a run never drops what another measured."""
    return replace_rows(old, new, ["pair", "dtype", "tree", "budget"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    scriptargs.add_pair_args(ap)
    scriptargs.add_dataset_arg(ap)
    ap.add_argument("--dtype", default="bfloat16", help="float32: live equals replay (a check, not the point)")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8, help="live batch size")
    ap.add_argument("--trees", nargs="+", default=["chain/4", "binary/16"])
    ap.add_argument("--out", default="results/bf16_replay_divergence.csv")
    args = ap.parse_args(argv)
    pair = scriptargs.load_pair(args, args.dtype)
    prompts = data.load_prompts({"name": args.dataset, "limit": args.prompts}, pair.tokenizer)
    conts = continuations(
        pair.target, [p.ids for p in prompts], args.tokens, api.eos_ids(pair), batch_size=len(prompts)
    )
    rows = [tree_row(pair, args, prompts, conts, spec) for spec in args.trees]
    new = pd.DataFrame(rows)
    df = upsert(args.out, lambda old: kept_rows(old, new), writer=lambda t: lambda tmp: t.to_csv(tmp, index=False))
    print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    for r in rows:
        print(
            f"{r['tree']}/{r['budget']}: {r['diverged']}/{r['prompts']} live {args.dtype} decodes leave the batched "
            f"continuation (mean first position {r['first_divergence_mean']:.1f}, median margin "
            f"{r['margin_median']:.3f}); tokens_per_step live - replay = {r['diff_live_minus_replay']:+.3f} "
            f"[{r['diff_ci_lo']:+.3f}, {r['diff_ci_hi']:+.3f}]; live - rank replay = "
            f"{r['diff_live_minus_rank_replay']:+.3f} [{r['rank_diff_ci_lo']:+.3f}, {r['rank_diff_ci_hi']:+.3f}]"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
