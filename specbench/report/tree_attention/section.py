"""REPORT.md's tree-attention subsection, from results/attention.csv (`python -m specbench.attention_bench`)
and, where present, results/attention_threads1.csv: the same points re-measured with one torch thread."""

from __future__ import annotations

import pandas as pd

from ...attention.heatmap import machines
from .. import analysis
from ..context import Ctx
from ..markdown import md_table
from . import stats, text

FIGURES = (
    "attention_grid.png",
    "attention_fusion.png",
    "attention_model.png",
    "attention_time.png",
    "attention_speedup.png",
)
KEY = {"batch": 1, "kv_len": 1024, "tree_size": 64}
POINT = ["shape", "dtype", "batch", "kv_len", "tree_size"]


def wide(kern: pd.DataFrame) -> pd.DataFrame:
    return kern.pivot_table(index=POINT, columns="impl", values="median_s", aggfunc="median").reset_index()


def key_table(w: pd.DataFrame) -> str:
    impls = [c for c in ("fused", "sequential", "flex", "flex_compiled") if c in w]
    key = w[(w.batch == KEY["batch"]) & (w.kv_len == KEY["kv_len"]) & (w.tree_size == KEY["tree_size"])]
    if key.empty or "fused" not in key:
        return ""
    rows = [
        [r["shape"], r["dtype"]]
        + [analysis.fmt(1000 * r[c]) for c in impls]
        + [analysis.fmt(r[c] / r["fused"], 2) for c in impls if c != "fused"]
        for r in key.to_dict("records")
    ]
    return (
        f"**Headline point** (batch {KEY['batch']}, KV length {KEY['kv_len']}, tree size {KEY['tree_size']}; "
        "median ms; ratios = time ÷ fused time):\n\n"
        + md_table(
            rows, ["shape", "dtype"] + [f"{c} ms" for c in impls] + [f"{c}/fused" for c in impls if c != "fused"]
        )
    )


def chain_check(w: pd.DataFrame) -> str:
    """On a chain (one branch) fused and sequential attention are the same computation: any large
    ratio there is timing noise, which bounds how far the other ratios can be trusted."""
    c = w[(w["shape"] == "chain")]
    if c.empty or not {"fused", "sequential"} <= set(c):
        return ""
    r = (c.sequential / c.fused).dropna()
    off = c[(r > 1.5) | (r < 1 / 1.5)]
    worst = c.loc[(r.apply(lambda x: max(x, 1 / x))).idxmax()]
    return (
        f"**Consistency check.** On a chain (one root-to-leaf branch) fused and per-branch attention are the same "
        f"computation, so sequential ÷ fused should be 1: it is {r.min():.2f}–{r.max():.2f} over "
        f"{len(r)} chain points, {len(off)} of them off by more than 1.5×; the worst is {worst['dtype']} batch "
        f"{int(worst.batch)}, KV {int(worst.kv_len)}, N={int(worst.tree_size)} "
        f"({1000 * worst.fused:.2f} ms fused vs {1000 * worst.sequential:.2f} ms sequential)."
    )


def recheck(w: pd.DataFrame, again: pd.DataFrame | None) -> str:
    """The committed points beside their re-measurement with one thread (attention_threads1.csv)."""
    k = stats.kernels(again)
    if k.empty:
        return (
            "_results/attention_threads1.csv is absent: the suspicious points have not been re-measured "
            "with `threads=1`._"
        )
    w1 = wide(k)
    m = w1.merge(w, on=POINT, suffixes=("_1t", ""))
    if m.empty or "fused_1t" not in m:
        return ""
    rows = [
        [
            r["shape"],
            r["dtype"],
            int(r["kv_len"]),
            int(r["tree_size"]),
            f"{1000 * r['fused']:.2f} / {1000 * r['sequential']:.2f} ({r['sequential'] / r['fused']:.2f})",
            f"{1000 * r['fused_1t']:.2f} / {1000 * r['sequential_1t']:.2f} ({r['sequential_1t'] / r['fused_1t']:.2f})",
        ]
        for r in m.sort_values(POINT).to_dict("records")
    ]
    m = m.assign(r0=m.sequential / m.fused, r1=m.sequential_1t / m.fused_1t)
    moved = m[(m.r0 / m.r1 > 1.5) | (m.r1 / m.r0 > 1.5)]
    verdict = (
        ""
        if moved.empty
        else f" {len(moved)} of {len(m)} points change their sequential ÷ fused ratio by more than 1.5× when "
        "re-measured: "
        + "; ".join(
            f"{r['shape']} {r['dtype']} KV {int(r['kv_len'])} N={int(r['tree_size'])} {r['r0']:.2f} → {r['r1']:.2f}"
            for r in moved.to_dict("records")
        )
        + ". On one thread the chain points agree with the identity (fused = sequential), so these outliers of "
        "attention.csv are timing noise of its multi-threaded run on a shared machine, not a property of the "
        "kernels; read attention.csv's ratios to within that noise."
    )
    thr = int(k.threads.iloc[0])  # attention_threads1.csv: 1 where not recorded (results.optional)
    t0 = int(w.threads.iloc[0])  # attention.csv's: 0 where not recorded
    return (
        f"**Re-measured with {thr} torch thread** (results/attention_threads1.csv, "
        f"{int(k.repeats.min()) if k.repeats.notna().any() else '?'}+ repeats per point, batch 1; fused / sequential ms "
        f"and their ratio):\n\n"
        + md_table(rows, ["shape", "dtype", "KV", "N", "attention.csv", "one thread"])
        + (f"\n\n(attention.csv ran {t0} threads.)" if t0 else "")
        + verdict
    )


def apart(att: pd.DataFrame) -> str:
    """Which machine this section's grid is from, where attention.csv holds rows of several (kept apart)."""
    ids = machines(att)
    if ids.nunique() < 2:
        return ""
    shown = ids.value_counts().index[0]
    name = att.get("machine", pd.Series("", index=att.index)).fillna("").astype(str)
    label = {i: (name[ids == i].iloc[0] or "a machine not recorded (rows from before they named it)") for i in set(ids)}
    rest = "; ".join(f"{(ids == i).sum()} rows on {label[i]}" for i in sorted(set(ids) - {shown}))
    return f"This grid was timed on {label[shown]} (the most rows); attention.csv also holds, kept apart: {rest}."


def markdown(att: pd.DataFrame | None, again: pd.DataFrame | None, links: dict[str, str]) -> str:
    """The subsection; ``links``: {figure file: its markdown link}, each placed beside its text."""
    kern = stats.kernels(att)
    if kern.empty:
        return "_results/attention.csv is absent: run `python -m specbench.attention_bench`._"
    w = wide(kern)
    w["threads"] = int(kern.threads.iloc[0])
    cells = stats.fused_cells(kern)
    sp = stats.speedups(kern, cells)
    mv = stats.model_view(att)
    parts = [
        apart(att),
        key_table(w),
        text.grid_sentence(cells),
        text.roof_sentence(kern, cells),
        links.get("attention_grid.png", ""),
        text.spread_sentence(cells, sp),
        text.why_sentence(kern, sp),
        links.get("attention_fusion.png", ""),
        text.model_text(mv, sp),
        links.get("attention_model.png", ""),
        chain_check(w),
        recheck(w, again),
        links.get("attention_time.png", ""),
        links.get("attention_speedup.png", ""),
        text.cell_table(cells, sp),
    ]
    return "\n\n".join(p for p in parts if p)


def section(ctx: Ctx) -> str:
    """The subsection on the analysis page (``sections.RENDER["attention"]``), its figures linked where made."""
    return markdown(
        ctx.data.attention,
        ctx.data.attention_recheck,
        {n: ctx.link(n) for n in FIGURES if n in ctx.figs},
    )
