"""The cost model against the interleaved speed benchmark (results/speed.csv, its timed steps in
results/speed_steps.csv.gz), each ranked batch-1 candidate projected from **its own timed steps**.

A projection of the replay's steps (its own prompts and length) describes other decodes than the
ones the benchmark timed; here each candidate is charged what its timed steps did (``costmodel``:
the same prompts, length and trees), and each decode's prefill is counted as the benchmark's wall
seconds count it (``speedup.with_prompts``): the target's as the run's plain decodes measured it
(``speedup.prefill_seconds``), the draft's in the ratio of the cost curves, as a live run's
projection is (``speedup.with_prefill``).  Nothing is fitted.  Beside each projection, what the
timed steps measured per term against the model's charge: target verify and draft seconds per
step after the first (the first holds the prefill), plain decoding's step against t(1), and the
seconds outside both timers (sampling, bookkeeping); and the replay's tokens per step of the same
tree and budget.  pandas and numpy only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..results import costcurve, speedstats
from . import costmodel, speedup
from .markdown import span

KEY = ["pair", "dataset", "tree", "budget", "dtype"]


def runs_of(bench: pd.DataFrame) -> dict[str, set[str]]:
    """The run id a pooled run is ranked under (``speedstats.latest_runs``) -> the runs pooled in it."""
    pooled = speedstats.latest_runs(bench.assign(source_run=bench.run_id))
    return {str(r): set(g.source_run) for r, g in pooled.groupby("run_id")}


class Curves:
    """(pair name, role, dtype, device, machine) -> (Curve, its draws), made on first use (None: no rows):
    a run is costed on the curve its own machine measured, never on another's (every machine's rows in
    ``costs``: a default run on another CPU keeps its curve beside the study's)."""

    def __init__(self, costs: pd.DataFrame):
        self.costs = costs
        self.made: dict[tuple, tuple | None] = {}

    def get(self, name: str, role: str, dtype: str, device: str, machine_id: str):
        key = (name, role, dtype, device, machine_id)
        if key not in self.made:
            mine = costcurve.of_machine(self.costs, machine_id)
            c = costcurve.curve(mine, costcurve.AT_CONTEXT, name, role, dtype, device)
            self.made[key] = None if c is None else (c, c.draws())
        return self.made[key]


def terms(cand: pd.DataFrame, plain: pd.DataFrame, target, draft) -> dict:
    """Measured ÷ modelled seconds per step over the steps after the first: the target's verify
    forward (its tree_size + 1 tokens), the draft's forwards (``scored``; NaN without a model), and
    plain decoding's step against t(1), with the range of its per-decode mean step (ms) beside t(1)."""
    later = cand[cand.step > 0]
    tc = target[0]
    out = {"verify_ratio": later.verify_s.mean() / float(np.mean(tc.at(later.tree_size.to_numpy(float) + 1)))}
    if draft is None:
        out["draft_ratio"] = np.nan
    else:
        model = [sum(draft[0].at(k) for k in f) for f in costmodel.forwards(later)]
        out["draft_ratio"] = later.draft_s.mean() / float(np.mean(model))
    later_plain = plain[plain.step > 0]
    out["plain_ratio"] = later_plain.verify_s.mean() / float(tc.at(1))
    per_decode = later_plain.groupby(["run_id", "round", "unit"]).verify_s.mean() * 1000  # a decode's own step
    out.update(plain_ms_lo=per_decode.min(), plain_ms_hi=per_decode.max(), t1_ms=float(tc.at(1)) * 1000)
    return out


def one(r: dict, rows: pd.DataFrame, steps: dict[str, pd.DataFrame], curves: Curves) -> dict | None:
    """One ranked candidate (``r``, a row of ``speedstats.answers``) of its pooled runs' ``rows`` and
    ``steps`` (by candidate): its projection from those steps, with prefill counted, beside its measured speedup."""
    cand, plain = steps.get(r["candidate"]), steps.get(speedstats.PLAIN)
    if cand is None or plain is None:
        return None
    name = str(cand.get("pair_name", cand.pair).iloc[0])  # costs.csv is keyed by config name
    where = (str(r["dtype"]), str(r.get("device") or "cpu"), str(r.get("machine_id") or ""))
    target, draft = curves.get(name, "target", *where), curves.get(name, "draft", *where)
    if target is None:
        return None
    c = costmodel.counts(cand)
    proj = costmodel.projection(c, draft, target)
    pre = float(speedup.prefill_seconds(plain, plain.config_hash.unique()).mean())
    ratio = speedup.draft_prefill_ratio(target[0], None if draft is None else draft[0])
    decodes = float((cand.step == 0).sum())
    plain_s = float(c.emitted.sum()) * float(target[0].at(1))
    mine = rows[rows.candidate == r["candidate"]]
    return {
        **{k: r[k] for k in ("run_id", "pair", "dataset", "dtype", "tree", "budget", "candidate", "machine_id")},
        **{k: r.get(k) for k in ("device", "machine", "host", "weights", "n_prompts", "max_new_tokens")},
        "measured": r["speedup"],
        "projected": proj["projected"],
        "projected_request": speedup.with_prompts(proj["projected"], decodes, pre, ratio, plain_s),
        "prefill_s": pre,
        "decodes": decodes,
        "tokens_per_step": c.emitted.sum() / c.steps.sum(),
        "cost_basis": proj["cost_basis"],
        "outside_s_step": float((mine.wall_s - mine.draft_s - mine.verify_s).sum() / mine.steps.sum()),
        **terms(cand, plain, target, draft),
    }


def replayed(speed: pd.DataFrame | None) -> pd.DataFrame:
    """The replay's projection and tokens per step of each tree and budget (its longest run)."""
    cols = KEY + ["projected", "tokens_per_step"]
    if speed is None or speed.empty or not {"engine", "projected"} <= set(speed.columns):
        return pd.DataFrame(columns=cols)
    proj = speed[(speed.engine == "replay") & speed.projected.notna()]
    return proj.sort_values("max_new_tokens", ascending=False).drop_duplicates(KEY)[cols]


def table(
    measured: pd.DataFrame | None,
    bench: pd.DataFrame | None,
    steps: pd.DataFrame | None,
    costs: pd.DataFrame | None,
    speed: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Every ranked batch-1 candidate with timed steps and a target cost curve: measured and projected
    (from its own steps, decoding alone and with prefill), the errors, the per-term ratios, and the
    replay's projection of the same tree and budget (``replay_projected``, ``replay_tokens_per_step``)."""
    if measured is None or bench is None or steps is None or costs is None:
        return pd.DataFrame()
    if measured.empty or bench.empty or costs.empty or steps.step.isna().all():  # NaN: not recorded
        return pd.DataFrame()
    m = measured[measured.batch_size.astype(int) == 1]
    pooled, curves, out = runs_of(bench), Curves(costs), []
    parts: dict[frozenset, tuple[pd.DataFrame, dict]] = {}  # pooled runs -> rows, steps by candidate: selected once
    for r in m.to_dict("records"):
        runs = frozenset(pooled.get(str(r["run_id"]), {r["run_id"]}))
        if runs not in parts:
            mine = steps[steps.run_id.isin(runs)]
            parts[runs] = (bench[bench.run_id.isin(runs)], dict(tuple(mine.groupby("candidate", sort=False))))
        got = one(r, *parts[runs], curves)
        if got is not None:
            out.append(got)
    if not out:
        return pd.DataFrame()
    df = pd.DataFrame(out)
    rep = replayed(speed).rename(columns={"projected": "replay_projected", "tokens_per_step": "replay_tokens_per_step"})
    df = df.merge(rep, on=KEY, how="left")
    study = costcurve.at_home(df, costcurve.machines(costcurve.one_per_curve(costs)))  # the replay's curves' machine
    df.loc[[not s for s in study], ["replay_projected", "replay_tokens_per_step"]] = np.nan
    df["error"] = df.projected_request / df.measured - 1
    df["error_decode"] = df.projected / df.measured - 1
    df["replay_error"] = df.replay_projected / df.measured - 1
    return df


def spread(e: pd.Series) -> str:
    """'median absolute X%, worst ±Y%' of an error column."""
    e = e.dropna().astype(float)
    worst = round(float(e.iloc[int(np.argmax(e.abs().to_numpy()))]), 2) + 0.0  # no '-0%'
    return f"median absolute {e.abs().median():.0%}, worst {worst:+.0%}"


def machines(df: pd.DataFrame) -> pd.Series:
    """Each row's machine as its row names it ("" where none)."""
    return df.get("machine", pd.Series("", index=df.index)).fillna("").astype(str)


def short(machine: str) -> str:
    """'AMD EPYC (AVX512)' of 'AMD EPYC (AVX512), 2 cores, 2 threads, torch 2.13.0+cpu'."""
    return machine.split(", ")[0] or "a machine its rows do not name"


def term_sentence(df: pd.DataFrame) -> str:
    """Per pair and dataset, measured ÷ modelled seconds per term (ranges over its candidates)."""
    parts = []
    machine = machines(df)
    several = machine.nunique() > 1
    for (pair, ds, m), g in df.assign(_m=machine).groupby(["pair", "dataset", "_m"], sort=True):
        draft = f", draft forwards {span(g.draft_ratio)}" if g.draft_ratio.notna().any() else ""
        on = f" on {short(m)}" if several else ""
        parts.append(
            f"{pair}/{ds}{on}: target verify {span(g.verify_ratio)}{draft}, plain decoding's step ÷ t(1) "
            f"{span(g.plain_ratio)}, {span(g.outside_s_step * 1000, '.1f')} ms per step outside both timers"
        )
    return (
        "Per term, the timed steps after the first (the first holds the prefill) measured ÷ the model's charge: "
        + "; ".join(parts)
        + "."
    )


def sentences(df: pd.DataFrame, live: pd.DataFrame | None = None) -> list[str]:
    """The benchmark's projection error from its own steps (with prefill, and decoding alone), the
    replay-based error it replaces with why, the per-term ratios, and the error over every live
    batch-1 configuration with the benchmark's included (``live``: speedup.csv's own-measured rows)."""
    if df.empty:
        return []
    out = [
        "On each benchmark run's machine, each ranked candidate projected from its own timed steps (the same prompts, "
        "length and decodes), each decode's prefill counted as the benchmark's wall seconds count it (the target's "
        "as the run's plain decodes measured it, the draft's in the ratio of the cost curves at "
        f"{speedup.PREFILL_AT} tokens, as for the live runs): "
        f"{spread(df.error)}, over {len(df)} configurations; on decoding alone {spread(df.error_decode)}."
    ]
    machine = machines(df)
    if machine.nunique() > 1:
        out.append(
            "By machine, each run on the cost curve its own machine measured: "
            + "; ".join(f"{short(m)}: {spread(g.error)} over {len(g)}" for m, g in df.groupby(machine, sort=True))
            + "."
        )
    rep = df[df.replay_projected.notna()]
    if len(rep):
        gap = rep.replay_tokens_per_step / rep.tokens_per_step - 1
        out.append(
            "Projected instead from the replay of the same tree and budget (its own prompts and length), the "
            f"error is {spread(rep.replay_error)} over {len(rep)}: the replay's tokens per step are "
            f"{span(gap * 100, '.0f')}% above those of the decodes the benchmark timed."
        )
    out.append(term_sentence(df))
    if live is not None and len(live):  # measured.live_errors' rows carry error
        e = pd.concat([live.error.astype(float), df.error], ignore_index=True).dropna()
        out.append(
            f"Over every live batch-1 configuration, the benchmark's included ({len(live)} live runs and "
            f"{len(df)} benchmark candidates), prefill counted: {spread(e)}."
        )
    return out


def timing_only(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of runs on the pairs' architectures with random weights (a GPU's, where the weight files
    cannot go): they time steps against the cost model and rank nothing."""
    return df[speedstats.random_weights(df)]


def timing_only_sentences(df: pd.DataFrame, controls: pd.DataFrame, brief: bool = False) -> list[str]:
    """Per random-weight run (``timing_only``): its machine, size, the measured ÷ modelled seconds per
    term, plain decoding's step per decode beside t(1), and its A/A control (``brief``: the main page's
    sentence: the step range and the control alone)."""
    out: list[str] = []
    df = timing_only(df)
    for run, g in df.groupby("run_id", sort=True) if len(df) else []:
        r = g.iloc[0]
        aa = controls[(controls.run_id == run) & (controls.kind == "speedup")] if len(controls) else controls
        aa_s = (
            f"its A/A control {aa.estimate.iloc[0]:.2f}× [{aa.lo.iloc[0]:.2f}, {aa.hi.iloc[0]:.2f}]"
            + (" is too wide to rank anything (±10% at most)" if aa.hi.iloc[0] - aa.lo.iloc[0] > 0.2 else "")
            if len(aa)
            else "no A/A control"
        )
        steps = f"plain decoding's step {span(g[['plain_ms_lo', 'plain_ms_hi']].stack(), '.0f')} ms per decode, t(1) {r.t1_ms:.0f} ms"
        if brief:
            out.append(f"A speed benchmark there (random weights) measured {steps}; {aa_s} (speed.md).")
            continue
        draft = f", draft forwards {span(g.draft_ratio)}" if g.draft_ratio.notna().any() else ""
        out.append(
            f"On {r.device} ({r.machine}), the speed benchmark on the pairs' architectures with random weights "
            f"(the weight files cannot reach that machine: it times steps and answers nothing), {r.pair}/{r.dataset}, "
            f"run {run}, {int(r.n_prompts)} prompts × {int(r.max_new_tokens)} tokens: measured ÷ modelled seconds per "
            f"step, target verify {span(g.verify_ratio)}{draft}, plain decoding's step ÷ t(1) {span(g.plain_ratio)}; "
            f"{steps}; {aa_s}."
        )
    return out
