"""The setup page's *Run times*: each step of `bash run_all.sh` with its wall time (results/run_times.csv)
beside its compute ceiling (`study.tools.ceiling`'s counts at each model's widest timed forward rate), and the
sentence naming each step far below its ceiling with why."""

from __future__ import annotations

import pandas as pd

from ..results import costcurve
from ..results.plan import REPORT_STEP  # recorded after the report it times: a later report shows it
from . import onerun
from .markdown import md_table

SETUP_STEP = "set-up"  # run_all.sh's first step (environment + models): timed apart from the study
EXTENDED_STEP = "extended:"  # run_all.sh's steps under SPECBENCH_EXTENDED=1: timed apart from the hour


def run_times(times: pd.DataFrame | None, costs: pd.DataFrame | None = None) -> str:
    """Each step's wall time in the `bash run_all.sh` runs that wrote results/ (run_times.csv; a
    resumed run appends its own rows, and a step a run skipped reads near 0: per step, the run
    that did its work), beside its compute ceiling where its forwards were counted (study.tools.ceiling,
    each model's widest forward on its ``costcurve.CEILING`` curve of ``costs``)."""
    if times is None or times.empty:
        return "_results/run_times.csv is absent: the steps' wall times of `bash run_all.sh` were not recorded._"
    ids = times.machine_id.astype(object).fillna("").astype(str)  # NaN where not recorded (results.optional)
    latest = ids[times.run.astype(str) == times.run.astype(str).max()].iloc[0]
    order = [latest, *sorted(set(ids) - {latest})]  # the latest run's machine first, each machine its own table
    return "\n\n".join(_machine_table(times[ids == m], costs, m) for m in order)


def chains(times: pd.DataFrame) -> pd.Series:
    """Each row's chain: a run and the runs that resumed it (``study.tools.ceiling``'s ``chain``).  Rows from
    before it was recorded: a run that names its machine is its own (each was a whole default run); the
    runs that name none are one chain, as they were reported."""
    run = pd.to_numeric(times.run, errors="coerce").astype("Int64").astype(str)
    named = times.machine_id.notna()
    legacy = run.where(named, "")
    chain = pd.to_numeric(times.chain, errors="coerce")
    return chain.astype("Int64").astype(str).where(chain.notna(), legacy)


def _machine_table(times: pd.DataFrame, costs: pd.DataFrame | None, machine_id: str) -> str:
    """One machine's latest chain of runs (per step the run that did its work), named by the machine (or as
    not recorded), and the machine's earlier chains' totals."""
    name = times.machine.dropna().astype(str).iloc[0] if times.machine.notna().any() else ""
    where = f"on {name}" if name else "on a machine its rows do not name (runs from before they recorded it)"
    if machine_id and costs is not None:
        costs = costcurve.of_machine(costs, machine_id)
    chain = chains(times)
    latest = chain[pd.to_numeric(times.run, errors="coerce").idxmax()]
    earlier = _earlier(times[chain != latest], chain[chain != latest])
    times = times[chain == latest]
    runs = times.run.nunique()
    per = times.loc[times.groupby("step", sort=False).seconds.idxmax()].reset_index(drop=True)
    per = per.reindex(columns=[*per.columns, *(c for c in CEILING if c not in per)])
    setup = per.step.astype(str).str.startswith(SETUP_STEP)
    extended = per.step.astype(str).str.startswith(EXTENDED_STEP)
    study, more = int(per.seconds[~setup & ~extended].sum()), int(per.seconds[extended].sum())
    upto = ", the report included" if per.step.astype(str).str.startswith(REPORT_STEP).any() else ", up to the report"
    cols = ["step", "seconds", "minutes"] + (["ceiling (s)", "ratio"] if per.ratio.notna().any() else [])
    rows = [
        [str(r.step), f"{int(r.seconds)}", f"{r.seconds / 60:.1f}", *_ceiling_cells(r)][: len(cols)]
        for r in per.itertuples()
    ]
    how = (
        "one run"
        if runs == 1
        else f"{runs} runs (a later one resumed where an earlier one stopped; per step, the run that did its work)"
    )
    return (
        f"**Run times.** Each step of `bash run_all.sh` {where}, {how}: wall seconds, and beside them "
        "the step's compute ceiling: the seconds the tokens its forwards processed would take at each model's "
        f"{ceiling_width(costs)} forward rate here (results/costs.csv), and the ratio ceiling / wall. Total without "
        f"the set-up{upto}: {study} s = {study / 60:.1f} min"
        + (
            f"; the steps marked extended (`SPECBENCH_EXTENDED=1`) took {more} s = {more / 60:.1f} min more"
            if extended.any()
            else ""
        )
        + ". "
        + ceiling_sentence(per[~setup])
        + earlier
        + "\n\n"
        + md_table(rows, cols)
    )


def _earlier(times: pd.DataFrame, chain: pd.Series) -> str:
    """The machine's earlier chains of runs, kept in run_times.csv: each one's total without the set-up."""
    if times.empty:
        return ""
    study = times[~times.step.astype(str).str.startswith((SETUP_STEP, EXTENDED_STEP))]
    totals = study.groupby(chain[study.index]).seconds.sum()
    return (
        f" Earlier runs on this machine, kept in results/run_times.csv: {len(totals)} (without the set-up: "
        + ", ".join(f"{s / 60:.1f} min" for s in totals.sort_index())
        + ")."
    )


CEILING = ["ceiling_s", "ratio", "in_forwards", "busiest", "tokens_per_forward"]


def ceiling_width(costs: pd.DataFrame | None) -> str:
    """The widest forward of each model's ``costcurve.CEILING`` curve, the rate a step's ceiling assumes, in words."""
    curves = costcurve.curves(costs, costcurve.CEILING) if costs is not None else {}
    return onerun.width_words(c.sizes[-1] for c in curves.values())


LOW_RATIO = 0.4  # a step below this share of its ceiling is named, with why (#35)


def _ceiling_cells(r) -> list[str]:
    if pd.isna(r.ratio):
        return ["", ""]
    return [f"{r.ceiling_s:.0f}", f"{r.ratio:.2f}"]


def ceiling_sentence(per: pd.DataFrame) -> str:
    """How many steps have a ceiling, and each below ``LOW_RATIO`` of it with what keeps it there
    (``_why_low``: narrow forwards, or time outside them)."""
    have = per.dropna(subset=["ratio"])
    if have.empty:
        counted = int((pd.to_numeric(per.get("forwards", pd.Series(dtype=float)), errors="coerce") > 0).sum())
        if counted:
            return (
                f"No step has a ceiling: {counted} step{'s' if counted != 1 else ''} counted forwards, but results/costs.csv names none of "
                "their models (rows from before its `model` column: rerun `python -m specbench.study.tools.costs`)."
            )
        return "No step has a ceiling: these runs predate the forward counts (`specbench.study.tools.ceiling`)."
    low = have[have.ratio < LOW_RATIO]
    out = (
        f"{len(have) - len(low)} of {len(have)} steps with counted forwards run at {LOW_RATIO} of their ceiling or more"
    )
    if low.empty:
        return out + "."
    return f"{out}; below it: " + "; ".join(_why_low(r) for r in low.itertuples()) + "."


def _why_low(r) -> str:
    """Why one step sits below its ceiling, from its counts: narrow forwards, or time outside them."""
    width = f"{r.busiest}'s forwards average {r.tokens_per_forward:.1f} tokens"
    share = f"its forwards at their own widths on this machine's cost curves would take {r.in_forwards:.2f} of its wall time"
    if r.in_forwards >= 0.5:
        return f"{r.step} ({r.ratio:.2f}): narrow forwards: {width}, and {share}"
    return f"{r.step} ({r.ratio:.2f}): time outside the models' forwards: {width}, and {share}"
