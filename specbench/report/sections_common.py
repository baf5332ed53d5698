"""What the REPORT.md section renders (`sections`) share: the line a section shows when steps.csv.gz
is absent, the links to its made figures, and its grouping of rows."""

from __future__ import annotations

import pandas as pd

from . import analysis

NO_STEPS = (
    "_results/steps.csv.gz is absent, so {what} (it needs per-prompt step records; "
    "`python -m specbench.collect` writes them)._"
)


def no_steps(ctx, what: str) -> str | None:
    return NO_STEPS.format(what=what) if ctx["data"]["steps"] is None else None


def figs(ctx, *names) -> list[str]:
    return [ctx["link"](n) for n in names if n in ctx["figs"]]


def groups(df: pd.DataFrame, keys=analysis.GROUP):
    return df.groupby(keys, sort=True) if len(df) else []
