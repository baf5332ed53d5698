"""The default run's plan (``bash run_all.sh``): what fits a time budget on this machine, from the
rates it measured (``inputs/machine.py``: GFLOP/s of a 1536 x 8960 linear layer at 1 and 64 rows in
each dtype).  torch-free: pandas and the standard library.

Every step's time is ``study.tools.estimates``'s.

``plan`` fills the budget in stages, each taken only once the stage before it reached its cap (so
more minutes never cover less, in this order of priority; the one exception: where no speed unit fits at
all, the small grid is still taken, and gives way once one does): the first pair x dataset's speed on its
fewest prompts worth running (4; with as many of its candidates as fit, the projected top first; where not
even its least set fits, on as few as 2, which closes the budget behind it), the small attention grid,
llama.cpp's benchmark for the main pair with its cost curve on the same fewest prompts (``study.tools.llamaplan``:
as many of its candidates as fit; skipped in one line where llama.cpp is not built), the rest of the acceptance
sample (``shrink``: the most expensive configurations dropped until it fits, named in the plan with the strata no
configuration then represents), the first pair x dataset's further prompts, llama.cpp's further prompts, every
further pair x dataset at full size (in the answer's order), the default grid.  The mandatory part (costs of the first pair, the sample's
cheapest configuration, the fixed steps) is planned even over the budget, and the plan says so.

    python -m specbench.study.tools.budget plan --machine OUT/machine.json --minutes 45 --spent 120 \\
        --out OUT/plan.json [--profile tiny] [--results results]
    python -m specbench.study.tools.budget get OUT/plan.json speed      # one line per unit, for the shell
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, replace

from ...core.args import Parser, check_out, number, refuse
from ...core.atomic import atomic_write, write_file
from ...results.plan import COLLECT_STEP, REPORT_STEP
from ...results.record import RecordError
from ...results.record import read_machine as read_record
from .estimates import (  # noqa: F401  (forward_s, sample_cost, PROMPT_TOKENS: its API, as the tests read it)
    PROFILES,
    PROMPT_TOKENS,
    Profile,
    costs_s,
    fixed_steps,
    forward_s,
    grid_s,
    recheck_s,
    sample_cost,
    shrink,
    speed_s,
)
from .llamaplan import Llama, grow, inputs, stage
from .planview import GRIDS, covered, get, printout, record, sentence  # noqa: F401  (GRIDS: its API)
from .sizes import PAIRS, PARAMS_B, STRATA, run_prompts  # noqa: F401  (PAIRS, PARAMS_B: its API)


@dataclass
class Fill:
    """The budget as it is spent: ``left`` seconds, stages taken until one stops short."""

    left: float
    open: bool = True

    def take(self, seconds: float) -> bool:
        if self.open and seconds <= self.left:
            self.left -= seconds
            return True
        self.open = False
        return False


def _fit(pair: str, cands: list, sizes, prof: Profile, rate: dict, left: float) -> tuple[int, int]:
    """(prompts, candidates): the most of ``sizes`` prompts that fit ``left`` seconds with every candidate,
    else the fewest prompts with as many of the first candidates as fit (the projected top first: the
    answer's tree and its twin against plain decoding and its A/A copy is the least worth running)."""
    n = next((p for p in sizes if speed_s(pair, len(cands), p, prof, rate) <= left), 0)
    if n:
        return n, len(cands)
    k = next((k for k in range(len(cands) - 1, 0, -1) if speed_s(pair, k, min(sizes), prof, rate) <= left), 0)
    return (min(sizes), k) if k else (0, 0)


def _units(units, prof: Profile, rate: dict, fill: Fill, costed: set, sizes) -> list[dict]:
    """Speed units in order, each with as many of ``sizes`` prompts and of its candidates as fit (`_fit`) and
    its pair's costs; stops at the first that does not fit, or that fits fewer prompts or candidates."""
    out: list[dict] = []
    for pair, dataset, cands in units:
        extra = 0.0 if pair in costed else costs_s([pair], rate, prof)
        n, k = _fit(pair, list(cands), sizes, prof, rate, fill.left - extra) if fill.open else (0, 0)
        if not n or not fill.take(extra + speed_s(pair, k, n, prof, rate)):
            fill.open = False
            break
        costed.add(pair)
        eta = speed_s(pair, k, n, prof, rate)
        unit = dict(pair=pair, dataset=dataset, prompts=n, tokens=prof.tokens, candidates=list(cands[:k]), eta_s=eta)
        out.append({**unit, "dropped": list(cands[k:])})
        if n < max(sizes) or k < len(cands):
            fill.open = False
    return out


def _first(units, prof: Profile, rate: dict, fill: Fill, costed: set) -> list[dict]:
    """The first pair x dataset's speed unit on its fewest prompts worth running (``_units``), else its least set
    (the projected top and its twin against plain decoding and its A/A copy) on as many prompts as fit, down to
    ``prof.least``: this machine's answer with a wider interval, before the grid and the rest of the sample (the
    budget closes behind it).  Each try on a copy of ``fill``."""
    lo = prof.prompts[0]
    if not units or _units(units, prof, rate, Fill(fill.left, fill.open), set(costed), [lo]):
        return _units(units, prof, rate, fill, costed, [lo])
    pair, dataset, cands = units[0]
    top = [(pair, dataset, list(cands[:1]))]
    for n in range(lo - 1, prof.least - 1, -1):
        if _units(top, prof, rate, Fill(fill.left, fill.open), set(costed), [n]):
            out = _units(top, prof, rate, fill, costed, [n])
            out[0]["dropped"] = list(cands[1:])
            fill.open = False
            return out
    fill.open = False  # none fits: the budget closes on it, as _units closes it
    return []


def _grow(unit: dict, prof: Profile, rate: dict, fill: Fill) -> None:
    """The first unit from its fewest prompts to as many as fit (closes ``fill`` short of the most)."""
    lo, hi = prof.prompts
    base = speed_s(unit["pair"], len(unit["candidates"]), lo, prof, rate)
    cost = {n: speed_s(unit["pair"], len(unit["candidates"]), n, prof, rate) - base for n in range(lo, hi + 1)}
    n = max((k for k in cost if fill.open and cost[k] <= fill.left), default=lo)
    fill.take(cost[n])
    unit.update(prompts=n, eta_s=base + cost[n])
    if n < hi:
        fill.open = False


def _recheck_step(sample: list[dict], rates: dict, prof: Profile, fill: Fill) -> dict:
    """The acceptance sample that fits what ``fill`` has left beyond its mandatory cheapest row."""
    floor = recheck_s(shrink(sample, rates, prof, 0.0)[0], rates, prof)
    kept, dropped = shrink(sample, rates, prof, floor + (fill.left if fill.open else 0.0))
    fill.take(recheck_s(kept, rates, prof) - floor)
    if dropped:
        fill.open = False
    return recheck_view(sample, kept, dropped, rates, prof)


def recheck_view(sample: list[dict], kept: list[dict], dropped: list[dict], rates: dict, prof: Profile) -> dict:
    """The plan's recheck step: the kept configurations (the shell's ``--only``), their batches and
    prompts, each dropped one with its seconds, and the strata values no kept one represents."""

    def name(r: dict) -> str:
        return f"{r['pair']} {r['tree']}/{int(r['budget'])} {r['dataset']} (batch {int(r['batch_size'])})"

    have = {(k, r[k]) for r in kept for k in STRATA}
    lost = sorted({f"{k} {r[k]}" for r in dropped for k in STRATA if (k, r[k]) not in have})
    return dict(
        step="recheck",
        configurations=len(kept),
        sampled=len(sample),
        configs=[r["config_hash"] for r in kept],
        batches=sorted({int(r["batch_size"]) for r in kept}),
        prompts=sum(run_prompts(r) for r in kept),
        dropped=[dict(name=name(r), eta_s=sum(sample_cost(r, rates, prof))) for r in dropped],
        unrepresented=lost,
        eta_s=recheck_s(kept, rates, prof),
    )


def plan(
    prof: Profile,
    rates: dict,
    dtype: str,
    budget_s: float,
    units,
    sample: list[dict],
    python_s: float | None = None,
    collect_s: float | None = None,
    report_s: float | None = None,
    llama: Llama | None = None,
) -> dict:
    """What fits ``budget_s`` seconds (see the module's docstring): a JSON-ready dict.  The costs' whole grid,
    unless it leaves the first pair x dataset's speed short of its fewest prompts with all its candidates and
    the narrow grid (``Profile.narrow_tokens``) leaves the speed benchmark more, or the whole grid overruns the
    budget and the narrow one less.  ``python_s``, ``collect_s``, ``report_s``: the fixed steps' (``fixed_steps``);
    ``llama``: llama.cpp's stage's inputs (``llamaplan.inputs``; None: a plan without the stage)."""
    fixed = fixed_steps(prof, python_s, collect_s, report_s)
    whole = _plan(prof, rates, dtype, budget_s, units, sample, fixed, llama)
    if not units or (_first_unit(whole) >= (prof.prompts[0], len(units[0][2])) and not whole["over_budget"]):
        return whole  # the whole curve ranks next after the first unit's fewest prompts with all its candidates
    narrow = _plan(replace(prof, cost_tokens=prof.narrow_tokens), rates, dtype, budget_s, units, sample, fixed, llama)
    if whole["over_budget"] and narrow["planned_s"] < whole["planned_s"]:
        why = "overran the budget"
    elif not whole["over_budget"] and covered(narrow)[:3] > covered(whole)[:3]:
        why = "left the speed benchmark less"
    else:
        return whole
    next(s for s in narrow["steps"] if s["step"] == "costs")["narrow_why"] = f"the whole grid {why}"
    return narrow


def _first_unit(p: dict) -> tuple[int, int]:
    """(prompts, candidates) of a plan's first speed unit, (0, 0) where none."""
    units = next(s for s in p["steps"] if s["step"] == "speed")["units"]
    return (units[0]["prompts"], len(units[0]["candidates"])) if units else (0, 0)


def _plan(prof: Profile, rates: dict, dtype: str, budget_s: float, units, sample, fixed: dict, llama) -> dict:
    rate = rates[dtype]
    first = [units[0][0]] if units else []
    floor = recheck_s(shrink(sample, rates, prof, 0.0)[0], rates, prof)
    must = sum(fixed.values()) + floor + costs_s(first, rate, prof)
    fill = Fill(budget_s - must, open=budget_s >= must)
    costed = set(first)
    small, full = prof.grids
    speed = _first(units[:1], prof, rate, fill, costed)  # this machine's answer first
    fill.open = fill.open or not speed  # no speed unit fits at all: the small grid may still
    grid = small if fill.take(grid_s(small, rates, prof)) else "none"
    llamacpp = stage(llama, prof, fill if speed else Fill(0.0, False))  # after this machine's answer's first unit
    recheck = _recheck_step(sample, rates, prof, fill)
    if speed and fill.open:
        _grow(speed[0], prof, rate, fill)
    grow(llamacpp, llama, prof, fill)
    if speed and speed[-1]["prompts"] == prof.prompts[1]:
        speed += _units(units[1:], prof, rate, fill, costed, [prof.prompts[1]])
    if grid == small and fill.take(grid_s(full, rates, prof) - grid_s(small, rates, prof)):
        grid = full
    pairs = sorted({u["pair"] for u in speed} | set(first))
    steps = [
        dict(
            step="costs",
            pairs=pairs,
            repeats=prof.costs_repeats,
            kv_lens=list(prof.kv_lens),
            max_tokens=prof.cost_tokens,
            eta_s=costs_s(pairs, rate, prof),
        ),
        recheck,
        dict(step="attention", grid=grid, eta_s=grid_s(grid, rates, prof)),
        dict(step="speed", units=speed, eta_s=sum(u["eta_s"] for u in speed)),
        *([llamacpp] if llamacpp else []),
        *(dict(step=name, eta_s=s) for name, s in fixed.items()),
    ]
    # the speed benchmarks stop taking prompts this many seconds before the budget ends (+speed_until):
    # what the steps after each take, so the run ends within its minutes whatever the speed step's ETA missed
    for at, s in enumerate(steps):
        if s["step"] in ("speed", "llamacpp"):
            s["after_s"] = sum(t["eta_s"] for t in steps[at + 1 :])
    after = next(s for s in steps if s["step"] == "speed")["after_s"]
    for u in reversed(speed):  # each pair x dataset leaves the ones after it their time
        u["after_s"] = after
        after += u["eta_s"]
    total = sum(s["eta_s"] for s in steps)
    return dict(
        profile=prof.name, dtype=dtype, budget_s=budget_s, planned_s=total, over_budget=total > budget_s, steps=steps
    )


# the answer's pairs x datasets, in the order the budget takes them (each where results/speedup.csv
# projects it): the speed answer's pairs first (the committed benchmark's), then the other drafters
UNITS = [
    ("qwen_coder", "humaneval"),
    ("ngram_qwen", "humaneval"),
    ("qwen_coder", "mt_bench"),
    ("ngram_qwen", "mt_bench"),
    ("smollm_qwen", "humaneval"),
    ("qwen_skip", "humaneval"),
    ("gemma_qwen", "humaneval"),
    ("smollm_qwen05", "humaneval"),
]
TINY_UNITS = [("local", "smoke", ["chain/2", "binary/2"])]


def answer_units(results_dir: str) -> list[tuple[str, str, list[str]]]:
    """UNITS with their benchmark candidates (``study.tools.validate.speed_picks`` on the committed
    projections); a pair x dataset without a projection is left out."""
    from ...results.files import read_speedup  # start-up: pandas, for the plan only; the shell calls `get` many times
    from . import validate  # heavy: torch (the tree registry), only for the real profile

    path = os.path.join(results_dir, "speedup.csv")
    if not os.path.isfile(path):
        refuse(f"--results: {path} not found; run python -m specbench.report first")
    speed = read_speedup(path, strict=False)  # lenient: speed_picks takes what it finds
    out = []
    for pair, ds in UNITS:
        try:
            out.append((pair, ds, [f"{t}/{b}" for t, b in validate.speed_picks(speed, pair, ds)]))
        except (ValueError, KeyError):
            continue
    return out


def _rates(rec: dict) -> object:
    return rec["rates_gflops"][rec["dtype"]]["64"]


def read_machine(path: str) -> dict:
    """The machine record (``results.record.read_machine``) with its dtype's rate at 64 rows, or one line."""
    try:
        return read_record(path, _rates)
    except RecordError as e:
        refuse(f"--machine={path}: not a machine record ({e.kind}); run python -m specbench.inputs.machine")


def make(args) -> dict:

    prof = PROFILES[args.profile]
    rec = read_machine(args.machine)
    dtype = args.dtype or rec["dtype"]
    if dtype not in rec["rates_gflops"]:
        refuse(f"--dtype={dtype}: not measured on this machine (measured: {', '.join(rec['rates_gflops'])})")
    units = TINY_UNITS if args.profile == "tiny" else answer_units(args.results)
    from .recheck import sample, sample_file  # start-up: pandas, for the plan only; the shell calls `get` many times

    rows = sample(sample_file(args.results))
    budget_s = args.minutes * 60 - args.spent
    collect, report = recorded_steps(args.results, rec.get("machine_id"), (COLLECT_STEP, REPORT_STEP))
    llama = inputs(prof, rec, dtype, args.results, units, args.gguf)
    p = plan(prof, rec["rates_gflops"], dtype, budget_s, units, rows.to_dict("records"), rec.get("python_s"), collect,
             report, llama)  # fmt: skip
    by = f"this machine's collect step of earlier runs ({collect:.0f} s, the median)" if collect else ""
    by = by or f"the Python work it measured ({rec.get('python_s') or 0:.3f} s)"
    by += f"; the report by its report step of earlier runs ({report:.0f} s, the median)" if report else ""
    return {**p, "minutes": args.minutes, "spent_s": args.spent, "machine": rec, "covered": sentence(p), "fixed_by": by}


def recorded_steps(results_dir: str, machine_id, steps: tuple[str, ...]) -> tuple[float | None, ...]:
    """Per step prefix (``COLLECT_STEP``, ``REPORT_STEP``), the median seconds of this machine's recorded steps
    whose message starts with it in results/run_times.csv (a step skipped by its marker records 0 and is left
    out), None where it has none; the file read once."""
    from ...results.files import read_run_times  # start-up: pandas, for the plan only; the shell calls `get` often

    path = os.path.join(results_dir, "run_times.csv")
    if not machine_id or not os.path.isfile(path):
        return tuple(None for _ in steps)
    try:
        t = read_run_times(path, strict=False)  # lenient: a file without the columns is no record
    except (OSError, ValueError) as e:  # a cut or garbled file (pandas' parser errors are ValueErrors)
        refuse(f"--results: {path}: not a readable run-times CSV ({type(e).__name__}); restore it: git checkout {path}")
    if not {"machine_id", "step", "seconds"} <= set(t.columns):
        return tuple(None for _ in steps)
    t = t[(t["machine_id"].astype(str) == str(machine_id)) & (t["seconds"].astype(float) > 0)]
    medians = (t["seconds"][t["step"].astype(str).str.startswith(step)].astype(float).median() for step in steps)
    return tuple(None if m != m else float(m) for m in medians)  # NaN (none recorded) -> None


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m specbench.study.tools.budget", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("plan", help="plan what fits the budget, print it, write --out")
    mk.add_argument("--machine", required=True, help="the machine record (python -m specbench.inputs.machine --out)")
    mk.add_argument(
        "--minutes",
        type=number(float, 0, 10**6, above=True),
        default=45.0,
        help="the whole run's budget (SPECBENCH_MINUTES)",
    )
    mk.add_argument(
        "--spent", type=number(float, 0, 10**8), default=0.0, help="seconds already spent (set-up, machine)"
    )
    mk.add_argument("--profile", choices=sorted(PROFILES), default="real")
    mk.add_argument("--results", default="results", help="summary.csv (the acceptance sample), speedup.csv")
    mk.add_argument("--dtype", default=None, help="the dtype the speed and costs steps run in (default: the measured)")
    mk.add_argument("--gguf", default=None, help="DRAFT:TARGET GGUF files of the tiny profile's llama.cpp stage")
    mk.add_argument("--out", required=True, help="the plan (JSON)")
    g = sub.add_parser("get", help="one value of a plan, for the shell")
    g.add_argument("plan")
    g.add_argument("key")
    r = sub.add_parser("record", help="what the run covered, for the report (results/default_run.json)")
    r.add_argument("plan")
    r.add_argument("--check", default="results/acceptance_check.csv")
    r.add_argument("--speed", default="results/speed.csv", help="the speed rows: what the run's benchmark ran")
    r.add_argument("--out", default="results/default_run.json")
    args = ap.parse_args(argv)
    if args.cmd in ("record", "plan"):
        check_out(args.out, "--out")  # a folder, or one it cannot write: one line before the work
    if args.cmd in ("record", "get"):
        try:
            with open(args.plan, encoding="utf-8") as f:
                p = json.load(f)
            if args.cmd == "get":
                print(get(p, args.key))
                return 0
            rec = record(p, args.check, args.speed, os.path.getmtime(args.plan))
        except (KeyError, TypeError, StopIteration, AttributeError) as e:
            refuse(f"{args.plan}: not a plan of this version (no {e}); start over: rm -r {os.path.dirname(args.plan)}")
        except (OSError, ValueError) as e:  # the plan, --check or --speed unreadable (pandas' parser errors among them)
            refuse(f"{args.plan} or its --check/--speed: not readable ({type(e).__name__}: {e})")
        atomic_write(args.out, lambda tmp: write_file(tmp, json.dumps(rec, indent=1, sort_keys=True) + "\n"))
        print(rec["acceptance_check"])
        return 0
    p = make(args)
    print(printout(p, args.spent))
    print(f"  covers: {p['covered']}")
    atomic_write(args.out, lambda tmp: write_file(tmp, json.dumps(p, indent=1, sort_keys=True) + "\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
