"""The results files' declared kinds (``core.readers.Kind``: columns, types, ranges) that commands check
them against: ``SPEEDUP`` and ``SPEEDUP_ROWS`` (the report's speedup.csv; what export's recommend=true reads
of it), ``VECTOR`` (acceptance_vector.csv, ``study.tools.calibrate``), ``SUMMARY`` (a collected summary.csv as
export reads it; ``SUMMARY_DIVERGENCE``: as margins does), ``SPEED_COLUMNS`` (speed.csv; ``SPEED_STEPS_COLUMNS``: speed_steps.csv.gz), ``SERVED_COLUMNS``
and ``SERVED_KEY`` (served.csv, ``study.serving.import_metrics``), ``ATTENTION_COLUMNS`` (attention.csv),
``RUN_TIMES`` (run_times.csv, ``study.tools.ceiling``), ``LOSSLESS_CHECK`` and ``LOSSLESS_CONTROL`` (lossless_check.csv
and lossless_control.csv, ``study.tools.lossless``), ``SUMMARY_CELLS`` (a summary.csv's cells, as the report and
collect check them) and ``STEP_COUNTS`` (what collect checks of each job's steps), and the fixes a refusal names (``COLLECT_FIX``, ``SPEED_FIX``, ...).  costs.csv's
are ``results.costtable``'s; each file's checked read is ``results.files``' (``read_speed``, ...).  Imports
``core.readers``.
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
SUMMARY_DIVERGENCE = Kind(  # what study.tools.margins reads of a collected summary.csv
    "a collected summary.csv",
    {
        **{c: Col("str") for c in ("config_hash", "pair", "verify", "tree", "dataset", "dtype")},
        "pair_id": Col("str", empty=True, optional=True),
        "temperature": Col("float", lo=0),
        "max_new_tokens": Col("int", lo=1),
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
SUMMARY_CELLS = {  # THE cells of a summary.csv: what the report (``files.check_summary``) and collect (each job's
    # row it merges, and --out's) check of it: counts, rates in range, a budget in every row
    "budget": Col("int", lo=0),
    **{c: _COUNT for c in ("n_steps", "new_tokens", "n_prompts", "max_new_tokens", "batch_size", "seed")},
    "temperature": Col("float", lo=0, empty=True),
    "acceptance_rate": Col("float", lo=0, hi=1, empty=True),
    **{c: Col("float", lo=0, empty=True) for c in ("acceptance_length", "tokens_per_step")},
}
STEP_COUNTS = {c: _COUNT for c in ("step", "emitted", "accepted", "tree_size", "tree_depth")}  # of each job's steps
SPEED_STEPS_COLUMNS = ("run_id", "candidate", "step")  # what +speed_merge reads of speed_steps.csv.gz

# served.csv: a server's measurements (python -m specbench.import_metrics), one row per key
SERVED_COLUMNS = [
    "engine", "config_hash", "pair", "dataset", "tree", "budget", "n_requests", "n_steps", "acceptance_rate",
    "acceptance_length", "tokens_per_step", "tokens_per_step_per_request", "marginal_acceptance", "source",
]  # fmt: skip
SERVED_KEY = ["engine", "pair", "dataset", "tree", "budget"]
SERVED_FIX = "give --out a served.csv that python -m specbench.import_metrics wrote (or a new file)"

# attention.csv: the tree-attention benchmark's timings (python -m specbench.attention_bench), a row per point
# and implementation on one machine (its key is the benchmark's: attention.bench.KEY)
ATTENTION_COLUMNS = ("median_s",)  # what a merge or a redraw reads beside the key
ATTENTION_FIX = "give the attention.csv a run wrote (git checkout results/attention.csv), or rerun with merge=false"

# run_times.csv: each run_all.sh step's wall time beside its compute ceiling (python -m specbench.study.tools.ceiling)
RUN_TIMES_COLUMNS = ["run", "step", "seconds", "forwards", "tokens", "ceiling_s", "ratio", "forward_s", "in_forwards"]
RUN_TIMES_COLUMNS += ["busiest", "tokens_per_forward", "unrated", "machine", "machine_id", "chain"]
RUN_TIMES_TEXT = ("run", "step", "busiest", "unrated", "machine", "machine_id", "chain")
RUN_TIMES = Kind(  # --out as ceiling writes it, read as strictly as collect reads its --out: a column added since
    # a row was written is blank in it (kept so), a column this version does not write is refused
    "results/run_times.csv (study.tools.ceiling)",
    {
        c: Col("str", empty=c not in ("run", "step"), optional=c not in ("run", "step"))
        if c in RUN_TIMES_TEXT
        else Col("float", lo=0, empty=c != "seconds", optional=c != "seconds")
        for c in RUN_TIMES_COLUMNS
    },
    "repair it (git checkout results/run_times.csv) or point --out at another file (its other runs are kept from it)",
    key=("run", "step"),
    closed=True,
)

# lossless_check.csv and lossless_control.csv: the χ² checks of the lossless rules through the real drafter and
# their lossy controls (python -m specbench.study.tools.lossless), a row per (configuration, prefix, rule)
LOSSLESS_COLUMNS = ["pair", "pair_id", "draft", "target", "dataset", "prefix_id", "prefix_tokens", "verify"]
LOSSLESS_COLUMNS += ["child_rule", "sibling_order", "tree", "budget", "temperature", "top_p", "dtype", "seed"]
LOSSLESS_COLUMNS += ["n_draws", "n_bins", "chi2", "chi2_p", "tv", "tv_null", "p_max", "tv_target", "alpha", "power"]
LOSSLESS_COLUMNS += ["target_forwards", "wall_s"]
LOSSLESS_CONTROL_COLUMNS = LOSSLESS_COLUMNS + ["exact_tv", "rejected"]
# a check's identity: the columns that name what ran, not what it measured (a run at another N adds its rows)
LOSSLESS_KEY = [
    c for c in LOSSLESS_COLUMNS[: LOSSLESS_COLUMNS.index("n_bins")] if c not in ("pair", "draft", "target", "dtype")
]
LOSSLESS_NUMBERS = ("prefix_tokens", "budget", "temperature", "top_p", "seed", "n_draws")  # a CSV reads 1.0 back as 1
LOSSLESS_FIX = (
    "regenerate it with `python -m specbench.study.tools.lossless` (or git checkout it), or give another --out"
)
_LOSSLESS_TEXT = ("pair", "pair_id", "draft", "target", "dataset", "prefix_id", "verify", "child_rule", "sibling_order")
_LOSSLESS_INTS = ("prefix_tokens", "budget", "seed", "n_draws")
_LOSSLESS_LATER = ("pair_id", "chi2_p", "tv_null", "power")  # columns an older file may lack (results.optional)


def _lossless_col(c: str) -> Col:
    if c in (*_LOSSLESS_TEXT, "tree", "dtype", "rejected"):
        return Col("str", empty=c == "sibling_order", optional=c in _LOSSLESS_LATER)
    if c in _LOSSLESS_INTS:
        return Col("int", lo=0)
    if c in ("temperature", "top_p"):
        return Col("float", lo=0)
    return Col("float", empty=True, optional=c in _LOSSLESS_LATER)  # what it measured: blank where not measured


LOSSLESS_CHECK = Kind(  # as the tool writes it: a column it does not write is refused (its merge would drop it)
    "a lossless_check.csv",
    {c: _lossless_col(c) for c in LOSSLESS_COLUMNS},
    LOSSLESS_FIX,
    key=tuple(LOSSLESS_KEY),
    closed=True,
)
LOSSLESS_CONTROL = Kind(
    "a lossless_control.csv",
    {c: _lossless_col(c) for c in LOSSLESS_CONTROL_COLUMNS},
    LOSSLESS_FIX,
    key=tuple(LOSSLESS_KEY),
    closed=True,
)
