"""The interleaved benchmark's schedule, whatever the engine: rounds, units, each unit's order of the
candidates, the deadline and the automatic rounds (``study.tools.speed`` times specbench's own loop
with it, ``study.tools.speed_llamacpp`` llama.cpp's servers).

``interleave(job, units, cands, one_unit, run_id)`` times every round and unit: each unit's
candidates in ``unit_orders`` (ABBA), ``speed_rounds`` rounds (``auto``: until the A/A control's
interval lies within 1 +- 3%, at most ``speed_max_rounds``), no unit started past ``speed_until``
once ``MIN_UNITS`` have run.  ``one_unit(order, unit, where)`` decodes one unit with every
candidate in ``order`` and returns (its rows, anything else to keep, e.g. step frames); ``where`` is
{round, unit}.  The keys are read from ``job.extra`` by ``study.job.toolopts`` (a bad value: a ``ConfigError``
naming the key).
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Iterator

import pandas as pd
from tqdm import tqdm

from ...results import speedstats
from ..job import toolopts
from ..job.jobspec import JobSpec

MIN_UNITS = 2  # timed before a deadline may stop the run: a paired interval needs two


def unit_orders(rng: random.Random, cands: list) -> Iterator[list]:
    """Each unit's order of the candidates: a fresh random permutation, then its reverse for the next
    unit (ABBA counterbalancing).  Over each such pair every candidate's mean position is the middle
    and of any two candidates each goes first once, so a drift within a unit cancels instead of
    favouring whichever one the seed put first (over the first 1,322 timed decodes, the first of a
    unit ran 1.5% slower than its candidate's mean, the sixth 1.1% faster)."""
    while True:
        order = rng.sample(cands, len(cands))
        yield order
        yield order[::-1]


def more(unit_s: list[float], until: float | None, now: float) -> bool:
    """Whether to time another unit: the first ``MIN_UNITS`` always, then one the mean unit so far
    ends by ``until`` (None: no deadline)."""
    return until is None or len(unit_s) < MIN_UNITS or now + sum(unit_s) / len(unit_s) <= until


def deadline(job: JobSpec) -> float | None:
    """``speed_until``: a Unix time, or None (``toolopts``)."""
    return toolopts.value(job.extra, "speed_until")


def round_limits(job: JobSpec) -> tuple[int, int]:
    """(rounds always run, the most run): ``speed_rounds=N`` is (N, N); ``auto`` is (1, speed_max_rounds)
    (both read by ``toolopts``)."""
    most = toolopts.value(job.extra, "speed_max_rounds")
    n = toolopts.value(job.extra, "speed_rounds")
    return (1, most) if n == "auto" else (n, n)


def interleave(job: JobSpec, units: list, cands: list, one_unit: Callable, run_id: str, desc: str = "speed"):
    """Every round, unit and candidate (module docstring; the orders seeded by the job's seed and the run
    id: two runs pooled as rounds do not repeat one another's orders): (rows, the other things kept)."""
    rounds, most = round_limits(job)
    orders = unit_orders(random.Random(f"{job.seed}:{run_id}"), cands)
    rows: list[dict] = []
    kept: list = []
    bar = tqdm(total=rounds * len(units) * len(cands), desc=desc, disable=not job.progress)
    unit_s: list[float] = []  # each unit's seconds (``more``)
    rnd, until, stopped = 0, deadline(job), False
    while not stopped and (
        rnd < rounds or (rnd < most and not speedstats.settled(speedstats.unit_sums(pd.DataFrame(rows))))
    ):
        if rnd >= rounds:
            bar.total += len(units) * len(cands)  # speed_rounds=auto: the A/A control is still wider than +-3%
        for u, unit in enumerate(units):
            if stopped := not more(unit_s, until, time.time()):
                print(
                    f"specbench.study.tools.{desc}: speed_until reached: stopped after {len(unit_s)} units",
                    file=sys.stderr,
                )
                break
            t0 = time.perf_counter()
            unit_rows, unit_kept = one_unit(next(orders), unit, {"round": rnd, "unit": u})
            rows += unit_rows
            kept += unit_kept
            bar.update(len(unit_rows))
            unit_s.append(time.perf_counter() - t0)
        rnd += 1
    bar.close()
    return rows, kept
