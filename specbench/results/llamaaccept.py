"""llama.cpp's acceptance against specbench's replay of the same drafting rule (#84 item 4; torch-free).

``agreement(rows)``: from ``results/acceptance_llamacpp.csv`` (``study.tools.accept_llamacpp``: one row per
engine, setting and prompt), the newest run of each (machine, pair, dataset, max_new_tokens), per setting
(n_max, p_min, n_min): each engine's accepted draft tokens per draft (Σ accepted ÷ Σ drafts over the prompts:
llama.cpp's ``draft_n_accepted`` over its ``spec_decode_num_drafts_total``; specbench's ``replay.pmin_walk``),
their difference (llama.cpp − specbench) with its 95% paired percentile interval over prompts
(``metrics.paired_bootstrap``; none from fewer than ``MIN_PROMPTS`` prompts), ``agree`` (the interval holds 0),
and llama.cpp's decodes token-identical to its own plain decoding (``same`` of ``decodes``).  Engines are paired
by prompt id within one run only.

A setting is (``spec_type``, ``size_n``, n_max, p_min, n_min): ``draft-simple`` (rows written before the column
existed: empty, read as ``draft-simple``, ``size_n`` 0) or ``ngram-simple`` (``study.tools.accept_ngram``: n_max
is its draft length M).  specbench's rows of ``drafter=llamacpp`` (empty before the column: the same) replay
llama.cpp's rule; rows of ``drafter=ngram`` (n-gram settings only) replay specbench's own ngram chain of budget
n_max, reported beside them as ``chain`` (accepted per draft) and ``drafts_chain``, outside the comparison.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .files import read_csv
from .metrics import paired_bootstrap

FILE = "acceptance_llamacpp.csv"
LLAMACPP, SPECBENCH = "llamacpp", "specbench"
RUN_KEY = ["machine_id", "pair", "dataset", "max_new_tokens"]
SETTING = ["spec_type", "size_n", "n_max", "p_min", "n_min"]
DRAFT_SIMPLE, OWN = "draft-simple", "ngram"  # the spec_type of rows without one; specbench's own drafter
MIN_PROMPTS = 10  # as the fixed comparisons: no interval from fewer
N_BOOT = 10_000


def read(path: str) -> pd.DataFrame:
    """acceptance_llamacpp.csv as its tool reads it (``study.tools.accept_llamacpp``: a rerun's rows, and under
    the lock before its rows are merged in): the specbench CSV (``files.read_csv``), identifier columns as text."""
    return read_csv(path)


def newest(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of each run key's newest run (run ids sort by time)."""
    last = rows.groupby(RUN_KEY, sort=False).run_id.transform("max")
    return rows[rows.run_id == last]


def _diff(acc_l, dr_l, acc_s, dr_s, axis=-1):
    with np.errstate(invalid="ignore", divide="ignore"):
        return acc_l.sum(axis) / dr_l.sum(axis) - acc_s.sum(axis) / dr_s.sum(axis)


def interval(arrays: tuple) -> tuple[float, float]:
    """95% percentile interval of ``_diff`` over prompts resampled together; NaN below ``MIN_PROMPTS``."""
    if len(arrays[0]) < MIN_PROMPTS:
        return float("nan"), float("nan")
    res = paired_bootstrap(arrays, _diff, N_BOOT)
    v = np.asarray(res.bootstrap_distribution, float)
    lo, hi = np.percentile(v[np.isfinite(v)], [2.5, 97.5])
    return float(lo), float(hi)


def _rate(acc, drafts) -> float:
    return float(acc.sum() / drafts.sum()) if drafts.sum() else float("nan")


def one(g: pd.DataFrame) -> dict:
    """One setting of one run: both engines on the prompts both ran (specbench's own chain beside them)."""
    own = g[(g.engine == SPECBENCH) & (g.drafter == OWN)]
    by = {e: s.set_index(s.prompt_id.astype(str)) for e, s in g[g.drafter != OWN].groupby("engine")}
    if set(by) != {LLAMACPP, SPECBENCH}:
        return {}
    ids = sorted(set(by[LLAMACPP].index) & set(by[SPECBENCH].index))
    lc, sb = by[LLAMACPP].loc[ids], by[SPECBENCH].loc[ids]
    arrays = tuple(np.asarray(x, float) for x in (lc.accepted, lc.drafts, sb.accepted, sb.drafts))
    lo, hi = interval(arrays)
    diff = float(_diff(*arrays))
    same = lc.same_tokens.astype(str).str.lower().eq("true")
    ch = own[own.prompt_id.astype(str).isin(ids)]
    return {"prompts": len(ids), "tokens": int(lc.tokens.sum()),
            LLAMACPP: _rate(arrays[0], arrays[1]), SPECBENCH: _rate(arrays[2], arrays[3]),
            "drafts_llamacpp": int(arrays[1].sum()), "drafts_specbench": int(arrays[3].sum()),
            "chain": _rate(ch.accepted, ch.drafts) if len(ch) else float("nan"), "drafts_chain": int(ch.drafts.sum()),
            "diff": diff, "lo": lo, "hi": hi, "agree": bool(lo <= 0 <= hi) if lo == lo else diff == 0,
            "same": int(same.sum()), "decodes": len(same)}  # fmt: skip


def settled(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows written before ``spec_type``, ``size_n`` and ``drafter`` existed read as draft-simple's."""
    fill = {"spec_type": DRAFT_SIMPLE, "size_n": 0, "drafter": LLAMACPP}
    rows = rows.assign(**{k: rows[k] if k in rows else v for k, v in fill.items()})
    return rows.fillna({k: v for k, v in fill.items()}).astype({"size_n": int})


def agreement(rows: pd.DataFrame | None) -> pd.DataFrame:
    """One row per run key and setting (module docstring); empty without rows."""
    if rows is None or rows.empty:
        return pd.DataFrame()
    cols = ["machine", *RUN_KEY, *SETTING]
    out = [{**dict(zip(cols, k)), **r} for k, g in newest(settled(rows)).groupby(cols, sort=True) if (r := one(g))]
    return pd.DataFrame(out)
