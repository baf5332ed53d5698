"""The default run's llama.cpp stage (#84 item 9, ``study.tools.budget``): llama.cpp's interleaved benchmark for
the main pair (``study.tools.speed_llamacpp``: qwen_coder on the first speed unit's dataset) with its cost curve
(``study.tools.costs_llamacpp``, which the report's projection for llama.cpp reads), when the plan fits it.
torch-free: pandas (the plan only) and the standard library.

Priority (``budget``'s stages): after the first speed unit (this machine's specbench answer) on its fewest prompts
with all its candidates and the small attention grid, llama.cpp on the same fewest prompts with as many of its
candidates (``Profile.llama_candidates``) as fit, the first kept (it and its twin against plain decoding and its
A/A copy is the least worth running); after the first unit's further prompts, llama.cpp's further prompts (``grow``).
Never a mandatory step: where it does not fit it is left out and closes the budget behind it, as every stage does;
where llama.cpp is not built (``inputs.llamacpp.unavailable``) or the tiny profile has no GGUF files, the plan says
why in one line and skips it, its minutes left to the stages after it.

ETA (``bench_s``): k candidates on P prompts x T tokens run k + 3 servers (plain, A/A, the candidates, the first
one's twin), each started (``Profile.llama_start_s``) and sent P timed requests and one untimed warm-up of
min(WARM_TOKENS, T) tokens:  servers x start + sum over servers of requests x (prompt_s + tokens x s_token(kind)),
with s_token per server kind (plain: plain and A/A; draft: the candidates and the twin) from, in this order:

1. ``speed``: this machine's llama.cpp rows of the pair in results/speed.csv: per kind, their seconds (``client_s``,
   the request's wall: prompt, decode, HTTP) over their tokens, from its rows of T tokens where it has them
   (prompt_s 0: the rows' seconds hold it).  The 16-prompt x 128-token benchmark with 4 candidates here: 17 min
   by this rule against 15-17 min measured (2026-12-07, the AVX-512 EPYC);
2. ``costs``: this machine's llama.cpp curve of the pair in results/costs.csv: plain decoding at the target's
   1-token forward, a drafting server at CURVE_MARGIN x (the target's and the draft's 1-token forwards), each at
   the deepest KV, prompt_s the target's widest forward scaled to PROMPT_TOKENS; that benchmark by this rule:
   24 min (1.5x the measured: drafting servers decoded 11-15 tok/s against 1 / 0.054 s from the curve);
3. ``machine``: specbench's own plain decoding on this machine's measured rates (``estimates.forward_s``: the
   target's 1-row forward a token, its PROMPT_TOKENS-row forward a prompt) for every server: a bound, not an
   estimate; llama.cpp decoded faster wherever both were measured (plain 20.9 against specbench's 3.8 tok/s
   here, 13.0 against 5.1 on the AMX Xeon; its drafting servers 11-15 tok/s here).

Its cost curve (``costs_s``): llama-bench per model (target, draft): a start, then its points (widths
1..``llama_widths`` at each KV of ``Profile.kv_lens``) repeats + 1 times (llama-bench's warm-up run): the points'
seconds from this machine's curve where present (2 x 15 + 4 x 8.4 = 64 s at 3 repeats here, 54 s measured),
else specbench's forwards at the same points (``estimates.forward_s``: a bound).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .estimates import PROMPT_TOKENS, Profile, forward_s
from .sizes import WARM_TOKENS, models

MAIN_PAIR = "qwen_coder"
CURVE_MARGIN = 1.5  # a drafting server's token over the curve's target + draft 1-token forwards (route 2 above)
PLAIN_KINDS = ("plain", "plain (A/A)")  # results.speedstats.PLAIN, PLAIN_AA: the plain servers' rows
GGUF_ENV = "SPECBENCH_TINY_GGUF=DRAFT:TARGET"


@dataclass(frozen=True)
class Llama:
    """What the stage is planned from: the pair x dataset, its seconds per token by server kind and per prompt,
    its cost curve's points' seconds, where they come from; ``skipped``: why it cannot run here ('' where it can)."""

    pair: str
    dataset: str
    plain_s: float = 0.0
    draft_s: float = 0.0
    prompt_s: float = 0.0
    points_s: float = 0.0
    rate_by: str = ""
    skipped: str = ""


def bench_s(ll: Llama, k: int, prompts: int, prof: Profile) -> float:
    """speed_llamacpp with ``k`` candidates on ``prompts`` prompts x ``prof.tokens`` tokens (the module's model)."""
    per = {kind: (prompts + 1) * ll.prompt_s + (prompts * prof.tokens + min(WARM_TOKENS, prof.tokens)) * s
           for kind, s in (("plain", ll.plain_s), ("draft", ll.draft_s))}  # fmt: skip
    return (k + 3) * prof.llama_start_s + 2 * per["plain"] + (k + 1) * per["draft"]


def costs_s(ll: Llama, prof: Profile) -> float:
    """costs_llamacpp at ``prof.costs_repeats`` (the module's model)."""
    return 2 * prof.llama_start_s + (prof.costs_repeats + 1) * ll.points_s


def stage(ll: Llama | None, prof: Profile, fill) -> dict | None:
    """The stage on the fewest prompts with as many candidates as fit ``fill`` (``budget.Fill``: closed short of
    all); None where there is no llama.cpp input (a plan without the stage)."""
    if ll is None:
        return None
    cands, lo = list(prof.llama_candidates), prof.prompts[0]
    step = dict(step="llamacpp", pair=ll.pair, dataset=ll.dataset, prompts=0, tokens=prof.tokens, candidates=[],
                dropped=cands, costs_repeats=prof.costs_repeats, costs_eta_s=0.0, eta_s=0.0, rate_by=ll.rate_by,
                kv_lens=list(prof.kv_lens), widths=prof.llama_widths, skipped=ll.skipped)  # fmt: skip
    if ll.skipped:
        return step
    cost = costs_s(ll, prof)
    k = next((k for k in range(len(cands), 0, -1) if cost + bench_s(ll, k, lo, prof) <= fill.left), 0)
    if not (k and fill.take(cost + bench_s(ll, k, lo, prof))):
        fill.open = False
        least = cost + bench_s(ll, 1, lo, prof)
        step["skipped"] = f"the budget left it none (its least, 1 candidate on {lo} prompts: {least / 60:.1f} min)"
        return step
    step.update(
        prompts=lo, candidates=cands[:k], dropped=cands[k:], costs_eta_s=cost, eta_s=cost + bench_s(ll, k, lo, prof)
    )
    if k < len(cands):
        fill.open = False
    return step


def grow(step: dict | None, ll: Llama | None, prof: Profile, fill) -> None:
    """The stage from its fewest prompts to as many as ``fill`` has left (closed short of the most)."""
    if not (step and ll and step["prompts"] and fill.open):
        return
    lo, hi = prof.prompts
    k = len(step["candidates"])
    more = {n: bench_s(ll, k, n, prof) - bench_s(ll, k, lo, prof) for n in range(lo, hi + 1)}
    n = max(m for m in more if more[m] <= fill.left)
    fill.take(more[n])
    step.update(prompts=n, eta_s=step["costs_eta_s"] + bench_s(ll, k, n, prof))
    if n < hi:
        fill.open = False


def inputs(prof: Profile, rec: dict, dtype: str, results_dir: str, units, gguf: str | None) -> Llama:
    """The stage's inputs on this machine (``rec``: machine.json): skipped where llama.cpp is not built, the
    tiny profile has no ``gguf`` (DRAFT:TARGET) or the plan has no speed unit of the main pair."""
    from ...inputs import llamacpp  # start-up: the shell calls `get` many times

    pair = "local" if prof.name == "tiny" else MAIN_PAIR
    dataset = next((ds for p, ds, _ in units if p == pair), "")
    why = llamacpp.unavailable() or ""
    if not why and prof.name == "tiny" and ":" not in (gguf or ""):
        why = f"the tiny profile's GGUF files not given ({GGUF_ENV})"
    if not why and not dataset:
        why = f"no speed unit of {pair} (results/speedup.csv projects none)"
    if why:
        return Llama(pair, dataset, skipped=why)
    mid, rate = str(rec.get("machine_id")), rec["rates_gflops"][dtype]
    draft, target = models(pair)
    curve = _curve(os.path.join(results_dir, "costs.csv"), mid, pair, prof)
    points = sum(forward_s(m, w, rate) for m in (draft, target) for w in range(1, prof.llama_widths + 1))
    points = curve["points_s"] if curve else points * len(prof.kv_lens)
    measured = _speed(os.path.join(results_dir, "speed.csv"), mid, pair, prof.tokens)
    if measured:
        return Llama(pair, dataset, *measured, 0.0, points, "this machine's llama.cpp rows in speed.csv")
    if curve:
        return Llama(pair, dataset, curve["t1"], CURVE_MARGIN * (curve["t1"] + curve["d1"]), curve["prompt_s"],
                     points, f"this machine's llama.cpp curve in costs.csv (drafting at {CURVE_MARGIN:g}x its forwards)")  # fmt: skip
    tok, prompt = forward_s(target, 1, rate), forward_s(target, PROMPT_TOKENS, rate)
    return Llama(pair, dataset, tok, tok, prompt, points, "specbench's plain decoding here (a bound: none measured)")


def _mine(path: str, mid: str, pair: str, need: set, costs: bool = False):
    """This machine's llama.cpp rows of ``pair`` in ``path``, speed.csv (costs.csv with ``costs``) read by its
    definition's lenient read (no schema check: the columns checked here); None where none (or the file lacks ``need``)."""
    from ...results import costtable, files  # start-up: pandas, for the plan only

    if not os.path.isfile(path):
        return None
    t = costtable.read_checked(path, strict=False) if costs else files.read_speed(path, strict=False)
    if not need | {"engine", "machine_id", "pair"} <= set(t.columns):
        return None
    t = t[(t.engine.astype(str) == "llamacpp") & (t.machine_id.astype(str) == mid) & (t.pair.astype(str) == pair)]
    return t if len(t) else None


def _speed(path: str, mid: str, pair: str, tokens: int) -> tuple[float, float] | None:
    """(plain, draft) seconds a token from this machine's llama.cpp benchmark rows (route 1), None without both."""
    t = _mine(path, mid, pair, {"candidate", "tokens", "wall_s", "max_new_tokens"})
    if t is None:
        return None
    secs = t["client_s"].fillna(t["wall_s"]) if "client_s" in t else t["wall_s"]
    out = []
    for plain in (True, False):
        kind = t.candidate.isin(PLAIN_KINDS) == plain
        same = kind & (t.max_new_tokens.astype(int) == tokens)
        rows = same if same.any() else kind
        if not rows.any() or not t.tokens[rows].sum() > 0:
            return None
        out.append(float(secs[rows].sum() / t.tokens[rows].sum()))
    return out[0], out[1]


def _curve(path: str, mid: str, pair: str, prof: Profile) -> dict | None:
    """Route 2's seconds from this machine's llama.cpp cost curve: t1, d1 (1-token forwards at the deepest KV), the
    prompt's, and the points costs_llamacpp measures; None without both roles' 1-token points."""
    c = _mine(path, mid, pair, {"role", "kv_len", "n_tokens", "seconds"}, costs=True)
    if c is None:
        return None
    deep = c[c.kv_len == c.kv_len.max()]
    one = {r: deep.seconds[(deep.role == r) & (deep.n_tokens == 1)] for r in ("target", "draft")}
    if any(s.empty for s in one.values()):
        return None
    target = deep[deep.role == "target"]
    wide = target[target.n_tokens == target.n_tokens.max()].iloc[0]
    run = c[(c.n_tokens <= prof.llama_widths) & c.kv_len.isin(prof.kv_lens)]
    return dict(t1=float(one["target"].iloc[0]), d1=float(one["draft"].iloc[0]),
                prompt_s=float(wide.seconds) * PROMPT_TOKENS / int(wide.n_tokens), points_s=float(run.seconds.sum()))  # fmt: skip


def values(s: dict | None) -> dict:
    """The shell's values: ``llamacpp`` (pair, dataset, prompts, tokens, [candidates], after_s; tab-separated, ''
    where not planned), ``llamacpp_costs`` (costs_llamacpp's options) and ``llamacpp_why`` (the one line)."""
    if not s or s["skipped"]:
        why = f"llama.cpp's benchmark: skipped: {s['skipped'] if s else 'not in this plan'}"
        return {"llamacpp": "", "llamacpp_costs": "", "llamacpp_why": why}
    return {
        "llamacpp": f"{s['pair']}\t{s['dataset']}\t{s['prompts']}\t{s['tokens']}\t[{','.join(s['candidates'])}]\t"
        f"{int(s.get('after_s', 0))}",
        "llamacpp_costs": f"--pair {s['pair']} --repeats {s['costs_repeats']} --tokens "
        f"{','.join(map(str, range(1, s['widths'] + 1)))} --kv {','.join(map(str, s['kv_lens']))}",
        "llamacpp_why": "",
    }
