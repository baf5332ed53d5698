"""Speedup (projected and measured) against the plain-decoding baseline (losslessness against the same
baseline rows: `lossless`).

Measured against the baseline row (tree none, budget 0) of the same
pair, dataset, dtype, max_new_tokens and batch size (`BASELINE_MATCH`): a live run's
tokens/s depends on how many prompts share a forward, so a batch-8 run is never
divided by a batch-1 baseline.  pandas only.

Projected speedup = Σ emitted × t_target(1) ÷ Σ (each step's own draft and verify
cost) on the measured cost curves, with a bootstrap interval over prompts and cost
repeats (``costmodel``; DRAFT_COST_RULE says it in the report's words).
Measured speedup = live tokens_per_s ÷ the baseline's tokens_per_s; where both exist,
``error`` = projected_request ÷ measured − 1 (the projection with the measured prefill counted,
``with_prefill``: the live tokens/s include it) and ``error_decode`` = projected ÷ measured − 1.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from ..results import costcurve, costtable
from . import analysis, costmodel

OUTPUT_MATCH = ["pair", "dataset", "dtype", "max_new_tokens", "batch_size"]  # outputs compare on shared prompts
BASELINE_MATCH = OUTPUT_MATCH + ["n_prompts"]  # speed: the same prompts (the dataset's first n)

DRAFT_COST_RULE = (
    "Each step is charged what it did (specbench/report/costmodel.py): one draft-model forward "
    "per entry of the step's `scored` column (the tokens the drafter's model scored: the "
    "committed tokens not yet in its cache with the root, then each expanded depth's nodes; "
    "EAGLE-2, adaptive chains and merged trees their real trees), plus one target forward over "
    "its tree_size + 1 tokens; a drafter that runs no model (n-gram) is charged its measured "
    "lookup time per step (draft_s). Forward times are the medians of the interleaved repeats in "
    f"costs.csv at a {costcurve.KV}-token context (interpolated between the measured KV lengths). "
    "The model charges forwards only: sampling, mask building and bookkeeping are not in it, and "
    "the live rows measure what they add (speedup.csv: the per-step draft and verify seconds "
    "measured beside the model's)."
)


REMEASURE = "python -m specbench.study.tools.costs pair={pair} dtype={dtype} +costs_repeats=21 results_dir=results"  # on a quiet machine (nothing else running): more repeats of every point, interleaved


def one_token(costs: pd.DataFrame | None, speed: pd.DataFrame | None, device: str = "cpu") -> str:
    """Where a target's one-token forward (plain decoding's step) is slower in costs.csv than its
    two-token one: the medians and repeat ranges at each KV length, the pairs whose target it is, and
    the projections above their own tokens per step that this explains (a step verifying k tokens
    then costs less than a plain step), with the command that would re-measure it."""
    if costs is None or costs.empty or not {"role", "n_tokens", "kv_len", "seconds"} <= set(costs.columns):
        return ""
    c = costs[(costs.role == "target") & (costtable.devices(costs) == device)]
    c = c[c.n_tokens.isin([1, 2])]
    points: dict[tuple, list[str]] = {}  # the pairs sharing a target (equal points) -> its slow KV lengths
    for _key, g in c.groupby([k for k in ("dtype", "kv_len") if k in c], sort=True):
        w = g.pivot_table(index="pair", columns="n_tokens", values="seconds", aggfunc="first").dropna()
        for (_t1, _t2), grp in w[w[1] > w[2]].groupby([1, 2], sort=True):
            one = g[g.pair == grp.index[0]].set_index("n_tokens")
            r1, r2 = one.loc[1], one.loc[2]
            same = tuple(sorted(g.pair[(g.n_tokens == 1) & (g.seconds == r1.seconds)]))
            points.setdefault(same, []).append(
                f"{r1.seconds:.3f} s ({int(r1.repeats)} repeats, {r1.seconds_min:.3f}–{r1.seconds_max:.3f}) against "
                f"{r2.seconds:.3f} s ({r2.seconds_min:.3f}–{r2.seconds_max:.3f}) at KV {int(r1.kv_len)}"
            )
    out = [f"the target of {', '.join(k)}: t(1) = {' and '.join(v)}" for k, v in points.items()]
    if not out:
        return ""
    text = "In costs.csv a target's one-token forward is slower than its two-token one (t(2)): " + "; ".join(out) + "."
    if speed is not None and len(speed) and {"projected", "tokens_per_step"} <= set(speed.columns):
        over = speed[speed.projected.astype(float) > speed.tokens_per_step.astype(float)]
        if len(over):
            pairs = ", ".join(sorted(set(over.pair.astype(str))))
            text += (
                f" Plain decoding is charged t(1) per token, so a step verifying k ≥ 1 draft tokens in a (k + 1)-token "
                f"forward can cost less than a plain step: that is why {len(over)} projections ({pairs}) exceed "
                f"their own tokens per step (by up to {(over.projected / over.tokens_per_step).max() - 1:.0%}). "
                "A re-measurement on a quiet machine: `"
                + REMEASURE.format(pair=over.get("pair_name", over.pair).iloc[0], dtype=over.dtype.iloc[0])
                + "`."
            )
    return text


def curves(costs: pd.DataFrame) -> dict:
    """(pair, role, dtype, device) -> (Curve, its bootstrap draws), or None without rows."""
    out: dict = {}
    keys = costs[["pair", "role"] + [c for c in ("dtype", "device") if c in costs]].drop_duplicates()
    for k in keys.to_dict("records"):
        device = str(k.get("device") or "cpu")
        c = costcurve.curve(costs, costcurve.AT_CONTEXT, k["pair"], k["role"], k.get("dtype"), device)
        if c is not None:
            out[(str(k["pair"]), k["role"], str(k.get("dtype")), device)] = (c, c.draws())
    return out


def projected_speedup(
    df: pd.DataFrame, steps: pd.DataFrame | None, costs: pd.DataFrame | None, counted=None
) -> pd.DataFrame:
    """Per configuration with a target cost curve: the projected speedup of its own steps
    (``costmodel.projection``) with its interval.  A live row at batch B > 1 is not
    projected (costs.csv times one sequence's forwards).  ``counted``: the steps'
    ``costmodel.StepCounts``, where the caller shares them."""
    need = {"role", "n_tokens", "seconds", "pair"}
    if costs is None or not need <= set(costs.columns) or df.empty or steps is None or steps.empty:
        return pd.DataFrame()
    cv = curves(costs)
    counted = counted or costmodel.StepCounts(steps)
    rows = []
    for r in df.to_dict("records"):
        if r.get("engine") == "live" and int(r.get("batch_size") or 1) > 1:
            continue
        name, dt = str(r.get("pair_name", r["pair"])), str(r.get("dtype"))  # costs.csv is keyed by config name
        where = (dt, str(r.get("device") or "cpu"))  # the curve of the machine the row ran on
        target = cv.get((name, "target", *where))
        if target is None or int(r["budget"]) == 0 or (c := counted.get(r["config_hash"])) is None:
            continue
        rows.append({**r, **costmodel.projection(c, cv.get((name, "draft", *where)), target)})
    return pd.DataFrame(rows)


def baseline_matcher(base: pd.DataFrame, keys=BASELINE_MATCH):
    """``match_baseline`` of ``base`` for many rows: its ``keys`` read as text once (a loop over a
    summary's rows filtered the frame once per key and row)."""
    text = {k: base[k].astype(str).to_numpy() for k in keys if k in base}

    def match(r) -> dict | None:
        m = np.ones(len(base), bool)
        for k, col in text.items():
            if k in r:
                m &= col == str(r[k])
        hit = np.flatnonzero(m)
        return base.iloc[hit[0]].to_dict() if len(hit) else None

    return match


def match_baseline(base: pd.DataFrame, r, keys=BASELINE_MATCH) -> dict | None:
    """The baseline row (lowest hash on ties) with the same ``keys`` as r, or None."""
    return baseline_matcher(base, keys)(r)


def measured_speedup(df: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Live configs with tokens_per_s beside their live baseline: measured = ratio of tokens_per_s."""
    base = analysis.baselines(summary)
    if base.empty:  # tokens_per_s: NaN where summary.csv does not record it (results.optional)
        return pd.DataFrame()
    base = base[(base.engine == "live") & base.tokens_per_s.notna()]
    rows, match = [], baseline_matcher(base)
    for r in df[(df.engine == "live") & df.tokens_per_s.notna()].to_dict("records"):
        b = match(r)
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


# a replayed configuration and a live batch-1 run of the same tree on the same pair, data and
# rule are one configuration timed two ways: the live run's measured speedup ranks the replayed one
TWIN = ["pair", "dataset", "dtype", "tree", "tree_params", "budget", "verify", "temperature"]
SPEEDUP_COLUMNS = [
    "config_hash", "pair", "dataset", "dtype", "engine", "batch_size", "n_prompts", "max_new_tokens",
    "tree", "tree_params", "budget", "verify", "temperature", "tokens_per_step", "cost_basis",
    "projected", "projected_lo", "projected_hi", "measured", "measured_hash", "error",
    "draft_s_step", "draft_s_step_model", "verify_s_step", "verify_s_step_model",
    "built_nodes", "built_depth", "prefill_s", "projected_request", "error_decode",
]  # fmt: skip


def step_seconds(steps: pd.DataFrame | None) -> pd.DataFrame:
    """Per live configuration: measured draft and verify seconds per step (steps.csv)."""
    if steps is None or not {"draft_s", "verify_s"} <= set(steps.columns):
        return pd.DataFrame(columns=["config_hash", "draft_s_step", "verify_s_step"])
    live = steps[steps.verify_s.notna()]
    g = live.groupby("config_hash")
    return pd.DataFrame({"draft_s_step": g.draft_s.mean(), "verify_s_step": g.verify_s.mean()}).reset_index()


def twins(table: pd.DataFrame) -> pd.DataFrame:
    """``measured`` for every configuration without its own: a live batch-1 twin's (``TWIN``),
    named in ``measured_hash``; a live row's own measurement names itself."""
    out = table.assign(measured_hash=np.where(table.measured.notna(), table.config_hash, ""))
    keys = [k for k in TWIN if k in out]
    if not {"engine", "batch_size"} <= set(out.columns):
        return out
    live = out[(out.engine == "live") & out.measured.notna() & (out.batch_size.fillna(1).astype(int) == 1)]
    if live.empty:
        return out
    best = live.sort_values("config_hash").drop_duplicates(keys).set_index(keys)
    idx = pd.MultiIndex.from_frame(out[keys].astype(object))
    best.index = pd.MultiIndex.from_frame(best.index.to_frame().astype(object))
    got = best.reindex(idx)
    own = out.measured.notna().to_numpy()
    out["measured"] = np.where(own, out.measured, got.measured.to_numpy())
    out["measured_hash"] = np.where(own, out.measured_hash, got.config_hash.fillna("").to_numpy())
    return out


def speedup_table(df, summary, steps, costs, counted=None) -> pd.DataFrame:
    """Every configuration with a projection or a measurement: projected speedup with its
    interval, measured speedup (its own, or its live batch-1 twin's), and for a live row
    with both its ``error`` (projected ÷ measured − 1) and per-step seconds, measured beside
    the model's."""
    proj = projected_speedup(df, steps, costs, counted)
    meas = measured_speedup(df, summary)
    if proj.empty and meas.empty:
        return pd.DataFrame()
    extra = ["projected", "projected_lo", "projected_hi", "cost_basis", "draft_s_step_model", "verify_s_step_model"]
    out = df.copy()
    for frame, cols in ((proj, extra), (meas, ["measured", "baseline_hash", "baseline_tokens_per_s"])):
        have = frame.set_index("config_hash") if len(frame) else pd.DataFrame()
        for c in cols:
            out[c] = out.config_hash.map(have[c]) if c in have else np.nan
    out = twins(out[out.projected.notna() | out.measured.notna()].reset_index(drop=True))
    out = out.merge(step_seconds(steps), on="config_hash", how="left")
    own = out.measured_hash == out.config_hash
    out = with_prefill(out, steps, costs)
    out["error_decode"] = np.where(own, out.projected / out.measured - 1, np.nan)
    out["error"] = np.where(own, out.projected_request / out.measured - 1, np.nan)
    return out


PREFILL_AT = 128  # the largest forward costs.csv times: the draft's prefill is the target's x t_d(128)/t_t(128)


def prefill_seconds(steps: pd.DataFrame | None, hashes) -> pd.Series:
    """Per plain-decoding run (config_hash): the target's prefill per prompt as that run measured it, the
    mean over prompts of its first step's verify seconds (the prompt's forward) less the median of its
    later steps' (one token each)."""
    if steps is None:  # verify_s, step: NaN where not recorded (results.optional)
        return pd.Series(dtype=float)
    b = steps[steps.config_hash.isin(set(hashes)) & steps.verify_s.notna()]
    first, later = b[b.step == 0], b[b.step > 0]
    return first.groupby("config_hash").verify_s.mean() - later.groupby("config_hash").verify_s.median()


def with_prefill(out: pd.DataFrame, steps: pd.DataFrame | None, costs: pd.DataFrame | None) -> pd.DataFrame:
    """A live batch-1 row's tokens/s include each prompt's prefill, which the projection (decoding alone)
    leaves out; set against it, ``projected_request`` adds per prompt the target's prefill measured by
    the plain run it is divided by (``prefill_s``, ``prefill_seconds``) to both sides, and the draft's
    (``prefill_s`` x the draft/target ratio of the curves at PREFILL_AT tokens) to the speculative side.
    Nothing is fitted: both terms are measured forward times."""
    out = out.assign(prefill_s=np.nan, projected_request=out.projected)
    live = (out.engine == "live") & (out.batch_size.fillna(1).astype(int) == 1) & out.projected.notna()
    if costs is None or not live.any():  # out: speed_table's, with each row's baseline_hash
        return out
    pre = prefill_seconds(steps, out.baseline_hash[live].dropna())
    # each (pair, role, dtype, device) curve built once: many rows share one
    curve = functools.cache(lambda *key: costcurve.curve(costs, costcurve.AT_CONTEXT, *key))

    for i in out.index[live]:
        r = out.loc[i].to_dict()
        pt = pre.get(r["baseline_hash"], np.nan)
        where = (str(r.get("pair_name", r["pair"])), str(r["dtype"]), str(r.get("device") or "cpu"))
        tc = curve(where[0], "target", where[1], where[2])
        if pt != pt or tc is None:
            continue
        ratio = draft_prefill_ratio(tc, curve(where[0], "draft", where[1], where[2]))
        p, plain = float(r["n_prompts"]), float(r["new_tokens"]) * float(tc.at(1))
        out.loc[i, "prefill_s"] = pt
        out.loc[i, "projected_request"] = with_prompts(float(r["projected"]), p, pt, ratio, plain)
    return out


def draft_prefill_ratio(target: costcurve.Curve, draft: costcurve.Curve | None) -> float:
    """The draft's prefill in units of the target's: the ratio of their curves at PREFILL_AT tokens (0
    for a drafter that runs no model)."""
    return float(draft.at(PREFILL_AT) / target.at(PREFILL_AT)) if draft is not None else 0.0


def with_prompts(projected: float, prompts: float, prefill: float, ratio: float, plain: float) -> float:
    """A decode-only projected speedup with ``prompts`` prompts' prefill counted on both sides: each costs
    the target ``prefill`` seconds, and the speculative side also the draft's ``ratio`` x ``prefill``;
    ``plain``: plain decoding's modelled decode seconds (its tokens x t(1))."""
    return (prompts * prefill + plain) / (prompts * prefill * (1 + ratio) + plain / projected)


BENCH_KEY = ["pair", "dataset", "dtype", "batch_size", "max_new_tokens", "tree", "budget"]
BENCH_COLUMNS = ["benchmark", "benchmark_lo", "benchmark_hi", "benchmark_runs", "benchmark_machine"]


def with_benchmark(table: pd.DataFrame, measured: pd.DataFrame | None, study: dict) -> pd.DataFrame:
    """``table`` with the interleaved benchmark's pooled estimate of the same key (``BENCH_KEY``; on the
    machine whose curves the projections read, ``study``: ``costcurve.machines``) and its interval
    (``results.speedstats.answers``: the one number every page shows), blank where the benchmark has none.
    ``measured`` stays a single live run's reading, without an interval."""
    m = measured if measured is not None else pd.DataFrame()
    if m.empty or table.empty:  # speedstats.answers' rows and speed_table's both carry tree_params
        return table.assign(**{c: float("nan") for c in BENCH_COLUMNS})
    m = m[
        np.asarray(costcurve.at_home(m, study), bool) & m["interval"].astype(bool) & (m.tree_params.astype(str) == "{}")
    ]
    m = m.assign(benchmark=m.speedup, benchmark_lo=m.lo, benchmark_hi=m.hi, benchmark_runs=m.n_runs,
                 benchmark_machine=m.machine)  # fmt: skip
    m = m.sort_values("run_id").drop_duplicates(BENCH_KEY, keep="last")
    keys = {k: table[k].astype(str) for k in BENCH_KEY}
    right = m[BENCH_KEY + BENCH_COLUMNS].astype({k: str for k in BENCH_KEY})
    plain = table.tree_params.astype(str) == "{}"
    out = table.assign(**keys).merge(right, on=BENCH_KEY, how="left")
    out.loc[~pd.Series(plain, index=out.index), BENCH_COLUMNS] = float("nan")
    return out.assign(**{k: table[k].to_numpy() for k in BENCH_KEY})


def speedup_csv(table: pd.DataFrame) -> pd.DataFrame:
    """results/speedup.csv: ``SPEEDUP_COLUMNS`` of every row of ``speedup_table`` (``with_benchmark``'s
    columns where given)."""
    cols = SPEEDUP_COLUMNS + [c for c in BENCH_COLUMNS if c in table]
    return table.reindex(columns=cols).sort_values(["pair", "dataset", "tree", "budget", "config_hash"])


def served_sentences(served: pd.DataFrame | None, rows: pd.DataFrame) -> list[str]:
    """Per served deployment (results/served.csv): its tokens per step beside the study's for the
    same pair, data, tree and budget (greedy; the row with the most prompts)."""
    if served is None or served.empty or rows.empty:
        return []
    out = []
    for s in served.to_dict("records"):
        m = rows[
            (rows.pair.astype(str) == str(s["pair"])) & (rows.dataset == s["dataset"]) & (rows.tree == s["tree"])
            & (rows.budget.astype(int) == int(s["budget"])) & (rows.temperature == 0)
        ]  # fmt: skip
        head = (
            f"{s['engine']} served {s['pair']} {s['tree']} N={int(s['budget'])} on {s['dataset']}: "
            f"{s['tokens_per_step']:.2f} tokens/step over {int(s['n_steps'])} steps"
        )
        if m.empty:
            out.append(head + "; the study has no greedy row of this tree to set beside it.")
            continue
        r = m.loc[m.n_prompts.astype(int).idxmax()]
        out.append(
            head + f"; the study measured {r.tokens_per_step:.2f} [{r.tokens_per_step_lo:.2f}, "
            f"{r.tokens_per_step_hi:.2f}] ({r.engine}, {int(r.n_prompts)} prompts, T=0)."
        )
    return out
