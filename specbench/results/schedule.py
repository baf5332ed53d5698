"""The batch-size schedule, from either of its two sources (``source``), read by the report (its tables,
figures and sentences: ``report.batch``, ``report.tldr``), by ``study.serving.export`` (a serving engine's
draft length per batch size) and by the benchmark's schedule runs (``study.tools.validate.schedule_picks``).

- ``LIVE``: results/speedup.csv's single live runs of the batch-size study (one run per cell, without
  intervals): per live setting (``SETTINGS[LIVE]``) with two or more batch sizes, each (B,
  configuration)'s measured speedup and whether it is that B's fastest.
- ``BENCHMARK``: the interleaved speed benchmark's schedule runs (results/speed.csv rows of roster
  ``schedule``: ``python -m specbench.study.tools.speed +speed_candidates=schedule batch_size=B``, one per
  pair and B, ``study.tools.plan.schedule_jobs``): per setting (``SETTINGS[BENCHMARK]``) and B every
  candidate ranked as at batch 1 (``speedstats.answers``: the paired speedup with its interval, the
  ties with Bonferroni, the pick rule, the controls); a B whose controls fail is not ranked.

**Where speculation stops paying** (``stop``, the benchmark's): the smallest measured B = x from which
on, at every measured B, the controls hold and no candidate's interval is above 1×.  At x the fastest's
interval is either below 1× (``loses``: speculation stops paying at B = x) or includes it (``no gain``:
no gain is resolved from B = x on, which is not a loss; where every B from some larger y on has its
fastest below 1×, ``losing_from`` says where).  Without such an x (the largest B measured still gains,
or is not ranked) nothing is claimed.  The verdict's words are the report's (``report.batch``).

Imports: pandas and results only (the report imports no torch).
"""

from __future__ import annotations

import pandas as pd

from . import ranking, speedstats

LIVE, BENCHMARK = "live", "benchmark"  # the two sources
SETTINGS = {  # one schedule per setting, never mixed
    LIVE: ["pair", "dataset", "dtype", "max_new_tokens", "n_prompts"],
    BENCHMARK: ["pair", "dataset", "dtype", "max_new_tokens", "machine_id"],
}
SOURCES = {  # where export's draft lengths come from, in its notes
    LIVE: "single live runs of the batch-size study (one run per cell, no interval)",
    BENCHMARK: "the interleaved benchmark's batch-size schedule (each B's paired interval)",
}
ROSTER, ANSWER = "schedule", speedstats.ANSWER  # speed.csv's ``roster``: a schedule run's, any other run's


class Lengths(list):
    """[(batch size, draft length K), ...] and where they come from (``source``, in export's notes)."""

    def __init__(self, items, source: str):
        super().__init__(items)
        self.source = source


def rosters(speed: pd.DataFrame) -> pd.Series:
    """Each speed.csv row's roster (rows written before the column existed: ``answer``)."""
    if "roster" not in speed:
        return pd.Series(ANSWER, index=speed.index)
    return speed["roster"].fillna(ANSWER).astype(str)


def several_b(rows: pd.DataFrame, source: str) -> pd.DataFrame:
    """The rows of each setting of ``source`` with two or more batch sizes."""
    return rows[rows.groupby(SETTINGS[source], dropna=False).batch_size.transform("nunique") >= 2]


def widest(sched: pd.DataFrame, source: str) -> pd.DataFrame:
    """The rows of the setting with the most batch sizes (the first such setting), indexed by it."""
    setting = SETTINGS[source]
    sizes = sched.groupby(setting, dropna=False).batch_size.nunique()
    return sched.set_index(setting).loc[[sizes.idxmax()]]


def schedule(rows: pd.DataFrame | None, source: str = LIVE) -> pd.DataFrame:
    """The schedule of ``source``: the live settings' (B, configuration) rows of results/speedup.csv with
    ``best`` (that B's fastest, ties all marked), or every candidate of the benchmark's schedule runs
    (``speedstats.answers`` rows of roster ``schedule``) with ``ranked`` (that B's controls hold);
    settings with two or more batch sizes only."""
    if rows is None or rows.empty:
        return pd.DataFrame()
    return _benchmark(rows) if source == BENCHMARK else _live(rows)


def _live(speed: pd.DataFrame) -> pd.DataFrame:
    setting = SETTINGS[LIVE]
    if not {"measured", "engine", "batch_size", "measured_hash", *setting} <= set(speed.columns):
        return pd.DataFrame()
    live = speed[(speed.engine == "live") & (speed.measured_hash.astype(str) == speed.config_hash.astype(str))]
    live = several_b(live, LIVE).copy()
    if live.empty:
        return pd.DataFrame()
    top = live.groupby(setting + ["batch_size"]).measured.transform("max")
    order = [c for c in (*setting, "batch_size", "shape", "tree", "budget") if c in live.columns]
    return live.assign(best=live.measured == top).sort_values(order)


def _benchmark(measured: pd.DataFrame) -> pd.DataFrame:
    if "scheduled" not in measured:
        return pd.DataFrame()
    m = measured[measured.scheduled.astype(bool)]
    if m.empty:
        return m
    m = several_b(m, BENCHMARK).copy()
    m["batch_size"] = m.batch_size.astype(int)
    m["ranked"] = m.controls_hold.astype(bool)
    order = [*SETTINGS[BENCHMARK], "batch_size", "speedup"]
    return m.sort_values(order, ascending=[True] * 6 + [False], kind="mergesort")


# ---------------------------------------------------------------------------------------------------
# the benchmark's schedule per B and its verdict
# ---------------------------------------------------------------------------------------------------
def per_b(g: pd.DataFrame) -> pd.DataFrame:
    """One benchmark setting's schedule, one row per B: the shown configuration (the pick rule among the
    ties), the fastest's interval, the ties' names, whether any candidate's interval is above 1×."""
    out = []
    for b, x in g.groupby("batch_size", sort=True):
        x = x.sort_values("speedup", ascending=False, kind="mergesort")
        top, shown = x.iloc[0], x[x.shown].iloc[0]
        ties = x[x.tie & ~x.shown]
        out.append(
            dict(
                batch_size=int(b),
                run_id=shown.run_id,
                ranked=bool(shown.ranked),
                shown=str(shown.candidate),
                speedup=float(shown.speedup),
                lo=float(shown.lo),
                hi=float(shown.hi),
                best=str(top.candidate),
                best_speedup=float(top.speedup),
                best_lo=float(top.lo),
                best_hi=float(top.hi),
                ties=", ".join(f"{c} {s:.2f}×" for c, s in zip(ties.candidate, ties.speedup)),
                gains=bool((x.lo > 1).any()),
                n_prompts=int(shown.n_prompts),
                n_units=int(shown.n_units),
                every=", ".join(
                    f"{c} {s:.2f}× [{lo:.2f}, {hi:.2f}]" for c, s, lo, hi in zip(x.candidate, x.speedup, x.lo, x.hi)
                ),
            )
        )
    return pd.DataFrame(out)


def settings(sched: pd.DataFrame | None) -> list[tuple[tuple, pd.DataFrame]]:
    """Per setting of the benchmark's schedule, its key and its rows per B (``per_b``)."""
    if sched is None or sched.empty:
        return []
    return [(k, per_b(g)) for k, g in sched.groupby(SETTINGS[BENCHMARK], sort=True, dropna=False)]


def trailing(flags: list[bool]) -> int | None:
    """The index where the trailing run of True ``flags`` starts; None where the last flag is False."""
    i = len(flags)
    while i > 0 and flags[i - 1]:
        i -= 1
    return None if i == len(flags) else i


def stop(rows: pd.DataFrame) -> tuple[str, int | None, bool]:
    """(kind, x, from the smallest B) of one setting's ``per_b`` rows: ``loses`` or ``no gain`` from
    B = x (module docstring); ``gains`` where the largest B measured still has an interval above 1×,
    ``open`` where it is not ranked (x None)."""
    rows = rows.sort_values("batch_size", kind="mergesort").reset_index(drop=True)
    i = trailing((rows.ranked & ~rows.gains).tolist())
    if i is None:
        return ("gains" if rows.ranked.iloc[-1] else "open"), None, False
    return ("loses" if rows.best_hi.iloc[i] < 1 else "no gain"), int(rows.batch_size.iloc[i]), i == 0


def losing_from(rows: pd.DataFrame) -> pd.Series | None:
    """The ``per_b`` row of the smallest B from which on every B of ``rows`` is ranked and its fastest's
    interval below 1×, else None."""
    rows = rows.sort_values("batch_size", kind="mergesort").reset_index(drop=True)
    i = trailing((rows.ranked & (rows.best_hi < 1)).tolist())
    return None if i is None else rows.iloc[i]


# ---------------------------------------------------------------------------------------------------
# a serving engine's draft length per batch size
# ---------------------------------------------------------------------------------------------------
def chain_k(x: pd.DataFrame) -> int:
    """One ranked B's chain draft length in the benchmark's schedule: among the chains whose interval is
    above 1×, the pick rule among those that tie the fastest (else the fastest of them); 0 where no
    chain pays."""
    paying = x[(x.tree == "chain") & (x.lo > 1)]
    if paying.empty:
        return 0
    tied = paying[paying.tie]
    pool = tied if len(tied) else paying.sort_values("speedup", ascending=False, kind="mergesort").head(1)
    r = pool.sort_values(["drafted_per_step", "speedup"], ascending=[True, False], kind="mergesort").iloc[0]
    return int(r.budget)


def live_k(x: pd.DataFrame) -> int:
    """One B's draft length in the live schedule: the fastest run's N (``ranking.best`` by the measured
    speedup) where it beats plain decoding, else 0."""
    r = ranking.best(x, "measured")
    return int(r.budget) if r is not None and r.measured > 1 else 0


def draft_lengths(rows: pd.DataFrame | None, pair: str, source: str = LIVE) -> Lengths | None:
    """[(B, K), ...] of ``pair``'s chains in the setting of ``source`` with the most batch sizes (K: the
    benchmark's ``chain_k`` over each ranked B, a B whose controls fail left out; the live runs'
    ``live_k``); None without such a schedule.  ``study.serving.export`` takes the live runs (single
    runs without intervals) only where the benchmark has no schedule."""
    if rows is None or rows.empty:
        return None
    if source == BENCHMARK:
        runs = rows[(rosters(rows) == ROSTER) & (rows.pair.astype(str) == pair)]
        sched = schedule(speedstats.answers(runs), BENCHMARK) if len(runs) else pd.DataFrame()
        sched = sched[sched.ranked] if len(sched) else sched
    else:
        chains = rows[(rows.pair.astype(str) == pair) & (rows.tree == "chain")] if "tree" in rows else rows.iloc[:0]
        sched = schedule(chains, LIVE)
        sched = sched[sched.measured.notna()] if len(sched) else sched
    if sched.empty:
        return None
    k = chain_k if source == BENCHMARK else live_k
    one = widest(sched, source)
    return Lengths([(int(b), k(x)) for b, x in one.groupby("batch_size", sort=True)], SOURCES[source])
