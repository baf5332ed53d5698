"""Batch-size effects on the real pair: the batched live engine and batched continuations.

    flock /tmp/specbench-real.lock .venv/bin/python scripts/bench_batch.py
    flock /tmp/specbench-real.lock .venv/bin/python scripts/bench_batch.py --cont-prompts 32 --cont-tokens 128
    .venv/bin/python scripts/bench_batch.py --pair local --pair-override draft.path=D \
        --pair-override target.path=T --dataset smoke --dtype float32 --prompts 4 --tokens 4 \
        --batches 1,4 --trees chain/4 --cont-prompts 2 --cont-tokens 4 \
        --divergence-out /tmp/x.csv                              # a tiny local pair, seconds

(specbench is imported from the editable install `bash scripts/setup.sh` makes; no sys.path edit.)

(1) bf16 (--dtype), live greedy, the same --prompts HumanEval (--dataset) prompts (optionally their last
    --prompt-tokens tokens): tokens/s (new tokens / wall
    seconds, prefill included) and tokens_per_step at B = --batches, for plain decoding
    (tree=none), chain/4 and binary/16 (the best tree of bench_live.py), or --trees.
(2) float32: the target's greedy continuations of --cont-prompts prompts x --cont-tokens
    tokens at batch 1 and at --cont-batch (default: all prompts in one batch); their
    speed, and where they differ (batched fp32 kernels round differently: at exact
    near-ties a batched continuation can take the other token): the first divergent
    position and the batch-1 target's logit margin (top-1 minus top-2) there.
Part 2 also writes its row to --divergence-out (results/continuation_divergence.csv; REPORT.md, Setup).
Prints the table, the divergences and, LAST, the two ratios: live chain/4 tokens/s at B=4
over B=1, and batched continuation generation over batch-1.  Goals: >= 2x and >= 4x.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import time

import torch

from specbench.api import decode_prompts, eos_ids
from specbench.engine.loop import continuations
from specbench.inputs import data, models
from specbench.study.job import scriptargs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GREEDY = {"name": "greedy", "temperature": 0.0, "draft_temperature": 1.0, "top_p": 1.0}


def parse_tree(s: str) -> dict:
    """'binary/16' or 'topk_wide/12,width=3' -> a tree config dict."""
    head, *extra = s.split(",")
    name, _, budget = head.partition("/")
    tree = {"name": name, "budget": int(budget or 0)}
    for item in extra:
        k, _, v = item.partition("=")
        tree[k] = int(v) if v.lstrip("-").isdigit() else v
    return tree


def live_point(pair, prompts, tree: dict, b: int, n: int) -> dict:
    t0 = time.perf_counter()
    done = decode_prompts(pair, prompts, tree, GREEDY, n, measure_shift=False, batch_size=b)
    secs = time.perf_counter() - t0
    tokens, steps = sum(len(d.tokens) for d in done), sum(len(d.records) for d in done)
    draft = sum(r.draft_s for d in done for r in d.records)  # both shared by a step's rows:
    verify = sum(r.verify_s for d in done for r in d.records)  # their ratio is the time split
    return {
        "tokens": tokens,
        "s": secs,
        "tok/s": tokens / secs,
        "tokens/step": tokens / steps,
        "draft share": draft / max(draft + verify, 1e-9),
        "outs": [d.tokens for d in done],
    }


def live_table(pair, prompts, trees: dict, batches, n: int) -> dict:
    """{(label, B): point}; prints one line per point and whether B changed any output."""
    warm = [data.Prompt("w", "", prompts[0].ids[:16], "bench")]
    table = {}
    for label, tree in trees.items():
        decode_prompts(pair, warm, tree, GREEDY, 4, measure_shift=False)  # first-call overheads
        for b in batches:
            pt = table[label, b] = live_point(pair, prompts, tree, b, n)
            same = "" if pt["outs"] == table[label, batches[0]]["outs"] else f"  (tokens differ from B={batches[0]})"
            print(
                f"{label:12s} B={b:<2d} {pt['tokens']:5d} tokens {pt['s']:7.1f} s {pt['tok/s']:6.2f} tok/s "
                f"tokens/step {pt['tokens/step']:5.2f}  draft share {pt['draft share']:4.2f}{same}",
                flush=True,
            )
    return table


def first_diff(a, b) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@torch.inference_mode()
def margin(model, ids, cont, pos: int) -> float:
    """The target's top-1 minus top-2 logit after prompt + cont[:pos] (batch 1, no cache)."""
    logits = model(torch.tensor([list(ids) + list(cont[:pos])]), use_cache=False).logits[0, -1].float()
    top = logits.topk(2).values
    return float(top[0] - top[1])


def continuation_bench(target, prompts, n: int, b: int, eos, dataset: str = "humaneval") -> dict:
    """Batch-1 vs batch-b fp32 continuations: prints speed and divergences, returns the
    row of results/continuation_divergence.csv (``speedup`` = batch-1 s / batched s)."""
    ids = [pr.ids for pr in prompts]
    continuations(target, [ids[0][:8]], 2, eos)  # warm-up
    t0 = time.perf_counter()
    one = continuations(target, ids, n, eos, batch_size=1)
    t1 = time.perf_counter()
    many = continuations(target, ids, n, eos, batch_size=b)
    t2 = time.perf_counter()
    tokens = sum(map(len, one))
    print(
        f"continuations fp32 {len(ids)} prompts x {n}: batch 1 {t1 - t0:.1f} s ({tokens / (t1 - t0):.2f} tok/s), "
        f"batch {b} {t2 - t1:.1f} s ({sum(map(len, many)) / (t2 - t1):.2f} tok/s)",
        flush=True,
    )
    diffs = [(i, d) for i, d in ((i, first_diff(x, y)) for i, (x, y) in enumerate(zip(one, many))) if d is not None]
    where = []
    for i, d in diffs:
        m = margin(target, ids[i], one[i], d)
        where.append(f"{prompts[i].id}@{d} (margin {m:.4f})")
        print(
            f"  prompt {prompts[i].id}: first divergent position {d} of {len(one[i])}, batch-1 target logit "
            f"margin there {m:.4f}"
        )
    agree = sum(d for _, d in diffs) + sum(len(one[i]) for i in range(len(one)) if i not in dict(diffs))
    print(
        f"divergence: {len(diffs)}/{len(ids)} batched continuations differ from batch-1; "
        f"{agree}/{tokens} tokens before the first divergence"
    )
    return {
        "dtype": "float32",
        "dataset": dataset,
        "n_prompts": len(ids),
        "max_new_tokens": n,
        "batch_size": b,
        "tokens": tokens,
        "diverged": len(diffs),
        "tokens_before_divergence": agree,
        "divergences": "; ".join(where),
        "batch1_s": round(t1 - t0, 2),
        "batched_s": round(t2 - t1, 2),
        "speedup": round((t1 - t0) / (t2 - t1), 3),
    }


def write_divergence(path: str, row: dict) -> None:
    """Replace the row of the same (pair, dtype, n_prompts, max_new_tokens, batch_size) in the CSV (``results.upsert``)."""
    import pandas as pd

    from specbench.results.upsert import replace_rows, upsert

    key = ["pair", "dtype", "n_prompts", "max_new_tokens", "batch_size"]
    upsert(path, lambda old: replace_rows(old, pd.DataFrame([row]), key))


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    scriptargs.add_pair_args(ap)
    scriptargs.add_dataset_arg(ap)
    ap.add_argument("--dtype", default="bfloat16", help="the live table's dtype (part 2 is float32)")
    ap.add_argument("--prompts", type=int, default=8, help="HumanEval prompts for the live table")
    ap.add_argument("--tokens", type=int, default=32, help="new tokens per prompt, live table")
    ap.add_argument("--batches", default="1,2,4,8")
    ap.add_argument(
        "--prompt-tokens",
        type=int,
        default=0,
        help="live table: keep the last N tokens of each prompt (0 = whole; bf16 prefill is slow here)",
    )
    ap.add_argument(
        "--trees",
        nargs="+",
        default=["none", "chain/4", "binary/16"],
        help="trees of the live table (binary/16: the best tree of bench_live.py), e.g. topk_wide/12,width=3",
    )
    ap.add_argument("--cont-prompts", type=int, default=8)
    ap.add_argument("--cont-tokens", type=int, default=32)
    ap.add_argument("--cont-batch", type=int, default=0, help="0: all --cont-prompts in one batch")
    ap.add_argument("--skip-live", action="store_true")
    ap.add_argument("--skip-cont", action="store_true", help="no continuation benchmark (part 2)")
    ap.add_argument(
        "--divergence-out",
        default="results/continuation_divergence.csv",
        help="part 2's row goes here (relative: repo root), for REPORT.md's setup section",
    )
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="K",
        help="cProfile the live table; print its K costliest functions (cumulative time)",
    )
    return ap.parse_args(argv)


def live_part(args, pair_cfg: dict, ds: dict) -> float:
    """Part 1: the live table; returns chain/4 tokens/s at B=4 over B=1 (nan without both)."""
    pair = models.load_pair(pair_cfg, args.dtype, "cpu")
    prompts = [
        data.Prompt(pr.id, "", pr.ids[-args.prompt_tokens :] if args.prompt_tokens else pr.ids, "bench")
        for pr in data.load_prompts(ds, pair.tokenizer)
    ]
    trees = {t: parse_tree(t) for t in args.trees}
    batches = [int(b) for b in args.batches.split(",")]
    prof = cProfile.Profile() if args.profile else None
    table = (prof.runcall if prof else lambda f, *a: f(*a))(
        live_table, pair, prompts[: args.prompts], trees, batches, args.tokens
    )
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile)
    del pair
    models.clear_cache()
    gc.collect()
    if ("chain/4", 4) in table and ("chain/4", 1) in table:
        return table["chain/4", 4]["tok/s"] / table["chain/4", 1]["tok/s"]
    return float("nan")


def continuation_part(args, pair_cfg: dict, ds: dict) -> float:
    """Part 2: batch-1 against batched float32 continuations; writes their row, returns the speedup."""
    target = models.load_model(pair_cfg["target"], "float32", "cpu")
    tokenizer = models.load_tokenizer(pair_cfg["target"])
    prompts = data.load_prompts(ds, tokenizer)[: args.cont_prompts]
    eos = eos_ids(argparse.Namespace(target=target, tokenizer=tokenizer))
    row = continuation_bench(target, prompts, args.cont_tokens, args.cont_batch or len(prompts), eos, args.dataset)
    write_divergence(os.path.join(ROOT, args.divergence_out), {"pair": pair_cfg["name"], **row})
    return row["speedup"]


def main(argv=None) -> None:
    args = parse_args(argv)
    pair_cfg = scriptargs.pair_spec(args.pair, args.pair_override)
    ds = {"name": args.dataset, "limit": max(args.prompts, args.cont_prompts)}
    live = "not run (--skip-live)" if args.skip_live else f"{live_part(args, pair_cfg, ds):.2f}x"
    cont = "not run (--skip-cont)" if args.skip_cont else f"{continuation_part(args, pair_cfg, ds):.2f}x"
    print(f"live chain/4 {args.dtype} tokens/s, B=4 over B=1: {live} (goal >= 2x)")
    print(f"batched continuations fp32 ({args.cont_prompts} x {args.cont_tokens}) over batch-1: {cont} (goal >= 4x)")


if __name__ == "__main__":
    main()
