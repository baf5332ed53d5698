"""`python -m specbench.study.tools.costs_llamacpp [options]`: llama.cpp's forward-cost curve (#84 item 3).

    python -m specbench.study.tools.costs_llamacpp --pair qwen_coder --repeats 5

``llama-bench`` (``inputs.llamacpp``'s proven build) times a forward of k tokens on top of a d-token KV
cache (``-p k -n 0 -d d -r repeats -o json``, threads = the machine's) for the pair's target and draft
GGUF files (the embedded models', assembled; ``--target``/``--draft`` name others), k = ``--tokens``
(default 1..17: the batch-1 trees' widths) at d = ``--kv`` (default ``study.tools.costs.KV_LENS``: the
study's depths).  Each point keeps its repeats (``samples``) with the median as ``seconds`` and the
spread (min, max, quartiles), as ``study.tools.costs`` writes specbench's own; the rows say
``engine=llamacpp`` (specbench's rows lack the column: ``results.costcurve.SPECBENCH``), ``dtype=gguf``
(the files as shipped) and the machine (``inputs.machine``), and replace only this machine's llama.cpp
curve of the pair in ``--results``/costs.csv (``KEY``).  llama.cpp not built, a GGUF missing, a run that
fails: one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from ...core.args import listed, number
from ...inputs import llamacpp, machine
from ..job.launch import pair_config
from .costs import KV_LENS, write_costs
from .speed_llamacpp import DTYPE, ENGINE

KEY = ["pair", "dtype", "device", "engine", "machine_id"]  # one machine's llama.cpp curve of one pair (machine last)
TOKENS = tuple(range(1, 18))


def bench(model: str | Path, tokens, kv_lens, repeats: int, threads: int) -> list[dict]:
    """``llama-bench``'s points of one GGUF: per (KV depth, tokens) its repeats in seconds and their spread."""
    cmd = [str(llamacpp.binary("llama-bench")), "-m", str(model), "-p", ",".join(map(str, tokens)), "-n", "0",
           "-d", ",".join(map(str, kv_lens)), "-r", str(repeats), "-t", str(threads), "-o", "json"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValueError(f"llama-bench exit {done.returncode} on {model}: {tail[:200]}")
    out = []
    for r in json.loads(done.stdout):
        v = np.array(r["samples_ns"], float) / 1e9
        out.append({"kv_len": int(r["n_depth"]), "n_tokens": int(r["n_prompt"]), "repeats": len(v),
                    "seconds": float(np.median(v)), "seconds_min": float(v.min()), "seconds_max": float(v.max()),
                    "seconds_q25": float(np.quantile(v, 0.25)), "seconds_q75": float(np.quantile(v, 0.75)),
                    "samples": " ".join(f"{x:.6g}" for x in v)})  # fmt: skip
    return out


def cost_rows(pair: str, models: dict, tokens, kv_lens, repeats: int) -> list[dict]:
    """Both roles' points (``bench``) as costs.csv rows of ``pair`` (module docstring)."""
    me = machine.identity("cpu")
    threads = os.cpu_count() or 1
    rows = []
    for role in ("draft", "target"):
        path = Path(models[role])
        for p in bench(path, tokens, kv_lens, repeats, threads):
            rows.append({"role": role, "pair": pair, "model": path.parent.name, "dtype": DTYPE, "device": "cpu",
                         "weights": "pretrained", **p, "machine": me["machine"], "machine_id": me["machine_id"],
                         "host": me["host"], "engine": ENGINE, "engine_version": llamacpp.engine_version()})  # fmt: skip
    return rows


def write(out: str, rows: list[dict]) -> str:
    """Replace this machine's llama.cpp curve of the pair in ``out``/costs.csv (``KEY``; ``costs.write_costs``:
    the one upsert), every other row kept; its path."""
    os.makedirs(out, exist_ok=True)
    return write_costs(out, rows, KEY)


def models_of(args) -> dict:
    """The GGUF files: ``--target``/``--draft``, else the pair's embedded models' (assembled)."""
    pair = pair_config(args.pair)
    out = {}
    for role in ("target", "draft"):
        given, spec = getattr(args, role), pair.get(role) or {}
        if given and not os.path.isfile(given):
            raise ValueError(f"--{role} {given}: no such file; give a GGUF file")
        if not given and spec.get("source") != "embedded":
            raise ValueError(f"--{role}: pair {args.pair} has no embedded {role}; give --{role} GGUF")
        out[role] = given or str(llamacpp.assemble_gguf(spec["id"]))
    return out


def parse_args(argv: list[str] | None):
    ap = argparse.ArgumentParser(
        prog="python -m specbench.study.tools.costs_llamacpp", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--pair", default="qwen_coder")
    ap.add_argument("--tokens", default=TOKENS, type=listed(number(int, 1)), help="forward widths k (comma-separated)")
    ap.add_argument("--kv", default=KV_LENS, type=listed(number(int, 0)), help="KV depths d (comma-separated)")
    ap.add_argument("--repeats", type=number(int, 1), default=5)
    ap.add_argument("--results", default="results")
    ap.add_argument("--target", help="the target's GGUF (default: the pair's embedded model)")
    ap.add_argument("--draft", help="the draft's GGUF (default: the pair's embedded model)")
    args = ap.parse_args(argv)
    args.tokens, args.kv = list(args.tokens), list(args.kv)  # a default is a tuple
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        why = llamacpp.unavailable()
        if why:
            raise ValueError(why)
        rows = cost_rows(args.pair, models_of(args), args.tokens, args.kv, args.repeats)
    except (ValueError, KeyError, llamacpp.Unavailable) as e:
        print(f"specbench.study.tools.costs_llamacpp: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    print(f"specbench: wrote {len(rows)} llama.cpp cost points of {args.pair} to {write(args.results, rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
