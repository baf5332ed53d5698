"""`python -m specbench.import_metrics FILE --engine vllm|sglang|llamacpp --pair P --dataset D [--tree chain]
[--budget N] [--out results/served.csv]`: what a server measured, as rows beside the study's.

- ``vllm``: a Prometheus text dump of a vLLM server's ``/metrics`` (vllm/v1/spec_decode/metrics.py,
  unchanged from 0.11.0 to 0.33.0): the counters ``vllm:spec_decode_num_drafts``,
  ``..._num_draft_tokens``, ``..._num_accepted_tokens`` and ``..._num_accepted_tokens_per_pos``
  (label ``position`` 0..K-1), exposed with a ``_total`` suffix; samples of every engine and model
  label are summed.  A step is a draft: acceptance length (bonus not counted, as the study's)
  = accepted / drafts, tokens per step = 1 + that (vLLM's "mean acceptance length"), acceptance
  rate = accepted / draft tokens, marginal acceptance at position i = per_pos[i] / drafts.
- ``sglang``, a JSON-lines file of an SGLang server's responses (one object per request, its
  ``meta_info``; sglang/srt/managers/tokenizer_manager.py, 0.5.23 and 0.5.10.post1):
  ``spec_verify_ct`` (verification steps) and ``completion_tokens``; a request's accept length is
  completion_tokens / spec_verify_ct (bonus counted); proposed and accepted draft tokens from
  ``spec_num_proposed_drafts`` / ``spec_num_correct_drafts`` (0.5.23) or ``spec_draft_token_num``
  / ``spec_accept_token_num`` (0.5.10) where present; ``spec_correct_drafts_histogram`` (steps
  by accepted drafts, summed over requests) gives the marginal acceptance P(accepted >= d)
  (bonus not counted: 1 + their sum = 1 + accepted / steps, which leaves out the first token
  each request gets from its prefill).
- ``sglang``, a Prometheus text dump of its ``/metrics`` (sglang/srt/metrics/collector.py): the
  gauges ``sglang:spec_accept_length`` (accepted drafts + the bonus token per step: tokens per
  step) and ``sglang:spec_accept_rate`` (accepted / proposed drafts), the mean over their label
  sets.  They describe the most recent batches only and carry no counts (n_steps is empty).
- ``llamacpp``: a ``llama-server``'s ``/metrics`` text (tools/server/server-task.cpp of the llama.cpp
  ``inputs.llamacpp`` builds): the vLLM counters above, named ``llamacpp:spec_decode_num_*``, read
  the same way (a step is a verification step with a draft); or its responses as JSON lines
  (``llamacpp_metrics``: each ``timings``' ``draft_n`` / ``draft_n_accepted``), which give the
  acceptance rate and no step count (give ``--budget``).

Every count is checked before a row is written: counts >= 0, finite and whole, per-position counts <=
drafts and non-increasing, positions 0..K-1 all present, accepted <= drafted, histogram totals
equal to the counters they repeat.  Rows (``COLUMNS``) are labelled ``engine=vllm``,
``engine=sglang`` or ``engine=llamacpp`` with no config hash of ours; ``--pair``, ``--dataset``, ``--tree`` and
``--budget`` say what was served (vLLM's budget defaults to the positions it counted).  They
replace the rows of the same engine, pair, dataset, tree and budget in ``--out``.  A file that is
not such a dump, or whose numbers cannot be, is one line naming the file and the fix, exit 2,
nothing written.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import defaultdict

import pandas as pd

from ...core import readers
from ...core.args import Parser, number
from ...core.atomic import os_line, write_file
from ...core.jsonl import json_objects
from ...results.files import read_served
from ...results.schemas import SERVED_COLUMNS, SERVED_KEY
from ...results.upsert import replace_rows, upsert
from ..job.argv import check_out, fail
from . import llamacpp_metrics

COLUMNS, KEY = SERVED_COLUMNS, SERVED_KEY  # served.csv's (results.schemas)
VLLM = "vllm:spec_decode_num_"
LLAMACPP = "llamacpp:spec_decode_num_"
SGLANG_GAUGES = ("sglang:spec_accept_length", "sglang:spec_accept_rate")
SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
DUMP_FIX = "give the /metrics text as the server wrote it"


def samples(text: str, path: str, keep) -> list[tuple[int, str, dict, float]]:
    """(line, name, labels, value) of the Prometheus samples whose name ``keep`` takes; a value that
    is not a finite number >= 0, or a series given twice, is one line naming the file, the line and the fix."""
    out: list[tuple[int, str, dict, float]] = []
    seen: dict[tuple, int] = {}  # (name, labels) -> the line that gave it
    for lineno, line in enumerate(text.splitlines(), 1):
        m = SAMPLE.match(line.strip())
        if not m or not keep(m["name"]):
            continue
        try:
            value = float(m["value"])
        except ValueError:
            raise ValueError(f"{path}:{lineno}: {m['name']} = {m['value']!r} is not a number; {DUMP_FIX}") from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(
                f"{path}:{lineno}: {m['name']} = {m['value']}: a count must be finite and >= 0; {DUMP_FIX}"
            )
        labels = dict(LABEL.findall(m["labels"] or ""))
        series = (m["name"], tuple(sorted(labels.items())))
        if series in seen:  # one series twice: two dumps pasted together, or a garbled one
            raise ValueError(
                f"{path}:{lineno}: {m['name']} repeats the series of line {seen[series]} (same labels); {DUMP_FIX}"
            )
        seen[series] = lineno
        out.append((lineno, m["name"], labels, value))
    return out


def vllm_counters(text: str, path: str = "metrics", prefix: str = VLLM) -> tuple[dict[str, float], dict[int, float]]:
    """({drafts, draft_tokens, accepted_tokens}: totals, {position: accepted}) of a /metrics dump
    (``prefix``: vLLM's counter names, or llama.cpp's, which are the same after it)."""
    totals: dict[str, float] = defaultdict(float)
    per_pos: dict[int, float] = defaultdict(float)
    found = samples(text, path, lambda n: n.startswith(prefix) and n.endswith("_total"))
    models = sorted({labels["model_name"] for _, _, labels, _ in found if "model_name" in labels})
    if len(models) > 1:  # one row is one model's counters: two summed would be neither's
        raise ValueError(f"{path}: counters of {len(models)} models ({', '.join(models)}); give one model's lines")
    for lineno, name, labels, value in found:
        what = name[len(prefix) : -len("_total")]
        if what != "accepted_tokens_per_pos":
            totals[what] += value
        elif not str(labels.get("position", "")).isdigit():
            raise ValueError(
                f"{path}:{lineno}: {name} without a position label 0..K-1; {DUMP_FIX} (every sample names its position)"
            )
        else:
            per_pos[int(labels["position"])] += value
    return totals, per_pos


def check_vllm(totals: dict[str, float], per_pos: dict[int, float], path: str, engine: str = "vLLM") -> None:
    """The counters' ranges and consistency (vLLM and llama.cpp count a position's acceptance only
    after the previous position's, and every accepted token at one position)."""
    drafts, drafted, accepted = (totals[k] for k in ("drafts", "draft_tokens", "accepted_tokens"))
    bad = [f"a count is not an integer ({v:g})" for v in [*totals.values(), *per_pos.values()] if v != int(v)][:1]
    if accepted > drafted:
        bad.append(f"accepted tokens {accepted:g} > draft tokens {drafted:g}")
    if per_pos:
        k = max(per_pos) + 1
        missing = sorted(set(range(k)) - set(per_pos))
        if missing:
            bad.append(f"accepted_tokens_per_pos lacks position(s) {', '.join(map(str, missing))} of 0..{k - 1}")
        counts = [per_pos.get(i, 0.0) for i in range(k)]
        if max(counts) > drafts:
            bad.append(f"a position's accepted count {max(counts):g} > drafts {drafts:g}")
        if any(b > a for a, b in zip(counts, counts[1:])):
            bad.append("per-position accepted counts increase with position")
        if not math.isclose(sum(counts), accepted, rel_tol=1e-9, abs_tol=0.5):
            bad.append(f"per-position accepted counts sum to {sum(counts):g}, not the accepted tokens {accepted:g}")
        if drafted > drafts * k + 0.5:
            bad.append(f"draft tokens {drafted:g} > drafts x positions ({drafts:g} x {k})")
    if bad:
        raise ValueError(
            f"{path}: not one {engine} server's spec-decode counters: {bad[0]}; {DUMP_FIX}, after its requests"
        )


def from_vllm(text: str, path: str, prefix: str = VLLM, engine: str = "vLLM") -> dict:
    totals, per_pos = vllm_counters(text, path, prefix)
    need = ("drafts", "draft_tokens", "accepted_tokens")
    if not all(k in totals for k in need) or not totals["drafts"]:
        raise ValueError(
            f"{path}: no {engine} spec-decode counters with drafts ({', '.join(prefix + k + '_total' for k in need)}); "
            f"give the text of a {engine} server's /metrics after speculative requests"
        )
    check_vllm(totals, per_pos, path, engine)
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


def count(meta: dict, keys: tuple[str, ...], where: str, required: bool = True) -> int | None:
    """The integer count under the first of ``keys`` in ``meta`` (None where absent and not
    ``required``); a missing, non-integer or negative one is one line naming ``where``."""
    key = next((k for k in keys if meta.get(k) is not None), None)
    if key is None:
        if required:
            raise ValueError(f"{where}: no meta_info.{keys[0]}; give SGLang's response objects as it returned them")
        return None
    v = meta[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or v != int(v):
        raise ValueError(f"{where}: meta_info.{key} = {v!r} is not a count (an integer >= 0); give SGLang's responses")
    return int(v)


def histogram(meta: dict, steps: int, correct: int | None, where: str) -> list[int] | None:
    """A request's ``spec_correct_drafts_histogram`` (steps by accepted drafts), checked against
    its step and accepted-draft counts; None where absent or empty."""
    h = meta.get("spec_correct_drafts_histogram")
    if h is None or h == []:
        return None
    if not isinstance(h, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in h):
        raise ValueError(f"{where}: meta_info.spec_correct_drafts_histogram must be a list of counts >= 0, got {h!r}")
    if sum(h) != steps:
        raise ValueError(f"{where}: spec_correct_drafts_histogram counts {sum(h)} steps, spec_verify_ct says {steps}")
    if correct is not None and sum(i * x for i, x in enumerate(h)) != correct:
        raise ValueError(f"{where}: spec_correct_drafts_histogram holds {sum(i * x for i, x in enumerate(h))} accepted "
                         f"drafts, spec_num_correct_drafts says {correct}")  # fmt: skip
    return h


def sglang_request(meta: dict, where: str) -> dict:
    steps = count(meta, ("spec_verify_ct",), where, required=False)
    if not steps:
        raise ValueError(f"{where}: no meta_info.spec_verify_ct > 0: not a speculative SGLang response")
    tokens = count(meta, ("completion_tokens",), where)
    proposed = count(meta, ("spec_num_proposed_drafts", "spec_draft_token_num"), where, required=False)
    correct = count(meta, ("spec_num_correct_drafts", "spec_accept_token_num"), where, required=False)
    if proposed is not None and correct is not None and correct > proposed:
        raise ValueError(f"{where}: {correct} accepted drafts > {proposed} proposed; give SGLang's responses unchanged")
    if tokens is not None and tokens < steps:  # every verify step emits a token: fewer is not one response
        raise ValueError(
            f"{where}: spec_verify_ct {steps} > completion_tokens {tokens}; give SGLang's responses unchanged"
        )
    if correct is not None and tokens is not None and correct > tokens:
        raise ValueError(f"{where}: {correct} accepted drafts > completion_tokens {tokens}; give SGLang's responses")
    hist = histogram(meta, steps, correct, where)
    return {"steps": steps, "tokens": tokens, "proposed": proposed or 0, "correct": correct or 0, "hist": hist}


def marginals(hists: list[list[int]], steps: int) -> list[float]:
    """P(accepted >= d), d = 1.., of the summed histograms (trailing zeros dropped)."""
    total = [0] * max(map(len, hists))
    for h in hists:
        for i, x in enumerate(h):
            total[i] += x
    while len(total) > 1 and total[-1] == 0:
        total.pop()
    return [sum(total[d:]) / steps for d in range(1, len(total))]


def from_sglang(text: str, path: str) -> dict:
    if any(SAMPLE.match(ln.strip()) and ln.strip().startswith("sglang:") for ln in text.splitlines()):
        return from_sglang_gauges(text, path)
    lines = json_objects(text.splitlines(), path, "give one SGLang response object per line", '{"meta_info": {...}}')
    reqs = []
    for lineno, obj in lines:
        meta = obj.get("meta_info", obj)
        if not isinstance(meta, dict):
            raise ValueError(f"{path}:{lineno}: meta_info is not an object; give SGLang's response objects")
        reqs.append(sglang_request(meta, f"{path}:{lineno}"))
    if not reqs:
        raise ValueError(f"{path}: no responses")
    steps, tokens = sum(r["steps"] for r in reqs), sum(r["tokens"] for r in reqs)
    proposed, accepted = sum(r["proposed"] for r in reqs), sum(r["correct"] for r in reqs)
    hists = [r["hist"] for r in reqs if r["hist"] is not None]
    if hists and len(hists) < len(reqs):
        raise ValueError(f"{path}: spec_correct_drafts_histogram on {len(hists)} of {len(reqs)} responses; give "
                         "responses of one SGLang server (all with it or none)")  # fmt: skip
    return {
        "n_requests": len(reqs),
        "n_steps": steps,
        "acceptance_rate": accepted / proposed if proposed else math.nan,
        "acceptance_length": tokens / steps - 1,
        "tokens_per_step": tokens / steps,
        "tokens_per_step_per_request": sum(r["tokens"] / r["steps"] for r in reqs) / len(reqs),
        "marginal_acceptance": json.dumps(marginals(hists, steps)) if hists else "",
    }


def from_sglang_gauges(text: str, path: str) -> dict:
    got = defaultdict(list)
    for _, name, _, value in samples(text, path, lambda n: n in SGLANG_GAUGES):
        got[name].append(value)
    length, rate = (sum(got[g]) / len(got[g]) if got[g] else None for g in SGLANG_GAUGES)
    if length is None:
        raise ValueError(
            f"{path}: no {SGLANG_GAUGES[0]} gauge; give an SGLang server's /metrics after speculative requests"
        )
    if length < 1 or (rate is not None and rate > 1):
        raise ValueError(f"{path}: {SGLANG_GAUGES[0]} = {length:g} (must be >= 1) or {SGLANG_GAUGES[1]} = {rate} "
                         f"(must be <= 1); {DUMP_FIX}")  # fmt: skip
    return {
        "acceptance_rate": math.nan if rate is None else rate,
        "acceptance_length": length - 1,
        "tokens_per_step": length,
        "marginal_acceptance": "",
    }


def from_llamacpp(text: str, path: str) -> dict:
    """llama-server's /metrics (its counters are vLLM's, named ``llamacpp:spec_decode_num_*``), or
    its responses' ``timings`` as JSON lines (``llamacpp_metrics``)."""
    if LLAMACPP in text:
        return from_vllm(text, path, LLAMACPP, "llama.cpp")
    return llamacpp_metrics.from_timings(text, path)


READERS = {"vllm": from_vllm, "sglang": from_sglang, "llamacpp": from_llamacpp}


def row(args) -> dict:
    fix = f"give the {args.engine} server's dump as it wrote it"
    whole = args.engine == "vllm" or not args.file.endswith((".jsonl", ".json"))  # /metrics text ends in "\n"
    readers.check_file(args.file, fix, whole=whole)  # missing, a folder, binary, not UTF-8, or cut: one line
    try:
        text = open(args.file, encoding="utf-8").read()
    except OSError as e:
        raise ValueError(f"{args.file}: {e.strerror or e}; {fix}") from None
    got = READERS[args.engine](text, args.file)
    seen = got.pop("budget_seen", None)
    if args.budget and seen and args.budget != seen:
        raise ValueError(f"{args.file}: counts {seen} draft positions, --budget says {args.budget}; drop --budget "
                         "(vLLM's is counted) or give the dump of the server that drafted that many")  # fmt: skip
    budget = args.budget or seen
    if not budget:
        raise ValueError("--budget: say how many draft tokens the server drafted per step (e.g. --budget 4)")
    depth = len(json.loads(got["marginal_acceptance"] or "[]"))
    if depth > budget:
        raise ValueError(f"{args.file}: steps accepted {depth} drafts, more than --budget {budget}; give the budget "
                         "the server drafted with")  # fmt: skip
    out = {"engine": args.engine, "config_hash": "", "pair": args.pair, "dataset": args.dataset, "tree": args.tree,
           "budget": int(budget), "source": os.path.abspath(args.file), **got}  # fmt: skip
    return {c: out.get(c, math.nan) for c in COLUMNS}


def merged(old: pd.DataFrame | None, new: dict) -> pd.DataFrame:
    """served.csv (``old``, None where there is none) with ``new`` in place of its row of the same key."""
    return replace_rows(old, pd.DataFrame([new]), KEY)[COLUMNS]


def served_writer(df: pd.DataFrame):
    return lambda tmp: write_file(tmp, df.to_csv(index=False, lineterminator="\n"))


def main(argv=None) -> None:
    ap = Parser(prog="python -m specbench.import_metrics", description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--engine", required=True, choices=sorted(READERS))
    ap.add_argument("--pair", required=True, help="the study pair it served (e.g. qwen_coder)")
    ap.add_argument("--dataset", required=True, help="the prompts it served (e.g. humaneval)")
    ap.add_argument("--tree", default="chain", help="the tree shape it drafted (default chain)")
    ap.add_argument("--budget", type=number(int, 1, 4096), default=None, help="draft tokens per step (vLLM: counted)")
    ap.add_argument("--out", default="results/served.csv")
    args = ap.parse_args(argv)
    for flag, name, eg in (
        ("--pair", args.pair, "qwen_coder"),
        ("--dataset", args.dataset, "humaneval"),
        ("--tree", args.tree, "chain"),
    ):
        if not re.fullmatch(r"[A-Za-z0-9][\w.-]*", name):  # a name the rows are keyed by, never a path
            fail(f"{flag}={name!r}: must be a name (letters, digits, _ . -), e.g. {flag} {eg}")
    check_out(args.out, "--out")  # a folder, or one it cannot write: one line, exit 2, before the reading
    try:
        new = row(args)
        upsert(args.out, lambda old: merged(old, new), read_served, served_writer)
    except ValueError as e:  # the dump or the served.csv it merges into refused: one line, exit 2
        fail(str(e).splitlines()[0])
    except OSError as e:  # the disk refused the write: one line, served.csv as it was
        fail(os_line(e, args.out, "--out"), 1)
    if pd.isna(new["tokens_per_step"]):  # llama.cpp's per-response timings: an acceptance rate, no steps
        what = f"acceptance rate {new['acceptance_rate']:.3f} ({new['n_requests']} responses, no step count)"
    else:
        steps = "gauges, no step count" if pd.isna(new["n_steps"]) else f"over {new['n_steps']} steps"
        what = f"tokens/step {new['tokens_per_step']:.3f} ({steps})"
    print(f"specbench: {args.engine} {what} -> {args.out}")


if __name__ == "__main__":
    main()
