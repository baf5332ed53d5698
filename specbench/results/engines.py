"""Plain decoding of two engines on one machine, as one ratio (#84 item 7; torch-free).

``plain_ratio(speed)``: from the speed benchmark's rows (``results/speed.csv``), per (pair, dataset, machine,
max_new_tokens, specbench's dtype): llama.cpp's plain tokens/s ÷ specbench's plain tokens/s, on the prompts
both engines decoded (batch 1, ``candidate plain``; each prompt's tokens and seconds summed over its rounds
and runs, then pooled over the prompts: Σ tokens ÷ Σ seconds per engine), with the 95% interval of
``results.speedstats`` (a jackknife over prompts, on the log scale; none below ``speedstats.MIN_UNITS``
prompts).  Rows are paired by prompt id only within one machine: a ratio is never formed across machines.
"""

from __future__ import annotations

import pandas as pd

from . import speedstats as ss

LLAMACPP = "llamacpp"
KEY = ["pair", "dataset", "machine_id", "max_new_tokens"]


def per_prompt(rows: pd.DataFrame) -> pd.DataFrame:
    """Each prompt's tokens and seconds, summed over its rounds and runs."""
    return rows.groupby(rows.prompt_ids.astype(str))[["tokens", "wall_s"]].sum()


def plain_ratio(speed: pd.DataFrame, other: str = LLAMACPP, base: str = ss.SPECBENCH, level: float = ss.LEVEL):
    """One row per key and ``base`` dtype (module docstring): ``prompts`` paired, each engine's tokens/s on them,
    ``ratio`` (``other`` ÷ ``base``) with ``lo``, ``hi``; empty where no key has both engines' plain rows."""
    if speed is None or speed.empty:
        return pd.DataFrame()
    rows = ss.with_engine(speed)
    plain = rows[(rows.candidate == ss.PLAIN) & (rows.batch_size.astype(int) == 1)]
    out = []
    for key, g in plain.groupby(KEY, sort=True):
        theirs = g[g.engine == other]
        if theirs.empty:
            continue
        for dtype, mine in g[g.engine == base].groupby("dtype", sort=True):
            a, b = per_prompt(theirs), per_prompt(mine)
            shared = sorted(set(a.index) & set(b.index))
            if not shared:
                continue
            a, b = a.loc[shared], b.loc[shared]
            data = (
                b.tokens.to_numpy(float),
                b.wall_s.to_numpy(float),
                a.tokens.to_numpy(float),
                a.wall_s.to_numpy(float),
            )
            lo, hi = ss._interval(data, ss._ratio, level, True)
            out.append({**dict(zip(KEY, key)), "machine": str(g.machine.iloc[0]), "dtype": dtype, "prompts": len(shared),
                        f"{other}_tok_s": a.tokens.sum() / a.wall_s.sum(), f"{base}_tok_s": b.tokens.sum() / b.wall_s.sum(),
                        "ratio": float(ss._ratio(*data)), "lo": lo, "hi": hi})  # fmt: skip
    return pd.DataFrame(out)
