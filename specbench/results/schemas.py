"""The results files' declared kinds (``core.readers.Kind``: columns, types, ranges) that commands check
them against: ``SPEEDUP`` and ``SPEEDUP_ROWS`` (the report's speedup.csv; what export's recommend=true reads
of it), ``VECTOR`` (acceptance_vector.csv, ``study.tools.calibrate``), ``SUMMARY`` (a collected summary.csv as
export reads it), ``SPEED_COLUMNS`` (speed.csv), ``SUMMARY_COUNTS`` and ``STEP_COUNTS`` (what collect checks
of each row it merges), and the fixes a refusal names (``COLLECT_FIX``, ``SPEED_FIX``).  costs.csv's are
``results.costtable``'s.  Imports ``core.readers``.
"""

from __future__ import annotations

from ..core.readers import Col, Kind

SPEEDUP = Kind(
    "the report's speedup.csv",
    {
        **{c: Col("str") for c in ("pair", "dataset", "engine", "verify", "tree")},
        "temperature": Col("float", lo=0),
        "budget": Col("int", lo=0),
        "max_new_tokens": Col("int", lo=1),
        "projected": Col("float", lo=0, empty=True),
        **{c: Col("float", lo=0, empty=True, optional=True) for c in ("projected_lo", "projected_hi")},
        "tokens_per_step": Col("float", lo=0, empty=True, optional=True),
    },
    "regenerate it with python -m specbench.report",
)
VECTOR = Kind(
    "an acceptance_vector.csv",
    {
        **{c: Col("str") for c in ("pair", "dataset", "verify")},
        "pair_id": Col("str", empty=True, optional=True),
        "temperature": Col("float", lo=0),
        "rank": Col("int", lo=0),
        "p_accept": Col("float", lo=0, hi=1),
        "n": Col("int", lo=0),
    },
    "regenerate it with python -m specbench.study.tools.calibrate",
)
SPEEDUP_ROWS = Kind(  # what export's recommend=true reads of it: the rows a recommendation names
    "the report's speedup.csv",
    {
        **SPEEDUP.columns,
        "config_hash": Col("str"),
        "batch_size": Col("int", lo=1),
        "n_prompts": Col("int", lo=0),
    },
    SPEEDUP.fix,
)
COLLECT_FIX = "collect it again (python -m specbench.collect) or git checkout the committed results/"
SUMMARY = Kind(  # a collected summary.csv, as export and margins read its rows
    "a collected summary.csv",
    {
        **{c: Col("str") for c in ("config_hash", "pair", "dataset", "tree", "verify")},
        "tree_params": Col("str", empty=True),
        "budget": Col("int", lo=0),
        "temperature": Col("float", lo=0),
    },
    COLLECT_FIX,
)
SPEED_FIX = "rerun python -m specbench.study.tools.speed (or git checkout results/speed.csv)"
SPEED_COLUMNS = (
    "run_id",
    "machine_id",
    "pair",
    "dataset",
    "batch_size",
    "candidate",
    "config_hash",
    "wall_s",
    "tokens",
)
_COUNT = Col("int", lo=0, empty=True)
SUMMARY_COUNTS = {  # what collect checks of each summary row it merges (and keeps): counts, rates in range
    **{c: _COUNT for c in ("budget", "n_steps", "new_tokens", "n_prompts", "max_new_tokens", "batch_size", "seed")},
    "temperature": Col("float", lo=0, empty=True),
    "acceptance_rate": Col("float", lo=0, hi=1, empty=True),
    **{c: Col("float", lo=0, empty=True) for c in ("acceptance_length", "tokens_per_step")},
}
STEP_COUNTS = {c: _COUNT for c in ("step", "emitted", "accepted", "tree_size", "tree_depth")}  # of each job's steps
