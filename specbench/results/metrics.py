"""A job's metrics from its steps (the summary row's numbers), the one paired bootstrap the study
and the report resample with, and where two token sequences first differ.

Metric definitions (also in docs/metrics.md and REPORT.md):
  acceptance_rate   = sum(accepted) / sum(tree_size)       (verified / drafted; NaN when nothing
                                                          was drafted, e.g. tree=none)
  acceptance_length = mean accepted per step               (bonus token NOT counted)
  tokens_per_step   = mean emitted per step                (bonus token counted; Spec-Bench's tau)
  alpha_d           = P(accepted >= d | accepted >= d-1 and tree_depth >= d)   (EAGLE)
CIs are 95% percentile bootstraps over prompts (``scipy.stats.bootstrap``, paired over each
prompt's sums; seeded, 1000 resamples).  Imports pandas, numpy and scipy.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
from scipy import stats

N_BOOT = 1000


def _metrics(df: pd.DataFrame) -> dict:
    drafted = df.tree_size.sum()
    return {
        "acceptance_rate": df.accepted.sum() / drafted if drafted > 0 else float("nan"),
        "acceptance_length": df.accepted.mean(),
        "tokens_per_step": df.emitted.mean(),
    }


def paired_bootstrap(samples: tuple, statistic, n_resamples: int, seed: int = 0):
    """``scipy.stats.bootstrap`` over prompts, the one way the study and the report resample: paired
    (a prompt's arrays move together), vectorised, 95% percentile interval, seeded."""
    return stats.bootstrap(
        samples,
        statistic,
        paired=True,
        vectorized=True,
        n_resamples=n_resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
    )


def _ratio(num, den, axis=-1):
    with np.errstate(invalid="ignore", divide="ignore"):
        return num.sum(axis) / den.sum(axis)


def _ratio_ci(num: np.ndarray, den: np.ndarray, seed: int) -> tuple[float, float]:
    """95% percentile interval of Σ num / Σ den over prompts resampled with replacement."""
    if den.sum() <= 0:
        return float("nan"), float("nan")
    if len(num) < 2:  # one prompt: every resample is the prompt itself
        return float(num.sum() / den.sum()), float(num.sum() / den.sum())
    with warnings.catch_warnings():  # a resample with nothing drafted has no rate (NaN), dropped below
        warnings.simplefilter("ignore")
        res = paired_bootstrap((num, den), _ratio, N_BOOT, seed)
    v = np.asarray(res.bootstrap_distribution, float)
    v = v[np.isfinite(v)]
    lo, hi = np.percentile(v, [2.5, 97.5])
    return float(lo), float(hi)


def bootstrap(df: pd.DataFrame, seed: int = 0) -> dict:
    """95% percentile CIs of the job metrics, resampling prompts."""
    groups = [g for _, g in df.groupby("prompt_id", sort=True)]
    rows = [[g.accepted.sum(), g.tree_size.sum(), g.emitted.sum(), len(g)] for g in groups]
    sums = np.array(rows, float).reshape(-1, 4)
    parts = {"acceptance_rate": (0, 1), "acceptance_length": (0, 3), "tokens_per_step": (2, 3)}
    out = {}
    for k, (num, den) in parts.items():
        out[f"{k}_lo"], out[f"{k}_hi"] = _ratio_ci(sums[:, num], sums[:, den], seed)
    return out


def alphas(df: pd.DataFrame) -> dict:
    out = {}
    for d in range(1, (int(df.tree_depth.max()) if len(df) else 0) + 1):
        at_risk = df[(df.accepted >= d - 1) & (df.tree_depth >= d)]
        out[f"alpha_{d}"] = (at_risk.accepted >= d).mean() if len(at_risk) else float("nan")
    return out


def summarize(keys: dict, steps: pd.DataFrame, wall_s: float, hist: list[int]) -> pd.DataFrame:
    row = dict(keys)
    row.update(n_prompts=steps.prompt_id.nunique(), n_steps=len(steps), new_tokens=int(steps.emitted.sum()))
    row.update(_metrics(steps))
    row.update(bootstrap(steps, seed=int(keys["seed"])))
    row.update(
        first_token_tv=steps.first_token_tv.mean(),
        expected_accepted=steps.expected_accepted.mean(),
        draft_s=steps.draft_s.sum(),
        verify_s=steps.verify_s.sum(),
        wall_s=wall_s,
        tokens_per_s=(steps.emitted.sum() / wall_s) if wall_s > 0 else float("nan"),
        accept_hist=json.dumps(hist),
    )
    row.update(alphas(steps))
    return pd.DataFrame([row])


def first_divergence(x: list[int], y: list[int]) -> int | None:
    """The first position where two token sequences differ (a length difference counts); None if equal."""
    for i, (u, v) in enumerate(zip(x, y)):
        if u != v:
            return i
    return None if len(x) == len(y) else min(len(x), len(y))
