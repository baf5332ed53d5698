"""`python -m specbench.study.tools.speed [overrides]`: the interleaved speed benchmark.

    python -m specbench.study.tools.speed pair=qwen_coder dataset=humaneval dataset.limit=16 \\
        max_new_tokens=64 dtype=float32 '+speed_candidates=[chain/3,chain/4,binary/3]' +speed_rounds=1

One process loads the pair once and, per round and per unit (a prompt, or ``batch_size`` prompts
decoded together), decodes the unit with every candidate in a random order, reversed for the next
unit (``unit_orders``: ABBA, so a drift within a unit cancels): plain decoding
(``tree=none``), plain decoding again under a second name (the A/A control), each candidate tree,
and the first candidate again under a second name (``X (twin)``: the identical-tree control).  Each
decode goes through the one loop (``DecodePlan.run``, live verifier), exactly as a live study job.

Rows (``results_dir``/speed.csv, appended; a run never replaces another's rows): one per (run,
round, unit, candidate) with wall, draft and verify seconds, steps, tokens, accepted and drafted
tokens, whether its tokens equal plain decoding's of the same unit and round (``same_tokens``), the
candidate's config hash (a live ``specbench.run`` job of the same config has the same) and the
machine that timed it (``machine``, ``machine_id``: CPU or GPU model, cores, threads, torch).  The
timed decodes' step rows go to ``speed_steps.csv.gz`` beside it.  ``results.speedstats`` turns the
rows into paired speedups with intervals, the controls and the ties; the run prints them last.

Keys (top level, all optional): ``speed_candidates`` (``auto``, the default: ``study.tools.validate.
speed_picks`` from ``results_dir``/speedup.csv; ``schedule``: the batch-size schedule's trees at this
``batch_size``, ``study.tools.validate.schedule_picks``, its rows marked ``roster=schedule``; or a list of
``tree/budget``), ``speed_rounds`` (default 1, >= 1; ``auto``: rounds until the A/A control's
interval lies within 1 +- 3%, ``speedstats.settled``, at most ``speed_max_rounds``, default 3),
``speed_until`` (a Unix time: no unit is started that the mean unit so far would end after, once
``MIN_UNITS`` have run; the default run's deadline, so it ends within its minutes), ``results_dir``
(default results), ``speed_merge`` (a speed.csv timed on another machine, a GPU's, appended with its steps:
``merge``; nothing is timed).  Bad values are refused in one line before any model loads.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, replace
from functools import partial

import hydra
import pandas as pd
import torch
from omegaconf import DictConfig

from ... import CONF_DIR
from ...core import readers
from ...core.registry import UnknownName
from ...inputs import machine
from ...results import schedule, speedstats
from ...results.files import read_speed, read_speed_steps, read_speedup
from ...results.upsert import replace_rows, upsert_all
from ..job import argv, checks, identity, jobfiles, launch, toolopts
from ..job.context import DecodePlan, context
from ..job.jobspec import ConfigError, JobSpec, from_config, resolved
from . import speedloop, validate
from .sizes import WARM_TOKENS
from .speedloop import MIN_UNITS, deadline, more, round_limits, unit_orders  # noqa: F401 (the module's own names)

KEYS = toolopts.keys("speed")
FILE, STEPS = "speed.csv", "speed_steps.csv.gz"
SPEED_MERGE_FIX = "give the speed.csv a speed benchmark wrote (its speed_steps.csv.gz beside it)"
# the run's own columns, from plain decoding's row keys (a candidate adds its tree and hash)
RUN_KEYS = ("pair", "pair_id", "draft", "target", "verify", "temperature", "dataset", "seed", "max_new_tokens") + (
    "dtype",
    "device",
    "batch_size",
)


@dataclass(frozen=True)
class Candidate:
    name: str
    job: JobSpec
    ident: identity.Identity
    plan: DecodePlan


def roster_of(job: JobSpec) -> str:
    """The run's ``roster`` column: ``schedule`` for a batch-size schedule run, else ``answer``."""
    return schedule.ROSTER if toolopts.value(job.extra, "speed_candidates") == schedule.ROSTER else schedule.ANSWER


def machine_here(job: JobSpec) -> str | None:
    """This machine's ``machine_id`` for the job's device (None where the device cannot be asked)."""
    try:
        return machine.identity(job.device)["machine_id"]
    except (RuntimeError, AssertionError):
        return None


def schedule_trees(job: JobSpec) -> list[tuple[str, int]]:
    """``speed_candidates=schedule``: the batch-size schedule's trees (``validate.schedule_picks``) from
    ``results_dir``/speed.csv (the batch-1 answer) and speedup.csv (the projections), either may be absent."""
    out = toolopts.value(job.extra, "results_dir")
    try:
        bench_path, proj_path = os.path.join(out, FILE), os.path.join(out, "speedup.csv")
        bench = read_speed(bench_path) if os.path.isfile(bench_path) else None
        proj = read_speedup(proj_path) if os.path.isfile(proj_path) else None
        return validate.schedule_picks(bench, proj, job.pair.name, job.dataset.name, job.dtype, machine_here(job))
    except (ValueError, AttributeError, KeyError) as e:
        raise ConfigError(
            f"speed_candidates=schedule: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        ) from None


def wanted(job: JobSpec) -> list[tuple[str, int]]:
    """The candidate trees: ``speed_candidates`` as given, ``auto`` from the projections, or
    ``schedule`` (the batch-size schedule's: ``schedule_trees``)."""
    given = toolopts.tree_candidates(job.extra)
    if not isinstance(given, str):
        return given
    if given == schedule.ROSTER:
        return schedule_trees(job)
    path = os.path.join(toolopts.value(job.extra, "results_dir"), "speedup.csv")
    if not os.path.isfile(path):
        raise ConfigError(f"speed_candidates=auto: {path} not found; run the report first or list TREE/BUDGET")
    try:
        return validate.speed_picks(read_speedup(path), job.pair.name, job.dataset.name)
    except (ValueError, AttributeError, KeyError) as e:
        raise ConfigError(f"speed_candidates=auto: {e}") from None


def candidate(job: JobSpec, cfg: DictConfig, name: str, tree: str, budget: int) -> Candidate:
    """One candidate's live job (bound and checked: no model loads) and its decode plan."""
    try:
        extra = {k: v for k, v in job.extra.items() if k != "speed_until"}  # when it stops is not what it is
        one = replace(job, tree=launch.compose_tree(cfg, tree, budget), engine="live", extra=extra)
        ident = identity.job_identity(one)
        one, ident = identity.bind(one, ident)
        checks.validate(one)
    except ConfigError as e:  # launch.compose_tree's line names the tree
        raise ConfigError(f"speed_candidates: {e}") from None
    except UnknownName as e:
        raise ConfigError(f"speed_candidates: {tree}/{budget}: {e}") from None
    return Candidate(name, one, ident, replace(DecodePlan.of(one), measure_shift=False))


def roster(job: JobSpec, cfg: DictConfig) -> list[Candidate]:
    """Plain decoding, its A/A copy, every candidate, and the first candidate's twin."""
    trees = wanted(job)
    out = [candidate(job, cfg, speedstats.PLAIN, "none", 0), candidate(job, cfg, speedstats.PLAIN_AA, "none", 0)]
    out += [candidate(job, cfg, f"{t} N={b}", t, b) for t, b in trees]
    t, b = trees[0]
    return out + [candidate(job, cfg, f"{t} N={b}{speedstats.TWIN_SUFFIX}", t, b)]


def timed(pair, c: Candidate, unit) -> tuple[float, list]:
    """(wall seconds, results) of one decode of ``unit`` by ``c`` (CUDA synchronised)."""
    sync = torch.cuda.synchronize if pair.target.device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    done = c.plan.run(pair, unit, c.plan.live_verifier(pair))
    sync()
    return time.perf_counter() - t0 - sum(d.analysis_s for d in done), done


def row(c: Candidate, done, wall: float, where: dict) -> dict:
    recs = [r for d in done for r in d.records]
    return {
        **where,
        "candidate": c.name,
        "config_hash": identity.config_hash(c.job, c.ident),
        "tree": c.job.tree.name,
        "tree_params": json.dumps(c.job.tree.params, sort_keys=True),
        "budget": c.job.tree.budget,
        "prompt_ids": "|".join(d.prompt_id for d in done),
        "wall_s": wall,
        "draft_s": sum(r.draft_s for r in recs),
        "verify_s": sum(r.verify_s for r in recs),
        "steps": len(recs),
        "tokens": sum(r.emitted for r in recs),
        "accepted": sum(r.accepted for r in recs),
        "drafted": sum(r.tree_size for r in recs),
        "tree_depth": max((r.tree_depth for r in recs), default=0),
    }


def warm(c: Candidate) -> Candidate:
    """``c`` as its warm-up decodes: ``WARM_TOKENS`` new tokens (its own, where fewer)."""
    return replace(c, plan=replace(c.plan, max_new_tokens=min(WARM_TOKENS, c.plan.max_new_tokens)))


def bench(job: JobSpec, pair, prompts, cands: list[Candidate], base: dict) -> tuple[list[dict], list]:
    """Every round, unit and candidate (``speedloop.interleave``): the rows and the step frames.  One
    untimed warm-up decode per candidate first (kernels, caches; ``warm``: a few steps of its drafter, tree and
    forwards on the first unit, not a whole decode)."""
    b = job.batch_size
    units = [prompts[i : i + b] for i in range(0, len(prompts), b)]
    for c in cands:  # every candidate, so none starts the timed units colder than another
        timed(pair, warm(c), units[0])
    keys = {
        c.name: jobfiles.row_keys(c.job, c.ident, names(pair), c.plan.mode.lossless, "live", base["run_id"])
        for c in cands
    }

    def one_unit(order, unit, where):
        return time_unit(pair, order, unit, keys, {**base, **where})

    return speedloop.interleave(job, units, cands, one_unit, base["run_id"])


def time_unit(pair, order: list[Candidate], unit, keys: dict, where: dict) -> tuple[list[dict], list]:
    """One unit decoded by every candidate in ``order``: its rows (``same_tokens`` against plain
    decoding of the same unit) and step frames."""
    rows, steps, tokens = [], [], {}
    for pos, c in enumerate(order):
        wall, done = timed(pair, c, unit)
        tokens[c.name] = [d.tokens for d in done]
        rows.append(row(c, done, wall, {**where, "order": pos}))
        frame = jobfiles.steps_frame(keys[c.name], [r for d in done for r in d.records])
        steps.append(frame.assign(candidate=c.name, round=where["round"], unit=where["unit"]))
    for r in rows:
        r["same_tokens"] = tokens[r["candidate"]] == tokens[speedstats.PLAIN]
    return rows, steps


def names(pair) -> tuple[str, str]:
    return pair.draft_name, pair.target_name


def write(out: str, rows: list[dict], steps: list) -> None:
    """Append this run's rows to speed.csv and its steps to speed_steps.csv.gz (one unit)."""
    append(out, pd.DataFrame(rows), pd.concat(steps, ignore_index=True))


def merge(out: str, path: str) -> str:
    """``+speed_merge=PATH``: the runs of a speed.csv timed elsewhere (a GPU machine's; its
    speed_steps.csv.gz beside it) appended to ``out``'s, those whose run id ``out`` already holds left
    out (merging twice changes nothing); no model loads.  A ``TableError`` (one line) when either
    file is not such a table."""
    new = read_speed(path, "speed_merge", SPEED_MERGE_FIX)
    steps_path = os.path.join(os.path.dirname(path), STEPS)
    new_steps = read_speed_steps(steps_path, "speed_merge", SPEED_MERGE_FIX)
    have = os.path.join(out, FILE)
    seen = set(read_speed(have).run_id.astype(str)) if os.path.isfile(have) else set()
    new, new_steps = new[~new.run_id.astype(str).isin(seen)], new_steps[~new_steps.run_id.astype(str).isin(seen)]
    if len(new):
        append(out, new, new_steps)
    return f"specbench: merged {new.run_id.nunique()} runs ({len(new)} rows) of {path} into {have} ({len(seen)} runs there)"


def append(out: str, new: pd.DataFrame, new_steps: pd.DataFrame) -> None:
    """``new`` runs and their steps added to ``out``'s speed.csv and speed_steps.csv.gz as one unit, read and
    written under the folder's lock (``results.upsert``; a run's rows keyed by its run id)."""
    tables = {os.path.join(out, name): (partial(replace_rows, new=df, key=["run_id"]), read)
              for name, df, read in ((FILE, new, read_speed), (STEPS, new_steps, read_speed_steps))}  # fmt: skip
    upsert_all(tables)


def summary(rows: list[dict], spread=speedstats.harness.NONE) -> str:
    """The run's controls, then every candidate's speedup with its interval and the ties: last (widened
    with ``spread``, this machine's run effect between reruns, as the report's intervals)."""
    df = pd.DataFrame(rows)
    w = speedstats.unit_sums(df)
    lines = []
    for c in speedstats.controls(w, spread):
        ok = "holds" if c["holds"] else "FAILS: this run's speedups are not ranked"
        lines.append(f"control {c['control']}: {c['estimate']:.3f} [{c['lo']:.3f}, {c['hi']:.3f}] {ok}")
    for r in speedstats.ranked(df, spread=spread).itertuples():
        tie = "ties the fastest" if r.tie else f"slower than the fastest by {r.diff_to_best:.3f}"
        lines.append(f"{r.candidate}: {r.speedup:.3f}x [{r.lo:.3f}, {r.hi:.3f}] ({tie})")
    differ = sorted({r["candidate"] for r in rows if not r["same_tokens"]})
    lines.append("tokens equal to plain decoding's: " + ("all" if not differ else "NOT " + ", ".join(differ)))
    return "\n".join(lines)


def settings(job: JobSpec, cfg: DictConfig) -> tuple[str, list[Candidate]]:
    """(results folder, candidates), every key checked before any model loads (``toolopts.check``), and the
    destination too (``check_destination``: refused before the benchmark runs, not after it, its rows lost)."""
    toolopts.check(job.extra, "speed")
    out = toolopts.value(job.extra, "results_dir")
    check_destination(out)
    return out, roster(job, cfg)


def check_destination(out: str) -> None:
    """``out``'s speed.csv and speed_steps.csv.gz, where there, read as strictly as ``append`` reads them
    (a ``TableError`` naming the file and the key), before any model loads or server starts."""
    for name, read in ((FILE, read_speed), (STEPS, read_speed_steps)):
        if os.path.isfile(path := os.path.join(out, name)):
            read(path)


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    try:
        job = from_config({**resolved(cfg), "tree": {"name": "none", "budget": 0}})
        if given := toolopts.value(job.extra, "speed_merge"):
            print(merge(toolopts.value(job.extra, "results_dir"), given))
            return
        out, cands = settings(job, cfg)
        ctx = context(cands[-1].job)
        prompts = ctx.prompts(ctx.tokenizer())
        for c in cands:
            checks.check_context(c.job, ctx.positions(), prompts)
    except (ConfigError, readers.TableError) as e:
        print(f"specbench.study.tools.speed: {e}", file=sys.stderr)
        sys.exit(2)
    pair = ctx.load_pair()
    plain = jobfiles.row_keys(cands[0].job, cands[0].ident, names(pair), True, "live", "")
    base = {"run_id": jobfiles.new_run_id(), **machine.identity(pair.target.device), **{k: plain[k] for k in RUN_KEYS}}
    base.update(roster=roster_of(job), weights=job.pair.weights)
    rows, steps = bench(job, pair, prompts, cands, base)
    write(out, rows, steps)
    print(f"specbench: wrote {len(rows)} rows to {out}/{FILE} ({base['machine']})")
    spread = speedstats.spreads(read_speed(os.path.join(out, FILE)))
    print(summary(rows, speedstats.judged_by(spread, pd.DataFrame(rows).head(1))))


def cli() -> None:
    """`python -m specbench.study.tools.speed`: the command line checked as `run` checks it."""
    argv.check_argv(sys.argv[1:], extra=KEYS)
    results_dir = argv.override_value(sys.argv[1:], "results_dir", "results")
    argv.check_out(os.path.join(str(results_dir), FILE), "results_dir")
    argv.run_hydra(main)


if __name__ == "__main__":
    cli()
