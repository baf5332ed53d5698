"""Measured speedups from the interleaved speed benchmark's rows (``results/speed.csv``; torch-free).

One row of speed.csv is one timed decode: a candidate (plain decoding included) on one unit (a
prompt, or a batch of ``batch_size`` prompts) in one round of one run, with its wall seconds and
the tokens it emitted.  Every candidate decodes the same units in every round, in a fresh random
order (``study.tools.speed``), so a candidate is compared with plain decoding **of the same units in
the same rounds**:

* **speedup** of candidate c = (Σ tokens_c / Σ wall_c) ÷ (Σ tokens_plain / Σ wall_plain) over the
  run's units and rounds (a ratio of throughputs, equal to Σ wall_plain / Σ wall_c where both emit
  the same tokens, as greedy decodes do);
* its **95% interval**: a paired percentile bootstrap over units (each unit's rounds resampled
  with it), by ``scipy.stats.bootstrap``; from fewer than ``BOOT_UNITS`` units (a batch-size schedule's
  large B: 16 prompts are 2 units at B = 8), where a percentile bootstrap covers far less than 95% (two
  units: about half), a Student t interval around the same estimate from the spread of the units' own
  values (n − 1 degrees of freedom: wide, as few units are);
* a **difference** between two candidates: their speedups' difference on the same resamples, so
  the interval is paired too.  The answer's ties are the candidates whose difference to the
  fastest includes 0 at a Bonferroni-adjusted level (the comparisons, one per candidate, are
  fixed before the run: ``ties``);
* **controls** in every run (``controls``): plain decoding timed against itself (A/A) and two
  identical trees under two names.  Their intervals must include 1× (and their difference 0);
  if one does not, the run's timing is not trusted and its speedups are not ranked;
* the **per-process offset** (``spreads``, ``results.harness``): a candidate keeps an offset for a
  whole run that its units share, so intervals over units miss it; estimated per machine from its
  runs' own controls, its variance is added to every interval above (speedups, differences,
  controls), divided among the runs pooled.
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
ABBA, UNBALANCED = "ABBA", "unbalanced"  # a run's order design (``order_design``)
ANSWER = "answer"  # the roster of a run without one (``study.tools.speedsched``'s schedule runs say ``schedule``)
LEVEL = 0.95
AA_WITHIN = 0.03  # speed_rounds=auto adds rounds while the A/A interval is wider than 1 +- 3%
RESAMPLES = 4000
BOOT_UNITS = 10  # units from which the interval is a bootstrap's (a percentile bootstrap over fewer undercovers)


def unit_sums(run: pd.DataFrame) -> pd.DataFrame:
    """[unit × (tokens, wall) per candidate]: each unit's tokens and seconds summed over the rounds,
    only units every candidate decoded in every round (a unit missing anywhere is dropped)."""
    g = run.groupby(["unit", "candidate"]).agg(tokens=("tokens", "sum"), wall_s=("wall_s", "sum"), n=("round", "size"))
    wide = g.unstack("candidate")
    complete = wide["n"].notna().all(axis=1) & (wide["n"].nunique(axis=1) == 1)
    return wide[complete][["tokens", "wall_s"]]


def _ratio(tp, wp, tc, wc, axis=-1):
    return (np.sum(tc, axis=axis) / np.sum(wc, axis=axis)) / (np.sum(tp, axis=axis) / np.sum(wp, axis=axis))


def _interval(data: tuple, statistic, level: float) -> tuple[float, float]:
    """The statistic's interval over units: a paired percentile bootstrap from ``BOOT_UNITS`` units, a
    Student t interval below (module docstring); none from one unit."""
    n = len(data[0])
    if n < 2:
        return float("nan"), float("nan")
    if n < BOOT_UNITS:
        each = statistic(*(np.asarray(d)[:, None] for d in data), axis=-1)  # every unit's own statistic
        est, half = float(statistic(*data)), t_half(each, level)
        return est - half, est + half
    res = stats.bootstrap(
        data,
        statistic,
        paired=True,
        vectorized=True,
        confidence_level=level,
        n_resamples=RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(0),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def t_half(values: np.ndarray, level: float) -> float:
    """Half the width of a Student t interval (n − 1 df) around a mean of ``values`` (0 where they agree)."""
    n = len(values)
    return float(stats.t.ppf(0.5 + level / 2, n - 1) * np.std(values, ddof=1) / np.sqrt(n))


def _cols(w: pd.DataFrame, name: str) -> tuple:
    return w["tokens"][name].to_numpy(float), w["wall_s"][name].to_numpy(float)


def speedup(w: pd.DataFrame, cand: str, base: str = PLAIN, level: float = LEVEL) -> tuple[float, float, float]:
    """(speedup, lo, hi) of ``cand`` over ``base`` on the units of ``unit_sums``."""
    data = (*_cols(w, base), *_cols(w, cand))
    return float(_ratio(*data)), *_interval(data, _ratio, level)


def difference(w: pd.DataFrame, a: str, b: str, level: float = LEVEL) -> tuple[float, float, float]:
    """(speedup_a - speedup_b, lo, hi): both over plain decoding, on the same resamples."""

    def diff(tp, wp, ta, wa, tb, wb, axis=-1):
        return _ratio(tp, wp, ta, wa, axis) - _ratio(tp, wp, tb, wb, axis)

    data = (*_cols(w, PLAIN), *_cols(w, a), *_cols(w, b))
    return float(diff(*data)), *_interval(data, diff, level)


def twins(names) -> list[tuple[str, str]]:
    """The identical-tree controls: (tree, its twin) for every ``X (twin)`` candidate whose X ran."""
    names = set(names)
    return [(n.removesuffix(TWIN_SUFFIX), n) for n in sorted(names) if n.endswith(TWIN_SUFFIX)]


def control_pairs(names) -> list[tuple[str, str, str]]:
    """(control, the first-named copy, the second) of one run: plain vs its A/A copy, each tree vs its twin."""
    aa = [("A/A", PLAIN, PLAIN_AA)] if {PLAIN, PLAIN_AA} <= set(names) else []
    return aa + [("twin", a, b) for a, b in twins(names) if a in set(names)]


def controls(w: pd.DataFrame, spread: harness.Spread = harness.NONE, runs: int = 1) -> list[dict]:
    """Every control of one run: what it compares, its estimate and interval (widened by the machine's
    per-process offsets, ``spread``, over ``runs`` pooled: ``results.harness``), the first copy's speedup
    (``scale``; 1 for A/A), ``off``: the estimate's signed distance from no difference (A/A: speedup - 1;
    twins: the difference), and whether it holds (A/A: the speedup's interval includes 1; twins: the
    difference's interval includes 0)."""
    out = []
    for control, a, b in control_pairs(w["tokens"].columns):
        if control == "A/A":
            s, lo, hi = speedup(w, b, a)
            se = _se(lo, hi, len(w), LEVEL)
            lo, hi = harness.widen(s, lo, hi, spread.aa_sd(runs), LEVEL)
            out.append(dict(control="A/A: plain vs plain", kind="speedup", estimate=s, lo=lo, hi=hi, scale=1.0,
                            se=se, off=s - 1.0, holds=lo <= 1 <= hi))  # fmt: skip
        else:
            d, lo, hi = difference(w, a, b)
            sa, sb = (float(_ratio(*_cols(w, PLAIN), *_cols(w, n))) for n in (a, b))
            se = _se(lo, hi, len(w), LEVEL)
            lo, hi = harness.widen(d, lo, hi, spread.difference_sd(sa, sb, runs), LEVEL)
            out.append(dict(control=f"{a} vs {b}", kind="difference", estimate=d, lo=lo, hi=hi, scale=sa,
                            se=se, off=d, holds=lo <= 0 <= hi))  # fmt: skip
    return out


def _se(lo: float, hi: float, n: int, level: float) -> float:
    """The standard error a run's own interval over ``n`` units implies (``_interval``: a bootstrap's
    normal critical value from ``BOOT_UNITS`` units, a t's with n - 1 df below)."""
    q = 0.5 + level / 2
    crit = stats.norm.ppf(q) if n >= BOOT_UNITS else stats.t.ppf(q, max(n - 1, 1))
    return float((hi - lo) / (2 * crit))


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
    """One run's candidates, fastest first: speedup with its interval, each one's difference to the
    fastest with a Bonferroni-adjusted interval (k = candidates - 1 comparisons fixed in advance),
    ``tie`` (that interval includes 0, or it is the fastest), ``pays`` (lo > 1), ``slower`` (hi < 1) and ``controls_hold``.
    Every interval is widened by the machine's per-process offsets (``spread``; ``results.harness``),
    divided among the runs pooled in ``run`` (``pooled_runs``)."""
    w = unit_sums(run)
    names = candidates(w) if len(w) else []
    if not names:
        return pd.DataFrame()
    k = int(run["pooled_runs"].iloc[0]) if "pooled_runs" in run else 1

    def wide(c: str) -> tuple:
        s, lo, hi = speedup(w, c, level=level)
        return (c, s, *harness.widen(s, lo, hi, spread.speedup_sd(s, k), level))

    df = pd.DataFrame([wide(c) for c in names], columns=["candidate", "speedup", "lo", "hi"])
    df = df.sort_values(["speedup", "candidate"], ascending=[False, True], kind="mergesort")
    best, s_of = df.candidate.iloc[0], dict(zip(df.candidate, df.speedup))
    adjusted = 1 - (1 - level) / max(1, len(names) - 1)

    def diff(c: str) -> tuple:
        d, lo, hi = difference(w, best, c, adjusted)
        return (d, *harness.widen(d, lo, hi, spread.difference_sd(s_of[best], s_of[c], k), adjusted))

    diffs = [diff(c) if c != best else (0.0, 0.0, 0.0) for c in df.candidate]
    df["diff_to_best"] = [d[0] for d in diffs]
    df["diff_lo"], df["diff_hi"] = [d[1] for d in diffs], [d[2] for d in diffs]
    df["tie"] = (df.candidate == best) | (df.diff_lo <= 0)
    df["pays"], df["slower"] = df.lo > 1, df.hi < 1  # resolved faster / slower than plain decoding
    df["n_units"], df["n_rounds"] = len(w), int(run["round"].nunique())
    df["controls_hold"] = all(c["holds"] for c in controls(w, spread, k))
    df["spread"], df["spread_plain"], df["spread_runs"] = spread.tree, spread.plain, spread.runs
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
    least as the batch grows), then the faster."""
    t = r[r.tie]
    t = t[~t.slower] if (~t.slower).any() else t
    t = t.sort_values(["drafted_per_step", "speedup"], ascending=[True, False], kind="mergesort")
    return t.iloc[0]


PICK_RULE = (
    "among the configurations that tie the fastest, the one drafting the fewest tokens per step (of those not "
    "resolved slower than plain decoding, where any is)"
)
PICK_SHORT = "of the ties (those not below 1× first), the one drafting the fewest tokens per step"  # PICK_RULE, brief


def latest_runs(speed: pd.DataFrame) -> pd.DataFrame:
    """Per (pair, dataset, dtype, batch size, max_new_tokens, machine, roster: a schedule run's rows,
    ``study.tools.speedsched``, or an answer run's, the default): the runs of one candidate set on one
    prompt set pooled (each of their rounds is one more round: every candidate beside plain decoding
    on the same units) under the newest one's ``run_id``; of several such sets, the one on the most
    prompts (the newest among equals: a new candidate set replaces an old one), so a default run's
    few prompts never hide a full benchmark.  Runs of the other sets stay in the file but are not ranked again."""
    key = ["pair", "dataset", "dtype", "batch_size", "max_new_tokens", "machine_id", "roster"]
    speed = speed.assign(source_run=speed["source_run"] if "source_run" in speed else speed.run_id)
    speed = speed.assign(roster=speed["roster"].fillna(ANSWER).astype(str) if "roster" in speed else ANSWER)
    out = []
    for _k, g in speed.groupby(key, dropna=False, sort=True):
        sets = g.groupby("run_id").apply(lambda r: (frozenset(r.candidate), frozenset(r.prompt_ids)))
        pick = max(sets.index, key=lambda r: (len(sets[r][1]), r))
        same = [r for r in sets.index if sets[r] == sets[pick]]
        newest = max(same)
        pooled = g[g.run_id.isin(same)]
        rounds = pooled.run_id + ":" + pooled["round"].astype(str)
        out.append(pooled.assign(round=rounds, run_id=newest, pooled_runs=len(same)))
    return pd.concat(out, ignore_index=True) if out else speed.iloc[0:0]


def answers(speed: pd.DataFrame, spread: dict | None = None) -> pd.DataFrame:
    """Per run (the newest of each key, ``latest_runs``): every candidate ranked (``ranked``, with its
    machine's offsets: ``spreads``, from ``speed`` where not given) with its description (``describe``)
    and the run's keys, ``shown`` on the row ``pick`` chooses."""
    spread = spreads(speed) if spread is None else spread
    out = []
    keys = ["pair", "dataset", "dtype", "device", "batch_size", "max_new_tokens", "machine", "machine_id", "roster"]
    keys += ["weights"]  # random: the architectures alone, timed where the weight files cannot go (a GPU's)
    speed = speed.assign(weights=speed["weights"].fillna("pretrained") if "weights" in speed else "pretrained")
    for run_id, run in latest_runs(speed).groupby("run_id", sort=True):
        r = ranked(run, spread=judged_by(spread, run))
        if r.empty:
            continue
        r = r.merge(describe(run), on="candidate", how="left")
        for k in keys:
            r[k] = run[k].iloc[0]
        r["run_id"], r["host"] = run_id, one_host(run)
        r["n_prompts"] = run.prompt_ids.str.split("|").explode().nunique()
        r["shown"] = r.candidate == pick(r).candidate
        out.append(r)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def one_host(rows: pd.DataFrame) -> str:
    """The host every row names (``inputs.machine.host``: this boot of it), or "" where they name several
    or none (rows from before the column)."""
    hosts = set(rows["host"].fillna("").astype(str)) if "host" in rows else {""}
    return hosts.pop() if len(hosts) == 1 else ""


def run_controls(speed: pd.DataFrame, spread: dict | None = None) -> pd.DataFrame:
    """Every newest run's controls (``controls``, with its machine's offsets: ``spreads``), with the run's keys."""
    spread = spreads(speed) if spread is None else spread
    out = []
    for run_id, run in latest_runs(speed).groupby("run_id", sort=True):
        w = unit_sums(run)
        for c in controls(w, judged_by(spread, run), int(run.pooled_runs.iloc[0])) if len(w) else []:
            keys = ("pair", "dataset", "batch_size", "roster")
            out.append({"run_id": run_id, **{k: run[k].iloc[0] for k in keys}, **c})
    return pd.DataFrame(out)


def random_weights(rows: pd.DataFrame) -> pd.Series:
    """Which rows are of runs on the pairs' architectures with random weights (``weights``; older rows lack
    it and are pretrained): such a run times steps against the cost model, it answers nothing."""
    return rows.weights.astype(str).eq("random") if "weights" in rows else pd.Series(False, index=rows.index)


def answer_first(a: pd.DataFrame) -> pd.DataFrame:
    """``answers`` rows with a schedule run's left out where an answer run has the same pair, dataset,
    dtype, batch size, max_new_tokens and machine (the TL;DR's and export's batch-1 answer), and
    random-weight runs left out (their acceptance is not the pair's: they time steps, they answer nothing)."""
    a = a[~random_weights(a)]
    if a.empty or "roster" not in a:
        return a
    key = ["pair", "dataset", "dtype", "batch_size", "max_new_tokens", "machine_id"]
    has = a.assign(_a=a.roster == ANSWER).groupby(key, dropna=False)._a.transform("any")
    return a[(a.roster == ANSWER) | ~has]


def order_design(run: pd.DataFrame) -> str:
    """``ABBA`` when every second unit of the run (in time order) decoded the candidates in the reverse of
    the unit before's order (``study.tools.speed.unit_orders``), else ``UNBALANCED``: each unit in one
    random order (runs before ABBA), so an order effect within a unit does not cancel, and runs of one
    seed repeated one sequence of orders."""
    if "order" not in run or run.order.isna().any():
        return UNBALANCED
    seqs = [tuple(u.sort_values("order").candidate) for _, u in run.groupby(["round", "unit"], sort=True)]
    pairs = list(zip(seqs[::2], seqs[1::2]))
    return ABBA if pairs and all(b == a[::-1] for a, b in pairs) else UNBALANCED


def own_controls(speed: pd.DataFrame) -> list[tuple]:
    """Every pretrained run's own controls (``controls``, unwidened): (machine, machine_id, run id, order
    design, control)."""
    speed = speed[~random_weights(speed)]
    out = []
    for (machine, mid, run_id), run in speed.groupby(["machine", "machine_id", "run_id"], sort=True):
        design = order_design(run)
        out += [(machine, str(mid), str(run_id), design, c) for c in controls(unit_sums(run))]
    return out


def spreads(speed: pd.DataFrame, own: list[tuple] | None = None) -> dict[str, harness.Offsets]:
    """Per ``machine_id``, the data of the harness's per-run offsets (``results.harness.by_machine``): its
    ABBA runs' own controls (``own``: ``own_controls(speed)``, computed here where not given; an order
    effect left standing is not the process's offset)."""
    own = own_controls(speed) if own is None else own
    return harness.by_machine((mid, r, c) for _m, mid, r, design, c in own if design == ABBA)


def judged_by(spread: dict, run: pd.DataFrame) -> harness.Spread:
    """The offsets ``run`` (a ``latest_runs`` group) is widened by: its machine's, from every other run."""
    mine = spread.get(str(run.machine_id.iloc[0]))
    return mine.fit(frozenset(run.source_run.astype(str))) if mine is not None else harness.NONE
