"""The results files' readers and writers: the specbench CSV (summary, steps, calibration and the
collected tables; identifier columns kept as text, gzip where the name ends in .gz) and the outputs
file (a job's outputs.jsonl, results/outputs.jsonl.gz), each read by one function here; the collected
folder's checks (``check_summary``, ``check_steps``), which the report and collect's ``--out`` share; and
the checked read of each other results file a command reads (its kind is ``results.schemas``'): speed.csv and
speed_steps.csv.gz (``read_speed``, ``read_speed_steps``), speedup.csv (``read_speedup``), lossless_check.csv
and lossless_control.csv (``read_lossless``), served.csv
(``read_served``), attention.csv (``read_attention``), run_times.csv (``read_run_times``), an
acceptance_vector.csv (``read_vector``, ``vector_rows``) and, a configuration's rows, summary.csv and
steps.csv.gz (``read_summary``, ``read_steps``).  ``strict=False`` is each one's lenient mode (``lenient``, the
one place it is decided), for the plans, ``study.tools.recheck``'s sample and ``study.tools.stale``: the file
parsed alone (``read_csv``), no schema check; the caller takes the columns it finds (a plan falls back where
they are missing).

Writers return a function of the temp file, for ``core.atomic``'s journalled writes (one file:
``write_csv``; several as one unit: ``core.atomic.atomic_write_many``).  Imports pandas and core
(``atomic``, ``jsonl``, ``readers``).
"""

from __future__ import annotations

import csv
import functools
import json
import os
from collections.abc import Callable, Iterator, Sequence

import pandas as pd

from ..core import readers
from ..core.atomic import atomic_write, gzip_bytes, gzipped, open_text
from ..core.jsonl import json_objects
from ..core.readers import Kind, TableError, check_cells
from .columns import TEXT_COLUMNS
from .schemas import (
    ATTENTION_COLUMNS,
    ATTENTION_FIX,
    COLLECT_FIX,
    LOSSLESS_CHECK,
    RUN_TIMES,
    SERVED_COLUMNS,
    SERVED_FIX,
    SPEED_COLUMNS,
    SPEED_FIX,
    SPEED_STEPS_COLUMNS,
    SPEEDUP,
    SUMMARY,
    SUMMARY_CELLS,
    VECTOR,
)

# the collected results/ folder keeps its two large tables gzipped (`csv_writer`, `open_text`)
STEPS_FILE = "steps.csv.gz"
OUTPUTS_FILE = "outputs.jsonl.gz"


def read_csv(path: str) -> pd.DataFrame:
    """A specbench CSV (summary, steps, calibration) with identifier columns kept as text."""
    return pd.read_csv(path, dtype=TEXT_COLUMNS, keep_default_na=False, na_values=[""])


def lenient(read: Callable[..., pd.DataFrame]) -> Callable[..., pd.DataFrame]:
    """``read`` with its lenient mode, ``strict=False``: the file parsed alone (``read_csv``), no schema check
    (the plans, ``study.tools.recheck``'s sample, ``study.tools.stale``: the caller takes the columns it finds)."""

    @functools.wraps(read)
    def either(path, *args, strict: bool = True, **kwargs) -> pd.DataFrame:
        return read(path, *args, **kwargs) if strict else read_csv(os.fspath(path))

    return either


# --------------------------------------------------------------------------
# the other results files' checked reads: every command reads each of them here, parsed as the report parses
# it (``read_csv``), or a ``core.readers.TableError``: one line naming ``key`` (the option), the file and the fix
# --------------------------------------------------------------------------
@lenient
def read_summary(path: str, key: str = "results_dir", kind: Kind = SUMMARY) -> pd.DataFrame:
    """A collected summary.csv checked against ``kind`` (``SUMMARY``: export's; ``SUMMARY_DIVERGENCE``: margins')."""
    return readers.read(path, kind, key, read_csv)


@lenient
def read_steps(
    path: str, columns: Sequence[str] = (), key: str = "results_dir", fix: str = COLLECT_FIX
) -> pd.DataFrame:
    """A collected steps.csv.gz with the ``columns`` a command reads (large and gzipped: no row-by-row scan)."""
    return readers.table(path, columns, fix, key, read_csv, scan=False)


def read_vector(path: str, key: str = "") -> pd.DataFrame:
    """An acceptance_vector.csv (``VECTOR``: a rank or p_accept out of range refused)."""
    return readers.read(path, VECTOR, key, read_csv)


def vector_rows(path: str, key: str = "") -> tuple[dict, ...]:
    """An acceptance_vector.csv checked as ``read_vector`` checks it, its rows as text (Sequoia's DP parses
    each number itself)."""
    readers.check(path, VECTOR, key)
    with open(path, newline="", encoding="utf-8") as f:
        return tuple(csv.DictReader(f))


@lenient
def read_speed(path: str, key: str = "results_dir", fix: str = SPEED_FIX) -> pd.DataFrame:
    """results/speed.csv (the interleaved benchmark's runs; ``+speed_merge``'s, timed elsewhere)."""
    return readers.table(path, SPEED_COLUMNS, fix, key, read_csv)


def read_speed_steps(path: str, key: str = "results_dir", fix: str = SPEED_FIX) -> pd.DataFrame:
    """The speed_steps.csv.gz beside a speed.csv (large and gzipped: no row-by-row scan)."""
    return readers.table(path, SPEED_STEPS_COLUMNS, fix, key, read_csv, scan=False)


@lenient
def read_speedup(path: str, key: str = "results_dir", kind: Kind = SPEEDUP) -> pd.DataFrame:
    """The report's speedup.csv checked against ``kind`` (``SPEEDUP``; export's recommend=true: ``SPEEDUP_ROWS``)."""
    return readers.read(path, kind, key, read_csv)


def read_served(path: str, key: str = "--out") -> pd.DataFrame:
    """A served.csv (``study.serving.import_metrics``' rows)."""
    return readers.table(path, SERVED_COLUMNS, SERVED_FIX, key, read_csv)


def read_attention(path: str, point: Sequence[str], key: str = "out_csv") -> pd.DataFrame:
    """An attention.csv with its ``point`` columns (the benchmark's key) and a numeric median_s."""
    df = readers.table(path, [*point, *ATTENTION_COLUMNS], ATTENTION_FIX, key, read_csv)
    if not pd.api.types.is_numeric_dtype(df["median_s"]):
        raise TableError(f"{key}={path}: column median_s holds a value that is not a number; {ATTENTION_FIX}")
    return df


@lenient
def read_run_times(path: str, key: str = "--out") -> pd.DataFrame:
    """A run_times.csv as ``study.tools.ceiling`` writes it (``RUN_TIMES``: every column, no (run, step) twice)."""
    return readers.read(path, RUN_TIMES, key, read_csv)


def read_lossless(path: str, kind: Kind = LOSSLESS_CHECK, key: str = "--out") -> pd.DataFrame:
    """A lossless_check.csv (``LOSSLESS_CHECK``; its controls: ``LOSSLESS_CONTROL``) as
    ``study.tools.lossless`` writes it: every cell typed, no check twice, no column it does not write."""
    return readers.read(path, kind, key, read_csv)


def csv_writer(df: pd.DataFrame):
    """A writer of ``df`` as specbench CSV (`text_writer`: gzip where the target's name ends in .gz)."""
    return lambda tmp: text_writer(df.to_csv(index=False, float_format="%.6g"))(tmp)


def write_csv(df: pd.DataFrame, path: str) -> None:
    atomic_write(path, csv_writer(df))


def text_writer(text: str):
    """A writer of ``text`` as utf-8, gzipped (`core.atomic.gzipped`) where the temp file's name ends
    in .gz, as `core.atomic.write_temp` names it after the target."""

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(gzip_bytes(text) if gzipped(tmp) else text.encode("utf-8"))

    return write


def jsonl_text(rows: Sequence[dict]) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


OUTPUT_LIKE = '{"config_hash": "...", "prompt_id": "...", "token_ids": [1, 2]}'


def output_rows(path: str, fix: str = COLLECT_FIX) -> Iterator[tuple[int, dict]]:
    """(line number, object) of every line of an outputs file (a job's outputs.jsonl, whose rows
    collect keys by config_hash, or results/outputs.jsonl.gz), nothing when it is absent: THE reader
    of this file kind, one parse (``core.jsonl``).  A binary or corrupt file, or a line that is not a
    JSON object: a ValueError naming the file (and line) and ``fix``."""
    if not os.path.isfile(path):
        return
    try:
        with open_text(path) as fh:
            yield from json_objects(fh, path, fix, OUTPUT_LIKE)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte {e.start}: a binary file?); {fix}") from None
    except (EOFError, OSError) as e:  # a gzip stream cut short, or no gzip stream
        raise ValueError(f"{path}: the file is truncated or corrupt ({e}); {fix}") from None


def read_outputs(path: str, fix: str = COLLECT_FIX) -> dict[tuple[str, str], list[int]]:
    """results/outputs.jsonl.gz -> {(config_hash, prompt_id): token_ids}; {} if absent.  A line
    without them: a ValueError naming the file, the line and ``fix`` (else as ``output_rows``)."""
    out = {}
    for lineno, row in output_rows(path, fix):
        try:
            out[(str(row["config_hash"]), str(row["prompt_id"]))] = [int(t) for t in row["token_ids"]]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}:{lineno}: expected {OUTPUT_LIKE}; {fix}") from None
    return out


# --------------------------------------------------------------------------
# the collected folder's validating read: the report reads results/ through these, and collect reads
# its --out through them before it merges into it (a destination read as strictly as a source)
# --------------------------------------------------------------------------
SUMMARY_REQUIRED = (
    "config_hash",
    "pair",
    "tree",
    "budget",
    "verify",
    "dataset",
    "acceptance_rate",
    "acceptance_length",
    "tokens_per_step",
)
SUMMARY_KEYS = SUMMARY_REQUIRED[:6]  # identifier cells that may not be empty


def check_summary(path: str, summary: pd.DataFrame, fix: str, required: Sequence[str] = SUMMARY_REQUIRED) -> None:
    """A collected summary.csv: the ``required`` columns, no empty identifier cell, its numbers finite
    and in range, no configuration twice; a ``TableError`` (one line naming ``path`` and ``fix``)."""
    missing = [c for c in required if c not in summary.columns]
    if missing:
        raise TableError(f"{path} lacks column(s) {', '.join(missing)}; {fix}")
    empty = [c for c in SUMMARY_KEYS if c in required and summary[c].isna().any()]
    if empty:
        raise TableError(f"{path} has rows with an empty {empty[0]}; {fix}")
    check_cells(summary, SUMMARY_CELLS, path, fix)
    dup = summary.config_hash[summary.config_hash.duplicated()]
    if len(dup):
        raise TableError(f"{path} lists configuration {dup.iloc[0]} twice; {fix}")


STEP_REQUIRED = ("config_hash", "prompt_id", "accepted", "emitted")


def check_steps(
    path: str,
    steps: pd.DataFrame,
    summary: pd.DataFrame,
    fix: str,
    strays: bool = False,
    need: Sequence[str] = STEP_REQUIRED,
) -> None:
    """A collected steps table against its summary: the columns ``need``, each configuration's step
    count equal to its ``n_steps`` and (not with ``strays``: collect drops them, saying so) no
    configuration the summary lacks; a ``TableError`` (one line naming ``path`` and ``fix``)."""
    if not set(need) <= set(steps.columns):
        raise TableError(f"{path} lacks column(s) {', '.join(sorted(set(need) - set(steps.columns)))}; {fix}")
    counts = steps.groupby("config_hash").size() if len(steps) else pd.Series(dtype=int)
    extra = sorted(set(counts.index) - set(summary.config_hash))
    if extra and not strays:
        raise TableError(
            f"{path} has steps of configuration {extra[0]}, which summary.csv lacks: the two files "
            f"come from different collects; {fix}"
        )
    if "n_steps" not in summary:
        return
    want = summary.set_index("config_hash").n_steps.dropna().astype(int)
    got = counts.reindex(want.index).fillna(0).astype(int)
    bad = want[(want != got) & (want > 0)]
    if len(bad):
        h = bad.index[0]
        raise TableError(
            f"{path} holds {got[h]} steps of configuration {h}, summary.csv says {bad[h]}: steps.csv "
            f"is truncated or stale; {fix}"
        )
