"""Measured speedups from the interleaved speed benchmark's rows (``results/speed.csv``; torch-free).

One row of speed.csv is one timed decode: a candidate (plain decoding included) on one unit (a
prompt, or a batch of ``batch_size`` prompts) in one round of one run, with its wall seconds and
the tokens it emitted.  Every candidate decodes the same units in every round, in a fresh random
order (``study.tools.speed``), so a candidate is compared with plain decoding **of the same units in
the same rounds**:

* **speedup** of candidate c = (Σ tokens_c / Σ wall_c) ÷ (Σ tokens_plain / Σ wall_plain) over the
  units and rounds of every run pooled (a ratio of throughputs, equal to Σ wall_plain / Σ wall_c where
  both emit the same tokens, as greedy decodes do);
* its **95% interval**, with runs as a level: a unit is one prompt (or batch) *of one run* (its rounds
  summed), the within-run variance of the log speedup a jackknife over those units, and the run effect
  (``results.harness``: how far a configuration moves between reruns of one machine beyond the runs' own
  intervals, τ, estimated from every configuration run more than once) added as τ²/R for R runs pooled;
  the interval is exp(log s ± t·se) with t on units − 1 degrees of freedom, so it never crosses 0, and
  below ``MIN_UNITS`` units none is claimed (the row ranks nothing);
* a **difference** between two candidates: the same jackknife on the difference of their speedups,
  plus τ² (s_a² + s_b²)/R.  The answer's ties are the candidates whose difference to the
  fastest includes 0 at a Bonferroni-adjusted level (the comparisons, one per candidate, are
  fixed before the run: ``ties``);
* **controls** in every run (``controls``): plain decoding timed against itself (A/A) and two
  identical trees under two names.  Their intervals must include 1× (and their difference 0);
  if one does not, the run's timing is not trusted and its speedups are not ranked.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from . import harness

PLAIN = "plain"  # the baseline candidate: tree=none
PLAIN_AA = "plain (A/A)"  # plain decoding again, as a candidate: the A/A control
TWIN_SUFFIX = " (twin)"  # an identical tree under a second name: the identical-tree control
RUN = ["run_id"]  # one benchmark process: its candidates, units and rounds
ABBA, UNBALANCED = "ABBA", "unbalanced"  # a run's order design (``runcontrols.order_design``)
ANSWER = "answer"  # the roster of a run without one (``results.schedule``'s schedule runs say ``schedule``)
SPECBENCH = "specbench"  # the engine of rows from before the ``engine`` column: specbench's own loop
LEVEL = 0.95
AA_WITHIN = 0.03  # speed_rounds=auto adds rounds while the A/A interval is wider than 1 +- 3%
MIN_UNITS = 5  # units (over the runs pooled) below which no interval is claimed: 3 units give none


def source(run: pd.DataFrame) -> pd.Series:
    """Each row's own run (``source_run`` where ``latest_runs`` pooled several under one id)."""
    return run["source_run"] if "source_run" in run else run["run_id"] if "run_id" in run else pd.Series("", run.index)


def with_engine(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with ``engine`` filled (``SPECBENCH`` where missing): the engine that timed each row is part of
    every key, so a llama.cpp run is never pooled or paired with one of specbench's loop."""
    return rows.assign(engine=rows["engine"].fillna(SPECBENCH).astype(str) if "engine" in rows else SPECBENCH)


def unit_sums(run: pd.DataFrame) -> pd.DataFrame:
    """[(run, unit) × (tokens, wall) per candidate]: each run's unit's tokens and seconds summed over
    that run's rounds; a candidate's cell is blank where it did not decode that unit in every round of
    its run (a candidate of another run's roster, or a unit cut short), and a unit without plain decoding
    is dropped.  A rerun's units are units of their own: runs are a level, not more rounds.  Each
    comparison reads only the units every candidate it names decoded (``paired``)."""
    run = run.assign(_src=source(run).astype(str).to_numpy())
    g = run.groupby(["_src", "unit", "candidate"]).agg(
        tokens=("tokens", "sum"), wall_s=("wall_s", "sum"), n=("round", "size")
    )
    wide = g.unstack("candidate")
    full = wide["n"].eq(wide["n"].max(axis=1), axis=0)
    out = pd.concat({k: wide[k].where(full) for k in ("tokens", "wall_s")}, axis=1)
    return out[out["tokens"][PLAIN].notna()] if PLAIN in set(wide["n"].columns) else out.iloc[0:0]


def paired(w: pd.DataFrame, *names: str) -> pd.DataFrame:
    """The units of ``w`` that every one of ``names`` decoded."""
    return w[w["tokens"][list(names)].notna().all(axis=1)]


def runs_in(w: pd.DataFrame) -> int:
    """How many runs ``unit_sums``' units come from."""
    return int(w.index.get_level_values(0).nunique()) if len(w) else 0


def _ratio(tp, wp, tc, wc, axis=-1):
    return (np.sum(tc, axis=axis) / np.sum(wc, axis=axis)) / (np.sum(tp, axis=axis) / np.sum(wp, axis=axis))


def _leave_one_out(data: tuple, statistic) -> np.ndarray:
    """The statistic with each unit left out in turn (one vectorised call over an n × n mask)."""
    n = len(data[0])
    keep = ~np.eye(n, dtype=bool)
    return statistic(*(np.where(keep, np.asarray(d, float)[None, :], 0.0) for d in data), axis=-1)


def jackknife_var(data: tuple, statistic, log: bool) -> float:
    """The jackknife variance over units of the statistic (of its log where ``log``)."""
    n = len(data[0])
    each = _leave_one_out(data, statistic)
    each = np.log(each) if log else each
    return float((n - 1) / n * np.sum((each - each.mean()) ** 2))


def _interval(data: tuple, statistic, level: float, log: bool, extra: float = 0.0) -> tuple[float, float]:
    """The statistic's interval over units (module docstring): a jackknife variance plus ``extra`` (the run
    effect's, on the same scale), a t critical value on units - 1 df, on the log scale where ``log``; none
    from fewer than ``MIN_UNITS`` units."""
    n = len(data[0])
    est = float(statistic(*data))
    if n < MIN_UNITS or not np.isfinite(est) or (log and est <= 0):
        return float("nan"), float("nan")
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * np.sqrt(jackknife_var(data, statistic, log) + extra)
    if log:
        return float(est * np.exp(-half)), float(est * np.exp(half))
    return est - half, est + half


def t_half(values: np.ndarray, level: float) -> float:
    """Half the width of a Student t interval (n − 1 df) around a mean of ``values`` (0 where they agree)."""
    n = len(values)
    return float(stats.t.ppf(0.5 + level / 2, n - 1) * np.std(values, ddof=1) / np.sqrt(n))


def _cols(w: pd.DataFrame, name: str) -> tuple:
    return w["tokens"][name].to_numpy(float), w["wall_s"][name].to_numpy(float)


def speedup(
    w: pd.DataFrame, cand: str, base: str = PLAIN, level: float = LEVEL, spread: harness.Spread = harness.NONE
) -> tuple[float, float, float]:
    """(speedup, lo, hi) of ``cand`` over ``base`` on the units of ``unit_sums``, the run effect of
    ``spread`` over the runs they come from included."""
    w = paired(w, base, cand)
    if w.empty:
        return float("nan"), float("nan"), float("nan")
    data = (*_cols(w, base), *_cols(w, cand))
    return float(_ratio(*data)), *_interval(data, _ratio, level, True, spread.log_var(runs_in(w)))


def _diff(tp, wp, ta, wa, tb, wb, axis=-1):
    return _ratio(tp, wp, ta, wa, axis) - _ratio(tp, wp, tb, wb, axis)


def difference(
    w: pd.DataFrame, a: str, b: str, level: float = LEVEL, spread: harness.Spread = harness.NONE
) -> tuple[float, float, float]:
    """(speedup_a - speedup_b, lo, hi): both over plain decoding, paired on the same units."""
    w = paired(w, PLAIN, a, b)
    if w.empty:  # never decoded the same units: not compared
        return float("nan"), float("nan"), float("nan")
    data = (*_cols(w, PLAIN), *_cols(w, a), *_cols(w, b))
    sa, sb = float(_ratio(*data[:4])), float(_ratio(*data[:2], *data[4:]))
    extra = spread.difference_var(sa, sb, runs_in(w))
    return float(_diff(*data)), *_interval(data, _diff, level, False, extra)


def twins(names) -> list[tuple[str, str]]:
    """The identical-tree controls: (tree, its twin) for every ``X (twin)`` candidate whose X ran."""
    names = set(names)
    return [(n.removesuffix(TWIN_SUFFIX), n) for n in sorted(names) if n.endswith(TWIN_SUFFIX)]


def control_pairs(names) -> list[tuple[str, str, str]]:
    """(control, the first-named copy, the second) of one run: plain vs its A/A copy, each tree vs its twin."""
    aa = [("A/A", PLAIN, PLAIN_AA)] if {PLAIN, PLAIN_AA} <= set(names) else []
    return aa + [("twin", a, b) for a, b in twins(names) if a in set(names)]


def holds(lo: float, hi: float, at: float) -> bool:
    """Whether an interval includes ``at``; an interval not claimed (too few units) holds nothing."""
    return bool(lo <= at <= hi)


def controls(w: pd.DataFrame, spread: harness.Spread = harness.NONE) -> list[dict]:
    """Every control of the runs of ``w``: what it compares, its estimate and interval (the run effect of
    ``spread`` included), ``off``: the estimate's signed
    distance from no difference (A/A: speedup - 1; twins: the difference), and whether it holds (A/A: the
    speedup's interval includes 1; twins: the difference's interval includes 0); ``judged``: whether it has an
    interval at all (fewer than ``MIN_UNITS`` units: neither holds nor fails)."""
    out = []
    for control, a, b in control_pairs(w["tokens"].columns):
        if control == "A/A":
            s, lo, hi = speedup(w, b, a, spread=spread)
            out.append(dict(control="A/A: plain vs plain", kind="speedup", estimate=s, lo=lo, hi=hi,
                            off=s - 1.0, holds=holds(lo, hi, 1.0), judged=lo == lo))  # fmt: skip
        else:
            d, lo, hi = difference(w, a, b, spread=spread)
            out.append(dict(control=f"{a} vs {b}", kind="difference", estimate=d, lo=lo, hi=hi,
                            off=d, holds=holds(lo, hi, 0.0), judged=lo == lo))  # fmt: skip
    return out


def settled(w: pd.DataFrame, within: float = AA_WITHIN) -> bool:
    """Whether the A/A control's interval lies within 1 +- ``within`` (``speed_rounds=auto`` stops
    there: a run whose plain-vs-plain spread is wider than that adds rounds); no A/A: settled."""
    if PLAIN_AA not in set(w["tokens"].columns):
        return True
    _s, lo, hi = speedup(w, PLAIN_AA)
    return 1 - within <= lo and hi <= 1 + within


def candidates(w: pd.DataFrame) -> list[str]:
    """The candidates ranked: all but plain decoding, its A/A copy and the twins."""
    return [c for c in w["tokens"].columns if c not in (PLAIN, PLAIN_AA) and not c.endswith(TWIN_SUFFIX)]


def ranked(run: pd.DataFrame, level: float = LEVEL, spread: harness.Spread = harness.NONE) -> pd.DataFrame:
    """One key's candidates (its runs pooled), fastest first: speedup with its interval, each one's
    difference to the fastest with a Bonferroni-adjusted interval (k = candidates - 1 comparisons fixed
    in advance), ``tie`` (that interval includes 0, or it is the fastest), ``pays`` (lo > 1), ``slower``
    (hi < 1) and ``controls_hold``; every interval with the run effect of ``spread`` (``results.harness``)
    over the runs pooled.  Without an interval (fewer than ``MIN_UNITS`` units) nothing pays, loses or ties."""
    w = unit_sums(run)
    names = candidates(w) if len(w) else []
    if not names:
        return pd.DataFrame()
    df = pd.DataFrame([(c, *speedup(w, c, level=level, spread=spread)) for c in names],
                      columns=["candidate", "speedup", "lo", "hi"])  # fmt: skip
    df["interval"] = df.lo.notna()  # fewer than MIN_UNITS units: listed, never ranked
    df = df.sort_values(["interval", "speedup", "candidate"], ascending=[False, False, True], kind="mergesort")
    best = df.candidate.iloc[0]
    adjusted = 1 - (1 - level) / max(1, len(names) - 1)
    diffs = [difference(w, best, c, adjusted, spread) if c != best else (0.0, 0.0, 0.0) for c in df.candidate]
    df["diff_to_best"] = [d[0] for d in diffs]
    df["diff_lo"], df["diff_hi"] = [d[1] for d in diffs], [d[2] for d in diffs]
    df["compared"] = df.diff_lo.notna() | (df.candidate == best)  # with the fastest, on units both decoded
    df["tie"] = df.interval & ((df.candidate == best) | (df.diff_lo <= 0))
    df["pays"], df["slower"] = df.lo > 1, df.hi < 1  # resolved faster / slower than plain decoding
    df["n_units"] = [len(paired(w, PLAIN, c)) for c in df.candidate]
    df["n_runs"] = [runs_in(paired(w, PLAIN, c)) for c in df.candidate]
    df["n_rounds"] = int(run["round"].nunique())
    df["controls_hold"] = all(c["holds"] for c in controls(w, spread) if c["judged"])
    df["run_effect"], df["run_effect_df"], df["run_effect_pooled"] = spread.tau, spread.df, spread.pooled
    return df.reset_index(drop=True)


def describe(run: pd.DataFrame) -> pd.DataFrame:
    """Per candidate of one run: its tree, budget and the timed decodes' own acceptance
    (accepted ÷ drafted, accepted per step, drafted per step, the deepest tree)."""
    g = run.groupby("candidate", sort=False)
    out = g[["tree", "budget", "tree_params", "config_hash"]].first()
    sums = g[["accepted", "drafted", "steps", "tokens"]].sum()
    out["timed_acceptance_rate"] = sums.accepted / sums.drafted.where(sums.drafted > 0)
    out["timed_acceptance_length"] = sums.accepted / sums.steps
    out["drafted_per_step"] = sums.drafted / sums.steps
    out["tree_depth"] = g["tree_depth"].max()
    return out.reset_index()


def pick(r: pd.DataFrame) -> pd.Series:
    """The configuration shown among the ties: of those not resolved slower than plain decoding
    (where any is), the fewest draft tokens per step (the cheapest to verify, and the one that loses
    least as the batch grows), then the faster; where nothing has an interval, the fastest."""
    t = r[r.tie] if r.tie.any() else r.head(1)
    t = t[~t.slower] if (~t.slower).any() else t
    t = t.sort_values(["drafted_per_step", "speedup"], ascending=[True, False], kind="mergesort")
    return t.iloc[0]


PICK_RULE = (
    "among the configurations that tie the fastest, the one drafting the fewest tokens per step (of those not "
    "resolved slower than plain decoding, where any is)"
)
PICK_SHORT = "of the ties (those not below 1× first), the one drafting the fewest tokens per step"  # PICK_RULE, brief


POOL_KEY = [
    "pair",
    "dataset",
    "dtype",
    "batch_size",
    "max_new_tokens",
    "machine_id",
    "engine",
    "weights",
]  # one number each


def latest_runs(speed: pd.DataFrame) -> pd.DataFrame:
    """Per key (``POOL_KEY``: pair, dataset, dtype, batch size, max_new_tokens, machine, engine, weights): every
    run of the key pooled under the newest one's ``run_id``, whatever its prompts, candidates or roster (an
    answer run's or a schedule run's, ``results.schedule``), so each key has one estimate, the same on every
    page.  Each row keeps its own run in ``source_run``: a rerun's units are units of their own (runs as a
    level), and each comparison reads only the units both of its candidates decoded (``paired``)."""
    speed = with_engine(speed.assign(source_run=speed["source_run"] if "source_run" in speed else speed.run_id))
    speed = speed.assign(
        roster=speed["roster"].fillna(ANSWER).astype(str) if "roster" in speed else ANSWER,
        weights=speed["weights"].fillna("pretrained").astype(str) if "weights" in speed else "pretrained",
    )
    out = []
    for _k, g in speed.groupby(POOL_KEY, dropna=False, sort=True):
        rounds = g.run_id + ":" + g["round"].astype(str)
        out.append(g.assign(round=rounds, run_id=g.run_id.max(), pooled_runs=g.run_id.nunique()))
    return pd.concat(out, ignore_index=True) if out else speed.iloc[0:0]


def scheduled(run: pd.DataFrame) -> set[str]:
    """The candidates a pooled run's schedule runs decoded (roster ``schedule``: the batch-size schedule's)."""
    return set(run.candidate[run.roster != ANSWER])


def answers(speed: pd.DataFrame, spread: dict | None = None) -> pd.DataFrame:
    """Per run (the newest of each key, ``latest_runs``): every candidate ranked (``ranked``, with its
    machine's run effect: ``spreads``, from ``speed`` where not given) with its description (``describe``)
    and the run's keys, ``shown`` on the row ``pick`` chooses."""
    spread = spreads(speed) if spread is None else spread
    out = []
    keys = ["pair", "dataset", "dtype", "device", "batch_size", "max_new_tokens", "machine", "machine_id"]
    keys += ["weights", "engine"]  # random: the architectures alone, timed where the weight files cannot go (a GPU's)
    speed = with_engine(speed).assign(
        weights=speed["weights"].fillna("pretrained") if "weights" in speed else "pretrained"
    )
    for run_id, run in latest_runs(speed).groupby("run_id", sort=True):
        r = ranked(run, spread=judged_by(spread, run))
        if r.empty:
            continue
        r = r.merge(describe(run), on="candidate", how="left")
        for k in keys:
            r[k] = run[k].iloc[0]
        r["run_id"], r["host"] = run_id, one_host(run)
        r["n_prompts"] = run.prompt_ids.str.split("|").explode().nunique()
        r["roster"] = ANSWER if (run.roster == ANSWER).any() else run.roster.iloc[0]  # the key's: answer first
        r["scheduled"] = r.candidate.isin(scheduled(run))
        r["shown"] = r.candidate == pick(r).candidate
        out.append(r)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def one_host(rows: pd.DataFrame) -> str:
    """The host every row names (``inputs.machine.host``: this boot of it), or "" where they name several
    or none (rows from before the column)."""
    hosts = set(rows["host"].fillna("").astype(str)) if "host" in rows else {""}
    return hosts.pop() if len(hosts) == 1 else ""


def run_controls(speed: pd.DataFrame, spread: dict | None = None) -> pd.DataFrame:
    """Every newest run's controls (``controls``, with its machine's run effect: ``spreads``), with the run's keys."""
    spread = spreads(speed) if spread is None else spread
    out = []
    for run_id, run in latest_runs(speed).groupby("run_id", sort=True):
        w = unit_sums(run)
        for c in controls(w, judged_by(spread, run)) if len(w) else []:
            keys = ("pair", "dataset", "batch_size", "roster")
            out.append({"run_id": run_id, **{k: run[k].iloc[0] for k in keys}, **c})
    return pd.DataFrame(out)


def random_weights(rows: pd.DataFrame) -> pd.Series:
    """Which rows are of runs on the pairs' architectures with random weights (``weights``; older rows lack
    it and are pretrained): such a run times steps against the cost model, it answers nothing."""
    return rows.weights.astype(str).eq("random") if "weights" in rows else pd.Series(False, index=rows.index)


def answer_first(a: pd.DataFrame) -> pd.DataFrame:
    """``answers`` rows without the random-weight runs (their acceptance is not the pair's: they time steps,
    they answer nothing): the TL;DR's and export's answers.  A schedule run's rows are pooled into their key's
    (``latest_runs``), so a key has one estimate whichever roster timed it."""
    return a[~random_weights(a)] if len(a) else a


RERUN_UNITS = 3  # a run's units from which its within-run variance enters the run effect's estimate
RERUN_KEY = ["machine_id", "engine", "pair", "dataset", "dtype", "batch_size", "max_new_tokens", "prompts", "candidate"]


def rerun_groups(speed: pd.DataFrame) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """Per machine id, every configuration (a candidate but plain decoding, on one prompt set) that
    runs of that machine timed more than once: its runs' log speedups and their jackknife variances
    (``results.harness.fit``'s groups)."""
    per_run = []
    for _run_id, run in with_engine(speed).groupby("run_id", sort=True):
        w = unit_sums(run.drop(columns=["source_run"], errors="ignore"))
        prompts = "|".join(sorted(set(run.prompt_ids.astype(str))))
        keys = {k: run[k].iloc[0] for k in RERUN_KEY[:-2]}
        for c in [n for n in w["tokens"].columns if n != PLAIN]:
            data = (*_cols(paired(w, PLAIN, c), PLAIN), *_cols(paired(w, PLAIN, c), c))
            if len(data[0]) < RERUN_UNITS:
                continue
            per_run.append({**keys, "prompts": prompts, "candidate": c, "log": float(np.log(_ratio(*data))),
                            "var": jackknife_var(data, _ratio, True)})  # fmt: skip
    out: dict[str, list] = {}
    if not per_run:
        return out
    for key, g in pd.DataFrame(per_run).groupby(RERUN_KEY, sort=True):
        if len(g) > 1:
            out.setdefault(machine_key(key[0], key[1]), []).append((g["log"].to_numpy(), g["var"].to_numpy()))
    return out


def machine_key(machine_id, engine: str = SPECBENCH) -> str:
    """A run effect's key (``harness.by_engine``): the machine id for specbench's loop, ``id|engine`` for another."""
    return str(machine_id) if engine == SPECBENCH else f"{machine_id}{harness.SEP}{engine}"


def spreads(speed: pd.DataFrame) -> dict[str, harness.Spread]:
    """Per ``machine_key`` (and the pooled keys), the run effect from its reruns, each engine's from its own
    (``results.harness.by_engine``)."""
    return harness.by_engine(rerun_groups(speed))


def judged_by(spread: dict, run: pd.DataFrame) -> harness.Spread:
    """The run effect a ``latest_runs`` group's intervals carry: its machine's (of its engine), else the one pooled
    over every machine's reruns of that engine, else none (no machine has run anything twice)."""
    engine = str(with_engine(run.head(1)).engine.iloc[0])
    pooled = spread.get(machine_key(harness.POOLED, engine), harness.NONE)
    return spread.get(machine_key(run.machine_id.iloc[0], engine), pooled)
