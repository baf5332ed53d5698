"""llama.cpp beside specbench's engine on this machine (#84 items 7 and 3, a quick check: printed, not committed).

    .venv/bin/python scripts/bench_llamacpp.py                        # plain tok/s, both engines, 8 prompts x 2 rounds
    .venv/bin/python scripts/bench_llamacpp.py --costs --repeats 5    # also llama-bench's forward cost curve

On a 2-core machine shared with other work (load average 5, 2026-12-07) llama.cpp's OpenMP threads
wait on each other and it decoded the 1.5B at 1.5 tok/s, far below an idle machine: run it idle.

(a) Plain decoding: the committed ``results/speed.csv`` rows of specbench's plain decoding (``candidate
    plain``, batch 1) of ``--pair`` on ``--dataset`` from this machine's ``machine_id`` give its tokens/s on
    their prompts; the built ``llama-server`` (``specbench.inputs.llamacpp``) serves the target's GGUF
    and decodes the same prompts (their text: llama.cpp tokenizes it) to the same ``max_new_tokens``,
    greedy, ``--rounds`` times in turn; tokens/s counts each request's server-side prompt and decode time,
    as the committed ``wall_s`` counts prefill and decode.  Last: the ratio.
(b) ``--costs``: ``llama-bench`` on the target's and the draft's GGUF, a forward of k tokens at KV depth d
    (``-p k -d d``, k = ``--tokens``, d = ``--kv``), ``--repeats`` each: the median and spread in ms.

The load average is printed beside every number: on a shared machine it says how far to trust them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess

import pandas as pd

from specbench.inputs import llamacpp
from specbench.inputs.data import as_spec
from specbench.inputs.datasets import DATASETS
from specbench.inputs.machine import identity
from specbench.results.files import read_speed
from specbench.study.job.launch import pair_config
from specbench.study.tools.llamaserver import LlamaServer


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def committed_plain(args, machine_id: str) -> pd.DataFrame:
    s = read_speed(args.results, strict=False)  # as it read it: parsed alone (a measurement script)
    rows = s[(s.machine_id == machine_id) & (s.pair == args.pair) & (s.dataset == args.dataset)]
    rows = rows[(rows.candidate == "plain") & (rows.batch_size == 1)]
    if rows.empty:
        raise SystemExit(f"no committed plain rows of {args.pair} on {args.dataset} from machine {machine_id}")
    n = int(rows.max_new_tokens.mode().iloc[0])
    return rows[rows.max_new_tokens == n]


def plain(args, rows: pd.DataFrame, target) -> None:
    n = int(rows.max_new_tokens.iloc[0])
    ids = list(dict.fromkeys(rows.prompt_ids.astype(str)))[: args.prompts]
    mine = rows[rows.prompt_ids.astype(str).isin(ids)]
    sb = mine.tokens.sum() / mine.wall_s.sum()
    print(f"specbench plain ({mine.dtype.iloc[0]}, committed, {len(mine)} decodes of {len(ids)} prompts x {n} tokens, "
          f"{mine.run_id.nunique()} runs): {sb:.2f} tok/s")  # fmt: skip
    texts = {pid: text for pid, text, _ in DATASETS.get(args.dataset)(as_spec({"name": args.dataset}))}
    tokens = seconds = 0.0
    per = []
    with LlamaServer(target, ctx=4096) as srv:
        print(f"llama-server: {llamacpp.engine_version()}, {srv.threads} threads; {load()}")
        for _ in range(args.rounds):
            for pid in ids:
                t = srv.complete(texts[pid], n)["timings"]
                s = (t["prompt_ms"] + t["predicted_ms"]) / 1000
                tokens, seconds = tokens + t["predicted_n"], seconds + s
                per.append(t["predicted_per_second"])
    lc = tokens / seconds
    print(f"llama.cpp plain (GGUF as shipped, {len(per)} decodes): {lc:.2f} tok/s with prefill; decode alone "
          f"median {statistics.median(per):.2f} tok/s; {load()}")  # fmt: skip
    print(f"RATIO llama.cpp / specbench plain tok/s: {lc / sb:.2f}x")


def costs(args, models: dict) -> None:
    bench = llamacpp.binary("llama-bench")
    threads = str(os.cpu_count() or 1)
    for role, path in models.items():
        cmd = [str(bench), "-m", str(path), "-p", args.tokens, "-n", "0", "-d", args.kv, "-r", str(args.repeats),
               "-t", threads, "-o", "json"]  # fmt: skip
        out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        print(f"llama-bench {role} ({os.path.basename(os.path.dirname(path))}); {load()}")
        for r in out:
            ms = [x / 1e6 for x in r["samples_ns"]]
            print(f"  k={r['n_prompt']:>3} kv={r['n_depth']:>4}: median {statistics.median(ms):8.1f} ms "
                  f"(min {min(ms):.1f}, max {max(ms):.1f}, n={len(ms)})")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="qwen_coder")
    ap.add_argument("--dataset", default="humaneval")
    ap.add_argument("--results", default="results/speed.csv")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--costs", action="store_true")
    ap.add_argument("--tokens", default="1,2,3,4,5,6,8,9,12,13,16,17")
    ap.add_argument("--kv", default="128,512")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--target", help="the target's GGUF (default: the pair's embedded model, assembled)")
    ap.add_argument("--draft", help="the draft's GGUF (default: the pair's embedded model, assembled)")
    ap.add_argument("--machine-id", help="whose committed rows (default: this machine's)")
    args = ap.parse_args(argv)
    pair = pair_config(args.pair)
    models = {r: getattr(args, r) or llamacpp.assemble_gguf(pair[r]["id"]) for r in ("target", "draft")}
    me = identity("cpu")
    print(f"machine {me['machine']} ({me['machine_id']}); {load()}")
    plain(args, committed_plain(args, args.machine_id or me["machine_id"]), models["target"])
    if args.costs:
        costs(args, models)


if __name__ == "__main__":
    main()
