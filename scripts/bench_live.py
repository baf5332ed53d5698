"""Wall tokens/s of the live engine against the tools users already have, on the real pair.

    flock /tmp/specbench-real.lock .venv/bin/python scripts/bench_live.py
    .venv/bin/python scripts/bench_live.py --pair local --pair-override draft.path=D \
        --pair-override target.path=T --dataset smoke --dtype float32 --prompts 1 --tokens 4 \
        --search-prompts 1 --candidates "[{name: chain, budget: 2}]"   # a tiny local pair, seconds

(specbench is imported from the editable install `bash scripts/setup.sh` makes; no sys.path edit.)

Same prompts, bf16, greedy, one process:
  (a) the target's plain greedy `generate`
  (b) HF assisted generation, the 0.5B as assistant, a constant 4-token chain
  (c) specbench live, tree=chain budget 4
  (d) specbench live, the best tree: by default the fastest of --candidates, timed first on
      --search-prompts held-out HumanEval (--dataset) prompts (the ones after the measured ones)
Prints (c)/(b), (d)/(a), (c)/(a) and whether the four produce identical tokens; bf16 kernels
round differently per call shape, so a divergence is reported (rate and first position), not hidden.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from omegaconf import OmegaConf
from tqdm import tqdm

from specbench.api import decode_prompts
from specbench.inputs import data
from specbench.results.columns import tree_params
from specbench.results.files import read_csv
from specbench.study.job import scriptargs

GREEDY = {"name": "greedy", "temperature": 0.0, "draft_temperature": 1.0, "top_p": 1.0}


def hf_generate(target, ids, n, eos, assistant=None) -> list[int]:
    x = torch.tensor([ids])
    kw = dict(
        max_new_tokens=n,
        do_sample=False,
        num_beams=1,
        eos_token_id=sorted(eos),
        pad_token_id=sorted(eos)[0],
        temperature=None,
        top_p=None,
        top_k=None,
        repetition_penalty=None,
    )
    if assistant is not None:
        kw["assistant_model"] = assistant
    out = target.generate(x, attention_mask=torch.ones_like(x), **kw)
    return out[0, len(ids) :].tolist()


def specbench_live(pair, tree: dict, ids, n, eos) -> tuple[list[int], list]:
    prompt = data.Prompt("p", "", list(ids), "bench")
    done = decode_prompts(pair, [prompt], tree, GREEDY, n, measure_shift=False)[0]
    return done.tokens, done.records


def first_diff(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def parse_tree(s: str) -> dict:
    """'binary,budget=8' or 'topk_wide,budget=12,width=3' -> tree config dict."""
    name, *kv = s.split(",")
    tree = {"name": name}
    for item in kv:
        k, _, v = item.partition("=")
        tree[k] = int(v) if v.lstrip("-").isdigit() else v
    return tree


def best_from(folder: str) -> dict:
    """The tree of the fastest live job (summary tokens_per_s) under folder/live."""
    import glob

    import pandas as pd

    files = glob.glob(os.path.join(folder, "live", "**", "summary.csv"), recursive=True)
    if not files:
        sys.exit(f"bench_live: no live summaries under {folder}/live: run scripts/bench_engine.py first")
    rows = pd.concat([read_csv(f) for f in files], ignore_index=True)
    top = rows.loc[rows.tokens_per_s.idxmax()]
    return {"name": top.tree, "budget": int(top.budget), **tree_params(top.tree_params, strict=True)}


CANDIDATES = (
    "[{name: chain, budget: 3}, {name: chain, budget: 4}, {name: chain, budget: 5},"
    " {name: specinfer, budget: 8, expansion: [2, 1, 1, 1]},"
    " {name: paths, budget: 5, paths: [[0], [1], [0, 0], [0, 0, 0], [0, 0, 0, 0]]}]"
)


def tree_label(tree: dict) -> str:
    return ",".join(f"{k}={v}" if k != "name" else str(v) for k, v in tree.items()).replace(" ", "")


def timed(fn, prompts) -> tuple[list[list[int]], float]:
    t0 = time.perf_counter()
    outs = [fn(pr.ids) for pr in prompts]
    return outs, time.perf_counter() - t0


def search_best(pair, candidates: list[dict], prompts, n, eos) -> dict:
    """The candidate tree with the most tokens/s on held-out prompts (live, bf16)."""
    best, best_tps = None, -1.0
    for tree in tqdm(candidates, desc="(d) tree search on held-out prompts"):
        outs, secs = timed(lambda ids, tree=tree: specbench_live(pair, tree, ids, n, eos)[0], prompts)
        tps = sum(map(len, outs)) / secs
        print(f"    search {tree_label(tree):60s} {tps:7.2f} tok/s")
        if tps > best_tps:
            best, best_tps = tree, tps
    return best


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    scriptargs.add_pair_args(ap)
    scriptargs.add_dataset_arg(ap)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument(
        "--best",
        default="search",
        help="(d)'s tree: 'search' (the fastest of --candidates on held-out prompts) or NAME,key=value,...",
    )
    ap.add_argument("--candidates", default=CANDIDATES, help="YAML list of tree configs searched for (d)")
    ap.add_argument("--search-prompts", type=int, default=2, help="held-out prompts timed per candidate")
    ap.add_argument(
        "--best-from", default=None, help="a bench_engine.py scratch folder: (d) = its live job with the most tokens/s"
    )
    return ap.parse_args(argv)


def eos_of(pair) -> set[int]:
    eos = pair.target.generation_config.eos_token_id
    return set(eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else [pair.tokenizer.eos_token_id])


def pick_best(args, pair, held_out, eos) -> dict:
    """(d)'s tree: from --best-from, searched on the held-out prompts, or --best itself."""
    if args.best_from:
        return best_from(args.best_from)
    if args.best != "search":
        return parse_tree(args.best)
    if not held_out:
        sys.exit("bench_live: --best search needs --search-prompts >= 1 held-out prompts")
    candidates = [dict(t) for t in OmegaConf.to_container(OmegaConf.create(args.candidates))]
    return search_best(pair, candidates, held_out, args.tokens, eos)


def report(args, prompts, methods, outs, secs) -> None:
    """The tokens/s of each method, where their tokens diverge from (a), and LAST the ratios."""
    tps = {k: sum(map(len, outs[k])) / secs[k] for k in methods}
    for k, (label, _) in methods.items():
        print(f"({k}) {label:32s} {sum(map(len, outs[k])):5d} tokens {secs[k]:8.2f} s {tps[k]:7.2f} tok/s")
    same = True
    for k in "bcd":
        diffs = [(pr.id, first_diff(outs["a"][i], outs[k][i])) for i, pr in enumerate(prompts)]
        bad = [(pid, d) for pid, d in diffs if d is not None]
        if bad:
            same = False
            agree = sum(
                min(d, len(outs["a"][i])) if d is not None else len(outs["a"][i]) for i, (_, d) in enumerate(diffs)
            )
            total = sum(map(len, outs["a"]))
            print(
                f"({k}) vs (a): {len(bad)}/{len(prompts)} prompts differ; first differing position "
                f"{', '.join(f'{p}@{d}' for p, d in bad)}; {agree}/{total} tokens before the first "
                f"divergence ({100 * (1 - agree / max(total, 1)):.1f}% of tokens after a divergence, {args.dtype})"
            )
    print("tokens: (a), (b), (c), (d) identical" if same else "tokens: NOT identical (see above)")
    print(
        f"(c)/(b) = {tps['c'] / tps['b']:.2f}  (d)/(a) = {tps['d'] / tps['a']:.2f}  (c)/(a) = {tps['c'] / tps['a']:.2f}"
    )


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.manual_seed(0)
    pair = scriptargs.load_pair(args, args.dtype)
    loaded = data.load_prompts({"name": args.dataset, "limit": args.prompts + args.search_prompts}, pair.tokenizer)
    prompts, held_out = loaded[: args.prompts], loaded[args.prompts :]
    eos, n = eos_of(pair), args.tokens
    gc = pair.draft.generation_config
    gc.num_assistant_tokens = 4
    gc.num_assistant_tokens_schedule = "constant"
    gc.assistant_confidence_threshold = 0.0  # never stop a chain early: exactly 4 tokens

    warm = prompts[0].ids[:16]
    specbench_live(pair, {"name": "chain", "budget": 4}, warm, n, eos)  # first-call overheads
    best = pick_best(args, pair, held_out, eos)
    methods = {
        "a": ("plain greedy generate", lambda ids: hf_generate(pair.target, ids, n, eos)),
        "b": ("HF assisted, 4-token chain", lambda ids: hf_generate(pair.target, ids, n, eos, pair.draft)),
        "c": (
            "specbench live chain/4",
            lambda ids: specbench_live(pair, {"name": "chain", "budget": 4}, ids, n, eos)[0],
        ),
        "d": (f"specbench live {tree_label(best)}", lambda ids: specbench_live(pair, best, ids, n, eos)[0]),
    }
    for _, fn in methods.values():  # first-call overheads out of the timing
        fn(warm)
    outs, secs = {}, {}
    for key, (label, fn) in methods.items():
        outs[key], secs[key] = timed(fn, tqdm(prompts, desc=label))
    report(args, prompts, methods, outs, secs)


if __name__ == "__main__":
    main()
