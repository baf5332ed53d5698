"""The speed page's *Batch size*: the interleaved benchmark's batch-size schedule (`schedule_section`:
per setting its table and its verdict in words, `stop_clause`; the rows are `results.schedule`'s), the
single live runs' per cell (`results.schedule`, labelled, without intervals) and its figure, then the
batched target continuations replay stands on: their divergence from batch 1 and bf16 replay against
bf16 live decoding."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..results import ranking, schedule, speedstats
from . import analysis, controls, figures, phrases
from .context import Ctx, Tables
from .markdown import fig_links, table


def fig_schedule(sched: pd.DataFrame) -> figures.Fig | None:
    """Measured speedup against the draft budget, one line per batch size B (plain decoding = 1);
    only the settings where some line has two or more budgets (the rest: the table)."""
    if sched.empty:
        return None
    keys = ["pair", "dataset", "dtype", "n_prompts", "max_new_tokens"]
    groups = [
        (f"{k[0]} · {k[1]} ({k[2]}, {k[3]} × {k[4]} tok)", g)
        for k, g in sched.groupby(keys, sort=True)
        if g.groupby(["batch_size", "shape"]).budget.nunique().max() >= 2
    ]
    if not groups:
        return None
    sizes = sorted({int(b) for _t, g in groups for b in g.batch_size})
    shades = plt.get_cmap("viridis")(np.linspace(0, 0.85, len(sizes)))

    def draw(ax, g):
        for (b, shape), s in g.groupby(["batch_size", "shape"], sort=True):
            s = s.sort_values("budget")
            c = shades[sizes.index(int(b))]
            ax.plot(s.budget, s.measured, marker="o" if shape == "chain" else "s", ms=3, color=c,
                    label=f"B={int(b):>2}" + ("" if shape == "chain" else f" {shape}"))  # fmt: skip
        ax.axhline(1, color="k", lw=0.6)
        ax.set(xlabel="budget N (draft tokens)", ylabel="measured speedup ×")

    return figures.panels(
        groups,
        "batch_schedule.png",
        draw,
        "Single live runs (one run per cell, no interval): measured speedup over plain decoding at the same "
        "batch size B against the draft budget, one line per B (same prompts; darker: smaller B). Where "
        "speculation stops paying is the interleaved benchmark's, in the table above. Settings with a single "
        "budget per B are in the table only.",
        legend="batch",
    )


def candidate_looks(sched: pd.DataFrame) -> dict[str, dict]:
    """Each candidate's look: its shape's palette colour (darker for the smaller budgets of one shape) and a
    marker per budget, the same budget the same marker in every panel."""
    budgets = sorted({int(b) for b in sched.budget})
    cands = sched.drop_duplicates("candidate").sort_values(["tree", "budget"])
    looks = {}
    for tree, g in cands.groupby("tree", sort=True):
        for i, r in enumerate(g.to_dict("records")):
            c = figures.lighter(figures.color(str(tree), "shape"), 0.45 * i / max(len(g) - 1, 1))
            looks[str(r["candidate"])] = dict(color=c, marker=figures.MARKERS[budgets.index(int(r["budget"])) % 8])
    return looks


def fig_bench_schedule(sched: pd.DataFrame) -> figures.Fig | None:
    """The interleaved benchmark's schedule (``results.schedule``'s): each candidate's paired speedup with
    its 95% interval against the batch size B, one panel per setting; a B whose controls fail is hollow."""
    if sched is None or sched.empty:
        return None
    groups = [
        (f"{k[0]} · {k[1]} ({k[2]}, {int(k[3])} tok) · {str(g.machine.iloc[0]).split(',')[0]}", g)
        for k, g in sched.groupby(schedule.SETTINGS[schedule.BENCHMARK], sort=True)
    ]
    names = sorted({str(c) for c in sched.candidate})
    looks = candidate_looks(sched)

    def draw(ax, g):
        sizes = sorted({int(b) for b in g.batch_size})
        for name, s in g.groupby("candidate", sort=True):
            s, j, look = s.sort_values("batch_size"), names.index(str(name)), looks[str(name)]
            x = s.batch_size * 2 ** ((j - len(names) / 2) * 0.03)  # side by side at each B
            err = [s.speedup - s.lo, s.hi - s.speedup]
            ax.errorbar(x, s.speedup, yerr=err, lw=1.2, capsize=2, ms=6, label=str(name), **look)
            failed = ~s.ranked.astype(bool)
            ax.plot(x[failed], s.speedup[failed], ls="none", ms=6, zorder=3, mfc="white", **look)
        ax.axhline(1, color="k", lw=0.8)
        figures.budget_axis(ax, sizes)  # log 2, a tick at each B
        ax.set(xlabel="batch size B", ylabel="measured speedup ×")

    return figures.page_panels(
        groups[: figures.MAX_PANELS],
        "bench_schedule.png",
        draw,
        "The interleaved benchmark's batch-size schedule: each candidate's speedup over plain decoding of the "
        "same prompts in the same round at batch size B, with its 95% paired interval (bars; the table above "
        "gives the ties); colour: the shape (darker: its smaller budgets), marker: the budget. Hollow: a B whose "
        "controls fail, not ranked. Plain decoding = 1.",
        cols=1,
        h=3.4,
        legend="candidate",
        ncol=5,
    )


# ---------------------------------------------------------------------------------------------------
# the benchmark's schedule in words (``results.schedule``: its rows per B and its verdict)
# ---------------------------------------------------------------------------------------------------
def fastest(at) -> str:
    """'chain N=3 0.89× [0.83, 0.95]': a ``per_b`` row's fastest candidate with its interval."""
    return f"{at.best} {at.best_speedup:.2f}× [{at.best_lo:.2f}, {at.best_hi:.2f}]"


def stop_clause(rows: pd.DataFrame, names: bool = True) -> str:
    """The verdict of one setting (``schedule.stop``) in words: a loss and an unresolved gain stated apart,
    nothing claimed without either; the fastest's interval beside a B whose item shows another only where
    ``names`` (the main page's items leave it to the speed page's table)."""
    kind, x, first = schedule.stop(rows)
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
    """'; it loses from B = 8 on (the fastest there is below 1×)', where every ``rows`` B from some y on
    is ranked and its fastest's interval below 1× (``schedule.losing_from``; else "")."""
    at = schedule.losing_from(rows)
    if at is None:
        return ""
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


def sentences(sched: pd.DataFrame) -> list[str]:
    """Per setting (one sentence each): each B's shown configuration with its interval and how many tie
    it (their names: the table), then the verdict; the machine named where several timed."""
    out: list[str] = []
    if sched is None or sched.empty:
        return out
    several = sched.machine_id.nunique() > 1
    for k, g in sched.groupby(schedule.SETTINGS[schedule.BENCHMARK], sort=True, dropna=False):
        rows = schedule.per_b(g)
        items = "; ".join(item(r, names=False) for r in rows.itertuples())
        on = str(g.machine.iloc[0]) if several else None
        out.append(f"Batch-size schedule, {where(k, rows, on)}: {items}; {stop_clause(rows, names=False)}.")
    return out


def _shown_cell(r: dict) -> str:
    cell = f"{r['shown']} {r['speedup']:.2f}× [{r['lo']:.2f}, {r['hi']:.2f}]"
    return cell if r["ranked"] else f"not ranked (a control fails; fastest {r['best']} {r['best_speedup']:.2f}×)"


BENCH_COLS = [
    ("batch B", lambda r: int(r["batch_size"])),
    ("prompts (units)", lambda r: f"{r['n_prompts']} ({r['n_units']})"),
    ("controls", lambda r: r["controls"]),
    ("shown [95% CI]", lambda r: _shown_cell(r)),
    ("ties it", lambda r: (r["ties"] or "none") if r["ranked"] else "not ranked"),
    ("every candidate [95% CI], fastest first", lambda r: r["every"]),
]


def schedule_section(t: Tables) -> list[str]:
    """The interleaved benchmark's batch-size schedule: per setting a table (one row per B) and its
    verdict (``stop_clause``); nothing without schedule runs."""
    sched, c = t.bench_schedule, t.controls
    out: list[str] = []
    if sched is None or sched.empty:
        return out
    for k, g in sched.groupby(schedule.SETTINGS[schedule.BENCHMARK], sort=True, dropna=False):
        rows = schedule.per_b(g)
        rows["controls"] = [controls.cell(c, r) for r in rows.run_id]
        verdict = stop_clause(rows)
        out.append(
            f"**{where(k, rows, str(g.machine.iloc[0]))}**: per B, each candidate's paired speedup over "
            "plain decoding of the same prompts in the same round (95% interval over units of B prompts: a jackknife "
            f"t interval on the log ratio, none below {speedstats.MIN_UNITS} units{controls.offset_clause(g)}), the one shown {speedstats.PICK_RULE}, and the ties (Bonferroni-adjusted paired "
            f"difference to the fastest includes 0); a B whose controls fail is not ranked. "
            f"{verdict[:1].upper()}{verdict[1:]}.\n\n" + table(rows.to_dict("records"), BENCH_COLS)
        )
    return out


SCHEDULE_COLS = [
    ("batch B", lambda r: int(r["B"])),
    ("plain tokens/s", lambda r: analysis.fmt(r["plain"], 2)),
    ("measured speedup by N", lambda r: r["by_n"]),
    ("fastest", lambda r: r["best"]),
]


def section(ctx: Ctx) -> str:
    """The interleaved benchmark's batch-size schedule (``schedule_section``), the single runs'
    (results.schedule.schedule, labelled), then the batched continuations' divergence."""
    sched, out = ctx.t.schedule, schedule_section(ctx.t)
    if not out:
        out.append(
            "_The interleaved benchmark has no schedule yet (`python -m specbench.study.tools.speed "
            "+speed_candidates=schedule batch_size=B` at two or more B)._"
        )
    out += fig_links(ctx, "bench_schedule.png")
    if sched.empty:
        out.append("_No live setting ran at two or more batch sizes, so there is no batch-size schedule._")
    for k, g in analysis.groups(sched, ["pair", "dataset", "dtype", "max_new_tokens", "n_prompts"]):
        rows = []
        for b, gb in g.groupby("batch_size", sort=True):
            top = ranking.order(gb, "measured").iloc[0]  # ranking.best of a non-empty B
            rows.append(
                dict(
                    B=b,
                    plain=top["baseline_tokens_per_s"],
                    by_n=", ".join(f"{r['shape']} {int(r['budget'])}: {r['measured']:.2f}×" for _, r in gb.iterrows()),
                    best=f"{top['shape']} N={int(top['budget'])} ({top['measured']:.2f}×)"
                    if top["measured"] > 1
                    else f"plain decoding (best speculative {top['measured']:.2f}×)",
                )
            )
        out.append(
            f"**{k[0]} on {k[1]} ({k[2]}, {int(k[4])} prompts × {int(k[3])} new tokens, live, single runs)**: "
            "measured speedup over plain decoding at the same B on the same prompts, one run per cell at its own "
            "time, without an interval: where speculation stops paying is not read from it.\n\n"
            + table(rows, SCHEDULE_COLS)
        )
    out += fig_links(ctx, "batch_schedule.png")
    out.append("**Batched target continuations** (replay's input). " + divergence_sentence(ctx.data.divergence))
    out.append(bf16_replay_sentence(ctx.data.bf16_replay))
    return "\n\n".join(out)


def divergence_sentence(div: pd.DataFrame | None) -> str:
    """How often batched float32 continuations (replay's default) differ from batch-1 ones."""
    head = (
        "Replay computes the target's float32 continuations `batch_size` prompts per forward; batched "
        "kernels round differently, so at an exact near-tie a batched continuation can take the other token "
        "(`exact_continuations=true` computes them one prompt at a time, bit-exact with batch-1 live decoding)."
    )
    if div is None or div.empty:
        return head + " _results/continuation_divergence.csv is absent: `scripts/bench_batch.py` measures it._"
    parts = [
        f"{int(r.diverged)} of {int(r.n_prompts)} {r.dataset} continuations of {int(r.max_new_tokens)} tokens "
        f"at batch {int(r.batch_size)} differ from batch-1 ({int(r.tokens_before_divergence)} of {int(r.tokens)} "
        f"tokens before the first divergence{'; ' + r.divergences if r.diverged else ''}; batched "
        f"{float(r.speedup):.2f}× faster)"
        for r in div.itertuples()
    ]
    return head + " Measured by `scripts/bench_batch.py` on the real target: " + "; ".join(parts) + "."


def bf16_replay_sentence(df: pd.DataFrame | None) -> str:
    """How far live bf16 decoding is from the bf16 batched continuation that bf16 replay stands on."""
    if df is None or df.empty:
        return (
            "_results/bf16_replay_divergence.csv is absent: `scripts/bench_bf16_replay.py` measures how far "
            "live bf16 decoding is from the bf16 batched continuation._"
        )
    parts = [
        f"{r.pair} {r.tree}/{int(r.budget)}: {int(r.diverged)} of {int(r.prompts)} prompts diverge"
        + (
            f" (mean first position {r.first_divergence_mean:.1f}, the target's top-1 minus top-2 logit there "
            f"at most {r.margin_max:.3f})"
            if r.diverged
            else ""
        )
        + ", tokens_per_step live minus replay "
        + phrases.interval(r.diff_live_minus_replay, r.diff_ci_lo, r.diff_ci_hi, int(r.prompts))
        + (" (the interval includes zero)" if r.diff_ci_lo <= 0 <= r.diff_ci_hi else "")
        + rank_replay_words(r)
        for r in df.itertuples()
    ]
    return (
        "**bf16 replay against bf16 live decoding** (`scripts/bench_bf16_replay.py`, "
        f"{int(df.max_new_tokens.iloc[0])} new tokens, HumanEval, live batch {int(df.live_batch.iloc[0])}): "
        + "; ".join(parts)
        + "."
    )


def rank_replay_words(r) -> str:
    """Live minus rank replay (the grids' engine for static shapes), where the row measured it."""
    diff = getattr(r, "diff_live_minus_rank_replay", float("nan"))
    if diff != diff:
        return ""
    lo, hi = r.rank_diff_ci_lo, r.rank_diff_ci_hi
    return (
        ", live minus rank replay "
        + phrases.interval(diff, lo, hi, int(r.prompts))
        + (" (the interval includes zero)" if lo <= 0 <= hi else "")
    )
