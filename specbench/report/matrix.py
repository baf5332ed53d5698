"""The drafter x target matrix (#34 item 8): each drafter against each target it ran with, at one
fixed shape and budget, on the prompts every cell ran (the cross-pair table's rows, ``across.cross_pair``).

Imports: ``analysis`` (number formats) and ``markdown`` (tables); reads the cross-pair frame only.
"""

from __future__ import annotations

import pandas as pd

from . import analysis
from .markdown import md_table

SETTINGS = (("chain", 4), ("binary", 8))  # fixed in advance: the shapes and budgets every pair runs


def drafter_label(draft: str, tree: str) -> str:
    """A drafter by what drafts: the draft model, the n-gram lookup, the target's own layers, or a
    merged model + n-gram tree."""
    draft = str(draft)
    if draft == "ngram":
        return "n-gram lookup"
    if "@layers=" in draft:
        return "self, layer subset"
    return f"{draft} + n-gram (merged)" if tree == "merged" else draft


def cells(cross: pd.DataFrame, shape: str, budget: int) -> pd.DataFrame:
    """One row per (dataset, dtype, max_new_tokens, drafter, target) at this shape and budget."""
    if cross.empty:
        return cross
    g = cross[(cross.cross_shape == shape) & (cross.budget == budget)]
    return g.assign(drafter=[drafter_label(d, t) for d, t in zip(g.draft, g.tree)])


def render(cross: pd.DataFrame) -> list[str]:
    """Markdown blocks: per fixed setting and dataset where two or more targets ran, the matrix
    (tokens/step · acceptance rate) and one computed sentence per drafter that ran both."""
    out: list[str] = []
    for shape, budget in SETTINGS:
        g = cells(cross, shape, budget)
        if g.empty:
            continue
        for (ds, dt, mnt), grp in g.groupby(["dataset", "dtype", "max_new_tokens"], sort=True):
            if grp.target.nunique() < 2:
                continue
            out.append(f"**Drafter × target, {shape} N={budget}: {ds} ({dt}, {int(mnt)} new tokens)**\n\n" + table(grp))
            out += sentences(grp)
    return out


def table(grp: pd.DataFrame) -> str:
    targets = sorted(grp.target.unique())
    drafters = sorted(grp.drafter.unique())
    at = {(r.drafter, r.target): r for r in grp.itertuples()}
    rows = [[d] + [cell(at[d, t]) if (d, t) in at else "–" for t in targets] for d in drafters]
    rows.append(["shared prompts"] + [analysis.fmt(int(grp.n_shared.max()))] * len(targets))
    return md_table(rows, ["drafter \\ target"] + targets)


def cell(r) -> str:
    """tokens/step · acceptance rate, and which layers a self-drafting subset keeps."""
    layers = str(r.draft).split("@layers=")[1] if "@layers=" in str(r.draft) else ""
    return f"{analysis.fmt(r.tps_shared, 2)} · {analysis.fmt(r.rate_shared, 2)}" + (
        f" (layers {layers})" if layers else ""
    )


def sentences(grp: pd.DataFrame) -> list[str]:
    """Per drafter that ran two targets: how its tokens/step and acceptance rate move between them."""
    out = []
    for d, rows in grp.groupby("drafter", sort=True):
        if rows.target.nunique() < 2:
            continue
        rows = rows.sort_values("tps_shared", kind="mergesort")
        lo, hi = rows.iloc[0], rows.iloc[-1]
        out.append(
            f"- {d}: {analysis.fmt(hi.tps_shared, 2)} tokens/step (rate {analysis.fmt(hi.rate_shared, 2)}) "
            f"verified by {hi.target}, {analysis.fmt(lo.tps_shared, 2)} (rate {analysis.fmt(lo.rate_shared, 2)}) "
            f"by {lo.target}."
        )
    return ["\n".join(out)] if out else []
