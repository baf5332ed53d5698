"""The setup page's *Study bookkeeping*: the reference study's size floors met and unmet (`floors`, each
unmet one priced), the least time one run takes here (`onerun`, at the ceiling rate `runtimes` states),
and where each answer row's best budget sits among the budgets tried (the brackets)."""

from __future__ import annotations

import pandas as pd

from . import floors, onerun, tables
from .context import Ctx
from .markdown import bullets


def floor_sentences(summary: pd.DataFrame) -> list[str]:
    """The study's size floors (report/floors.py): how many are met, and each unmet one with its cost."""
    st = floors.status(summary)
    if st.empty:
        return [f"summary.csv lacks one of {', '.join(floors.NEEDED)}: the study's size floors are not checked."]
    met = st[st.missing == 0]
    out = [
        f"Study size: {len(met)} of {len(st)} floors of the reference study are met in full "
        f"({'; '.join(met.floor) if len(met) else 'none'})."
    ]
    for r in st[st.missing > 0].itertuples():
        priced = (
            "at the measured wall time per prompt-token of the same pair's runs of the same kind here "
            "(replay, live sampling, live at batch 1 or batched; the same tree where run) they would take "
            + minutes_more(r.minutes)
        )
        if r.unpriced:
            priced = f"{r.unpriced} of the decodes they need have no run of their pair and kind here to price them" + (
                f"; the others would take {minutes_more(r.minutes)}" if r.minutes > 0 else ""
            )
        out.append(f"Floor not met: {r.floor}: {r.missing} of {r.cells} configurations absent; {priced}.")
    return out


def minutes_more(minutes: float) -> str:
    """'about 12 min more', or 'under a minute more' (a rank-replayed grid prices at seconds)."""
    return f"about {minutes:.0f} min more" if minutes >= 0.5 else "under a minute more"


def section(ctx: Ctx) -> str:
    """The study's bookkeeping (the setup page): its size floors, the least time one run takes, and
    where each answer row's best budget sits among the budgets tried."""
    t, data = ctx.t, ctx.data
    least = onerun.sentence(t.least)
    lines = floor_sentences(data.summary) + ([least] if least else []) + bracket_sentences(t.answer, t.rows)
    return bullets(lines, "none recorded")


def live_budgets(rows: pd.DataFrame, r: dict) -> str:
    """'N = 1, 2, 3, 4, 6 (16 × 32); 3 (8 × 64)': every live batch-1 run in summary.csv of r's pair,
    shape, dataset and dtype, by run size (prompts × new tokens)."""
    keep = (rows.engine == "live") & (rows.batch_size.astype(float) == 1)
    for k in ("pair", "shape", "dataset", "dtype"):
        keep &= rows[k].astype(str) == str(r[k])
    runs = [
        f"{', '.join(str(int(b)) for b in sorted(set(g.budget)))} ({int(n)} × {int(k)})"
        for (n, k), g in rows[keep].groupby(["n_prompts", "max_new_tokens"], sort=True)
    ]
    return "N = " + "; ".join(runs) if runs else "no live batch-1 run"


def bracket_sentences(ans: pd.DataFrame, rows: pd.DataFrame | None = None) -> list[str]:
    """How many answer rows' best budget sits at an edge of the budgets tried, per pair; a live
    check's edge names the replayed grid's best for the same shape (``tables.replayed_best``) and its bracket."""
    if ans.empty:
        return []
    kind = ans.bracket.astype(str).map(lambda b: "at an edge" if b.startswith("edge") else b)
    counts = ", ".join(f"{n} {k}" for k, n in kind.value_counts().sort_index().items())
    edge = ans[kind == "at an edge"]
    out = [
        f"Where each of the {len(ans)} answer rows' best budget sits among the budgets tried (answer.md's labels): "
        f"{counts}. Only an interior best (or N = 1, the smallest admitted) is an optimum; one budget tried "
        "brackets nothing, and an edge's optimum may lie beyond it."
    ]
    if edge.empty:
        return out
    per = ", ".join(f"{p} {len(g)}" for p, g in edge.groupby("pair", sort=True))
    out.append(f"The edges per pair: {per}.")
    live = edge[edge.get("engine", pd.Series("", index=edge.index)) == "live"]
    if len(edge) > len(live):
        out.append(f"{len(edge) - len(live)} of them are grids not run dense at the low end (budgets 1, 2, 3, ...).")
    best = tables.replayed_best(ans)
    for r in live.to_dict("records"):
        now = best.get(tuple(str(r[k]) for k in tables.LIVE_KEY))
        moved = f"; the replayed grid's best is now N={int(now['budget'])}, {now['bracket']} there" if now else ""
        ran = live_budgets(rows, r) if rows is not None else f"N = {r['budgets']}"
        out.append(
            f"{r['pair']}'s live check of {r['shape']} on {r['dataset']} has its best at an edge of N = "
            f"{r['budgets']} at {int(r['max_new_tokens'])} new tokens; its live batch-1 runs (prompts × tokens): "
            f"{ran}{moved} (`run_all.sh` re-picks its live budgets from the current projection)."
        )
    return out
