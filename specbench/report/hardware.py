"""The answer per hardware and per batch size (pandas, numpy, matplotlib; no torch).

**Phase diagram.**  Acceptance is measured once; which tree is fastest depends on the cost
curve.  On a two-parameter family of curves, a forward of k tokens costs ``1 + m (k - 1)``
target one-token forwards on the target and ``r (1 + m (k - 1))`` on the draft model (``r``:
the draft-to-target cost ratio, ``m``: the marginal cost of one more query token), so a
configuration's speedup is ``E / (r (F + m (K - F)) + S + m (V - S))`` with, over its steps,
E tokens emitted, F draft forwards of K tokens in all, S target forwards of V tokens
(``costmodel.counts``; a drafter without a model drafts for free here).  Each machine
measured in costs.csv is a point: ``r = t_draft(1) / t_target(1)`` and the secant
``m = (t_target(M) / t_target(1) - 1) / (M - 1)`` at ``M = MARGINAL_AT``.

**Batch-size schedule of single runs.**  Per live setting run at several batch sizes B (one run per
cell, no interval): each B's configurations' measured speedups over plain decoding at the same B, and
the fastest; the interleaved benchmark's schedule, with intervals, is ``results.schedule``'s other source.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..results import costcurve, costtable, ranking
from . import costmodel
from .costmodel import label, speedup

RS = np.logspace(-2, 0.5, 55)  # draft-to-target cost ratio (above 1: a draft slower than the target)
MS = np.logspace(-3, 0, 49)  # marginal cost per query token, in one-token forwards
MARGINAL_AT = 17  # the secant of a measured curve: a 16-token tree's verification


def aggregates(
    rows: pd.DataFrame, steps: pd.DataFrame | None, costs: pd.DataFrame | None, counted=None
) -> pd.DataFrame:
    """Per replayed greedy configuration: E, F, K, S, V of its steps (module docstring); a pair
    whose costs.csv rows time no draft model (n-gram) drafts for free.  ``counted``: the steps'
    ``costmodel.StepCounts``, where the caller shares them."""
    if steps is None or costs is None or rows.empty:
        return pd.DataFrame()
    timed = costs.groupby("pair").role.agg(set)
    free_pairs = {str(p) for p, roles in timed.items() if "draft" not in roles}
    keep = rows[(rows.engine == "replay") & (rows.temperature == 0) & (rows.budget.astype(int) > 0)]
    counted = counted or costmodel.StepCounts(steps[steps.config_hash.isin(keep.config_hash)])
    out = []
    for r in keep.to_dict("records"):
        c = counted.get(r["config_hash"])
        if c is None:
            continue
        free = str(r.get("pair_name", r["pair"])) in free_pairs
        keys = {k: r[k] for k in ("config_hash", "pair", "dataset", "shape", "budget", "max_new_tokens")}
        out.append({**keys, **totals(c, free)})
    return pd.DataFrame(out)


def totals(c: costmodel.Counts, free: bool) -> dict:
    """E, F, K, S, V of one configuration's steps (module docstring); ``free``: its drafter runs no model."""
    return {
        "E": c.emitted.sum(),
        "F": 0.0 if free else c.draft.sum(),
        "K": 0.0 if free else float((c.draft @ c.draft_sizes).sum()),
        "S": c.steps.sum(),
        "V": float((c.verify @ c.verify_sizes).sum()),
    }


def width_priced(c: costmodel.Counts, target: costcurve.Curve, draft: costcurve.Curve | None) -> float:
    """Seconds of one configuration's steps with every forward priced at its width on the measured curves
    (a drafter without a model drafts for free)."""
    verify = float((c.verify.sum(0) * target.at(c.verify_sizes)).sum())
    if draft is None or not len(c.draft_sizes):
        return verify
    return verify + float((c.draft.sum(0) * draft.at(c.draft_sizes)).sum())


def per_width(rows: pd.DataFrame, counted: costmodel.StepCounts | None, costs: pd.DataFrame | None) -> pd.DataFrame:
    """Per machine (each of costs.csv's, ``costs_all``), dtype, pair and dataset: the best replayed greedy
    configuration with every forward priced at that machine's measured width (``Curve.at``: interpolated
    between measured widths, never a single slope; a drafter without a model drafts for free, as on the phase
    diagram), beside the secant model's best at the same machine's (r, m) (``speedup``)."""
    if counted is None or costs is None or costs.empty or rows.empty:
        return pd.DataFrame()
    keep = rows[(rows.engine == "replay") & (rows.temperature == 0) & (rows.budget.astype(int) > 0)]
    out = []
    costs = costs.assign(device=costtable.devices(costs))
    ids = costs.machine_id.fillna("").astype(str)  # costs.csv's machine, machine_id, weights: NaN where not recorded
    for (_mid, pair, dtype, device), g in costs.groupby([ids, "pair", "dtype", "device"], sort=True):
        tc, dc = (costcurve.curve(g, costcurve.AT_CONTEXT, pair, role, dtype, device) for role in ("target", "draft"))
        if tc is None:
            continue
        t1 = float(tc.at(1))
        r_, m_ = (0.0 if dc is None else float(dc.at(1)) / t1), (float(tc.at(MARGINAL_AT)) / t1 - 1) / (MARGINAL_AT - 1)
        for ds, kd in keep[keep.pair.astype(str) == str(pair)].groupby("dataset", sort=True):
            made = [(r, c) for r in kd.to_dict("records") if (c := counted.get(r["config_hash"])) is not None]
            if not made:
                continue
            priced = np.array([c.emitted.sum() * t1 / width_priced(c, tc, dc) for _r, c in made])
            sums = pd.DataFrame([totals(c, dc is None) for _r, c in made])
            i = int(ranking.best_index(pd.DataFrame([r for r, _c in made]), priced))  # the one ranking's pick
            s, name = priced[i], label(made[i][0])
            out.append(dict(machine=str(g.machine.fillna("").iloc[0]), dtype=dtype, device=device,
                            weights=str(g.weights.fillna("pretrained").iloc[0]),
                            pair=pair, dataset=ds, best=s, best_label=name,
                            secant=float(speedup(sums, np.array([r_]), np.array([m_])).max())))  # fmt: skip
    return pd.DataFrame(out)


def machine_points(costs: pd.DataFrame | None) -> pd.DataFrame:
    """Per (pair, dtype, device) with draft and target curves: r and m (module docstring)."""
    if costs is None or costs.empty:
        return pd.DataFrame()
    out = []
    costs = costs.assign(device=costtable.devices(costs))
    for (pair, dtype, device), g in costs.groupby(["pair", "dtype", "device"], sort=True):
        t, d = (costcurve.curve(costs, costcurve.AT_CONTEXT, pair, role, dtype, device) for role in ("target", "draft"))
        if t is None:
            continue
        t1 = float(t.at(1))
        out.append(
            {
                "pair": pair,
                "dtype": dtype,
                "device": device,
                "r": 0.0 if d is None else float(d.at(1)) / t1,  # no draft model: it drafts for free here
                "m": (float(t.at(MARGINAL_AT)) / t1 - 1) / (MARGINAL_AT - 1),
                "t1": t1,
                "t_max": float(t.at(t.sizes[-1])),
                "n_max": int(t.sizes[-1]),
                "weights": "random" if (g.weights == "random").any() else "pretrained",
                "machine": " / ".join(sorted(set(g.machine.dropna().astype(str)))),
            }
        )
    return pd.DataFrame(out)


def other_points(every: pd.DataFrame | None, study: pd.DataFrame | None) -> pd.DataFrame:
    """``machine_points`` of the cost curves the study's projections do not read (``every`` less ``study``,
    ``costcurve.one_per_curve``'s rows): each other machine's apart (a default run's curve on another CPU)."""
    if every is None or study is None or every.empty:
        return pd.DataFrame()
    rest = every.drop(index=study.index)
    ids = rest.machine_id.fillna("").astype(str)
    parts = [machine_points(g).assign(machine_id=m) for m, g in rest.groupby(ids, sort=True)]
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def other_sentence(pts: pd.DataFrame) -> str:
    """One sentence on the other machines' curves: each pair's t(1), its widest forward and r."""
    if pts is None or pts.empty:
        return ""
    each = [
        f"{p.pair} in {p.dtype} on {p.device} ({p.machine or 'a machine its rows do not name'}): t(1) "
        f"{p.t1 * 1e3:.0f} ms, a {p.n_max}-token forward {p.t_max * 1e3:.0f} ms ({p.t_max / p.t1:.2f}×), r {p.r:.2f}"
        for p in pts.itertuples()
    ]
    return (
        "Other machines' cost curves, kept apart (a default run's on another machine: its own live runs are set "
        "against them, speed.md; the projections here read the study's): " + "; ".join(each) + "."
    )


def schedule_sentences(sched: pd.DataFrame, covered=frozenset()) -> list[str]:
    """Per live setting of single runs (one run per cell, no interval): the fastest configuration at
    each B, labelled as such and never read as where speculation stops paying (the interleaved
    benchmark's schedule says that, ``results.schedule.stop``); a (pair, dataset, dtype) in ``covered``
    (the benchmark's schedule has it) is left to the benchmark."""
    out: list[str] = []
    if sched.empty:
        return out
    for (pair, ds, dt, toks, n), g in sched.groupby(["pair", "dataset", "dtype", "max_new_tokens", "n_prompts"]):
        if (pair, ds, dt) in covered:
            continue
        best = g[g.best].sort_values("batch_size")
        items = [f"B={int(r['batch_size'])}: {label(r)} {r['measured']:.2f}×" for r in best.to_dict("records")]
        where = f"{pair} on {ds} ({dt}, {int(n)} prompts × {int(toks)} tokens, single live runs, no interval)"
        out.append(f"Batch-size schedule, {where}: {'; '.join(items)}.")  # no interval: no "stops paying"
    return out
