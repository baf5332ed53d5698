"""Paired comparisons of two configurations on the prompts both ran (pandas/numpy only).

Two configurations are comparable only when they ran the same dataset at the
same temperature, dtype and max_new_tokens (`check_comparable`), and they are
compared only on the prompts both ran, read from steps.csv.

Definition (used for every difference in REPORT.md): over a set of prompts P,
``tokens_per_step(P) = Σ_{p∈P} emitted_p / Σ_{p∈P} steps_p`` (ratio of sums,
the same formula as summary.csv's tokens_per_step over all of a config's
prompts).  The paired difference is ``tokens_per_step_a(P) -
tokens_per_step_b(P)`` with P the shared prompts; its 95% interval is a
percentile bootstrap (``scipy.stats.bootstrap``, paired) that resamples P with
replacement, the same resample for both configurations (seeded, `N_PAIRED`
draws).  `boot_p` reads a two-sided p-value off the same bootstrap draws, and
`interval_at` another level's interval from them (`report.fixed`).

The module also compares generated tokens with a baseline's (`output_equality`,
Spec-Bench ``equal.py`` style).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..results.metrics import first_divergence, paired_bootstrap  # noqa: F401 (the report's API)

ALPHA = 0.05  # the family-wise level of Holm's adjustment over the comparisons fixed in advance (``fixed``)
N_PAIRED = 10000  # bootstrap draws per paired difference (enough for a Holm level of 0.05 / 100)

COMPARABLE_KEYS = ("dataset", "temperature", "dtype", "max_new_tokens")


class Incomparable(ValueError):
    """Two configurations that must not be ranked against each other."""


def _same(key: str, x, y) -> bool:
    if key in ("temperature", "max_new_tokens"):
        return math.isclose(float(x), float(y))
    return str(x) == str(y)


def check_comparable(a: Mapping, b: Mapping) -> None:
    """Raise `Incomparable` (one line) unless a and b share dataset, temperature, dtype, max_new_tokens."""
    for key in COMPARABLE_KEYS:
        if key in a and key in b and not _same(key, a[key], b[key]):
            raise Incomparable(
                f"configs {a['config_hash']} and {b['config_hash']} differ in {key} "
                f"({a[key]} vs {b[key]}); compare only configurations with the same "
                f"{', '.join(COMPARABLE_KEYS)}"
            )


def prompt_sums(steps: pd.DataFrame | None) -> pd.DataFrame:
    """Per (config_hash, prompt_id): Σ emitted and the number of steps."""
    if steps is None or not {"config_hash", "prompt_id", "emitted"} <= set(steps.columns):
        return pd.DataFrame(columns=["emitted", "steps"])
    return (
        steps.groupby(["config_hash", "prompt_id"], sort=True)
        .emitted.agg(["sum", "size"])
        .rename(columns={"sum": "emitted", "size": "steps"})
    )


def rows_of(sums: pd.DataFrame, config_hash: str) -> pd.DataFrame | None:
    """One configuration's per-prompt sums (indexed by prompt_id), or None where steps.csv has none."""
    if sums.empty:
        return None
    try:
        return sums.loc[config_hash]
    except KeyError:
        return None


def _prompts(rows: pd.DataFrame | None) -> frozenset:
    return frozenset() if rows is None else frozenset(rows.index)


def prompts_of(sums: pd.DataFrame, config_hash: str) -> frozenset:
    return _prompts(rows_of(sums, config_hash))


@dataclass(frozen=True)
class Paired:
    a: str  # config_hash of a
    b: str  # config_hash of b
    n_prompts: int  # shared prompts
    a_value: float  # tokens_per_step of a over the shared prompts
    b_value: float
    diff: float  # a_value - b_value
    lo: float  # 95% paired bootstrap interval of diff
    hi: float
    boot: np.ndarray | None = field(default=None, repr=False, compare=False)  # the bootstrap draws of diff

    @property
    def includes_zero(self) -> bool:
        return self.lo <= 0.0 <= self.hi


def _ratio_diff(ae, as_, be, bs, axis=-1):
    return ae.sum(axis) / as_.sum(axis) - be.sum(axis) / bs.sum(axis)


def paired_boot(x: np.ndarray, y: np.ndarray, seed: int = 0, n_boot: int = N_PAIRED):
    """``scipy.stats.bootstrap`` (paired percentile, 95%) of Σ emitted / Σ steps of x minus y's,
    x and y [prompts, (emitted, steps)] in the same prompt order; None from fewer than 2 prompts."""
    if len(x) < 2:
        return None
    return paired_bootstrap((x[:, 0], x[:, 1], y[:, 0], y[:, 1]), _ratio_diff, n_boot, seed)


def paired_difference(sums: pd.DataFrame, a: Mapping, b: Mapping, seed: int = 0, n_boot: int = N_PAIRED) -> Paired:
    """tokens_per_step of a minus b on their shared prompts, with a paired bootstrap interval."""
    check_comparable(a, b)
    ha, hb = str(a["config_hash"]), str(b["config_hash"])
    ra, rb = rows_of(sums, ha), rows_of(sums, hb)
    shared = sorted(_prompts(ra) & _prompts(rb))
    if not shared:
        raise Incomparable(
            f"configs {ha} and {hb} share no prompts in steps.csv; compare only configurations run on the same prompts"
        )
    assert ra is not None and rb is not None  # both ran the shared prompts
    x = ra.loc[shared, ["emitted", "steps"]].to_numpy(float)
    y = rb.loc[shared, ["emitted", "steps"]].to_numpy(float)
    av, bv = x[:, 0].sum() / x[:, 1].sum(), y[:, 0].sum() / y[:, 1].sum()
    res = paired_boot(x, y, seed, n_boot)
    if res is None:  # one prompt: every resample is the difference itself
        return Paired(ha, hb, len(shared), float(av), float(bv), float(av - bv), float(av - bv), float(av - bv))
    lo, hi = res.confidence_interval
    boot = np.asarray(res.bootstrap_distribution, float)
    return Paired(ha, hb, len(shared), float(av), float(bv), float(av - bv), float(lo), float(hi), boot)


def interval_at(p: Paired, level: float) -> tuple[float, float]:
    """The percentile interval of p's bootstrap draws at confidence ``level`` (linear quantiles, as
    ``scipy.stats.bootstrap`` reads its own)."""
    if p.boot is None:
        return p.lo, p.hi
    a = (1 - level) / 2
    lo, hi = np.quantile(p.boot, [a, 1 - a])
    return float(lo), float(hi)


def boot_p(p: Paired) -> float:
    """Two-sided paired-bootstrap p-value: the smallest α at which the 1 − α percentile interval of the
    draws (`interval_at`) excludes zero, so that interval excludes zero exactly when α > p.  NaN
    without draws (fewer than 2 prompts)."""
    if p.boot is None:
        return float("nan")
    x = np.sort(p.boot[np.isfinite(p.boot)])
    n = len(x)
    if n < 2:
        return float("nan")
    j = int(np.searchsorted(x, 0.0, side="right")) - 1  # the last draw <= 0
    u_lo = 0.0 if j < 0 else 1.0 if j == n - 1 else (j - x[j] / (x[j + 1] - x[j])) / (n - 1)
    i = int(np.searchsorted(x, 0.0, side="left"))  # the first draw >= 0
    u_hi = 0.0 if i == 0 else 1.0 if i == n else (i - 1 - x[i - 1] / (x[i] - x[i - 1])) / (n - 1)
    return float(min(1.0, 2 * min(u_lo, 1 - u_hi)))


# --------------------------------------------------------------------------
# generated outputs
# --------------------------------------------------------------------------
def output_equality(outputs: Mapping, config_hash: str, baseline_hash: str) -> dict:
    """Share of the shared prompts whose tokens equal the baseline's, and where the others diverge."""
    prompts = sorted({p for h, p in outputs if h == config_hash} & {p for h, p in outputs if h == baseline_hash})
    diverged = [(p, first_divergence(outputs[(config_hash, p)], outputs[(baseline_hash, p)])) for p in prompts]
    diverged = [(p, pos) for p, pos in diverged if pos is not None]
    return dict(n_prompts=len(prompts), identical=len(prompts) - len(diverged), diverged=diverged)


def holm(p: np.ndarray, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Holm's step-down over p-values (NaN counts as 1): (adjusted p, the level of each adjusted
    interval).  Adjusted p_(i) = max_{j ≤ i} min(1, (m − j + 1) p_(j)); rejected: adjusted p < alpha.
    Level: alpha / (m − min(i, k) + 1), k the first rank not rejected (ties ranked in list order)."""
    p = np.where(np.isnan(p), 1.0, np.asarray(p, float))
    m = len(p)
    order = np.argsort(p, kind="mergesort")
    steps = m - np.arange(m)  # m − i + 1 for rank i = 1..m
    adj_sorted = np.maximum.accumulate(np.minimum(1.0, steps * p[order]))
    rejected = adj_sorted < alpha
    k = int(np.argmin(rejected)) if not rejected.all() else m  # 0-based first rank not rejected
    level_sorted = alpha / steps[np.minimum(np.arange(m), k)] if m else steps.astype(float)
    adj, level = np.empty(m), np.empty(m)
    adj[order], level[order] = adj_sorted, level_sorted
    return adj, level
