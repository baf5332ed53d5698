"""Runs as a level: how far one configuration's speedup moves between benchmark runs of one machine,
beyond what each run's own interval already says (torch-free: numpy).

Within one speed benchmark run every candidate decodes the same units, so a paired interval over units
sees the noise that varies from unit to unit.  It does not see what a whole run shares (the process's
buffers and threads, the host's state that day): a rerun of the same prompts draws that afresh.  So a
rerun is one more draw of the **run effect**, not more prompts.  The random-effects model, on the log
scale of a speedup (a ratio, so its interval can never cross 0):

    l_r = log speedup of run r = λ + u_r + e_r,   u_r ~ Normal(0, τ²),   e_r ~ Normal(0, v_r)

where v_r is run r's own within-run variance (``results.speedstats``: a jackknife over its units) and τ
the run effect's sd.  τ² is estimated per machine by the method of moments over every configuration run
more than once on the same prompts (``fit``: the between-run variance of its log speedups less the mean
within-run variance, pooled by degrees of freedom; 0 where the runs agree within their own intervals).
A pooled estimate over R runs then has variance V_within + τ²/R (``Spread.log_var``), a difference of two
speedups V_within + τ² (s_a² + s_b²)/R (``Spread.difference_var``).  A machine with fewer than ``MIN_DF``
degrees of freedom of reruns takes the estimate pooled over every machine's reruns (``pooled``), so a
single run is never judged as if runs did not vary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

POOLED = "*"  # ``by_machine``'s key of the estimate over every machine
SEP = "|"  # ``by_engine``: "machine_id|engine" keys another engine's reruns (specbench's are the machine id alone)
MIN_DF = 4  # degrees of freedom of reruns below which a machine takes the estimate pooled over machines


@dataclass(frozen=True)
class Spread:
    """One machine's run effect: ``tau`` (sd of a log speedup between runs), the degrees of freedom and
    configurations that estimated it, and whether it is pooled over every machine's reruns."""

    tau: float = 0.0
    df: int = 0  # Σ (runs - 1) over the configurations run more than once
    configs: int = 0  # configurations run more than once on the same prompts
    pooled: bool = False  # estimated over every machine's reruns (this machine has fewer than MIN_DF)

    def log_var(self, runs: int = 1) -> float:
        """The run effect's variance of a log speedup pooled over ``runs`` runs."""
        return self.tau**2 / max(runs, 1)

    def difference_var(self, sa: float, sb: float, runs: int = 1) -> float:
        """The run effect's variance of the difference of two speedups ``sa - sb`` (each one's own draw,
        as a relative offset of its speedup), pooled over ``runs`` runs."""
        return self.tau**2 * (sa**2 + sb**2) / max(runs, 1)


NONE = Spread()


def fit(groups: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, int, int]:
    """(τ, df, configurations): the method-of-moments run effect from ``groups``, one per configuration
    run more than once: (its runs' log speedups, their within-run variances)."""
    num = df = n = 0.0
    for logs, var in groups:
        logs, var = np.asarray(logs, float), np.asarray(var, float)
        keep = np.isfinite(logs) & np.isfinite(var)
        logs, var = logs[keep], var[keep]
        if len(logs) < 2:
            continue
        num += (len(logs) - 1) * (float(np.var(logs, ddof=1)) - float(var.mean()))
        df += len(logs) - 1
        n += 1
    return (float(np.sqrt(max(num / df, 0.0))) if df else 0.0), int(df), int(n)


def by_machine(groups: dict[str, list[tuple[np.ndarray, np.ndarray]]]) -> dict[str, Spread]:
    """Per machine id, its ``Spread`` from its reruns (``groups``: machine id -> ``fit``'s groups); a
    machine with fewer than ``MIN_DF`` degrees of freedom gets the estimate over every machine's, also
    kept under the key ``POOLED`` for a machine with no reruns at all."""
    tau, df, n = fit([g for gs in groups.values() for g in gs])
    everyone = Spread(tau, df, n, pooled=True)
    out = {POOLED: everyone}
    for mid, gs in groups.items():
        t, d, k = fit(gs)
        out[mid] = Spread(t, d, k) if d >= MIN_DF else everyone
    return out


def by_engine(groups: dict[str, list[tuple[np.ndarray, np.ndarray]]]) -> dict[str, Spread]:
    """``by_machine`` per engine: keys ``machine_id`` (specbench's loop) fitted together, keys ``machine_id|engine``
    fitted with that engine's alone (its pooled estimate under ``*|engine``), so one engine's reruns never widen
    another's intervals."""
    out = by_machine({k: g for k, g in groups.items() if SEP not in k})
    for engine in sorted({k.split(SEP, 1)[1] for k in groups if SEP in k}):
        theirs = by_machine({k: g for k, g in groups.items() if k.endswith(SEP + engine)})
        out.update({f"{POOLED}{SEP}{engine}" if k == POOLED else k: v for k, v in theirs.items()})
    return out
