"""The speed benchmark's controls in words: each run's (A/A and identical twin: ``control``, in
``sentence`` and ``cell``) and every run's pooled per machine and order design (``pooled_sentences``,
from ``results.runcontrols.pooled_controls``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..results import speedstats
from .context import Tables
from .markdown import span


def control(r, digits: int, twin: str) -> str:
    """One control (a ``controls`` row): 'A/A 0.981× [0.950, 1.012]' or, ``twin`` naming the first of the
    identical trees, e.g. 'twin binary N=3 +0.012 [-0.020, 0.031]'."""
    aa = r.kind == "speedup"
    name = "A/A" if aa else twin.format(str(r.control).split(" vs ")[0])
    est = f"{r.estimate:.{digits}f}×" if aa else f"{r.estimate:+.{digits}f}"
    if r.lo != r.lo:  # fewer than speedstats.MIN_UNITS units: no interval, neither held nor failed
        return f"{name} {est} (no interval: under {speedstats.MIN_UNITS} prompts)"
    return f"{name} {est} [{r.lo:.{digits}f}, {r.hi:.{digits}f}]"


def sentence(t: Tables, runs=None, brief: bool = False) -> str:
    """The controls of the ``runs`` the table shows (all runs where None); ``brief`` (the main page):
    their ranges and any that fails, each run's own intervals one link away (speed.md)."""
    c = t.controls
    if runs is not None and len(c):
        c = c[c.run_id.isin(set(runs))]
    if c.empty:
        return ""
    twice = c.groupby(["pair", "dataset"]).run_id.transform("nunique") > 1
    c = c.assign(where=c.pair + "/" + c.dataset + np.where(twice, " (run " + c.run_id.astype(str) + ")", ""))
    parts: dict[str, list[str]] = {}
    for r in c.itertuples():
        if brief and r.holds:
            continue
        ok = "" if r.holds or r.lo != r.lo else " FAILS"
        parts.setdefault(str(r.where), []).append(f"{control(r, 3, 'twin {}')}{ok}")
    held, judged = int(c.holds.sum()), int(c.lo.notna().sum())
    apart = f", {len(c) - judged} without an interval" if judged < len(c) else ""
    head = (
        f"Controls ({held} of {judged} hold{apart}; the A/A speedup's interval must include 1×, the identical-twin "
        "difference's 0): "
    )
    listed = "; ".join(f"{k}: {', '.join(v)}" for k, v in parts.items())
    if not brief:
        return head + listed + "."
    aa, tw = c[c.kind == "speedup"].estimate, c[c.kind != "speedup"].estimate
    ranges = [f"A/A {span(aa, '.3f')}×"] if len(aa) else []
    ranges += [f"twin differences {span(tw, '+.3f', ' to ')}"] if len(tw) else []
    tail = "".join(f"; {m}" for m in too_many_misses(t))
    return (
        head
        + ", ".join(ranges)
        + (f"; failing: {listed}" if listed else "")
        + tail
        + "; each with its interval: speed.md."
    )


def short(t: Tables, runs) -> str:
    """The TL;DR's controls: how many hold, and how often one run's own interval missed (speed.md)."""
    c = t.controls
    c = c[c.run_id.isin(set(runs))] if len(c) else c
    if c.empty:
        return ""
    pooled = t.pooled_controls
    bad = pooled[pooled.fail_p < 0.05] if len(pooled) else pooled.iloc[0:0]
    miss = "; ".join(
        f"{r.control} {r.runs_failed} of {r.runs_judged} on {str(r.machine).split(',')[0]}" for r in bad.itertuples()
    )
    tail = f" Own-interval misses above 5%: {miss} (speed.md)." if miss else ""
    return f"Controls (A/A, twins): {int(c.holds.sum())} of {int(c.lo.notna().sum())} hold.{tail}"


def offset_clause(rows: pd.DataFrame) -> str:
    """', with the run effect ...': the between-run spread (``results.harness``) the ranked ``rows``
    (``speedstats.answers``) carry, where a machine's reruns estimated one; '' where none did."""
    if rows.empty:  # speedstats.answers' rows carry the run effect
        return ""
    est = rows[rows.run_effect_df.fillna(0) > 0]
    if est.empty:
        return ""
    parts = []
    for m, g in est.groupby(est.machine.astype(str).str.split(",").str[0], sort=True):
        src = "pooled over every machine's reruns" if g.run_effect_pooled.all() else "from its reruns"
        parts.append(f"on {m}: τ = {span(g.run_effect, '.1%')} ({src}, {span(g.run_effect_df, '.0f')} df)")
    return (
        ", with runs as a level: a rerun's prompts are units of their own, and the run effect (how far one "
        "configuration moves between reruns beyond their own intervals) is added as τ²/runs (" + "; ".join(parts) + ")"
    )


def too_many_misses(t: Tables) -> list[str]:
    """Per pooled control whose runs failed more often than their 95% allows (``coverage_verdict``), one clause
    naming each machine where it did."""
    pooled = t.pooled_controls
    bad = pooled[pooled.fail_p < 0.05] if len(pooled) else pooled.iloc[0:0]
    out = []
    for (orders, name), rows in bad.groupby(["orders", "control"], sort=False):
        on = " and ".join(
            f"{r.runs_failed} of {r.runs_judged} on {str(r.machine).split(',')[0]} (p = {r.fail_p:.2g})"
            for r in rows.itertuples()
        )
        out.append(
            f"over every {orders} run, the {name} control's own interval (its units alone) failed in {on}, 5% "
            "allowed: the intervals here add the run effect"
        )
    return out


POOLED_NAMES = {
    "A/A": ("plain decoding", "its A/A copy"),
    "twin": ("the first-named of two identical trees", "its twin"),
}


POOLED_ORDERS = {  # how a pooled sentence names its runs' order design (``runcontrols.order_design``)
    speedstats.ABBA: "in ABBA orders",
    speedstats.UNBALANCED: (
        "before ABBA orders, each unit in one random order, so an order effect within a unit does not cancel "
        "and runs of one seed repeated one sequence of orders,"
    ),
}


def pooled_sentences(t: Tables) -> list[str]:
    """Per machine and order design with two runs or more, the controls of every run pooled
    (``runcontrols.pooled_controls``): how often and by how much the first-named copy took longer, and
    whether that lean is beyond chance.  ABBA runs first: theirs is the harness's measure."""
    pooled = t.pooled_controls
    out = []
    groups = pooled[pooled.runs > 1].groupby(["machine", "orders"], sort=True) if len(pooled) else []
    for (machine, orders), g in sorted(groups, key=lambda kg: (kg[0][0], kg[0][1] != speedstats.ABBA)):
        parts, verdicts = [], []
        for r in g.sort_values("control").itertuples():
            first, second = POOLED_NAMES[r.control]
            parts.append(
                f"{first} took longer than {second} in {r.slower} of {r.units} units (p = {r.p:.2g}) and in "
                f"{r.runs_slower} of {r.runs} runs (p = {r.runs_p:.2g}), by {r.lean:+.1%} [{r.lo:+.1%}, {r.hi:+.1%}], "
                + (
                    f"and its own 95% interval (its units alone) excluded {'1×' if r.control == 'A/A' else '0'} in "
                    f"{r.runs_failed} of {r.runs_judged} runs (5% allowed: p = {r.fail_p:.2g}, one-sided)"
                    if r.runs_judged
                    else f"and no run had an interval of its own (each under {speedstats.MIN_UNITS} prompts)"
                )
            )
            verdicts.append(pooled_verdict(r) + coverage_verdict(r))
        said = "; ".join(verdicts)
        out.append(
            f"Pooled over the {int(g.runs.max())} runs timed on {machine} {POOLED_ORDERS[orders]} "
            "(two-sided binomial tests of an even split; "
            f"geometric-mean ratios with 95% t intervals over runs, a run's units sharing its process): "
            f"{'; '.join(parts)}. "
            f"{said[:1].upper()}{said[1:]}."
        )
    return out


def pooled_verdict(r) -> str:
    """Whether one pooled control (a ``pooled_controls`` row) shows a lean of the harness: its interval
    over runs excludes 0, or only the sign over runs is beyond chance, or neither."""
    systematic, signed = r.lo > 0 or r.hi < 0, r.runs_p < 0.05
    what = f"a difference under {abs(r.lean):.1%} between two candidates"
    if (systematic or signed) and r.orders != speedstats.ABBA:
        return (
            f"the {r.control} lean is beyond chance in these runs, whose orders let an order effect stand; "
            "the ABBA runs' lean measures the harness's"
        )
    if systematic:
        return (
            f"the {r.control} lean's interval excludes 0: a systematic difference between two names for one "
            f"decode, too small for one run's units to show, so {what} is within the harness's own"
        )
    if signed:
        return (
            f"the {r.control} lean's interval includes 0, but its sign over runs is beyond chance, so {what} "
            "may be the harness's own"
        )
    return f"the {r.control} lean's interval includes 0"


def coverage_verdict(r) -> str:
    """'' where one pooled control's runs failed no more often than their 95% allows, else what that means."""
    if not r.fail_p < 0.05:
        return ""
    return (
        f"; the {r.control} control's own interval (its units alone) failed in more runs than its 95% allows, so one "
        "run's intervals over units are narrower than what varies between runs (the failed controls were off by up "
        f"to {r.failed_max:.2f}): the report's intervals add the run effect estimated from reruns (results.harness)"
    )


def cell(c: pd.DataFrame, run_id: str) -> str:
    """A run's controls: 'A/A 0.98× [0.95, 1.01], chain N=3 vs its twin +0.01 [-0.02, 0.03]: hold'."""
    mine = c[c.run_id == run_id] if len(c) else c
    if mine.empty:
        return "none recorded"
    parts = [control(r, 2, "{} vs its twin") for r in mine.itertuples()]
    judged = mine[mine.lo.notna()]  # a control without an interval neither holds nor fails
    return ", ".join(parts) + (": hold" if judged.holds.all() else ": FAIL, not ranked")
