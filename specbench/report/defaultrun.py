"""What the last default run (`bash run_all.sh`) covered, on which machine: one sentence from
results/default_run.json (study.tools.budget's record) and results/acceptance_check.csv (study.tools.recheck)."""

from __future__ import annotations

import pandas as pd

from ..results.acceptcheck import mine, others, verdict


def sentence(rec: dict | None, check: pd.DataFrame | None, brief: bool = False) -> str:
    """The run's budget, machine, dtype, plan and acceptance-sample check, or that none is recorded (``brief``:
    the main page's: its machine, dtype and the check's headline; in full on the set-up page).  The check is
    the run's machine's; another machine's kept in the file is stated after it (in full only)."""
    mid = rec.get("machine_id") if rec is not None else None
    kept, check = (others(check, mid), mine(check, mid)) if mid else ([], check)
    check = None if check is not None and check.empty else check
    if rec is not None and brief:
        checked = verdict(check, brief=True) if check is not None else "no acceptance-sample check"
        return (
            f"The last default run (`bash run_all.sh`, {rec['profile']} profile) ran on {rec['machine']} in "
            f"{rec['dtype']}; {checked} (setup.md: what it covered, and the check in full)."
        )
    if rec is None:
        return "results/default_run.json is absent: no default run (`bash run_all.sh`) is recorded in these results."
    rates = rec.get("rates_gflops", {}).get(rec["dtype"], {})
    rate = (
        f"; a 1536 x 8960 layer ran {float(rates['1']):.1f} GFLOP/s at 1 row, {float(rates['64']):.1f} at 64"
        if rates
        else ""
    )
    why = (
        "dtype=auto's measured choice"
        if rec.get("dtype_auto") == rec["dtype"]
        else f"dtype=auto measured {rec.get('dtype_auto')} faster"
    )
    checked = verdict(check) if check is not None else "the acceptance-sample check did not run"
    return (
        f"The last default run (`bash run_all.sh`, {rec['profile']} profile, SPECBENCH_MINUTES={float(rec['minutes']):g}) "
        f"ran on {rec['machine']} in {rec['dtype']} ({why}{rate}), planned {int(rec['planned_s']) / 60:.0f} min "
        f"and covered {rec['covered']}. The acceptance-sample check as last run (results/acceptance_check.csv, "
        f"which the default run or `python -m specbench.study.tools.recheck` writes): {checked}."
    ) + "".join(f" Kept beside it, the last check on {m}: {verdict(g, brief=True)}." for m, g in kept)
