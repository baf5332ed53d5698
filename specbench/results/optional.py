"""The optional columns of each results file, and what a file without one reads as: decided once, where
the file is read (``filled``), so no reader of the table asks whether a column exists.

A column is optional where files written before it was recorded lack it (``OPTIONAL``: file name ->
{column: the value every row of such a file gets}).  The value is NaN ("not recorded"), or the documented
default of rows from before the column: a speed.csv row's engine is specbench's own loop and its weights
pretrained (``results.speedstats``); an attention.csv row without ``level`` is a kernel timing, and
attention_threads1.csv ran one thread (attention.csv's threads unrecorded: 0).  A column a file has is
never touched, its empty cells included.  Imports pandas.
"""

from __future__ import annotations

import os

import pandas as pd

NAN = float("nan")
TEXT = None  # a text column not recorded: empty cells (NaN in an object column, as a text column reads)
_ATTENTION: dict[str, object] = {
    "level": "kernel",
    "note": "",
    **dict.fromkeys(
        ("roofline_frac", "bw_frac", "iqr_s", "repeats", "bytes_moved", "bandwidth_gbs", "peak_gflops"), NAN
    ),
    **dict.fromkeys(("nodes", "n_branches", "branch_tokens"), NAN),  # the tree's geometry
}
_STEPS: dict[str, object] = {
    "pair_id": TEXT,
    "scored": TEXT,
    **dict.fromkeys(("step", "draft_s", "verify_s", "tree_depth"), NAN),
}
_LOSSLESS: dict[str, object] = {"pair_id": TEXT}  # not power, tv_null: the table shows the columns a file has
OPTIONAL: dict[str, dict[str, object]] = {
    "summary.csv": {
        **dict.fromkeys(("pair_id", "target", "accept_hist", "sibling_order", "verify_params"), TEXT),
        **dict.fromkeys(("n_prompts", "tokens_per_s", "first_token_tv", "expected_accepted"), NAN),
    },
    "steps.csv.gz": _STEPS,
    "speed_steps.csv.gz": _STEPS,
    "acceptance_vector.csv": {**dict.fromkeys(("pair_id", "prompt_ids"), TEXT), "temperature": 0.0},
    "attention.csv": {**_ATTENTION, "threads": 0},
    "attention_threads1.csv": {**_ATTENTION, "threads": 1},
    "costs.csv": {**dict.fromkeys(("machine", "machine_id", "weights"), TEXT), "seconds_q25": NAN, "seconds_q75": NAN},
    "run_times.csv": {"machine": TEXT, "machine_id": TEXT, "chain": NAN},
    "speed.csv": {"engine": "specbench", "weights": "pretrained", "pair_id": TEXT, "same_tokens": TEXT},
    "lossless_check.csv": _LOSSLESS,
    "lossless_control.csv": {**_LOSSLESS, "rejected": TEXT},
    "divergence_margins.csv": {"dtype": TEXT},
}


def filled(df: pd.DataFrame | None, path: str | os.PathLike) -> pd.DataFrame | None:
    """``df`` (the file at ``path``, None where absent) with each optional column it lacks added at its
    default (``OPTIONAL``, by the file's name; acceptance_vector-*.csv as acceptance_vector.csv)."""
    if df is None:
        return None
    name = os.path.basename(path)
    name = "acceptance_vector.csv" if name.startswith("acceptance_vector") else name
    missing = {
        c: pd.Series(NAN, index=df.index, dtype=object) if v is TEXT else v
        for c, v in OPTIONAL.get(name, {}).items()
        if c not in df.columns
    }
    return df.assign(**missing) if missing else df
