"""The batch-size schedule from the interleaved speed benchmark (``results/speed.csv``; torch-free: the
report and ``study.serving.export`` read it).

The full study's schedule step (``study.tools.plan.schedule_jobs``, ``python -m specbench.study.tools.plan schedule``)
runs one benchmark per pair and batch size B.  A schedule run is ``python -m specbench.study.tools.speed +speed_candidates=schedule batch_size=B`` (its rows
carry ``roster=schedule``): plain decoding, its A/A copy, the batch-1 answer's tree (the benchmark's,
else the projected top; twinned: the identical-tree control), chain N ∈ ``CHAINS`` and one binary tree
(``picks``).  Per setting (``SETTING``) and batch size B, every candidate is ranked as at batch 1
(``speedstats.answers``: the paired speedup with its interval, the ties with Bonferroni, the pick rule,
the controls); a B whose controls fail is not ranked.

**Where speculation stops paying** (``stop``): the smallest measured B = x from which on, at every
measured B, the controls hold and no candidate's interval is above 1×.  At x the fastest's interval is
either below 1× (``loses``: speculation stops paying at B = x) or includes it (``no gain``: no gain is
resolved from B = x on, which is not a loss; where every B from some larger y on has its fastest below 1×,
``loses_from`` says that too).  Without such an x (the largest B measured still gains,
or is not ranked) nothing is claimed.
"""

from __future__ import annotations

import pandas as pd

from ...results import speedstats
from ...results.schedule import Lengths
from .plan import SCHEDULE_CHAINS

SETTING = ["pair", "dataset", "dtype", "max_new_tokens", "machine_id"]  # one schedule, never mixed
ROSTER, ANSWER = "schedule", speedstats.ANSWER  # speed.csv's ``roster``: a schedule run's, any other run's
CHAINS = SCHEDULE_CHAINS  # the benchmarks themselves: study.tools.plan.schedule_jobs
BINARY = 3  # the binary tree's budget where no projection ranks one
SOURCE = "the interleaved benchmark's batch-size schedule (each B's paired interval)"


# ---------------------------------------------------------------------------------------------------
# the benchmark's candidates
# ---------------------------------------------------------------------------------------------------
def rosters(speed: pd.DataFrame) -> pd.Series:
    """Each row's roster (rows written before the column existed: ``answer``)."""
    if "roster" not in speed:
        return pd.Series(ANSWER, index=speed.index)
    return speed["roster"].fillna(ANSWER).astype(str)


def answer_tree(bench: pd.DataFrame | None, pair: str, dataset: str, dtype: str, machine_id=None):
    """(tree, budget) the benchmark shows at batch 1 for ``pair`` on ``dataset`` (its answer runs, whose
    controls hold; the same machine and dtype first, then the newest), or None."""
    if bench is None or bench.empty:
        return None
    b = bench[(rosters(bench) == ANSWER) & (bench.pair == pair) & (bench.dataset == dataset)]
    b = b[b.batch_size.astype(int) == 1]
    a = speedstats.answers(b) if len(b) else pd.DataFrame()
    if a.empty:
        return None
    a = a[a.shown & a.controls_hold]
    if a.empty:
        return None
    a = a.assign(_here=(a.machine_id == machine_id).astype(int), _dt=(a.dtype == dtype).astype(int))
    r = a.sort_values(["_here", "_dt", "run_id"], kind="mergesort").iloc[-1]
    return str(r.tree), int(r.budget)


def projected_binary(speedup: pd.DataFrame | None, pair: str, dataset: str) -> int:
    """The budget of the binary tree projected fastest for the pair and dataset, else ``BINARY``."""
    if speedup is None or speedup.empty or "projected" not in speedup:
        return BINARY
    g = speedup[(speedup.pair == pair) & (speedup.dataset == dataset) & (speedup.tree == "binary")]
    g = g[(g.engine == "replay") & g.projected.notna()]
    return int(g.loc[g.projected.astype(float).idxmax()].budget) if len(g) else BINARY


def picks(bench, speedup, pair: str, dataset: str, dtype: str, machine_id=None) -> list[tuple[str, int]]:
    """A schedule run's trees, the first twinned: the batch-1 answer's (the benchmark's, else the
    projected top, ``validate.speed_picks``), chain N ∈ CHAINS, one binary tree; each once."""
    first = answer_tree(bench, pair, dataset, dtype, machine_id)
    if first is None and speedup is not None and not speedup.empty:
        from .validate import speed_picks  # heavy: torch, the benchmark's only (the report imports this)

        try:
            first = speed_picks(speedup, pair, dataset)[0]
        except (ValueError, KeyError, IndexError):
            first = None
    out = [first] if first else []
    out += [("chain", n) for n in CHAINS] + [("binary", projected_binary(speedup, pair, dataset))]
    return list(dict.fromkeys(out))


# ---------------------------------------------------------------------------------------------------
# the schedule from the benchmark's answers
# ---------------------------------------------------------------------------------------------------
def schedule(measured: pd.DataFrame | None) -> pd.DataFrame:
    """Every candidate of the schedule runs (``speedstats.answers`` rows of roster ``schedule``), per
    setting with two or more batch sizes; ``ranked`` where the B's controls hold."""
    if measured is None or measured.empty or "roster" not in measured:
        return pd.DataFrame()
    m = measured[measured.roster == ROSTER]
    if m.empty:
        return m
    m = m[m.groupby(SETTING, dropna=False).batch_size.transform("nunique") >= 2].copy()
    m["batch_size"] = m.batch_size.astype(int)
    m["ranked"] = m.controls_hold.astype(bool)
    return m.sort_values([*SETTING, "batch_size", "speedup"], ascending=[True] * 6 + [False], kind="mergesort")


def per_b(g: pd.DataFrame) -> pd.DataFrame:
    """One setting's schedule, one row per B: the shown configuration (the pick rule among the ties),
    the fastest's interval, the ties' names, whether any candidate's interval is above 1×."""
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


def stop(rows: pd.DataFrame) -> tuple[str, int | None, bool]:
    """(kind, x, from the smallest B) of one setting's ``per_b`` rows: ``loses`` or ``no gain`` from
    B = x (module docstring); ``gains`` where the largest B measured still has an interval above 1×,
    ``open`` where it is not ranked (x None)."""
    rows = rows.sort_values("batch_size", kind="mergesort").reset_index(drop=True)
    i = trailing((rows.ranked & ~rows.gains).tolist())
    if i is None:
        return ("gains" if rows.ranked.iloc[-1] else "open"), None, False
    return ("loses" if rows.best_hi.iloc[i] < 1 else "no gain"), int(rows.batch_size.iloc[i]), i == 0


def trailing(flags: list[bool]) -> int | None:
    """The index where the trailing run of True ``flags`` starts; None where the last flag is False."""
    i = len(flags)
    while i > 0 and flags[i - 1]:
        i -= 1
    return None if i == len(flags) else i


def fastest(at) -> str:
    """'chain N=3 0.89× [0.83, 0.95]': a ``per_b`` row's fastest candidate with its interval."""
    return f"{at.best} {at.best_speedup:.2f}× [{at.best_lo:.2f}, {at.best_hi:.2f}]"


def stop_clause(rows: pd.DataFrame, names: bool = True) -> str:
    """The verdict of one setting in words: a loss and an unresolved gain stated apart, nothing claimed
    without either; the fastest's interval beside a B whose item shows another only where ``names``
    (the main page's items leave it to the speed page's table)."""
    kind, x, first = stop(rows)
    last = int(rows.batch_size.max())
    if kind == "gains":
        return f"speculation still pays at B = {last}, the largest measured"
    if kind == "open":
        return f"where speculation stops paying is not resolved (B = {last}, the largest measured, is not ranked)"
    assert x is not None  # "loses" and "no gain" name their B
    at = rows[rows.batch_size == x].iloc[0]
    best = fastest(at)
    beyond = "at any measured B" if first else "from there on"
    gap = unranked_before(rows, x)
    unresolved = f"; whether it pays at {gap} is not resolved" if gap else ""
    if kind == "loses":
        if gap:  # "stops paying at B = x" would claim the B's before it
            return f"speculation loses from B = {x} on (the fastest: {best}){unresolved}"
        head = "speculation pays at no measured B" if first else f"speculation stops paying at B = {x}"
        return f"{head}: no interval above 1× {beyond}, and the fastest at B = {x}, {best}, loses"
    head = (
        f"no gain is resolved from B = {x} on (not a loss: the fastest at B = {x}{unless_shown(at, names)} includes 1×)"
    )
    return head + loses_from(rows[rows.batch_size > x], names) + unresolved


def short_stop(rows: pd.DataFrame) -> str:
    """The verdict in a few words (the TL;DR's): 'no gain from B = 4, loses from B = 8'."""
    kind, x, _first = stop(rows)
    if kind in ("gains", "open"):
        return f"pays at every measured B (to {int(rows.batch_size.max())})" if kind == "gains" else "not resolved"
    if kind == "loses":
        return f"loses from B = {x}"
    tail = loses_from(rows[rows.batch_size > x], names=False)
    later = tail.split("loses from ")[1].split(" on")[0] if tail else ""
    return f"no gain resolved from B = {x}" + (f", loses from {later}" if later else "")


def unranked_before(rows: pd.DataFrame, x: int) -> str:
    """'B = 4' (or 'B = 2 or B = 4'): the B's just before x that are not ranked, else ""."""
    before = rows[rows.batch_size < x].sort_values("batch_size", ascending=False, kind="mergesort")
    gap = []
    for r in before.itertuples():
        if r.ranked:
            break
        gap.append(f"B = {int(r.batch_size)}")
    return " or ".join(gap[::-1])


def loses_from(rows: pd.DataFrame, names: bool = True) -> str:
    """'; it loses from B = 8 on (the fastest there is below 1×)', where
    every ``rows`` B from some y on is ranked and its fastest's interval below 1× (else "")."""
    rows = rows.sort_values("batch_size", kind="mergesort").reset_index(drop=True)
    i = trailing((rows.ranked & (rows.best_hi < 1)).tolist())
    if i is None:
        return ""
    at = rows.iloc[i]
    return f"; it loses from B = {int(at.batch_size)} on (the fastest there{unless_shown(at, names)} is below 1×)"


def unless_shown(at, names: bool = True) -> str:
    """', chain N=3 0.89× [0.83, 0.95],': the fastest with its interval, where the B's item shows another
    (and ``names``)."""
    return "" if at.best == at.shown or not names else f", {fastest(at)},"


def item(r, names: bool = True) -> str:
    """'B=2: chain N=1 1.31× [1.25, 1.37] (ties: chain N=2 1.30×)'; the ties counted where not ``names``."""
    if not r.ranked:
        return f"B={r.batch_size}: a control fails, not ranked"
    k = len(r.ties.split(", ")) if r.ties else 0
    ties = (f" (ties: {r.ties})" if names else f" (+{k} tied)") if k else ""
    return f"B={r.batch_size}: {r.shown} {r.speedup:.2f}× [{r.lo:.2f}, {r.hi:.2f}]{ties}"


def prompts(rows: pd.DataFrame) -> str:
    """'16 prompts', or '16–48 prompts' where the B's differ (each B's: the speed page's table)."""
    lo, hi = int(rows.n_prompts.min()), int(rows.n_prompts.max())
    return f"{lo} prompts" if lo == hi else f"{lo}–{hi} prompts"


def where(k: tuple, rows: pd.DataFrame, machine: str | None) -> str:
    """'qwen_coder on humaneval (interleaved benchmark, bfloat16, 64 new tokens, 16–96 prompts[,
    timed on M])'."""
    pair, ds, dtype, tokens, _mid = k
    on = f", timed on {machine}" if machine else ""
    return f"{pair} on {ds} (interleaved benchmark, {dtype}, {int(tokens)} new tokens, {prompts(rows)}{on})"


def settings(sched: pd.DataFrame | None) -> list[tuple[tuple, pd.DataFrame]]:
    """Per setting (``SETTING``) of the schedule, its key and its rows per B (``per_b``)."""
    if sched is None or sched.empty:
        return []
    return [(k, per_b(g)) for k, g in sched.groupby(SETTING, sort=True, dropna=False)]


def sentences(sched: pd.DataFrame) -> list[str]:
    """Per setting (the main page's): each B's shown configuration with its interval and how many tie it
    (their names: the speed page's table), then the verdict; the machine named where several timed."""
    out: list[str] = []
    if sched is None or sched.empty:
        return out
    several = sched.machine_id.nunique() > 1
    for k, g in sched.groupby(SETTING, sort=True, dropna=False):
        rows = per_b(g)
        items = "; ".join(item(r, names=False) for r in rows.itertuples())
        on = str(g.machine.iloc[0]) if several else None
        out.append(f"Batch-size schedule, {where(k, rows, on)}: {items}; {stop_clause(rows, names=False)}.")
    return out


# ---------------------------------------------------------------------------------------------------
# a serving engine's draft length per batch size
# ---------------------------------------------------------------------------------------------------
def chain_k(x: pd.DataFrame) -> int:
    """One ranked B's chain draft length: among the chains whose interval is above 1×, the pick rule
    among those that tie the fastest (else the fastest of them); 0 where no chain pays."""
    paying = x[(x.tree == "chain") & (x.lo > 1)]
    if paying.empty:
        return 0
    tied = paying[paying.tie]
    pool = tied if len(tied) else paying.sort_values("speedup", ascending=False, kind="mergesort").head(1)
    r = pool.sort_values(["drafted_per_step", "speedup"], ascending=[True, False], kind="mergesort").iloc[0]
    return int(r.budget)


def draft_lengths(bench: pd.DataFrame | None, pair: str) -> Lengths | None:
    """[(B, K), ...] of ``pair``'s schedule runs in the setting with the most ranked batch sizes (K: the
    chain draft length, ``chain_k``; a B whose controls fail is left out); None without one."""
    if bench is None or bench.empty:
        return None
    runs = bench[(rosters(bench) == ROSTER) & (bench.pair.astype(str) == pair)]
    sched = schedule(speedstats.answers(runs)) if len(runs) else pd.DataFrame()
    if sched.empty:
        return None
    sched = sched[sched.ranked]
    if sched.empty:
        return None
    sizes = sched.groupby(SETTING, dropna=False).batch_size.nunique()
    one = sched.set_index(SETTING).loc[[sizes.idxmax()]]
    return Lengths([(int(b), chain_k(x)) for b, x in one.groupby("batch_size", sort=True)], SOURCE)
