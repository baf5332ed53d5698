"""The engine against this machine's ceiling, in one run, on the same HumanEval prompts.

    .venv/bin/python scripts/bench_ceiling.py                    # bf16, B=32 and B=64, 128 new tokens
    .venv/bin/python scripts/bench_ceiling.py --dtype float32 --skip-live
    .venv/bin/python scripts/bench_ceiling.py --pair local --pair-override draft.path=D \
        --pair-override target.path=T --dataset smoke --dtype float32 --new-tokens 4 --batches 2 \
        --live-tokens 4 --live-batch 2                            # a tiny local pair, seconds

Prints, in this order:
  (a) the target's prefill rate: one forward of 256 prompt tokens (no cache; median of 3);
  (b) HF ``generate`` at B=32 (left padding, greedy, prefill included);
  (c) the engine's batched greedy continuations (``engine.loop.continuations``) at B=32 and
      B=64: tokens/s with the prefill and without it (the batched prefill timed on its own);
  (d) live chain/4 (the 0.5B drafting) at B=--live-batch (8) and at B=1, tokens/s (prefill included);
then LAST the ratios with their goals.  A goal not met prints a profile of one step.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from types import SimpleNamespace

import torch

from specbench import api
from specbench.core.kv import SlotKV
from specbench.engine.loop import continuations
from specbench.inputs import data
from specbench.study.job import scriptargs


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


@torch.inference_mode()
def prefill_rate(model, prompts, n: int = 256) -> float:
    """Tokens/s of one n-token forward (the model's own large-batch rate: the ceiling)."""
    ids = [t for p in prompts for t in p][:n]  # fewer where the prompts are short (a smoke run)
    x = torch.tensor([ids], device=model.device)
    decoder = model.get_decoder()  # the LM head of one position is noise; transformers' logits_to_keep
    secs = [timed(lambda: decoder(input_ids=x, use_cache=False))[1] for _ in range(3)]  # copies the head
    return len(ids) / statistics.median(secs)


@torch.inference_mode()
def hf_generate(model, tokenizer, prompts, new: int, eos) -> tuple[int, float]:
    """(tokens generated, seconds) of HF greedy generate on the batch, left padding."""
    width = max(map(len, prompts))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos)
    ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=model.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=model.device)
    out, secs = timed(
        lambda: model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=new,
            do_sample=False,
            pad_token_id=pad,
            eos_token_id=sorted(eos),
        )
    )
    tokens = 0
    for row in out[:, width:].tolist():
        n = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
        tokens += n
    return tokens, secs


def engine_prefill_seconds(model, prompts) -> float:
    kv = SlotKV(model)
    for p in prompts:
        kv.add(p)
    return timed(kv.flush)[1]


def engine_continuations(model, prompts, new: int, eos) -> tuple[int, float, float]:
    """(tokens, seconds with the prefill, the batched prefill's seconds)."""
    conts, secs = timed(lambda: continuations(model, prompts, new, eos, batch_size=len(prompts)))
    return sum(map(len, conts)), secs, engine_prefill_seconds(model, prompts)


def live_chain(pair, prompts, new: int, batch: int) -> tuple[int, float]:
    items = [SimpleNamespace(id=str(i), ids=p) for i, p in enumerate(prompts)]
    done, secs = timed(
        lambda: api.decode_prompts(
            pair, items, {"name": "chain", "budget": 4}, {"name": "greedy"}, new, measure_shift=False, batch_size=batch
        )
    )
    return sum(len(d.tokens) for d in done), secs


def profile_step(model, prompts, eos) -> None:
    """The top operators of a few batched decode steps."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        continuations(model, prompts, 4, eos, batch_size=len(prompts))
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    scriptargs.add_pair_args(ap)
    scriptargs.add_dataset_arg(ap)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--batches", default="32,64", help="engine continuation batch sizes; HF generate at the first")
    ap.add_argument("--live-tokens", type=int, default=64)
    ap.add_argument("--live-batch", type=int, default=8, help="(d)'s batch, timed against B=1")
    ap.add_argument("--skip-live", action="store_true")
    ap.add_argument("--skip-hf", action="store_true", help="no HF generate (its ratio is not printed)")
    ap.add_argument("--device", default="cpu")
    return ap.parse_args(argv)


def measure(args, pair, prompts, eos) -> list[tuple[str, float, float]]:
    """Prints (a) to (d); returns the (label, ratio, goal) of each goal."""
    model, batches = pair.target, args.batches
    ceiling = prefill_rate(model, prompts)
    print(f"(a) target prefill, one {min(256, sum(map(len, prompts)))}-token forward: {ceiling:.1f} tok/s", flush=True)
    b0 = batches[0]
    hf = None
    if not args.skip_hf:
        hf_tok, hf_s = hf_generate(model, pair.tokenizer, prompts[:b0], args.new_tokens, eos)
        hf = hf_tok / hf_s
        print(f"(b) HF generate B={b0}: {hf_tok} tokens in {hf_s:.1f} s = {hf:.1f} tok/s", flush=True)
    eng = {}
    for b in batches:
        tok, secs, pre = engine_continuations(model, prompts[:b], args.new_tokens, eos)
        eng[b] = (tok / secs, tok / (secs - pre))
        print(
            f"(c) engine continuations B={b}: {tok} tokens in {secs:.1f} s = {tok / secs:.1f} tok/s; "
            f"batched prefill {pre:.1f} s; decode alone {eng[b][1]:.1f} tok/s",
            flush=True,
        )
    live, lb = {}, args.live_batch
    if not args.skip_live:
        for b in (lb, 1):
            tok, secs = live_chain(pair, prompts[:lb], args.live_tokens, b)
            live[b] = tok / secs
            print(f"(d) live chain/4 B={b}: {tok} tokens in {secs:.1f} s = {live[b]:.2f} tok/s", flush=True)
    goals = [(f"engine decode tok/s at B={b} / prefill rate", eng[b][1] / ceiling, 0.5) for b in batches]
    if hf:
        goals.append((f"engine B={b0} / HF generate B={b0} (prefill included)", eng[b0][0] / hf, 2.0))
    if live:
        goals.append((f"live chain/4 tok/s B={lb} / B=1", live[lb] / live[1], 3.0))
    return goals


def main(argv=None) -> int:
    args = parse_args(argv)
    args.batches = [int(b) for b in args.batches.split(",")]
    pair = scriptargs.load_pair(args, args.dtype, args.device)
    model, eos = pair.target, api.eos_ids(pair)
    limit = max(*args.batches, 0 if args.skip_live else args.live_batch)
    prompts = [p.ids for p in data.load_prompts({"name": args.dataset, "limit": limit}, pair.tokenizer)]
    print(
        f"device {model.device}, dtype {args.dtype}, torch threads {torch.get_num_threads()}, "
        f"{len(prompts)} {args.dataset} prompts (mean {statistics.mean(map(len, prompts)):.0f} tokens)",
        flush=True,
    )
    goals = measure(args, pair, prompts, eos)
    if any(r < g for _, r, g in goals):
        profile_step(model, prompts[: args.batches[0]], eos)
    print("ratios (goal):")
    for label, r, g in goals:
        print(f"  {label}: {r:.2f} (>= {g}) {'met' if r >= g else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
