"""`python -m specbench.import_metrics FILE --engine vllm|sglang --pair P --dataset D [--tree chain]
[--budget N] [--out results/served.csv]`: what a server measured, as rows beside the study's.

- ``vllm``: a Prometheus text dump of a vLLM server's ``/metrics`` (vllm/v1/spec_decode/metrics.py,
  unchanged from 0.11.0 to 0.33.0): the counters ``vllm:spec_decode_num_drafts``,
  ``..._num_draft_tokens``, ``..._num_accepted_tokens`` and ``..._num_accepted_tokens_per_pos``
  (label ``position`` 0..K-1), exposed with a ``_total`` suffix; samples of every engine and model
  label are summed.  A step is a draft: acceptance length (bonus not counted, as the study's)
  = accepted / drafts, tokens per step = 1 + that (vLLM's "mean acceptance length"), acceptance
  rate = accepted / draft tokens, marginal acceptance at position i = per_pos[i] / drafts.
- ``sglang``: a JSON-lines file of an SGLang server's responses (one object per request, its
  ``meta_info``; sglang/srt/managers/tokenizer_manager.py, 0.5.23 and 0.5.10.post1):
  ``spec_verify_ct`` (verification steps) and ``completion_tokens``; a request's accept length is
  completion_tokens / spec_verify_ct (bonus counted); proposed and accepted draft tokens from
  ``spec_num_proposed_drafts`` / ``spec_num_correct_drafts`` (0.5.23) or ``spec_draft_token_num``
  / ``spec_accept_token_num`` (0.5.10) where present.

Rows (``COLUMNS``) are labelled ``engine=vllm`` or ``engine=sglang`` with no config hash of
ours; ``--pair``, ``--dataset``, ``--tree`` and ``--budget`` say what was served (vLLM's budget
defaults to the positions it counted).  They replace the rows of the same engine, pair, dataset,
tree and budget in ``--out``.  A file that is not such a dump is one line, exit 2.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections import defaultdict

import pandas as pd

from ..core.args import Parser
from ..core.atomic import lock, write_text
from ..core.jsonl import json_objects

COLUMNS = [
    "engine", "config_hash", "pair", "dataset", "tree", "budget", "n_requests", "n_steps", "acceptance_rate",
    "acceptance_length", "tokens_per_step", "tokens_per_step_per_request", "marginal_acceptance", "source",
]  # fmt: skip
KEY = ["engine", "pair", "dataset", "tree", "budget"]
VLLM = "vllm:spec_decode_num_"
SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def vllm_counters(text: str) -> tuple[dict[str, float], dict[int, float]]:
    """({drafts, draft_tokens, accepted_tokens}: totals, {position: accepted}) of a /metrics dump."""
    totals: dict[str, float] = defaultdict(float)
    per_pos: dict[int, float] = defaultdict(float)
    for line in text.splitlines():
        m = SAMPLE.match(line.strip())
        if not m or not m["name"].startswith(VLLM) or not m["name"].endswith("_total"):
            continue
        what = m["name"][len(VLLM) : -len("_total")]
        labels = dict(LABEL.findall(m["labels"] or ""))
        if what == "accepted_tokens_per_pos":
            per_pos[int(labels["position"])] += float(m["value"])
        else:
            totals[what] += float(m["value"])
    return totals, per_pos


def from_vllm(text: str, path: str) -> dict:
    totals, per_pos = vllm_counters(text)
    need = ("drafts", "draft_tokens", "accepted_tokens")
    if not all(k in totals for k in need) or not totals["drafts"]:
        raise ValueError(
            f"{path}: no vLLM spec-decode counters with drafts ({', '.join(VLLM + k + '_total' for k in need)}); "
            "give the text of a vLLM server's /metrics after speculative requests"
        )
    drafts = totals["drafts"]
    marginal = [per_pos[i] / drafts for i in range(max(per_pos) + 1)] if per_pos else []
    return {
        "n_steps": int(drafts),
        "acceptance_rate": totals["accepted_tokens"] / totals["draft_tokens"] if totals["draft_tokens"] else math.nan,
        "acceptance_length": totals["accepted_tokens"] / drafts,
        "tokens_per_step": 1 + totals["accepted_tokens"] / drafts,
        "marginal_acceptance": json.dumps(marginal),
        "budget_seen": len(marginal) or None,
    }


def from_sglang(text: str, path: str) -> dict:
    reqs = []
    lines = json_objects(text.splitlines(), path, "give one SGLang response object per line", '{"meta_info": {...}}')
    for lineno, obj in lines:
        meta = obj.get("meta_info", obj)
        if not meta.get("spec_verify_ct"):
            raise ValueError(f"{path}:{lineno}: no meta_info.spec_verify_ct > 0: not a speculative SGLang response")
        reqs.append(meta)
    if not reqs:
        raise ValueError(f"{path}: no responses")
    steps = sum(int(r["spec_verify_ct"]) for r in reqs)
    tokens = sum(int(r["completion_tokens"]) for r in reqs)
    proposed = sum(int(r.get("spec_num_proposed_drafts", r.get("spec_draft_token_num", 0)) or 0) for r in reqs)
    accepted = sum(int(r.get("spec_num_correct_drafts", r.get("spec_accept_token_num", 0)) or 0) for r in reqs)
    return {
        "n_requests": len(reqs),
        "n_steps": steps,
        "acceptance_rate": accepted / proposed if proposed else math.nan,
        "acceptance_length": tokens / steps - 1,
        "tokens_per_step": tokens / steps,
        "tokens_per_step_per_request": sum(int(r["completion_tokens"]) / int(r["spec_verify_ct"]) for r in reqs)
        / len(reqs),
        "marginal_acceptance": "",
    }


READERS = {"vllm": from_vllm, "sglang": from_sglang}


def row(args) -> dict:
    try:
        text = open(args.file, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{args.file}: {getattr(e, 'strerror', None) or e}") from None
    got = READERS[args.engine](text, args.file)
    budget = args.budget or got.pop("budget_seen", None)
    got.pop("budget_seen", None)
    if not budget:
        raise ValueError("--budget: say how many draft tokens the server drafted per step (e.g. --budget 4)")
    out = {"engine": args.engine, "config_hash": "", "pair": args.pair, "dataset": args.dataset, "tree": args.tree,
           "budget": int(budget), "source": os.path.abspath(args.file), **got}  # fmt: skip
    return {c: out.get(c, math.nan) for c in COLUMNS}


def main(argv=None) -> None:
    ap = Parser(prog="python -m specbench.import_metrics", description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--engine", required=True, choices=sorted(READERS))
    ap.add_argument("--pair", required=True, help="the study pair it served (e.g. qwen_coder)")
    ap.add_argument("--dataset", required=True, help="the prompts it served (e.g. humaneval)")
    ap.add_argument("--tree", default="chain", help="the tree shape it drafted (default chain)")
    ap.add_argument("--budget", type=int, default=None, help="draft tokens per step (vLLM: counted)")
    ap.add_argument("--out", default="results/served.csv")
    args = ap.parse_args(argv)
    try:
        new = row(args)
    except ValueError as e:
        print(f"specbench: error: {str(e).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    with lock(os.path.dirname(os.path.abspath(args.out))):
        old = pd.read_csv(args.out) if os.path.isfile(args.out) else pd.DataFrame(columns=COLUMNS)
        mine = tuple(str(new[k]) for k in KEY)
        old = old[[tuple(str(v) for v in r) != mine for r in old[KEY].itertuples(index=False, name=None)]]
        table = pd.concat([old, pd.DataFrame([new])], ignore_index=True)[COLUMNS]
        write_text(args.out, table.to_csv(index=False, lineterminator="\n"))
    print(
        f"specbench: {args.engine} tokens/step {new['tokens_per_step']:.3f} over {new['n_steps']} steps -> {args.out}"
    )


if __name__ == "__main__":
    main()
