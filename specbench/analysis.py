"""Numbers and sentences computed from results/*.csv for REPORT.md (pandas only, no torch).

Every figure that REPORT.md states comes from here: labels, the projected
speedup calibrated with measured forward costs, the measured live speedup and
the analysis sentences.  Functions return empty results when their input
columns are missing, so the report degrades section by section.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

MARGINAL_GAIN = 0.05        # extra budget "stops paying" below +5% tokens_per_step per budget step
BASELINE_TREES = ("baseline", "none")


def fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    return f"{float(x):.{digits}f}"


def alpha_cols(df: pd.DataFrame) -> list[str]:
    cols = [c for c in df.columns if c.startswith("alpha_") and c[6:].isdigit()]
    return sorted(cols, key=lambda c: int(c[6:]))


# parameters that say where a shape comes from, not what it is: a named path list
# (medusa63) is its name; sequoia's vector is calibrated per dataset
LABEL_SKIP = ("name", "budget", "vector", "max_children")


def shape_label(tree: str, params) -> str:
    """``kary(width=3)``: the shape name plus its shape-defining parameters."""
    try:
        p = json.loads(params) if isinstance(params, str) and params else {}
    except json.JSONDecodeError:
        p = {}
    items = [f"{k}={v}" for k, v in sorted(p.items())
             if v is not None and k not in LABEL_SKIP and not k.startswith("calib_")
             and not (k == "paths" and tree != "paths")]
    return f"{tree}({', '.join(items)})" if items else str(tree)


def mode_label(verify: str, temperature) -> str:
    t = float(temperature) if temperature == temperature else 0.0
    return f"{verify} T={t:g}"


def prepare(summary: pd.DataFrame) -> pd.DataFrame:
    """Summary rows with derived label columns, in a fixed order; baseline rows dropped."""
    df = summary.copy()
    for col, default in (("tree_params", "{}"), ("temperature", 0.0), ("dataset", "?"),
                         ("pair", "?"), ("verify", "?"), ("engine", "?")):
        if col not in df.columns:
            df[col] = default
    df["shape"] = [shape_label(t, p) for t, p in zip(df.tree, df.tree_params)]
    df["mode"] = [mode_label(v, t) for v, t in zip(df.verify, df.temperature)]
    df = df[~df.tree.isin(BASELINE_TREES) & (df.budget > 0)]
    keys = [c for c in ("pair", "dataset", "mode", "shape", "budget", "engine", "config_hash") if c in df]
    return df.sort_values(keys, kind="mergesort").reset_index(drop=True)


def baselines(summary: pd.DataFrame) -> pd.DataFrame:
    if "tree" not in summary or "budget" not in summary:
        return summary.iloc[0:0]
    return summary[summary.tree.isin(BASELINE_TREES) | (summary.budget <= 0)]


def by_shape(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Mean of metric per pair × mode × shape × budget (over datasets and engines)."""
    return (df.groupby(["pair", "mode", "shape", "budget"], sort=True)[metric]
            .mean().reset_index())


# --------------------------------------------------------------------------
# projected and measured speedup
# --------------------------------------------------------------------------
def _cost_fn(costs: pd.DataFrame, pair: str, role: str):
    """seconds(n_tokens) by linear interpolation of the measured points (clamped)."""
    c = costs[costs.role == role]
    if "pair" in c.columns and (c.pair == pair).any():
        c = c[c.pair == pair]
    if c.empty:
        return None
    pts = c.groupby("n_tokens", sort=True).seconds.median()
    xs, ys = pts.index.to_numpy(float), pts.to_numpy(float)
    return lambda n: float(np.interp(n, xs, ys))


def projected_speedup(df: pd.DataFrame, steps: pd.DataFrame | None,
                      costs: pd.DataFrame | None) -> pd.DataFrame:
    """speedup = tokens_per_step · t_target(1) / (draft_cost + verify_cost), per config.

    verify_cost = t_target(N+1): one target forward over the root and the N draft
    nodes.  draft_cost = D · t_draft(ceil(N / D)): one draft forward per tree depth
    D over a frontier of about N / D nodes, D = the deepest tree of the config in
    steps.csv (the budget N for a chain when steps.csv is absent).  t_role(n) is
    the median measured forward time for n query tokens, interpolated linearly.
    """
    need = {"role", "n_tokens", "seconds"}
    if costs is None or not need <= set(costs.columns) or df.empty:
        return pd.DataFrame()
    depth = {}
    if steps is not None and {"config_hash", "tree_depth"} <= set(steps.columns):
        depth = steps.groupby("config_hash").tree_depth.max().to_dict()
    rows = []
    for r in df.itertuples(index=False):
        t_target, t_draft = _cost_fn(costs, r.pair, "target"), _cost_fn(costs, r.pair, "draft")
        if t_target is None or t_draft is None:
            continue
        n = int(r.budget)
        d = max(1, int(depth.get(r.config_hash, n if r.tree == "chain" else math.ceil(math.log2(n + 1)))))
        draft_cost = d * t_draft(math.ceil(n / d))
        verify_cost = t_target(n + 1)
        rows.append(dict(config_hash=r.config_hash, pair=r.pair, dataset=r.dataset, mode=r.mode,
                         shape=r.shape, budget=n, tokens_per_step=r.tokens_per_step,
                         depth=d, draft_cost=draft_cost, verify_cost=verify_cost,
                         t_target1=t_target(1),
                         projected=r.tokens_per_step * t_target(1) / (draft_cost + verify_cost)))
    return pd.DataFrame(rows)


def measured_speedup(summary: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """Live tokens_per_s over the plain-decoding baseline row of the same pair,
    dataset, dtype, device and max_new_tokens (baseline: tree none/baseline or budget 0)."""
    base = baselines(summary)
    if base.empty or "tokens_per_s" not in df or "engine" not in df:
        return pd.DataFrame()
    match = [c for c in ("pair", "dataset", "dtype", "device", "max_new_tokens") if c in df and c in base]
    base = base.groupby(match, sort=True).tokens_per_s.mean().rename("baseline_tokens_per_s").reset_index()
    live = df[(df.engine == "live") & df.tokens_per_s.notna()]
    out = live.merge(base, on=match, how="inner")
    out["measured"] = out.tokens_per_s / out.baseline_tokens_per_s
    return out[["config_hash", "tokens_per_s", "baseline_tokens_per_s", "measured"]]


# --------------------------------------------------------------------------
# analysis sentences
# --------------------------------------------------------------------------
def best_shape_sentences(df: pd.DataFrame) -> list[str]:
    """Per dataset, so a shape run on one dataset only is compared like for like."""
    out = []
    t = (df.groupby(["pair", "mode", "dataset", "shape", "budget"], sort=True)["tokens_per_step"]
         .mean().reset_index())
    for (pair, mode, dataset), g in t.groupby(["pair", "mode", "dataset"], sort=True):
        parts = []
        for budget, gb in g.groupby("budget", sort=True):
            gb = gb.sort_values(["tokens_per_step", "shape"], ascending=[False, True], kind="mergesort")
            best = gb.iloc[0]
            runner = f", ahead of {gb.iloc[1]['shape']} ({fmt(gb.iloc[1].tokens_per_step, 2)})" if len(gb) > 1 else ""
            parts.append(f"N={int(budget)}: {best['shape']} ({fmt(best.tokens_per_step, 2)}{runner})")
        out.append(f"Best shape by tokens_per_step for {pair}, {mode} on {dataset}: " + "; ".join(parts) + ".")
    return out


def saturation_sentences(df: pd.DataFrame, threshold: float = MARGINAL_GAIN) -> list[str]:
    out = []
    t = by_shape(df, "tokens_per_step")
    for (pair, mode, shape), g in t.groupby(["pair", "mode", "shape"], sort=True):
        g = g.sort_values("budget")
        if len(g) < 2:
            continue
        b, v = g.budget.to_numpy(), g.tokens_per_step.to_numpy(float)
        gains = v[1:] / v[:-1] - 1.0
        stop = next((i for i, x in enumerate(gains) if x < threshold), None)
        if stop is None:
            out.append(f"{pair}, {mode}, {shape}: every budget step up to N={b[-1]} still adds at least "
                       f"{threshold:.0%} tokens_per_step (last step {gains[-1]:+.1%}).")
        else:
            out.append(f"{pair}, {mode}, {shape}: going from N={b[stop]} to N={b[stop + 1]} changes "
                       f"tokens_per_step by only {gains[stop]:+.1%} ({fmt(v[stop], 2)} → {fmt(v[stop + 1], 2)}); "
                       f"extra budget stops paying at N={b[stop]}.")
    return out


def mode_sentences(df: pd.DataFrame) -> list[str]:
    out = []
    for (pair, dataset), g in df.groupby(["pair", "dataset"], sort=True):
        modes = g.groupby("mode", sort=True).agg(best=("tokens_per_step", "max"),
                                                 rate=("acceptance_rate", "mean"))
        if len(modes) < 2:
            continue
        modes = modes.sort_values(["best", "rate"], ascending=False, kind="mergesort")
        desc = ", ".join(f"{m} {fmt(r.best, 2)} (mean acceptance_rate {fmt(r.rate, 3)})"
                         for m, r in modes.iterrows())
        out.append(f"On {dataset} with {pair}, the best tokens_per_step per mode is: {desc}.")
    return out


def lossy_table(df: pd.DataFrame) -> pd.DataFrame:
    """Each lossy config beside the lossless configs of the same pair, dataset,
    shape and budget: acceptance gained over the lossless mode at the same
    temperature (if any) and over greedy."""
    if "lossless" not in df or df.empty:
        return pd.DataFrame()
    lossless = df.lossless.astype(str).str.lower().isin(["true", "1"])
    lossy, ref = df[~lossless], df[lossless]
    key = ["pair", "dataset", "shape", "budget"]
    rows = []
    for r in lossy.itertuples(index=False):
        same = ref
        for k in key:
            same = same[same[k] == getattr(r, k)]
        greedy = same[same.verify == "greedy"]
        hot = same[(same.verify != "greedy") & (same.temperature == r.temperature)]
        rows.append(dict(
            config_hash=r.config_hash, pair=r.pair, dataset=r.dataset, mode=r.mode, shape=r.shape,
            budget=int(r.budget), first_token_tv=getattr(r, "first_token_tv", float("nan")),
            acceptance_rate=r.acceptance_rate,
            gain_vs_lossless=(r.acceptance_rate - hot.acceptance_rate.mean()) if len(hot) else float("nan"),
            lossless_ref=", ".join(sorted(hot["mode"].unique())) if len(hot) else "",
            gain_vs_greedy=(r.acceptance_rate - greedy.acceptance_rate.mean()) if len(greedy) else float("nan")))
    return pd.DataFrame(rows)


def lossy_sentences(table: pd.DataFrame) -> list[str]:
    out = []
    if table.empty:
        return out
    for mode, g in table.groupby("mode", sort=True):
        gain = g.gain_vs_lossless if g.gain_vs_lossless.notna().any() else g.gain_vs_greedy
        ref = "the lossless modes at the same temperature" if g.gain_vs_lossless.notna().any() else "greedy"
        out.append(f"{mode} (lossy) changes acceptance_rate by {fmt(gain.mean(), 3)} on average "
                   f"(range {fmt(gain.min(), 3)} to {fmt(gain.max(), 3)}) over {ref}, at a mean "
                   f"first-token total-variation distance of {fmt(g.first_token_tv.mean(), 3)} "
                   f"from the target distribution (max {fmt(g.first_token_tv.max(), 3)}).")
    return out


def dataset_sentences(df: pd.DataFrame) -> list[str]:
    """Acceptance per dataset over the configurations that every dataset ran."""
    if df.dataset.nunique() < 2:
        return []
    out = []
    cfg = ["pair", "mode", "shape", "budget"]
    for pair, g in df.groupby("pair", sort=True):
        per = g.groupby(cfg + ["dataset"]).acceptance_rate.mean().unstack("dataset").dropna()
        if per.empty or per.shape[1] < 2:
            continue
        means = per.mean().sort_values(ascending=False, kind="mergesort")
        desc = ", ".join(f"{d} {fmt(v, 3)}" for d, v in means.items())
        spread = means.iloc[0] / means.iloc[-1] if means.iloc[-1] > 0 else float("nan")
        out.append(f"{pair}: over the {len(per)} configurations run on every dataset, mean acceptance_rate "
                   f"is {desc}; {means.index[0]} accepts {fmt(spread, 2)}× as much as {means.index[-1]}.")
    return out


def speedup_sentences(proj: pd.DataFrame) -> list[str]:
    out = []
    if proj.empty:
        return out
    for (pair, mode), g in proj.groupby(["pair", "mode"], sort=True):
        g = g.sort_values(["projected", "config_hash"], ascending=[False, True], kind="mergesort")
        b = g.iloc[0]
        out.append(f"{pair}, {mode}: the highest projected speedup is {fmt(b.projected, 2)}× "
                   f"({b['shape']}, N={int(b.budget)}, {b.dataset}); "
                   f"{int((g.projected > 1).sum())} of {len(g)} configurations project above 1×.")
    return out
