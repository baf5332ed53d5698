"""The report's tables as pandas frames: the answer tables, the cross-pair table, the cap,
identities, calibration, batch size and measured vs projected speed (pandas only).

Evidence rules (docs/report.md; the constants and the ranking: ``results.ranking``): a ranked or "best" claim rests on >= MIN_RANKED prompts; an
interval from fewer than MIN_CI prompts is not printed; a budget where more than MAX_CUT of
the steps were cut by max_new_tokens is never ranked; a Sequoia tree calibrated on the
prompts it is scored on, or on fewer than MIN_CALIB prompts, is never ranked; a projection costed on
a derived basis (``costmodel.basis``) is never ranked.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from ..results import costcurve, ranking, runcontrols, schedule
from ..results.ranking import MAX_CUT, MIN_CI, MIN_RANKED  # noqa: F401 (the report's sections print them)
from . import across, analysis, compare, costmodel, speedup
from .context import Inputs, Tables

DERIVED = "costed on a derived basis"  # its steps lack the drafter's scored tokens (costmodel.basis)
ENGINE_WORDS = {
    "replay": "replayed from the target's greedy continuation (no target forward)",
    "live": "live speculative decoding (wall-clock timed)",
    "auto": "replay where exact, else live",
}


def engine_words(engine) -> str:
    return ENGINE_WORDS.get(str(engine), str(engine))


# --------------------------------------------------------------------------
# per-prompt sums and the length cap
# --------------------------------------------------------------------------
def prompt_sums(steps: pd.DataFrame | None) -> pd.DataFrame:
    """Per (config_hash, prompt_id): steps, emitted, accepted, drafted (Σ tree_size)."""
    cols = ["steps", "emitted", "accepted", "drafted"]
    if steps is None or steps.empty:
        return pd.DataFrame(columns=cols)
    s = steps.assign(drafted=steps.get("tree_size", 0), one=1)
    return s.groupby(["config_hash", "prompt_id"], sort=True).agg(
        steps=("one", "sum"), emitted=("emitted", "sum"), accepted=("accepted", "sum"), drafted=("drafted", "sum")
    )


def cut_share(steps: pd.DataFrame | None, summary: pd.DataFrame) -> pd.Series:
    """Per configuration: the share of its steps cut by max_new_tokens, i.e. steps that reached the
    cap and emitted fewer than accepted + 1 tokens (the bonus, or accepted tokens, lost to the cap).
    ``summary``: its rows with ``max_new_tokens`` (``analysis.prepare`` gives a row without one 0)."""
    if steps is None or steps.empty:
        return pd.Series(dtype=float)
    cap = summary.set_index("config_hash").max_new_tokens.astype(float)
    order = [c for c in ("config_hash", "prompt_id", "step") if c in steps]
    s = steps.sort_values(order, kind="mergesort")
    cum = s.groupby(["config_hash", "prompt_id"], sort=False).emitted.cumsum()
    cut = (cum >= s.config_hash.map(cap)) & (s.emitted < s.accepted + 1)
    return cut.groupby(s.config_hash).mean()


def calibration_issue(status) -> str | None:
    """Why a Sequoia row's calibration bars a ranked claim, or None (disjoint, or not a Sequoia row)."""
    status = str(status) if isinstance(status, str) else ""
    if status.startswith("in-sample"):
        return "tree calibrated on the scored prompts"
    if status.startswith("not recorded"):
        return "calibration prompts not recorded"
    if status.startswith("disjoint, "):  # 'disjoint, 4 prompts < 16'
        return "acceptance vector from " + status.removeprefix("disjoint, ")
    return None


def claim(n_prompts, cut, calib: str | None = None, basis=None) -> str:
    """Whether a row may carry a ranked claim, and if not, why (one short phrase)."""
    why = []
    if cut == cut and cut is not None and cut > MAX_CUT:
        why.append(f"{cut:.0%} of steps cut by max_new_tokens")
    if calib:
        why.append(calib)
    if basis == "derived":
        why.append(DERIVED)
    if why:
        return "not ranked: " + "; ".join(why)
    n = int(n_prompts) if n_prompts == n_prompts and n_prompts is not None else 0
    return "ranked" if n >= MIN_RANKED else f"exploratory ({n} prompts < {MIN_RANKED})"


def is_ranked(text: str) -> bool:
    return text == "ranked"


# --------------------------------------------------------------------------
# identities: configurations whose step records are the same on every prompt
# --------------------------------------------------------------------------
def record_fingerprints(steps: pd.DataFrame | None) -> pd.Series:
    if steps is None or steps.empty:
        return pd.Series(dtype=object)
    cols = [c for c in ("prompt_id", "step", "accepted", "emitted") if c in steps]
    s = steps.sort_values(["config_hash"] + cols[:2], kind="mergesort")
    return s.groupby("config_hash", sort=True)[cols].apply(
        lambda g: hashlib.sha1(g.to_csv(index=False).encode()).hexdigest()
    )


def identities(df: pd.DataFrame, steps: pd.DataFrame | None, fp: pd.Series | None = None) -> pd.DataFrame:
    """Pairs of configurations of one group, mode and budget with identical step records on every
    prompt: (config_hash, same_as) with both rows' labels; the first by shape name is the reference.
    ``fp``: ``record_fingerprints(steps)``, where the caller has them (hashing every step is slow)."""
    fp = record_fingerprints(steps) if fp is None else fp
    if fp.empty:
        return pd.DataFrame()
    d = df.assign(fp=df.config_hash.map(fp)).dropna(subset=["fp"])
    rows = []
    # tree_budget (analysis.with_built): a cost-aware Sequoia's built size, else its budget
    for _, g in d.groupby(analysis.GROUP + ["temperature", "tree_budget", "fp"], sort=True):
        if g.config_hash.nunique() < 2:
            continue
        g = g.sort_values(["tree", "verify", "shape", "config_hash"], kind="mergesort")
        ref = g.iloc[0]
        for r in g.iloc[1:].to_dict("records"):
            rows.append(
                dict(
                    r,
                    same_as=ref["config_hash"],
                    ref_shape=ref["shape"],
                    ref_mode=ref["mode"],
                    ref_tree=ref["tree"],
                    ref_verify=ref["verify"],
                    ref_budget=ref["budget"],
                )
            )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------
# calibration of the Sequoia trees
# --------------------------------------------------------------------------
MIN_CALIB = 16  # a ranked Sequoia tree's acceptance vector comes from at least this many calibration prompts


def calibration(df: pd.DataFrame, sums: pd.DataFrame, vector: pd.DataFrame | None) -> pd.DataFrame:
    """Per sequoia configuration: the prompts its acceptance vector was calibrated on (the vector of
    its `calib_dataset` / `calib_pair_id`; acceptance_vector.csv `prompt_ids`, when recorded) against
    the prompts it was scored on: disjoint (by dataset or by prompt id), in-sample, or not recorded."""
    rows = []
    for r in df[df.tree == "sequoia"].to_dict("records"):
        p = analysis.params_of(r.get("tree_params"))
        own = r["pair_id"] if pd.notna(r["pair_id"]) else ""  # NaN: not recorded (results.optional)
        ds, pid = str(p.get("calib_dataset", r["dataset"])), str(p.get("calib_pair_id", own))
        scored = set(compare.prompts_of(sums, r["config_hash"]))
        calib = None
        if vector is not None and vector.prompt_ids.notna().any():  # NaN: not recorded (results.optional)
            v = vector[vector.dataset.astype(str) == ds]
            if pid and vector.pair_id.notna().any():  # the files record pair ids
                v = v[v.pair_id.astype(str) == pid]
            calib = {x for cell in v.prompt_ids.dropna().astype(str) for x in cell.split(";") if x} or None
        shared = len(calib & scored) if calib is not None else None
        status = (
            f"disjoint (calibrated on {ds})"
            if ds != str(r["dataset"])
            else "not recorded"
            if calib is None
            else f"in-sample ({shared} shared)"
            if shared
            else f"disjoint, {len(calib)} prompts < {MIN_CALIB}"
            if len(calib) < MIN_CALIB
            else "disjoint"
        )
        rows.append(
            dict(r, n_calib=len(calib) if calib else None, n_scored=len(scored), shared=shared, calibration=status)
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------
# the answer tables
# --------------------------------------------------------------------------
SPEED = ["measured", "measured_hash", "baseline_tokens_per_s", "projected", "projected_lo", "projected_hi", "error"]
SPEED += ["draft_s_step", "draft_s_step_model", "verify_s_step", "verify_s_step_model", "cost_basis"]
SPEED += ["benchmark", "benchmark_lo", "benchmark_hi"]


def speed_columns(df: pd.DataFrame, speed: pd.DataFrame) -> pd.DataFrame:
    """df with the speed table's columns (``SPEED``), `speed` and `speed_basis`: the interleaved benchmark's
    pooled estimate of the key where it timed it (``benchmark``, with its interval: the number every page
    shows), else the configuration's own live run or its live twin (``measured``: a single run, no
    interval), else the projection (``projected``)."""
    out = df.copy()
    by = speed.drop_duplicates("config_hash").set_index("config_hash") if not speed.empty else pd.DataFrame()
    for c in SPEED:
        out[c] = out.config_hash.map(by[c]) if c in by else np.nan
    out["cost_basis"] = out.cost_basis.astype(object)
    out["measured"], out["projected"] = out.measured.astype(float), out.projected.astype(float)
    bench, single = out.benchmark.astype(float), out.measured.notna()
    out["speed"] = bench.where(bench.notna(), out.measured.where(single, out.projected))
    out["speed_basis"] = np.where(
        bench.notna(), "benchmark", np.where(single, "measured", np.where(out.projected.notna(), "projected", ""))
    )
    return out


def annotate(df: pd.DataFrame, steps, speed, calib: pd.DataFrame, idents: pd.DataFrame) -> pd.DataFrame:
    """Every configuration with its cut share, speed, calibration status, identity and claim."""
    out = speed_columns(df, speed)
    out["cut"] = out.config_hash.map(cut_share(steps, df)).astype(float)
    status = dict(zip(calib.config_hash, calib.calibration)) if len(calib) else {}
    out["calibration"] = out.config_hash.map(status)
    same = (
        dict(zip(idents.config_hash, [f"{s} N={int(b)}" for s, b in zip(idents.ref_shape, idents.ref_budget)]))
        if len(idents)
        else {}
    )
    out["same_as"] = out.config_hash.map(same)
    out["claim"] = [
        claim(n, c, calibration_issue(s), b)
        for n, c, s, b in zip(
            out.get("n_prompts", pd.Series(0, index=out.index)),
            out.cut,
            out.calibration,
            out.cost_basis.where(out.speed_basis == "projected"),  # a measured speed is no projection
        )
    ]
    return out


def bracket(best: int, tried: list[int]) -> str:
    """Where the best budget sits in the budgets tried (those the cut cap allows): ``interior``,
    ``smallest admitted`` (N = 1), or an edge, which is no optimum: the best may lie beyond it."""
    if len(set(tried)) < 2 or best not in tried:
        return "one budget tried"
    if best == min(tried):
        return "smallest admitted" if best == 1 else f"edge: smallest tried (N={best})"
    return f"edge: largest tried (N={best})" if best == max(tried) else "interior"


def answer(rows: pd.DataFrame) -> pd.DataFrame:
    """Per greedy group and shape: the best budget by speed (``results.ranking.best``: among the budgets
    the cap allows, cut share <= MAX_CUT; where no budget qualifies, the fastest one, marked not ranked)."""
    g = rows[rows.temperature == 0]
    out = []
    for _key, grp in g.groupby(analysis.GROUP + ["shape"], sort=True):
        pick = ranking.order(grp, "speed").iloc[0].to_dict()  # ranking.best of a non-empty group
        pick["budgets"] = ", ".join(str(int(b)) for b in sorted(grp.budget.unique()))
        pick["bracket"] = (
            bracket(int(pick["budget"]), grp[ranking.admitted(grp)].budget.astype(int).tolist())
            if grp.speed.notna().any()
            else "no speed: no cost curve for this pair"  # tokens/step always grows with N: no optimum
        )
        pick["by"] = pick["speed_basis"] or "tokens/step (no speed recorded)"
        out.append(pick)
    if not out:
        return pd.DataFrame()
    res = live_checks(pd.DataFrame(out))
    res["_k"] = res.speed.fillna(-np.inf)
    return (
        res.sort_values(analysis.GROUP + ["_k", "shape"], ascending=[True] * 4 + [False, True], kind="mergesort")
        .drop(columns="_k")
        .reset_index(drop=True)
    )


LIVE_KEY = ["pair", "dataset", "dtype", "shape"]  # a live check and the replayed grid it checks
BRACKETED = ("interior", "smallest admitted")  # the brackets that are an optimum (``bracket``)


def replayed_best(ans: pd.DataFrame) -> dict[tuple, dict]:
    """The replayed grid's best answer row per (pair, dataset, dtype, shape) (``LIVE_KEY``, as strings):
    the one lookup the live checks (``live_checks``) and the setup's bracket sentences read.  Its rule:
    among the replayed answer rows of that key, the longest run's (most ``max_new_tokens``; a tie:
    the first in ``ans``'s order), whatever its budget and bracket; the caller reads both (an optimum
    only where its bracket is in ``BRACKETED``)."""
    if ans.empty:
        return {}
    replay = ans[ans.engine == "replay"].sort_values("max_new_tokens", ascending=False, kind="mergesort")
    keys = [tuple(k) for k in replay[LIVE_KEY].astype(str).to_numpy()]
    best: dict[tuple, dict] = {}
    for k, r in zip(keys, replay.to_dict("records")):
        best.setdefault(k, r)
    return best


def live_checks(res: pd.DataFrame) -> pd.DataFrame:
    """A live table's edge is no edge where its budget is the replayed grid's best (``replayed_best``)
    and that best is bracketed: the live run checks that optimum's timing (``study.tools.validate``)."""
    best = replayed_best(res)
    if not best:
        return res
    for i in res.index[(res.engine == "live") & res.bracket.str.startswith("edge")]:
        there = best.get(tuple(res.loc[i, LIVE_KEY].astype(str)))
        if there and there["bracket"] in BRACKETED and int(there["budget"]) == int(res.loc[i, "budget"]):
            res.loc[i, "bracket"] = f"live check of the replayed grid's best ({there['bracket']} there)"
    return res


def live_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Live configurations with a measured speedup (and their projection, where costs exist)."""
    own = rows[rows.measured.notna() & (rows.measured_hash == rows.config_hash)]
    return own.sort_values(analysis.GROUP + ["mode", "shape", "budget"], kind="mergesort")


def setup_pairs(summary: pd.DataFrame) -> pd.DataFrame:
    """Per pair label and dtype: draft, target, engines, weight quantisation (when recorded), prompts."""
    d = analysis._with_defaults(summary)
    rows = []
    for (pair, dtype), g in d.groupby(["pair", "dtype"], sort=True):
        quant = [
            f"{role}: {', '.join(sorted(set(g[c].dropna().astype(str))))}"
            for role, c in (("draft", "draft_quant"), ("target", "target_quant"))
            if c in g and g[c].notna().any()
        ]
        prompts = (
            "; ".join(f"{ds} {int(x.n_prompts.max())}" for ds, x in g.groupby("dataset", sort=True))
            if g.n_prompts.notna().any()  # NaN: summary.csv from before it was recorded (results.optional)
            else "not recorded"
        )
        rows.append(
            dict(
                pair=pair,
                dtype=dtype,
                draft=g.get("draft", pd.Series(["?"])).iloc[0],
                target=g.target.fillna("?").iloc[0],  # NaN: not recorded (results.optional)
                engines="; ".join(engine_words(e) for e in sorted(g.engine.astype(str).unique())),
                quant="; ".join(quant) if quant else "not recorded",
                prompts=prompts,
                configs=len(g),
            )
        )
    return pd.DataFrame(rows)


def compute(data: Inputs) -> Tables:
    """The shared tables of the report from the loaded inputs (`load.load`); the sections' own tables
    are added by ``build.compute`` (this module imports no section)."""
    summary, steps = data.summary, data.steps
    df = analysis.with_built(analysis.prepare(summary), steps)
    sums = prompt_sums(steps)
    counted = costmodel.StepCounts(steps) if steps is not None else None  # shared: projection, phase diagram
    bench = runcontrols.tables(data.bench)  # {} where no benchmark ran: its tables are empty frames
    measured = bench.get("measured", pd.DataFrame())
    speed = speedup.with_benchmark(  # the benchmark's pooled estimate beside each row: the one number per key
        speedup.speedup_table(df, summary, steps, data.costs, counted),
        measured,
        costcurve.machines(data.costs),
    )
    calib = calibration(df, sums, data.vector)
    fingerprints = record_fingerprints(steps)  # shared: identities, modes
    idents = identities(df, steps, fingerprints)
    rows = annotate(df, steps, speed, calib, idents)
    return Tables(
        df=df,
        rows=rows,
        counted=counted,
        schedule=schedule.schedule(rows),
        sums=sums,
        speed=speed,
        calib=calib,
        idents=idents,
        answer=answer(rows),
        cross=across.cross_pair(df, sums),
        modes=across.modes(df, sums, fingerprints),
        live=live_rows(rows),
        setup=setup_pairs(summary),
        chain_diffs=analysis.vs_chain(df, sums),
        pair=analysis.main_pair(df),
        **bench,
        bench_schedule=schedule.schedule(measured, schedule.BENCHMARK),
        cost_machines=costcurve.machines(data.costs_all),
        cost_hosts=costcurve.machines(data.costs_all, "host"),
        cost_study=costcurve.machines(data.costs),  # the machine whose curves the study's projections read
    )
