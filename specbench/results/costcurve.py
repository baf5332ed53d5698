"""Forward-cost curves from results/costs.csv rows (``study.tools.costs`` writes them): the seconds of one
forward against its query tokens, read by a named rule the caller chooses.

Each costs.csv row is one (role, pair, dtype, device, KV length, n_tokens) point: its median
``seconds`` and its repeats (``samples``); newer rows name the ``model`` too.  Rows that name no
device are the CPU's; rows without ``kv_len`` were measured at ``KV``.  A rule says whose rows make one
curve, at which KV length it is read, and what a forward wider than the widest measured one costs:

* ``AT_CONTEXT``: one pair's role (its draft or its target forward) in the caller's dtype, read at a
  ``KV``-token context: the measured KV lengths that bracket ``KV`` weighted linearly (``kv_weights``,
  clamped to the measured ones), on the sizes measured at each of them; clamped beyond the widest
  size.  Each point keeps its repeats (``Curve.draws``).  The cost model's projection
  (``report.costmodel``) and Sequoia's hardware-aware size (``trees.sequoia``, through ``read``).
* ``CEILING``: one model's forward, every row that names it pooled (each size's value is the median
  over the pairs that share the model), in bf16 on the CPU unless the caller names another dtype,
  at the model's shortest measured KV length; linear in n beyond the widest size.  A step's compute
  ceiling (``study.tools.ceiling``: results/run_times.csv) and the least time of one run (``report.onerun``).

Between measured sizes a curve is linear in n.  The table is read by its definition (``results.costtable``:
its text columns, a row without a device the CPU's).  pandas and numpy.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import costtable
from .costtable import devices

KV = 256  # the context a step is costed at: the study's prompts (~50-400 tokens) + up to 128 new
BOOT = 400  # bootstrap replicates of a curve's repeats (``Curve.draws``)
SEED = 0


@dataclass(frozen=True)
class Rule:
    """How one curve is read from costs.csv rows (module docstring)."""

    name: str
    per: str  # "pair": one pair's role, each point its repeats; "model": every pair's rows of one model, pooled
    kv: int | None  # the KV length read at (bracketing lengths weighted linearly); None: the shortest measured
    linear_beyond: bool  # a forward wider than the widest measured: linear in n (True) or the widest's cost
    dtype: str | None = None  # the dtype when the caller names none (None: every dtype's rows)
    device: str = "cpu"  # the device when the caller names none
    engine: str = "specbench"  # whose forwards: specbench's own (``SPECBENCH``) or llama.cpp's (``of_engine``)


AT_CONTEXT = Rule("at_context", per="pair", kv=KV, linear_beyond=False)
CEILING = Rule("ceiling", per="model", kv=None, linear_beyond=True, dtype="bfloat16")


SPECBENCH = "specbench"  # the engine of cost rows without an ``engine`` column: specbench's own forwards


def of_engine(costs: pd.DataFrame, engine: str = SPECBENCH) -> pd.DataFrame:
    """The cost rows one engine measured (``engine``; rows without it are specbench's): a projection reads
    the curve of the engine it projects for, never another's."""
    named = costs["engine"].fillna(SPECBENCH).astype(str) if "engine" in costs else pd.Series(SPECBENCH, costs.index)
    return costs[named == engine]


def kv_weights(kvs: Iterable[int], at: int = KV) -> dict[int, float]:
    """Linear interpolation weights of the measured KV lengths at ``at`` (clamped)."""
    kvs = sorted(set(kvs))
    lo = max([k for k in kvs if k <= at], default=kvs[0])
    hi = min([k for k in kvs if k >= at], default=kvs[-1])
    if lo == hi:
        return {lo: 1.0}
    f = (at - lo) / (hi - lo)
    return {lo: 1 - f, hi: f}


@dataclass(frozen=True)
class Curve:
    """Seconds of one forward against its query tokens: ``sizes`` measured, and per size the values at
    each KV length read (``samples[i][j]``: size i, KV length j, weight ``weights[j]``; a pair's point:
    its repeats; a model's: the pairs' medians)."""

    sizes: np.ndarray
    samples: tuple[tuple[np.ndarray, ...], ...]
    weights: tuple[float, ...]
    linear_beyond: bool = False

    @functools.cached_property
    def _medians(self) -> np.ndarray:
        return np.array([sum(w * float(np.median(x)) for w, x in zip(self.weights, row)) for row in self.samples])

    def values(self) -> np.ndarray:
        """The median at each size (its KV lengths' medians, weighted), computed once per curve: the report
        reads a curve ~1.6 million times (the benchmark check's per-step charges spent 270 s in np.median)."""
        return self._medians.copy()

    def draws(self, boot: int = BOOT) -> np.ndarray:
        """[1 + boot, sizes]: the medians, then ``boot`` resamples of every point's repeats
        (drawn once per curve, so every configuration on it sees the same machine draws).
        Each replicate resamples the points in ``values``' order, one ``rng.integers`` draw
        each (what ``rng.choice(x, len(x))`` draws); the medians and weighted sums are taken at once."""
        rng = np.random.default_rng(SEED)
        flat = [x for row in self.samples for x in row]
        lens = np.array([len(x) for x in flat], int)
        starts = np.cumsum(lens) - lens
        # every replicate's draws for every point at once: the same stream as one call per point and replicate
        picks = np.tile(np.repeat(starts, lens), boot) + rng.integers(0, np.tile(np.repeat(lens, lens), boot))
        picked = np.concatenate(flat).astype(float)[picks].reshape(boot, -1)
        meds = np.empty((boot, len(flat)))
        for n in set(lens.tolist()):  # points with n repeats: one median over [boot, points, n]
            at = np.flatnonzero(lens == n)
            cols = (starts[at][:, None] + np.arange(n)).ravel()
            meds[:, at] = np.median(picked[:, cols].reshape(boot, len(at), n), axis=-1)
        per_kv = meds.reshape(boot, len(self.samples), len(self.weights))
        out = np.zeros((boot, len(self.samples)))
        for j, w in enumerate(self.weights):  # sum(w * med) in values' order
            out = out + w * per_kv[:, :, j]
        return np.vstack([self.values()[None], out])

    def at(self, n, values: np.ndarray | None = None):
        """Seconds of an ``n``-token forward (``values``: one row of ``draws``; default the medians)."""
        v = self.values() if values is None else values
        if self.linear_beyond and np.ndim(n) == 0 and n > self.sizes[-1]:
            return v[-1] * n / self.sizes[-1]
        if self.linear_beyond and np.ndim(n):
            n = np.asarray(n, float)
            return np.where(n > self.sizes[-1], v[-1] * n / self.sizes[-1], np.interp(n, self.sizes, v))
        return np.interp(n, self.sizes, v)

    def weights_at(self, n) -> np.ndarray:
        """[len(n), sizes]: the matrix W with ``at(n, v) == W @ v`` for any values row v (``at`` is linear in
        the values), so one product reads every row of ``draws`` at once (``report.costmodel.step_costs``:
        the projection's 400 draws read one by one were half the report's time)."""
        n = np.atleast_1d(np.asarray(n, float))
        return np.stack([self.at(n, e) for e in np.eye(len(self.sizes))], axis=1)

    def seconds(self, n: float) -> float:
        return float(self.at(n))

    def per_token(self) -> float:
        """Seconds per token of the widest measured forward."""
        return float(self.values()[-1] / self.sizes[-1])


def repeats(r) -> np.ndarray:
    """A cost point's repeats (``samples``), or its median alone where they were not kept."""
    s = r.get("samples")
    if isinstance(s, str) and s.strip():
        return np.array([float(x) for x in s.split()])
    return np.array([float(r["seconds"])])


def _machine(costs: pd.DataFrame, rule: Rule, dtype: str | None, device: str | None) -> pd.DataFrame:
    """The rows of the rule's engine in one dtype (the rule's where the caller names none; None: every dtype)
    and device."""
    c = of_engine(costs, rule.engine)
    dev = devices(c)
    c = c[dev == (device or rule.device)]
    dtype = dtype if dtype is not None else rule.dtype
    if "dtype" in c.columns and dtype is not None:
        c = c[c.dtype.astype(str) == str(dtype)]
    return c


def _curve(c: pd.DataFrame, rule: Rule) -> Curve | None:
    """One curve's rows (one pair's role, or one model's) read by ``rule``."""
    if c.empty:
        return None
    kv = c.kv_len.astype(int) if "kv_len" in c.columns else pd.Series(KV, index=c.index)
    weights = kv_weights(sorted(set(kv)), rule.kv) if rule.kv is not None else {int(kv.min()): 1.0}
    c = c.assign(kv=kv)
    sizes = sorted(set(c.n_tokens.astype(int)) & set.intersection(*(set(c[c.kv == k].n_tokens) for k in weights)))
    points = dict(tuple(c.groupby(["kv", "n_tokens"], sort=False)))  # grouped once, not masked per point
    rows = []
    for n in sizes:
        at = [points[(k, n)] for k in weights]
        rows.append(tuple(g.seconds.to_numpy(float) if rule.per == "model" else repeats(g.iloc[0]) for g in at))
    return Curve(np.array(sizes, float), tuple(rows), tuple(weights.values()), rule.linear_beyond)


def curve(costs: pd.DataFrame, rule: Rule, key: str, role: str | None = None, dtype=None, device=None) -> Curve | None:
    """The curve of ``key`` by ``rule`` (a pair's ``role`` for ``AT_CONTEXT``, a model for ``CEILING``) in
    ``dtype`` on ``device`` (never another pair's, model's, dtype's or machine's), or None without rows."""
    if rule.per == "pair":
        c = costs[(costs.role == role) & (costs.pair.astype(str) == str(key))]
    else:
        c = costs[costs.model.astype(str) == str(key)] if "model" in costs.columns else costs.iloc[:0]
    c = _machine(c, rule, dtype, device)
    if rule.per == "pair" and _ids(c).m.nunique() > 1:
        raise ValueError(f"costs of pair {key} ({role}, {dtype}) from two machines: read them through one_per_curve")
    return _curve(c, rule)


def curves(costs: pd.DataFrame, rule: Rule, dtype=None, device=None) -> dict[str, Curve]:
    """model -> its curve by ``rule`` (``CEILING``), for every model costs.csv names."""
    if "model" not in costs.columns:
        return {}
    c = _machine(costs, rule, dtype, device)
    c = c[c.model.notna() & (c.model.astype(str) != "")]
    return {str(m): cv for m, g in c.groupby("model") if (cv := _curve(g, rule)) is not None}


def model_of(costs: pd.DataFrame, pair: str, role: str, device: str = "cpu") -> str | None:
    """The model a pair's ``role`` forward ran on ``device`` (costs.csv's ``model``: as the forward counts name
    it, so a model loaded from a local folder, a GPU's random-weight architecture, is named by its path), or
    None where no row names it."""
    if "model" not in costs.columns:
        return None
    here = devices(costs).astype(str) == device
    named = costs[(costs.pair.astype(str) == str(pair)) & (costs.role == role) & costs.model.notna() & here]
    named = named[named.model.astype(str) != ""]
    return str(named.model.iloc[0]) if len(named) else None


def read(path: str, rule: Rule, key: str, role: str | None, dtype: str, device: str = "cpu") -> Curve:
    """``curve`` from a costs.csv file; one line naming the fix when it has no such rows."""
    got = curve(one_per_curve(costtable.read(path)), rule, key, role, dtype, device)
    if got is None:
        whose = f"{role} costs of pair {key}" if rule.per == "pair" else f"costs of model {key}"
        raise ValueError(
            f"{path}: no {whose} in {dtype} on {device}: run `python -m specbench.study.tools.costs "
            f"pair={key} dtype={dtype} device={device}` first"
        )
    return got


def _ids(costs: pd.DataFrame, col: str = "machine_id") -> pd.DataFrame:
    """``costs`` with ``device`` (cpu where unnamed) and ``m``: the row's ``col`` ("" where unnamed)."""
    m = costs[col].astype(object).fillna("").astype(str) if col in costs else pd.Series("", index=costs.index)
    return costs.assign(m=m, device=devices(costs))


def study_machines(costs: pd.DataFrame) -> dict:
    """(device, dtype) -> the machine whose curves the study's projections read: the one that measured
    the most pairs there (the full study's; a default run on another machine measures the plan's few),
    then the most cost points, then the smallest id."""
    c = _ids(costs)
    size = c.groupby(["device", "dtype", "m"]).agg(pairs=("pair", "nunique"), points=("pair", "size")).reset_index()
    size = size.sort_values(["pairs", "points", "m"], ascending=[False, False, True], kind="mergesort")
    return {
        (d, str(dt)): m
        for (d, dt), m in size.drop_duplicates(["device", "dtype"]).set_index(["device", "dtype"]).m.items()
    }


def study_name(costs: pd.DataFrame | None, device: str = "cpu") -> str | None:
    """How the cost rows name the machine whose curves the study reads on ``device`` (in the dtype where it
    measured the most pairs): 'AMD EPYC (AVX512), 2 cores, 2 threads, torch 2.13.0+cpu'; None without such rows."""
    if costs is None or costs.empty or "machine" not in costs or "pair" not in costs:
        return None
    c = _ids(costs)
    c = c[(c.device == device) & c.machine.notna()]
    if c.empty:
        return None
    home = study_machines(costs)
    pairs = {dt: c[(c.dtype == dt) & (c.m == m)].pair.nunique() for (d, dt), m in home.items() if d == device}
    dtype = max(sorted(pairs), key=lambda dt: pairs[dt])
    named = c[(c.dtype == dtype) & (c.m == home[(device, dtype)])].machine
    return str(named.iloc[0]) if len(named) else None


def one_per_curve(costs: pd.DataFrame | None) -> pd.DataFrame | None:
    """``costs`` with one machine's rows per (pair, device, dtype): the study's machine (``study_machines``)
    where it measured the pair, else the machine with the most points of that curve.  Rows of two machines
    never make one curve; the other machines' curves are kept in costs.csv (a default run's, for its own
    live rows: ``machines``, ``at_home``)."""
    if costs is None or costs.empty or "pair" not in costs:
        return costs
    c = _ids(costs)
    home = study_machines(costs)
    points = c.groupby(["pair", "device", "dtype", "m"]).size().rename("n").reset_index()
    points = points.assign(
        study=[home.get((d, str(dt))) == m for d, dt, m in zip(points.device, points.dtype, points.m)]
    )
    points = points.sort_values(["study", "n", "m"], ascending=[False, False, True], kind="mergesort")
    keep = set(
        points.drop_duplicates(["pair", "device", "dtype"])[["pair", "device", "dtype", "m"]].itertuples(
            index=False, name=None
        )
    )
    return costs[[k in keep for k in c[["pair", "device", "dtype", "m"]].itertuples(index=False, name=None)]]


def of_machine(costs: pd.DataFrame, machine_id: str) -> pd.DataFrame:
    """The cost rows one machine measured."""
    return costs[_ids(costs).m == str(machine_id)]


def machines(costs: pd.DataFrame | None, col: str = "machine_id") -> dict:
    """(pair, device, dtype) -> the ``machine_id``s (or ``col``s, e.g. ``host``) that measured a curve of it
    (rows that name none, measured before rows carried it, name no machine).  Per machine and dtype: a default
    run on another machine adds its own curve (an AVX2 CPU's float32, another CPU's bfloat16) beside the
    committed one, and each machine's live rows are set against their own."""
    if costs is None or costs.empty or col not in costs:
        return {}
    ids = _ids(costs, col).groupby(["pair", "device", "dtype"]).m.agg(set)
    return {k: frozenset(v - {""}) for k, v in ids.items() if v - {""}}


def at_home(rows: pd.DataFrame, where: dict, col: str = "machine_id") -> list[bool]:
    """Per row (pair, device, dtype, ``col``): whether its machine (or host) measured a cost curve of its pair
    in its dtype on its device (``where``: ``machines``)."""
    if rows.empty:
        return []
    device = rows.device.fillna("cpu") if "device" in rows else pd.Series("cpu", index=rows.index)
    ids = rows[col].fillna("").astype(str) if col in rows else pd.Series("", index=rows.index)
    keys = zip(rows.pair, device, rows.dtype, ids)
    return [bool(i) and i in where.get((p, d, str(dt)), ()) for p, d, dt, i in keys]


def run_order(rows: pd.DataFrame, study: dict, homes: dict) -> list[tuple]:
    """Per benchmark row, the key the answer's run is the largest of: (timed on the machine whose curves the
    study's projections read, ``study``; on a machine that measured a curve of its own, ``homes``: both from
    ``machines``; the run's units timed; run id, which starts with its time).  The TL;DR's (``report.measured.shown``)
    and the export's (``study.serving.export``) one rule."""
    units = rows.groupby("run_id").n_units.transform("max")  # a run's units (a candidate may have fewer)
    return list(zip(at_home(rows, study), at_home(rows, homes), units, rows.run_id))
