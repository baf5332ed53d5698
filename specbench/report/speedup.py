"""Speedup (projected and measured) and losslessness against the plain-decoding baseline.

Both are measured against the baseline row (tree none, budget 0) of the same
pair, dataset, dtype, max_new_tokens and batch size (`BASELINE_MATCH`): a live run's
tokens/s depends on how many prompts share a forward, so a batch-8 run is never
divided by a batch-1 baseline.  pandas only.

Projected speedup = tokens_per_step · t_target(1) / (draft_cost + verify_cost)
with t_role(n) the median measured forward time for n query tokens
(results/costs.csv, interpolated linearly), verify_cost = t_target(N+1), and a
draft cost that charges each drafter what it does per step (`draft_cost`).
Measured speedup = live tokens_per_s ÷ the baseline's tokens_per_s.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ..study.declared import draft_frontier
from . import analysis as A
from . import compare as C

BASELINE_MATCH = ["pair", "dataset", "dtype", "max_new_tokens", "batch_size"]

DRAFT_COST_RULE = (
    "draft_cost charges each drafter what it does per step: an n-gram drafter its measured "
    "lookup time (mean draft_s per step in steps.csv); EAGLE-2 one draft forward per depth over "
    "its frontier of `width` nodes, D × t_draft(min(width, N)); every other model drafter one "
    "draft forward per depth over a frontier of about N/D nodes, D × t_draft(⌈N/D⌉), with D "
    "the config's deepest tree in steps.csv."
)


def _cost_fn(costs: pd.DataFrame, pair: str, role: str, dtype: str | None = None):
    """seconds(n_tokens) by linear interpolation of the measured points (clamped): this
    pair's, in this dtype where costs.csv says the dtype."""
    c = costs[costs.role == role]
    if "pair" in c.columns:  # never another pair's costs: no rows, no projection
        c = c[c.pair == pair]
    if dtype is not None and "dtype" in c.columns:  # never another dtype's either
        c = c[c.dtype.astype(str) == str(dtype)]
    if c.empty:
        return None
    pts = c.groupby("n_tokens", sort=True).seconds.median()
    xs, ys = pts.index.to_numpy(float), pts.to_numpy(float)
    return lambda n: float(np.interp(n, xs, ys))


def _param(params, key: str) -> int | None:
    """The integer ``tree.<key>`` of a row's tree_params JSON, or None."""
    try:
        return int(json.loads(params).get(key))
    except (TypeError, ValueError, json.JSONDecodeError):
        return None


def draft_cost(r, depth: int, t_draft, lookup_s: float | None) -> float | None:
    """Seconds of drafting per step for one config (see DRAFT_COST_RULE); None if unknown.
    A pair with target costs but no draft costs drafts without a model: ``study.costs``
    measures the model a drafter forwards (``Drafter.forward_model``) and none for one that
    runs no model (n-gram), which is charged its measured draft_s per step instead.  A tree
    policy that declares a frontier parameter (``PolicySpec.draft_frontier``, EAGLE-2's
    ``width``; the report reads ``study.declared``) forwards that many nodes per depth."""
    n = int(r["budget"])
    if t_draft is None:
        return lookup_s if lookup_s is not None and math.isfinite(lookup_s) else None
    if (key := draft_frontier(r["tree"])) and (width := _param(r["tree_params"], key)):
        return depth * t_draft(min(width, n))
    return depth * t_draft(math.ceil(n / depth))


def projected_speedup(df: pd.DataFrame, steps: pd.DataFrame | None, costs: pd.DataFrame | None) -> pd.DataFrame:
    need = {"role", "n_tokens", "seconds"}
    if costs is None or not need <= set(costs.columns) or df.empty:
        return pd.DataFrame()
    depth, lookup = {}, {}
    if steps is not None and {"config_hash", "tree_depth"} <= set(steps.columns):
        depth = steps.groupby("config_hash").tree_depth.max().to_dict()
        if "draft_s" in steps:
            lookup = steps.groupby("config_hash").draft_s.mean().to_dict()
    rows = []
    for r in df.to_dict("records"):
        if r.get("engine") == "live" and int(r.get("batch_size") or 1) > 1:
            continue  # costs.csv times one sequence's forwards: no projection for B prompts per forward
        name = r.get("pair_name", r["pair"])  # costs.csv is keyed by the pair's config name
        t_target = _cost_fn(costs, name, "target", r.get("dtype"))
        if t_target is None:
            continue
        n = int(r["budget"])
        d = max(1, int(depth.get(r["config_hash"], n if r["tree"] == "chain" else math.ceil(math.log2(n + 1)))))
        dc = draft_cost(r, d, _cost_fn(costs, name, "draft", r.get("dtype")), lookup.get(r["config_hash"]))
        if dc is None:
            continue
        vc = t_target(n + 1)
        rows.append(
            {
                **r,
                "depth": d,
                "draft_cost": dc,
                "verify_cost": vc,
                "projected": r["tokens_per_step"] * t_target(1) / (dc + vc),
            }
        )
    return pd.DataFrame(rows)


def match_baseline(base: pd.DataFrame, r) -> dict | None:
    """The baseline row (lowest hash on ties) with the same BASELINE_MATCH keys as r, or None."""
    m = base
    for k in BASELINE_MATCH:
        if k in base and k in r:
            m = m[m[k].astype(str) == str(r[k])]
    return None if m.empty else m.iloc[0].to_dict()


def measured_speedup(df: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Live configs with tokens_per_s beside their live baseline: measured = ratio of tokens_per_s."""
    base = A.baselines(summary)
    if base.empty or "tokens_per_s" not in df or "engine" not in df:
        return pd.DataFrame()
    base = base[(base.engine == "live") & base.tokens_per_s.notna()]
    rows = []
    for r in df[(df.engine == "live") & df.tokens_per_s.notna()].to_dict("records"):
        b = match_baseline(base, r)
        if b is not None:
            rows.append(
                {
                    **r,
                    "baseline_hash": b["config_hash"],
                    "baseline_tokens_per_s": b["tokens_per_s"],
                    "measured": r["tokens_per_s"] / b["tokens_per_s"],
                }
            )
    return pd.DataFrame(rows)


def speedup_table(df, summary, steps, costs) -> pd.DataFrame:
    """Projected speedup for every config with costs, and measured speedup where a live baseline matches."""
    proj = projected_speedup(df, steps, costs)
    meas = measured_speedup(df, summary)
    if proj.empty and meas.empty:
        return pd.DataFrame()
    if proj.empty:
        return meas.assign(projected=float("nan"))
    if meas.empty:
        return proj.assign(measured=float("nan"), baseline_tokens_per_s=float("nan"), baseline_hash="")
    extra = meas[["config_hash", "baseline_hash", "baseline_tokens_per_s", "measured"]]
    unprojected = meas[~meas.config_hash.isin(proj.config_hash)].assign(projected=float("nan"))
    both = proj.merge(extra, on="config_hash", how="left")
    return pd.concat([both, unprojected], ignore_index=True) if len(unprojected) else both


def lossless_table(df: pd.DataFrame, summary: pd.DataFrame, outputs: dict) -> pd.DataFrame:
    """Every greedy configuration's outputs against its greedy (T=0) baseline's on the same prompts."""
    base = A.baselines(summary)
    base = base[(base.verify.astype(str) == "greedy") & (base.temperature.astype(float) == 0)] if len(base) else base
    if not outputs or base.empty:
        return pd.DataFrame()
    rows = []
    for r in df[(df.verify == "greedy") & (df.temperature == 0)].to_dict("records"):
        b = match_baseline(base, r)
        if b is None:
            continue
        eq = C.output_equality(outputs, r["config_hash"], b["config_hash"])
        if eq["n_prompts"]:
            rows.append({**r, **eq, "baseline_hash": b["config_hash"]})
    return pd.DataFrame(rows)


def speedup_sentences(table: pd.DataFrame) -> list[str]:
    out: list[str] = []
    if table.empty:
        return out
    for key, g in table.groupby(A.GROUP + ["mode"], sort=True):
        where = f"{key[0]} on {key[1]} ({key[2]}, {int(key[3])} new tokens), {key[4]}"
        if g.projected.notna().any():
            b = g.sort_values(["projected", "config_hash"], ascending=[False, True], kind="mergesort").iloc[0]
            out.append(
                f"{where}: the highest projected speedup is {A.fmt(b.projected, 2)}× ({b['shape']}, "
                f"N={int(b.budget)}); {int((g.projected > 1).sum())} of {int(g.projected.notna().sum())} "
                "configurations project above 1×."
            )
        m = g[g.measured.notna()]
        if len(m):
            b = m.sort_values(["measured", "config_hash"], ascending=[False, True], kind="mergesort").iloc[0]
            out.append(
                f"{where}: measured speedup over plain decoding peaks at {A.fmt(b.measured, 2)}× "
                f"({b['shape']}, N={int(b.budget)}; projected {A.fmt(b.projected, 2)}×)."
            )
    return out


def lossless_sentences(table: pd.DataFrame) -> list[str]:
    out: list[str] = []
    if table.empty:
        return out
    keys = [k for k in BASELINE_MATCH if k in table]
    for key, g in table.groupby(keys, sort=True):
        where = dict(zip(keys, key))
        n, same = int(g.n_prompts.sum()), int(g.identical.sum())
        bad = g[g.identical < g.n_prompts]
        tail = (
            "every output is token-identical to plain decoding."
            if bad.empty
            else (
                f"{len(bad)} of {len(g)} configurations differ somewhere; the earliest divergence is at token "
                f"{min(pos for d in bad.diverged for _, pos in d)}."
            )
        )
        out.append(
            f"{where['pair']} on {where['dataset']} ({where['dtype']}, {int(where['max_new_tokens'])} new tokens"
            + (f", batch {int(where['batch_size'])}" if "batch_size" in where else "")
            + f"): {same} of {n} "
            f"(configuration, prompt) outputs of {len(g)} greedy configurations equal the baseline's "
            f"({same / n:.1%}); " + tail
        )
    return out


CHECK_ALPHA = 0.01  # a Holm-adjusted χ² p-value below this flags a (pair, mode, prefix) check


def holm(p: pd.Series) -> pd.Series:
    """Holm's step-down adjusted p-values (family-wise error over the non-NaN ``p``; NaN stays NaN)."""
    order = p.dropna().sort_values(kind="mergesort")
    m = len(order)
    adj = np.minimum(1.0, np.maximum.accumulate(order.to_numpy(float) * (m - np.arange(m))))
    return pd.Series(adj, index=order.index).reindex(p.index)


def lossless_check_sentences(check: pd.DataFrame) -> list[str]:
    """Per pair and mode: how many prefixes' χ² p-values fall below CHECK_ALPHA, raw and
    Holm-adjusted over all of the pair's checks (many modes x prefixes x seeds: at 18
    checks one raw p < 0.01 comes up about one time in six from exact samplers), and
    the empirical TV beside the TV an exact sampler shows at the same N (``tv_null``)."""
    out: list[str] = []
    if check is None or check.empty or "chi2_p" not in check:
        return out
    check = check.assign(holm_p=check.groupby("pair").chi2_p.transform(lambda p: holm(p.astype(float))))
    for (pair, mode), g in check.groupby(["pair", "verify"], sort=True):
        p, m = g.chi2_p.astype(float), int(check.chi2_p[check.pair == pair].astype(float).notna().sum())
        low, flagged = int((p < CHECK_ALPHA).sum()), int((g.holm_p < CHECK_ALPHA).sum())
        tv = (
            f"; empirical TV {A.fmt(g.tv.astype(float).mean(), 4)} against {A.fmt(g.tv_null.astype(float).mean(), 4)}"
            " for exact sampling at the same N"
            if "tv_null" in g and g.tv_null.notna().any()
            else ""
        )
        out.append(
            f"{pair}, {mode}: {low} of {len(g)} checks (prefix × seed) have p < {CHECK_ALPHA:g} (smallest "
            f"p = {A.fmt(p.min())}, Holm-adjusted over the pair's {m} checks {A.fmt(g.holm_p.min())}; "
            f"{int(g.n_draws.min())}+ draws each){tv}; "
            + (
                "consistent with a lossless sampler."
                if flagged == 0
                else f"{flagged} reject the target's distribution after adjustment: look at these prefixes."
            )
        )
    return out
