"""The full study's plan before it starts: each step, its jobs and its expected time from the
recorded run times, and the total (``scripts/full_study.sh`` prints it first).

    python -m specbench.study.tools.eta --phases hour,extended [--times results/run_times.csv] [--out DIR]

* The steps are ``STEPS``, in ``scripts/full_study.sh``'s order: its fixed steps by their step
  message (``tests/test_study_eta.py`` checks them against the script) and, in their place, every
  sweep of a plan phase (``results.plan``), with its jobs counted from its overrides
  (``study.job.sweepjobs``: no job config composed, no model, no torch).
* A step's expected time is the longest recorded run of that step in ``--times`` (a resumed run
  records only what it had left), dated by its run and named by its machine where its rows name one
  (``machines``: parts may be recorded on machines of different speed), with that machine's prefill rate from
  ``--costs`` where it has a curve there (``prefill_rates``); a sweep is matched by its
  preset and overrides (the words after ``sweep=`` in its step message), any other step by its message.  A step never
  recorded says "no recorded time" and the total counts it apart.
* A step of speed runs never recorded as a step (the batch schedule) is expected to take its jobs'
  timed decodes in ``--speed`` (``speed_recorded``: each job's longest run there), where every job has one.
* ``--out``: a resumed run's output folder: a sweep's jobs already finished there (its folder under
  ``--out``) are counted, and its expected time is scaled to the jobs left; so are a fixed step's
  that counts jobs by their once-markers (the batch-size schedule: ``plan.schedule_jobs``).

Imports: csv, ``results.plan`` (the plan and ``plural``), ``study.job.sweepjobs`` and ``inputs.packages``'s
``STUDY_TARGET`` (no torch, no pandas).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from ...inputs.packages import STUDY_TARGET
from ...results import plan
from ...results.plan import plural
from ..job import sweepjobs


@dataclass(frozen=True)
class Step:
    """A fixed step of scripts/full_study.sh: its short name, its step message and its phase."""

    name: str
    message: str
    phase: str = "hour"
    markers: tuple[str, ...] = ()  # one once-marker ($OUT/NAME.done) per job, where the step counts jobs
    # per marker, the key of its job's timed decodes in speed.csv (``speed_recorded``), where the job is a speed run
    speed_keys: tuple[tuple, ...] = ()


def speed_key(pair: str, dataset: str, batch_size, max_new_tokens) -> tuple:
    """A schedule speed run's key in ``recorded``'s dict (``speed_recorded``)."""
    return ("speed", str(pair), str(dataset), int(batch_size), int(max_new_tokens))


HOUR, EXTENDED, POWER90 = "hour", "extended", "power90"
STEPS: tuple[Step | str, ...] = (  # a phase's name stands for its plan sweeps, in their run order
    Step("set-up", "set-up (environment + embedded models)"),
    Step(
        "costs",
        "forward costs per pair (bf16, the study's dtype) and the environment "
        "(results/costs.csv, results/environment.json)",
    ),
    Step("calibrate", "Sequoia acceptance vectors (results/acceptance_vector.csv) on each dataset's LAST 16 prompts"),
    HOUR,
    Step("projection", "study: projection of the replayed grids ($OUT/projected/speedup.csv)"),
    Step(
        "live check",
        "study: live check of the projection at batch 1 (sweep=reference_validate: 8 prompts x 64 tokens)",
    ),
    Step(
        "batch schedule",
        "study: the batch-size schedule, interleaved (specbench.study.tools.speed +speed_candidates=schedule per pair "
        "and batch size)",
        markers=tuple(plan.schedule_marker(p, b) for p, _d, b, _n, _t in plan.schedule_jobs()),
        speed_keys=tuple(speed_key(p, d, b, t) for p, d, b, _n, t in plan.schedule_jobs()),
    ),
    Step(
        "calibrate n-gram",
        "extended: Sequoia acceptance vectors of the n-gram pair (results/acceptance_vector.csv)",
        EXTENDED,
    ),
    EXTENDED,
    Step(
        "lossless",
        "extended: losslessness on the real pair: first emitted token of each lossless sampling mode vs the "
        "target, modes that draft alike on the same trees (results/lossless_check.csv)",
        EXTENDED,
    ),
    Step(
        "lossless 90%",
        "extended: losslessness at 90% power against a first-token TV of 0.02 (--draws auto)",
        POWER90,
    ),
    Step("attention", "tree-attention benchmark + real 1.5B model view (results/attention.csv)"),
    Step(
        "collect",
        "collect, the logit margin at each greedy divergence (results/divergence_margins.csv), report",
    ),
)
SWEEP_STEP = re.compile(r"(?:^|: )sweep=(\S+)(.*)$")  # "...: part 1: sweep=reference tree=chain ..."


def plan_jobs(sweep: plan.Sweep, extra: Sequence[str] = ()) -> list[list[str]]:
    """The jobs of a plan sweep as ``scripts/sweeps.sh`` runs it (``extra``: the overrides every sweep
    of the run gets), from its overrides alone (``study.job.sweepjobs``)."""
    args = sweepjobs.task([f"sweep={sweep.preset}", *sweep.args, *extra])
    return sweepjobs.expand(sweepjobs.preset_params(sweep.preset), args)


def step_key(message: str) -> tuple:
    """A step message's key: a sweep's (preset, its overrides in any order), else the message."""
    m = SWEEP_STEP.search(message.strip())
    if m:
        return ("sweep", m[1], tuple(sorted(m[2].split())))
    return ("step", message.strip())


def sweep_key(sweep: plan.Sweep) -> tuple:
    return ("sweep", sweep.preset, tuple(sorted(sweep.args)))


def recorded(path: str) -> dict[tuple, tuple[float, str]]:
    """step key -> (the longest recorded seconds, its run) from a run-times CSV (run, step, seconds)."""
    out: dict[tuple, tuple[float, str]] = {}
    if not os.path.exists(path):
        return out
    with open(path, newline="") as fh:
        rows = csv.DictReader(fh)
        missing = {"run", "step", "seconds"} - set(rows.fieldnames or ())
        if missing:
            raise ValueError(f"--times {path}: no column {', '.join(sorted(missing))}; give a run-times CSV")
        for row in rows:
            try:
                seconds = float(row["seconds"])
            except (TypeError, ValueError):
                continue
            if seconds <= 0:  # a step skipped by its marker: no measurement
                continue
            key = step_key(row["step"] or "")
            if key not in out or seconds > out[key][0]:
                out[key] = (seconds, row["run"] or "")
    return out


def machines(path: str, rates: dict | None = None, run: str = "run") -> dict[str, str]:
    """run -> the machine that ran it, as its rows in a run-times CSV (or ``run="run_id"``: speed.csv) name it
    (its CPU and vector capability: 'AMD EPYC (AVX512)'), and where ``rates`` (``prefill_rates`` of
    results/costs.csv) has that machine, its prefill rate beside it; runs recorded before rows named their
    machine are left out."""
    if not os.path.exists(path):
        return {}
    rates = rates or {}
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("machine") and r.get(run)]
    return {r[run]: r["machine"].split(", ")[0] + rates.get(r.get("machine_id") or "", "") for r in rows}


def prefill_rates(path: str) -> dict[str, str]:
    """machine_id -> ', 1.5B target N tok/s (DTYPE, W-token forward)': the most tokens per second of the
    study's target over its measured forwards in a costs CSV, any dtype and KV length, named by the forward that
    gave it (usually its widest; ``study.tools.ceiling`` reads the widest at KV 128 instead); a machine without
    a target curve there is left out."""
    best: dict[str, tuple[float, str, str]] = {}
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as fh:
        rows = csv.DictReader(fh)
        missing = {"model", "n_tokens", "seconds", "machine_id"} - set(rows.fieldnames or ())
        if missing:
            raise ValueError(f"--costs={path}: no column {', '.join(sorted(missing))}: not a costs.csv")
        for r in rows:
            try:
                if r["model"] != STUDY_TARGET or not r.get("machine_id"):  # its forward rate stands for the machine's
                    continue
                rate = int(r["n_tokens"]) / float(r["seconds"])
            except (KeyError, TypeError, ValueError, ZeroDivisionError):
                continue
            if rate > best.get(r["machine_id"], (0.0,))[0]:
                best[r["machine_id"]] = (rate, r.get("dtype", ""), r["n_tokens"])
    return {m: f", 1.5B target {v:,.1f} tok/s ({dt}, {n}-token forward)" for m, (v, dt, n) in best.items()}


def speed_recorded(path: str) -> dict[tuple, tuple[float, str]]:
    """``speed_key`` -> (the longest run's seconds, its run id) of the schedule runs in a speed.csv (the
    interleaved benchmark's rows, ``roster`` schedule): a run's timed decodes summed (``wall_s``; its model
    load and warm-up decodes are not in it).  A step of such runs that run_times.csv never recorded (the
    full study's batch schedule) is expected to take what its jobs took there."""
    runs: dict[tuple, float] = {}
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("roster") != "schedule":
                continue
            try:
                key = speed_key(row["pair"], row["dataset"], float(row["batch_size"]), float(row["max_new_tokens"]))
                runs[(key, row["run_id"])] = runs.get((key, row["run_id"]), 0.0) + float(row["wall_s"])
            except (KeyError, TypeError, ValueError):
                continue
    out: dict[tuple, tuple[float, str]] = {}
    for (key, run), seconds in runs.items():
        if key not in out or seconds > out[key][0]:
            out[key] = (seconds, run)
    return out


@dataclass
class Line:
    part: str
    name: str
    jobs: int | None
    done: int
    seconds: float | None
    run: str
    source: str = ""  # where the expected time comes from, beside run_times.csv


def fixed_line(step: Step, times: dict, out: str | None) -> Line:
    """A fixed step's line: its jobs and those finished in ``out`` where it counts them by markers."""
    sec, run = times.get(step_key(step.message), (None, ""))
    jobs = len(step.markers) or None
    finished = [out is not None and os.path.exists(os.path.join(out, m + ".done")) for m in step.markers]
    done = sum(finished)
    if sec is not None and jobs:
        sec = sec * (jobs - done) / jobs
    each: list[tuple[float, str]] = [times[k] for k in step.speed_keys if k in times]
    if sec is None and each and len(each) == len(step.speed_keys):  # never a step: its speed runs' timed decodes
        left = sum(e[0] for e, f in zip(each, finished) if not f)
        return Line("-", step.name, jobs, done, left, max(e[1] for e in each), "speed.csv's timed decodes")
    return Line("-", step.name, jobs, done, sec, run)


def lines(phases, times: dict, out: str | None = None, extra=(), sweeps_only: bool = False) -> list[Line]:
    """The plan's steps in ``phases`` with their jobs and expected seconds (``sweeps_only``: the
    phases' sweeps alone, in the order given)."""
    rows = []
    for entry in tuple(phases) if sweeps_only else STEPS:
        if isinstance(entry, Step):
            if entry.phase in phases:
                rows.append(fixed_line(entry, times, out))
            continue
        if entry not in phases:
            continue
        for part, sweep in plan.runs(entry):
            jobs = plan_jobs(sweep, extra)
            done = 0
            if out:
                done = sweepjobs.count_finished(os.path.join(out, sweep.folder), sweepjobs.job_dirs(jobs))
            sec, run = times.get(sweep_key(sweep), (None, ""))
            if sec is not None and jobs:
                sec = sec * (len(jobs) - done) / len(jobs)
            rows.append(Line(part, " ".join(("sweep=" + sweep.preset, *sweep.args)), len(jobs), done, sec, run))
    return rows


def duration(seconds: float) -> str:
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def when(run: str) -> str:
    """The date of a run id (its start, epoch seconds, or a job's run id: YYYYMMDDTHHMMSS-...), else the id itself."""
    if re.match(r"\d{8}T\d{6}", run):
        return f"{run[:4]}-{run[4:6]}-{run[6:8]}"
    try:
        return datetime.datetime.fromtimestamp(int(run), datetime.timezone.utc).strftime("%Y-%m-%d")
    except (ValueError, OverflowError, OSError):
        return run


def render(rows: list[Line], phases, times_path: str, width: int = 60, on: dict | None = None) -> str:
    """The plan as text: one line per step (``on``: run -> its machine, named where known: steps may be
    recorded on machines of different speed), then the total."""
    head = f"The study's plan (phases: {', '.join(phases)}; "
    beside = "; a step never recorded as one: its jobs' own records, as named" if any(r.source for r in rows) else ""
    out = [head + f"expected times: the longest recorded run of each step in {times_path}{beside})"]
    out.append(f"  {'part':<11} {'step':<{width}} {'jobs':>12}  expected")
    for r in rows:
        name = r.name if len(r.name) <= width else r.name[: width - 3] + "..."
        jobs = "-" if r.jobs is None else f"{r.jobs:,}" + (f" ({r.done:,} done)" if r.done else "")
        source = f", {r.source}" if r.source else ""
        where = f" on {(on or {})[r.run]}" if r.run in (on or {}) else ""
        exp = (
            "no recorded time"
            if r.seconds is None
            else f"{duration(r.seconds)} (recorded {when(r.run)}{where}{source})"
        )
        out.append(f"  {r.part:<11} {name:<{width}} {jobs:>12}  {exp}")
    known = [r.seconds for r in rows if r.seconds is not None]
    unknown = len(rows) - len(known)
    total = duration(sum(known)) + (f" + {plural(unknown, 'step')} with no recorded time" if unknown else "")
    if not known:
        total = "no recorded time"
    n_jobs = sum(r.jobs or 0 for r in rows)
    out.append(f"  {'total':<11} {plural(len(rows), 'step'):<{width}} {n_jobs:>12,}  {total}")
    return "\n".join(out)


def _read(key: str, path: str, read, *args):
    """``read(path, *args)``, or one line naming ``--key`` and exit 2 where the file cannot be read as its CSV."""
    try:
        return read(path, *args)
    except (ValueError, OSError) as e:  # a file that is not UTF-8 text among them
        _refuse(str(e) if str(e).startswith("--") else f"--{key}={path}: not a readable CSV ({e})")


def _refuse(why: str) -> NoReturn:
    print(f"specbench: error: {why}; give the file results/ holds or leave the option out", file=sys.stderr)
    sys.exit(2)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m specbench.study.tools.eta", description=__doc__.split("\n\n")[0])
    ap.add_argument("--phases", default=HOUR, help="comma-separated: hour, extended, power90 (tiny: --sweeps)")
    ap.add_argument("--sweeps", action="store_true", help="the phases' sweeps alone (scripts/run_plan.sh)")
    ap.add_argument("--times", default="results/run_times.csv", help="recorded run times (run, step, seconds)")
    ap.add_argument("--speed", default="results/speed.csv", help="the speed benchmark's rows (its schedule runs)")
    ap.add_argument("--costs", default="results/costs.csv", help="forward costs: each machine's prefill rate")
    ap.add_argument("--out", default=None, help="the run's output folder: count the jobs it has finished")
    ap.add_argument("overrides", nargs="*", help="the overrides every sweep gets (hydra/launcher=...)")
    a = ap.parse_args(argv)
    phases = [p.strip() for p in a.phases.split(",") if p.strip()]
    valid = (*plan.PHASES, POWER90)
    bad = [p for p in phases if p not in valid]
    if bad or not phases:
        print(
            f"specbench: error: --phases={a.phases}: use a comma-separated list of {', '.join(valid)}", file=sys.stderr
        )
        sys.exit(2)
    for key in ("times", "speed", "costs"):  # a file named on the command line must be there (a default may be absent)
        path = getattr(a, key)
        if path != ap.get_default(key) and not os.path.isfile(path):
            _refuse(f"--{key}={path}: no such file")
    if a.out is not None and not os.path.isdir(a.out):
        _refuse(f"--out={a.out}: not a folder (the run's output folder, SPECBENCH_OUT)")
    rates = _read("costs", a.costs, prefill_rates)
    times = {**_read("speed", a.speed, speed_recorded), **_read("times", a.times, recorded)}
    on = {**_read("speed", a.speed, machines, rates, "run_id"), **_read("times", a.times, machines, rates)}
    print(render(lines(phases, times, a.out, a.overrides, a.sweeps), phases, a.times, on=on))


if __name__ == "__main__":
    main()
