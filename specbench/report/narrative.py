"""The analysis sentences of notebooks/analysis.ipynb, from the frames of `specbench.report.analysis`:
the headline per comparison group, configurations that ran a subset of the group's prompts, the
mode gains at T>0, and where extra budget stops paying (saturation).
"""

from __future__ import annotations

import math

import pandas as pd

from . import compare
from .analysis import GROUP, fmt, fmt_ci, fmt_diff, greedy_groups, main_set

MARGINAL_GAIN = 0.05  # extra budget "stops paying" below +5% tokens_per_step per budget step


def _zero(p: compare.Paired) -> str:
    return "; the interval includes zero, so this difference is not resolved" if p.includes_zero else ""


def _where(r) -> str:
    return f"{r['pair']} on {r['dataset']} ({r['dtype']}, {int(r['max_new_tokens'])} new tokens)"


def headline_sentences(head: pd.DataFrame) -> list[str]:
    out: list[str] = []
    if head.empty:
        return out
    for _, g in head.groupby(GROUP, sort=True):
        first = g.iloc[0]
        parts = []
        for r in g.itertuples(index=False):
            if r.paired is not None:
                parts.append(
                    f"N={r.budget}: {r.shape} {fmt(r.tokens_per_step, 2)}, "
                    f"{r.paired.diff:+.2f} [{r.paired.lo:+.2f}, {r.paired.hi:+.2f}] vs chain"
                    f"{' (interval includes zero)' if r.paired.includes_zero else ''}"
                )
            elif r.has_chain:
                parts.append(f"N={r.budget}: chain is best ({fmt(r.tokens_per_step, 2)})")
            else:
                parts.append(f"N={r.budget}: {r.shape} {fmt(r.tokens_per_step, 2)} (no chain at this budget)")
        top = g.sort_values(["tokens_per_step", "budget"], ascending=[False, True], kind="mergesort").iloc[0]
        out.append(
            f"{_where(first)}, greedy: " + "; ".join(parts) + f". Highest overall: {top['shape']} at "
            f"N={top['budget']} ({fmt_ci(top['tokens_per_step'], top['lo'], top['hi'])} tokens/step)."
        )
    return out


def subset_sentences(chain_diffs: pd.DataFrame, head: pd.DataFrame) -> list[str]:
    """Configurations that ran fewer prompts than their group's main set, compared with chain on those."""
    if chain_diffs.empty:
        return []
    main_n = {tuple(r[k] for k in GROUP): r["n_prompts"] for r in head.to_dict("records")} if len(head) else {}
    out = []
    for r in chain_diffs.to_dict("records"):
        n = main_n.get(tuple(r[k] for k in GROUP))
        if n is not None and r["n_shared"] < n:
            out.append(
                f"{_where(r)}: {r['shape']} N={int(r['budget'])} ran {r['n_shared']} of the {n} prompts; "
                f"on those it differs from chain by {fmt_diff(r['paired'])} tokens/step{_zero(r['paired'])}."
            )
    return out


def _mode_sentence(r: dict) -> str:
    kind = "lossless" if str(r.get("lossless")).lower() in ("true", "1") else "lossy"
    tv = f", first_token_tv {fmt(r.get('first_token_tv'))}" if kind == "lossy" else ""
    trees = " (the same drafted trees)" if r.get("same_trees") is True else ""
    exact = r.get("exact_gain", math.nan)
    exact = (
        f"; by the exact laws on those trees, {exact:+.3f} expected accepted tokens/step"
        if exact == exact and exact is not None
        else ""
    )
    return (
        f"{_where(r)}, {r['shape']} N={int(r['budget'])}: {r['mode']} ({kind}) vs {r['ref_mode']}{trees}: "
        f"{fmt_diff(r['paired'])} tokens/step on {r['n_shared']} shared prompts{tv}{_zero(r['paired'])}{exact}."
    )


def mode_sentences(gains: pd.DataFrame) -> list[str]:
    if gains.empty:
        return []
    rows = gains.sort_values(GROUP + ["mode", "shape", "budget"], kind="mergesort").to_dict("records")
    return [_mode_sentence(r) for r in rows]


def saturation_sentences(df: pd.DataFrame, sums: pd.DataFrame, threshold: float = MARGINAL_GAIN) -> list[str]:
    """Per comparison group and shape at T=0, on the group's main prompt set (never across datasets)."""
    out = []
    for _, g in greedy_groups(df, main_only=True):
        main = main_set(g, sums)
        for (_mode, shape), s in main.groupby(["mode", "shape"], sort=True):
            s = s.groupby("budget", sort=True).tokens_per_step.max()
            if len(s) < 2:
                continue
            b, v = s.index.to_numpy(), s.to_numpy(float)
            gains = v[1:] / v[:-1] - 1.0
            stop = next((i for i, x in enumerate(gains) if x < threshold), None)
            where = _where(g.iloc[0])
            if stop is None:
                out.append(
                    f"{where}, {shape}: every budget step up to N={b[-1]} still adds at least "
                    f"{threshold:.0%} tokens_per_step (last step {gains[-1]:+.1%})."
                )
            else:
                out.append(
                    f"{where}, {shape}: N={b[stop]} → N={b[stop + 1]} changes tokens_per_step by "
                    f"{gains[stop]:+.1%} ({fmt(v[stop], 2)} → {fmt(v[stop + 1], 2)}), under "
                    f"{threshold:+.0%}; extra budget stops paying at N={b[stop]}."
                )
    return out
