"""The wording of a group, a setting, a claim, a speed, an interval and a share, shared by the
sections, the TL;DR and the findings table (`findings`).  Imports analysis and tables."""

from __future__ import annotations

import pandas as pd

from ..results import costcurve, ranking
from . import analysis, tables


def where(r) -> str:
    """'qwen_coder on humaneval (float32, replayed, 64 new tokens)': a group, phrased once."""
    return f"{r['pair']} on {r['dataset']} {setting(r)}"


def setting(r) -> str:
    """'(float32, replayed, 64 new tokens)': how a group ran."""
    eng = {"replay": "replayed", "live": "live"}.get(str(r.get("engine")), str(r.get("engine", "")))
    parts = [str(r["dtype"])] + ([eng] if eng and eng != "?" else []) + [f"{int(r['max_new_tokens'])} new tokens"]
    return f"({', '.join(parts)})"


def pct(x) -> str:
    """'12%', or 'n/a' for a missing value."""
    return "n/a" if x is None or x != x else f"{x:.0%}"


def interval(v, lo, hi, n, digits: int = 2) -> str:
    """A value with its 95% CI, or with the reason no interval is printed (fewer than MIN_CI prompts)."""
    if v is None or v != v:
        return "n/a"
    n = int(n) if n == n and n is not None else 0
    if n < tables.MIN_CI:
        return f"{analysis.fmt(float(v), digits)} (n={n}, no CI)"
    return analysis.fmt_ci(float(v), lo, hi, digits)


def metric(r: dict, name: str, digits: int = 2) -> str:
    return interval(r.get(name), r.get(f"{name}_lo"), r.get(f"{name}_hi"), r.get("n_prompts"), digits)


def projected(r: dict) -> str:
    """'1.39 [1.36, 1.42]', or '–' without a projection."""
    if r.get("projected") != r.get("projected") or r.get("projected") is None:
        return "–"
    return f"{r['projected']:.2f} [{r['projected_lo']:.2f}, {r['projected_hi']:.2f}]"


def speed(r: dict) -> str:
    """'1.45× [1.37, 1.53] (benchmark)', '1.39× [1.36, 1.42] (projected)', or '1.42× (single run, no interval;
    projected 1.39× [1.36, 1.42])': a single live run's reading is never called measured (the benchmark's
    pooled estimate is: ``results.speedstats``, the same number on every page)."""
    if r.get("speed") != r.get("speed") or r.get("speed") is None:
        return "not recorded"
    if r.get("speed_basis") == "benchmark":
        return f"{r['speed']:.2f}× [{r['benchmark_lo']:.2f}, {r['benchmark_hi']:.2f}] (benchmark)"
    lo, hi = r.get("projected_lo"), r.get("projected_hi")
    ci = f" [{lo:.2f}, {hi:.2f}]" if lo == lo and lo is not None else ""
    if r.get("speed_basis") == "projected":
        return f"{r['speed']:.2f}×{ci} (projected)"
    proj = f"; projected {r['projected']:.2f}×{ci}" if r.get("projected") == r.get("projected") else ""
    return f"{r['speed']:.2f}× (single run, no interval{proj})"


def claim_word(r: dict) -> str:
    return "ranked" if tables.is_ranked(r["claim"]) else r["claim"]


def widest_first(ans: pd.DataFrame) -> list[str]:
    """The answer's pairs, the one with the most answer rows (the main pair) first, then by name."""
    return sorted(set(ans.pair), key=lambda p: (-int((ans.pair == p).sum()), p))


def fastest_per_dataset(g: pd.DataFrame) -> list[dict]:
    """A pair's best answer row per dataset (``results.ranking.order`` by speed): from its ranked rows (the
    full-size study) where it has any, else from all of them (then each says exploratory); a timed speed
    (the benchmark's or a single run's) before a projected one."""
    g = g[g.speed.notna()]
    ranked = g[g.claim.map(tables.is_ranked)]
    out = []
    for _ds, d in (ranked if len(ranked) else g).groupby("dataset", sort=True):
        meas = d[d.speed_basis.isin(["benchmark", "measured"])]
        out.append(ranking.order(meas if len(meas) else d, "speed").iloc[0])
    return [r.to_dict() for r in out]


def gain(r: dict) -> str:
    p = r["paired"]
    if int(r["n_shared"]) < tables.MIN_CI:
        return f"{p.diff:+.2f} (n={int(r['n_shared'])}, no CI)"
    return analysis.fmt_diff(p)


def cost_machine(env: dict | None, costs: pd.DataFrame | None, short: bool = False) -> str:
    """The CPU whose cost curves the projections read, as its cost rows name it ('AMD EPYC (AVX512), 2 cores,
    2 threads, torch 2.13.0+cpu'; ``short``: 'AMD EPYC (AVX512), 2 cores'; ``costcurve.study_name``), else
    results/environment.json's (the last forward-cost run's machine: a default run elsewhere rewrites it)."""
    named = costcurve.study_name(costs)
    if named:
        return ", ".join(named.split(", ")[:2]) if short else named
    if not env:
        return "machine not recorded"
    parts = [env.get("gpu") or env.get("cpu"), f"{env.get('cores')} cores"]
    parts += [] if short else [f"{env.get('torch_threads')} torch threads"]
    return ", ".join(str(p) for p in parts if p)
