"""The default run's step times on this machine (``study.tools.budget``'s estimates), from the rates it
measured (``inputs/machine.py``: GFLOP/s of a 1536 x 8960 linear layer at 1, 4, 16 and 64 rows in each dtype).
torch-free: the standard library.

Every step's time is an estimate from the models' sizes (2 FLOP per parameter and token) at the
measured rate for its forward width, plus each process's start and model load:

* ``costs``: every forward shape of the answer's pairs' models, ``repeats`` times, at each KV length after its prefill
  (widths 1..128; 1..17 where the whole grid leaves the first speed unit less: on a CPU whose wide forwards
  are slow, such as bf16 without AVX-512, whose 64-token forward of the 1.5B target took 12 s);
* ``recheck``: the acceptance sample (``study.tools.recheck``), each configuration at its committed
  batch B on the P prompts of its run (``recheck.run_prompts``): one target continuation per
  (target, dataset, batch, prompts, tokens, dtype) it needs (per B prompts a prefill, then one
  B-row forward per token), and per configuration a process, a drafter pass over the same rows and
  tokens (``sample_cost``); a live row decodes its P prompts with both models;
* ``speed``: per pair x dataset, ``prompts`` x ``tokens`` decodes of plain decoding, its A/A copy,
  each candidate and the first one's twin, each token one target decode step (a tree step's
  drafts and wider forward cost about the steps it saves);
* ``attention``: the tree-attention grid's time on a reference machine, scaled by the rates of both dtypes
  it times (``grid_s``: fitted on three hosts' recorded runs); it runs
  before the speed step, so what it takes beyond its ETA comes out of the speed step's prompts;
* ``record``, ``ceiling``, ``report``: the report at this machine's own recorded report step where it has one
  (``results.plan.REPORT_STEP``); else scaled by its recorded collect step where it has one
  (``results.plan.COLLECT_STEP``), else fixed, or more on a machine slower at Python work (``fixed_steps``: the
  machine's measured ``python_s``; hosts of one kind differ 2.6x in the report).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .sizes import WARM_TOKENS, continuation_key, cost_sizes, models, params, run_prompts

PROMPT_TOKENS = 200  # a prompt's tokens (padded), for prefill estimates: the longer prompts of humaneval
# No gain factor: a whole model's forward of w tokens costs what the layer's measured rates give at w rows
# (``row_s``: the time of a 1-, 4- and 16-row forward, linear between them, each token beyond 16 at the 64-row
# rate), all this machine's (machine.json).  Checked on results/costs.csv (1..17 tokens at KV 128, the AVX2 EPYC
# in fp32, 2026-12-05) against the rates its run measured (results/default_run.json: 6.6 / 6.4 / 19.5 / 40.1
# GFLOP/s at 1 / 4 / 16 / 64 rows): 0.88-1.01x the measured seconds for the 1.5B target, 0.74-1.04x for the 0.5B;
# charging every token after the first at the 64-row rate (the estimate before the narrow widths were measured,
# still what a record of 1 and 64 rows gets) gave 0.37-0.88x and 0.38-0.74x, and that host's costs step ran
# 387 s on a 276 s ETA (282 s on a 281 s ETA after).  On the AVX-512 EPYC the two-width form gave 0.96-1.21x
# for the 1.5B target, 0.73-0.87x for the 0.5B.
# The attention grids (Profile.grid_s: 'key' ~40 s, 'default' 660 s, timed on the AVX-512 EPYC whose 64-row
# rates were REF_RATES) time both dtypes, so a grid's seconds are a fixed part (process, compiles, checks) and
# one part per dtype at that dtype's 64-row rate.  The 'key' grid's seconds in results/run_times.csv fit
# GRID_FIT exactly on three hosts: 43 s (AVX-512 EPYC, bf16 283 / fp32 61 GFLOP/s), 23 s (Xeon with AMX,
# 798 / 236) and 263 s (AVX2-only EPYC, 21 / 80; by the best rate alone: 160 s); a grid scales by the fit's
# seconds on this machine over its seconds at REF_RATES
GRID_FIT = {"fixed": 13.7, "bfloat16": 5025.0, "float32": 707.0}
REF_RATES = {"bfloat16": {"64": 319.0}, "float32": {"64": 70.0}}


@dataclass(frozen=True)
class Profile:
    name: str
    tokens: int = 64  # new tokens per speed decode
    prompts: tuple[int, int] = (4, 16)  # speed prompts per pair x dataset: (fewest worth running, most)
    # the first pair x dataset's fewest where those do not fit: a paired interval needs two (speed.MIN_UNITS)
    least: int = 2
    costs_repeats: int = 3
    # the costs' widths where the whole grid (1..128) leaves no room for the first speed unit's fewest prompts: the
    # batch-1 trees' (up to 16 draft tokens and the root), which the speed benchmark times and its check reads
    narrow_tokens: int = 17
    cost_tokens: int | None = None  # the plan's: None (every width) or narrow_tokens
    kv_lens: tuple[int, ...] = (128, 512)
    grids: tuple[str, str] = ("key", "default")  # (small, full) attention grid
    grid_s: dict = field(default_factory=lambda: {"none": 0.0, "tiny": 5.0, "key": 40.0, "default": 660.0})
    # one process's imports and model load: the batch-1 acceptance check of results/run_times.csv's last default
    # run (15 one-prompt processes in 284 s, their forwards 128 s of it) left ~10 s a process; 15 with the load
    load_s: float = 15.0
    # record: the run's record (default_run.json, a few seconds); ceiling; report (python -m specbench.report took
    # ~2-3 min; recorded in run_times.csv from 2026-12-06, ``REPORT_STEP``, and then read from there)
    fixed_s: dict = field(default_factory=lambda: {"record": 10.0, "ceiling": 10.0, "report": 180.0})
    # the same steps on a host slower at Python (the AVX2 EPYC of 2026-12-02: ceiling and report 355 s, where
    # `python -m specbench.report` took 360 s against ~140 s on the AVX-512 host), scaled by the machine's
    # measured `python_s` (inputs/machine.py) against that host's; a step takes the larger estimate
    slow_fixed_s: dict = field(default_factory=lambda: {"record": 10.0, "ceiling": 10.0, "report": 360.0})
    slow_collect_s: float = 230.0  # that host's collect step (COLLECT_STEP), which scales them where recorded
    # llama.cpp's stage (study.tools.llamaplan): the candidates of its committed benchmark (n_max/p_min), a server's
    # start with its cold first request (9-12 s to /health for the 1.5B target with and without its draft on the
    # AVX-512 EPYC, 2026-12-07), and llama-bench's widths (1..llama_widths) for its cost curve
    llama_candidates: tuple[str, ...] = ("2/0.75", "4/0.75", "8/0.75", "4/0")
    llama_start_s: float = 15.0
    llama_widths: int = 17


SLOW_PYTHON_S = 0.13  # inputs.machine.python_s() on the host of Profile.slow_fixed_s


def fixed_steps(
    prof: Profile, python_s: float | None, collect_s: float | None = None, report_s: float | None = None
) -> dict:
    """record, ceiling and report's seconds: where this machine has recorded its collect step (``collect_s``,
    the median of its runs in results/run_times.csv), the slow host's steps scaled by it; else the larger of the
    fixed and the slow host's scaled by the measured ``python_s``.  On the AVX2 EPYC, python_s read 0.13 to 0.22 s
    within minutes while its collect took 181-249 s: the linear python_s scaling put 384 s on a 249 s collect and
    600 s on a 309 s ceiling and report (2026-12-05), crowding out the speed benchmark.  Where this machine has
    recorded its report step itself (``report_s``, the median of its runs), the report takes that."""
    if collect_s and prof.slow_collect_s:
        scale = float(collect_s) / prof.slow_collect_s
        out = {k: prof.slow_fixed_s.get(k, v) * scale for k, v in prof.fixed_s.items()}
    else:
        scale = float(python_s or 0.0) / SLOW_PYTHON_S
        out = {k: max(v, prof.slow_fixed_s.get(k, 0.0) * scale) for k, v in prof.fixed_s.items()}
    return {**out, "report": float(report_s)} if report_s and "report" in out else out


PROFILES = {
    "real": Profile("real"),
    "tiny": Profile(
        "tiny",
        tokens=8,
        prompts=(1, 2),
        least=1,
        costs_repeats=1,
        kv_lens=(16,),
        grids=("none", "tiny"),
        load_s=4.0,
        fixed_s={"record": 6.0, "ceiling": 3.0, "report": 40.0},
        slow_fixed_s={},
        llama_candidates=("2/0",),
        llama_start_s=2.0,
        llama_widths=2,
    ),
}


def forward_s(model: str | None, width: int, rate: dict) -> float:
    """One forward of ``width`` tokens at this machine's measured rates (``row_s``)."""
    if model is None:
        return 0.0
    return 2 * params(model) * row_s(width, rate) + 0.002


def row_s(width: int, rate: dict) -> float:
    """Seconds per GFLOP of one token's forward (``rate``: GFLOP/s by rows) for a forward of ``width`` tokens:
    through the measured widths below the widest (1 row, and 4 and 16 where measured) the time of their
    forward, linear between them and never less than a narrower one's; each token beyond the last of those at
    the widest (64-row) rate.  A record of 1 and 64 rows alone (before 2026-12-05) charges the first token at
    the 1-row rate and each further one at the 64-row rate."""
    by = {int(k): float(v) for k, v in rate.items()}
    top = max(by)
    points: list[tuple[int, float]] = []
    for n in [n for n in sorted(by) if n < top] or [1]:
        points.append((n, max(n / by.get(n, by[top]), points[-1][1] if points else 0.0)))
    w = max(width, 1)
    for (na, ta), (nb, tb) in zip(points, points[1:]):
        if w <= nb:
            return ta + (w - na) * (tb - ta) / (nb - na)
    n_last, t_last = points[-1]
    return t_last + (w - n_last) / by[top]


def costs_s(pairs, rate: dict, prof: Profile) -> float:
    """study.tools.costs for ``pairs`` (widths up to ``prof.cost_tokens``): each distinct model once (a shared
    target is measured once)."""
    ms = {m for p in pairs for m in models(p) if m is not None}
    sizes = cost_sizes(prof.cost_tokens)
    per = {m: sum(forward_s(m, n, rate) for n in sizes) * prof.costs_repeats for m in ms}  # study.tools.costs.measure
    fill = {m: sum(forward_s(m, kv, rate) for kv in prof.kv_lens) for m in ms}
    return (prof.load_s + sum(per[m] * len(prof.kv_lens) + fill[m] for m in ms)) if ms else 0.0


def _decode_s(model: str | None, b: int, n: int, rate: dict) -> float:
    """``b`` prompts prefilled, then ``n`` forwards of ``b`` rows."""
    return forward_s(model, b * PROMPT_TOKENS, rate) + n * forward_s(model, b, rate)


def sample_cost(row: dict, rates: dict, prof: Profile) -> tuple[float, float]:
    """(its continuation's seconds, its own seconds) for one sampled row at its committed batch B on the
    P prompts of its run (P / B batches); a live row has no shared continuation (its decode is its own)."""
    draft, target = models(row["pair"])
    b, n, rate = int(row["batch_size"]), int(row["max_new_tokens"]), rates[row["dtype"]]  # the committed dtype
    runs = -(-run_prompts(row) // b)
    cont, own = runs * _decode_s(target, b, n, rate), prof.load_s + runs * _decode_s(draft, b, n, rate)
    return (0.0, own + cont) if row.get("engine", "replay") == "live" else (cont, own)


def recheck_s(sample: list[dict], rates: dict, prof: Profile) -> float:
    """The sample's seconds: each row's own, each continuation it needs once."""
    conts: dict = {}
    own = 0.0
    for r in sample:
        cont, mine = sample_cost(r, rates, prof)
        conts[continuation_key(r)] = max(conts.get(continuation_key(r), 0.0), cont)
        own += mine
    return own + sum(conts.values())


def shrink(sample: list[dict], rates: dict, prof: Profile, seconds: float) -> tuple[list[dict], list[dict]]:
    """(kept, dropped): the sample with its most expensive rows (own + continuation) dropped first
    until it fits ``seconds``; the cheapest row is always kept (the mandatory part)."""
    order = sorted(range(len(sample)), key=lambda i: (-sum(sample_cost(sample[i], rates, prof)), i))
    for k in range(len(order)):
        kept = [sample[i] for i in sorted(order[k:])]
        if k == len(order) - 1 or recheck_s(kept, rates, prof) <= seconds:
            return kept, [sample[i] for i in order[:k]]
    return [], []


def speed_s(pair: str, n_candidates: int, prompts: int, prof: Profile, rate: dict) -> float:
    """study.tools.speed on one pair x dataset: plain, A/A, each candidate and a twin per prompt, and a
    short warm-up decode of each (``WARM_TOKENS``); each decode a prefill of its prompt, then one target step per token."""
    target = models(pair)[1]
    per_token = forward_s(target, 1, rate)  # a tree step's wider forward and drafts ~ its tokens saved
    tokens = prompts * prof.tokens + min(WARM_TOKENS, prof.tokens)
    return prof.load_s + (n_candidates + 3) * (
        (prompts + 1) * forward_s(target, PROMPT_TOKENS, rate) + tokens * per_token
    )


def grid_fit_s(rates: dict) -> float:
    """The 'key' grid's seconds at ``rates`` (GRID_FIT); a dtype not measured runs at the best measured rate."""
    best = max(float(r["64"]) for r in rates.values())
    return GRID_FIT["fixed"] + sum(
        w / float(rates.get(dt, {"64": best})["64"]) for dt, w in GRID_FIT.items() if dt != "fixed"
    )


def grid_s(grid: str, rates: dict, prof: Profile) -> float:
    """The attention grid's seconds on a machine of ``rates``: its reference seconds scaled by ``grid_fit_s``."""
    if grid in ("tiny", "none"):
        return prof.grid_s[grid]
    return prof.grid_s[grid] * grid_fit_s(rates) / grid_fit_s(REF_RATES)
