"""The harness's own spread: how far two names for one decode drift apart in one process, per machine
(torch-free: numpy and scipy).

Within one speed benchmark run every candidate decodes the same units, so a paired interval over units
sees the noise that varies from unit to unit.  It does not see an offset that one candidate keeps for
the whole process (where its buffers sit, which core its threads favour): every unit of the run shares
it.  The controls measure it.  Each run's twin control (two names for one tree) and A/A control (two
names for plain decoding) is one draw of such an offset beside its own sampling error, so over a
machine's runs

    d_i / s_i ~ Normal(0, se_i² + 2 σ²)

where d_i is the control's difference (the twin's speedup difference; the A/A's speedup - 1), s_i the
first copy's speedup (1 for A/A), se_i the run's own standard error (its interval's half-width over the
critical value it used) and σ the relative offset of ONE candidate (``fit``: its maximum-likelihood
value, 0 where the runs' own intervals already cover their controls, with a likelihood-ratio test of
σ = 0).  σ is estimated apart for tree decodes (``tree``, from the twins) and for plain decoding
(``plain``, from the A/A copies); it also absorbs whatever else a run's intervals miss (a percentile
bootstrap's under-coverage over 16 units).  ``widen`` adds the offset's variance to an interval: a
speedup s of a candidate over plain decoding gains s² (σ_tree² + σ_plain²), a difference between two
candidates σ_tree² (s_a² + s_b²) + σ_plain² (s_a - s_b)², each divided by the runs pooled (an offset
is drawn afresh per process).  A run is judged by the offsets of the other runs (``Offsets.fit``'s
``leave_out``), so one run that is off cannot widen its own interval into holding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

MIN_RUNS = 8  # runs of one machine below which no offset is estimated (σ = 0: the runs' own intervals)


@dataclass(frozen=True)
class Spread:
    """One machine's offsets (relative sd of one candidate's per-process offset) and their evidence."""

    tree: float = 0.0  # a tree decode's, from the twin controls
    plain: float = 0.0  # plain decoding's, from the A/A controls
    runs: int = 0  # the runs whose controls estimated them (0: none estimated)
    tree_p: float = float("nan")  # likelihood-ratio p of tree = 0
    plain_p: float = float("nan")

    def speedup_sd(self, s: float, runs: int = 1) -> float:
        """The offset's sd of a candidate's speedup ``s`` over plain decoding, ``runs`` pooled."""
        return abs(s) * float(np.hypot(self.tree, self.plain)) / np.sqrt(max(runs, 1))

    def difference_sd(self, sa: float, sb: float, runs: int = 1) -> float:
        """The offset's sd of the difference of two candidates' speedups ``sa - sb``: each one's own, and
        plain's, which scales both (so it moves the difference by (sa - sb) times its offset)."""
        return float(np.hypot(self.tree * np.hypot(sa, sb), self.plain * (sa - sb))) / np.sqrt(max(runs, 1))

    def aa_sd(self, runs: int = 1) -> float:
        """The offset's sd of plain decoding's A/A speedup (two draws of plain's offset)."""
        return np.sqrt(2) * self.plain / np.sqrt(max(runs, 1))


NONE = Spread()


def fit(rel: np.ndarray, rel_se: np.ndarray) -> tuple[float, float]:
    """(σ, p): the maximum-likelihood σ of ``rel`` ~ Normal(0, rel_se² + 2σ²), and the likelihood-ratio
    p-value of σ = 0 (a boundary test: half the χ²₁ tail).  (0, nan) from fewer than ``MIN_RUNS`` values."""
    e, se = np.asarray(rel, float), np.asarray(rel_se, float)
    keep = np.isfinite(e) & np.isfinite(se) & (se > 0)
    e, se = e[keep], se[keep]
    if len(e) < MIN_RUNS:
        return 0.0, float("nan")

    def nll(v: float) -> float:
        var = se**2 + v
        return 0.5 * float(np.sum(np.log(var) + e**2 / var))

    top = max(float(np.max(e**2)), 1e-12)
    v = float(optimize.minimize_scalar(nll, bounds=(0.0, top), method="bounded").x)
    v = v if nll(v) < nll(0.0) else 0.0
    lr = max(2 * (nll(0.0) - nll(v)), 0.0)
    return float(np.sqrt(v / 2)), float(0.5 * stats.chi2.sf(lr, 1)) if lr > 0 else 1.0


def widen(est: float, lo: float, hi: float, sd: float, level: float) -> tuple[float, float]:
    """``lo``, ``hi`` around ``est`` with an independent Normal(0, ``sd``) added: each side's half-width
    and the offset's ``level`` half-width added in quadrature (the interval unchanged where sd = 0)."""
    if not sd > 0:
        return lo, hi
    z = float(stats.norm.ppf(0.5 + level / 2)) * sd
    return est - float(np.hypot(est - lo, z)), est + float(np.hypot(hi - est, z))


@dataclass(frozen=True)
class Offsets:
    """One machine's runs' own controls, relative (``rel``, ``rel_se``) per kind ("difference": the twins,
    "speedup": the A/A copies) and run: ``fit`` estimates its offsets, leaving out the runs it judges."""

    runs: dict  # run id -> {kind: (rel, rel_se) lists}

    def fit(self, leave_out=frozenset()) -> Spread:
        """The offsets from every run but ``leave_out`` (the runs whose intervals they widen: a run that
        is off does not widen its own interval into holding), 0 from fewer than ``MIN_RUNS``."""
        kept = [r for k, r in self.runs.items() if k not in leave_out]
        n = sum(1 for r in kept if r.get("difference"))
        if n < MIN_RUNS:
            return NONE

        def of(kind: str) -> tuple[float, float]:
            pairs = [p for r in kept for p in r.get(kind, [])]
            return fit(np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]))

        (tree, tree_p), (plain, plain_p) = of("difference"), of("speedup")
        return Spread(tree, plain, n, tree_p, plain_p)


def by_machine(controls) -> dict[str, Offsets]:
    """Per machine id, its runs' offsets data from ``controls``: (machine_id, run id, a run's own control:
    a ``results.speedstats.controls`` row, unwidened, with its standard error ``se``)."""
    runs: dict[str, dict] = {}
    for mid, run, c in controls:
        scale, se = float(c["scale"]), float(c["se"])
        if not (np.isfinite(scale) and scale > 0 and np.isfinite(se) and se > 0):
            continue  # a run of one unit, or no speedup to scale by
        off = float(c["off"])  # the estimate's distance from no difference
        runs.setdefault(mid, {}).setdefault(run, {}).setdefault(c["kind"], []).append((off / scale, se / scale))
    return {mid: Offsets(r) for mid, r in runs.items()}
