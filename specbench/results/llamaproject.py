"""specbench's projection for llama.cpp's candidates, beside their measured speedup (#84 item 6; torch-free).

A llama.cpp candidate ``draft n_max=N p_min=P`` (``study.tools.speed_llamacpp``) drafts a chain of at most N
tokens, one draft forward per token, and verifies it in one target forward of N + 1 tokens.  With P = 0 every
step drafts N tokens: the rule of specbench's static ``chain`` of budget N, whose greedy acceptance on the same
pair and dataset is in results/summary.csv (``tokens_per_step``: emitted per step, the bonus counted).  The
projection prices that step on **llama.cpp's** cost curve (costs.csv rows ``engine=llamacpp``, read at the
study's context by ``costcurve.AT_CONTEXT``'s rule for that engine):

    projected speedup = tokens_per_step × t_target(1) / (N × t_draft(1) + t_target(N + 1))

against plain decoding's one-token target forward per token.  A candidate with P > 0 stops where the draft's
top probability falls below P: specbench has no acceptance of that rule yet, so it is listed unprojected.
``compare`` sets each projection beside the measured speedup of the same candidate (``speedstats.answers``
of the llama.cpp rows) with the error projected ÷ measured − 1.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from . import costcurve
from . import speedstats as ss
from .columns import tree_params

ENGINE, DTYPE = "llamacpp", "gguf"
RULE = replace(costcurve.AT_CONTEXT, name="llamacpp_at_context", dtype=DTYPE, engine=ENGINE)


def chain_row(summary: pd.DataFrame, pair: str, dataset: str, n_max: int) -> pd.Series | None:
    """specbench's summary row of the greedy static chain of ``n_max`` on the pair and dataset (the row of the
    longest decodes, then of the most prompts), or None where the study has none."""
    s = summary
    rows = s[(s.pair == pair) & (s.dataset == dataset) & (s.tree == "chain") & (s.budget.astype(int) == n_max)]
    rows = rows[(rows.verify == "greedy") & (rows.temperature.astype(float) == 0)]
    if rows.empty:
        return None
    return rows.sort_values(["max_new_tokens", "n_prompts"], ascending=False, kind="mergesort").iloc[0]


def tokens_per_step(summary: pd.DataFrame, pair: str, dataset: str, n_max: int) -> float:
    """specbench's emitted tokens per step of that chain (``chain_row``), or nan where the study has none."""
    row = chain_row(summary, pair, dataset, n_max)
    return float("nan") if row is None else float(row.tokens_per_step)


def projected(tps: float, n_max: int, draft: costcurve.Curve, target: costcurve.Curve) -> float:
    """The module docstring's projected speedup of a chain of ``n_max`` emitting ``tps`` tokens per step."""
    return tps * target.seconds(1) / (n_max * draft.seconds(1) + target.seconds(n_max + 1))


def compare(speed: pd.DataFrame, summary: pd.DataFrame, costs: pd.DataFrame) -> pd.DataFrame:
    """Per llama.cpp benchmark candidate (each key's newest run): measured speedup with its interval, specbench's
    projection (nan where P > 0 or no curve or acceptance) and the error; empty without llama.cpp rows."""
    rows = ss.with_engine(speed) if speed is not None and len(speed) else pd.DataFrame()
    if rows.empty or not (rows.engine == ENGINE).any():
        return pd.DataFrame()
    measured = ss.answers(rows[rows.engine == ENGINE])
    out = []
    for r in measured.itertuples():
        params = tree_params(r.tree_params)
        n_max, p_min = int(params.get("n_max", 0)), float(params.get("p_min", 0.0))
        mine = costcurve.of_engine(costs, ENGINE) if costs is not None else pd.DataFrame()
        mine = mine[mine.machine_id.astype(str) == str(r.machine_id)] if len(mine) else mine
        draft, target = (
            costcurve.curve(mine, RULE, r.pair, role) if len(mine) else None for role in ("draft", "target")
        )
        tps = tokens_per_step(summary, r.pair, r.dataset, n_max) if n_max and p_min == 0 else float("nan")
        priced = draft is not None and target is not None and np.isfinite(tps)
        proj = projected(tps, n_max, draft, target) if priced else float("nan")  # type: ignore[arg-type]
        out.append({"pair": r.pair, "dataset": r.dataset, "machine": r.machine, "candidate": r.candidate,
                    "n_max": n_max, "p_min": p_min, "measured": r.speedup, "lo": r.lo, "hi": r.hi,
                    "specbench_tokens_per_step": tps, "projected": proj, "error": proj / r.speedup - 1})  # fmt: skip
    return pd.DataFrame(out)
