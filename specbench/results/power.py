"""Power of the empirical lossless check (``study.tools.lossless``), which the check picks its N from and
the report states.

The check is Pearson's χ² of N first tokens against the target's law p, over bins (the
likeliest tokens, the rest pooled).  Against a first-token law at binned total variation
δ from p the statistic is noncentral χ² with df = bins - 1 and noncentrality
λ = N Σ_b (p'_b - p_b)² / p_b.  Over every such law, λ ≥ 4Nδ²: moving mass δ out of
bins of total p-mass a into bins of mass b (a + b ≤ 1) costs at least δ²/a + δ²/b ≥ 4δ².
So ``power(n, df, tv, alpha)`` = P(χ²_df(4Nδ²) > χ²_df quantile at 1 - alpha) is a
lower bound on the probability that a rule that far from the target is rejected, and
``draws_for_power`` is the smallest N reaching a target power.  scipy; no torch.
"""

from __future__ import annotations

from scipy.stats import chi2, ncx2


def power(n: int, df: int, tv: float, alpha: float) -> float:
    """Lower bound on the χ² test's power against any law at binned TV ``tv`` (module docstring)."""
    if df < 1 or n < 1:
        return float("nan")
    return float(ncx2.sf(chi2.isf(alpha, df), df, 4.0 * n * tv * tv))


def draws_for_power(df: int, tv: float, alpha: float, target: float) -> int:
    """Smallest N with ``power(N, df, tv, alpha) >= target`` (bisection on N)."""
    if not 0 < target < 1 or not 0 < alpha < 1 or tv <= 0 or df < 1:
        raise ValueError(
            f"power target {target}, alpha {alpha}, tv {tv}, df {df}: need 0 < power, alpha < 1, "
            "tv > 0 and at least 2 bins"
        )
    lo, hi = 1, 2
    while power(hi, df, tv, alpha) < target:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if power(mid, df, tv, alpha) < target else (lo, mid)
    return hi


def power_tv(n: int, df: int, alpha: float, target: float) -> float:
    """The smallest TV against which ``n`` draws reach ``target`` power (bisection on TV)."""
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if power(n, df, mid, alpha) < target else (lo, mid)
    return hi
