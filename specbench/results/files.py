"""The results files' readers and writers: the specbench CSV (summary, steps, calibration and the
collected tables; identifier columns kept as text, gzip where the name ends in .gz) and the outputs
file (a job's outputs.jsonl, results/outputs.jsonl.gz), each read by one function here.

Writers return a function of the temp file, for ``core.atomic``'s journalled writes (one file:
``write_csv``; several as one unit: ``core.atomic.atomic_write_many``).  Imports pandas and core
(``atomic``, ``jsonl``, ``readers``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence

import pandas as pd

from ..core.atomic import atomic_write, gzip_bytes, gzipped, open_text
from ..core.jsonl import json_objects
from ..core.readers import COLLECT_FIX
from .columns import TEXT_COLUMNS

# the collected results/ folder keeps its two large tables gzipped (`csv_writer`, `open_text`)
STEPS_FILE = "steps.csv.gz"
OUTPUTS_FILE = "outputs.jsonl.gz"


def read_csv(path: str) -> pd.DataFrame:
    """A specbench CSV (summary, steps, calibration) with identifier columns kept as text."""
    return pd.read_csv(path, dtype=TEXT_COLUMNS, keep_default_na=False, na_values=[""])


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
