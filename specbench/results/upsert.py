"""THE upsert of a results table: "replace the rows with this key in a CSV", under the folder's lock,
journalled (``core.atomic``).  Every tool that keeps a table's other rows (costs, ceiling, lossless,
recheck, calibrate, import_metrics, the attention benchmark, scripts/bench_batch.py,
scripts/bench_bf16_replay.py) merges through ``replace_rows`` and writes through ``upsert``.

``key_text`` is how a key is compared: each cell as text, a missing column or cell empty, and the
``numbers`` columns as floats (a CSV reads 1.0 back as 1).  ``upsert(path, merge)`` reads the table
(``read``; None where there is none) under the lock of its folder, writes ``merge(old)`` (``writer``),
with the ``also`` files in the same journalled unit, and returns what it wrote.  A reader that refuses
a garbled destination (a ``core.readers.TableError``, one line) refuses before anything is written.
Imports pandas, ``core.atomic`` and ``results.files``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from ..core.atomic import atomic_write_many, lock
from .files import csv_writer, read_csv

Merge = Callable[[pd.DataFrame | None], pd.DataFrame]


def key_text(df: pd.DataFrame, key: Sequence[str], numbers: Sequence[str] = ()) -> pd.Series:
    """Each row's ``key`` as a tuple of text: a missing column or an empty cell is "", a ``numbers``
    column the number it holds (1.0 and 1 are "1"; its text where it is not a number)."""

    def cell(c: str, v) -> str:
        if v is None or v is pd.NA or (isinstance(v, float) and v != v):
            return ""
        if c in numbers:
            try:
                x = float(v)
            except (TypeError, ValueError):
                return str(v)
            return str(int(x)) if x.is_integer() else repr(x)
        return str(v)

    cols = [df[c] if c in df.columns else pd.Series("", index=df.index) for c in key]
    return pd.Series(
        [tuple(cell(c, v) for c, v in zip(key, row)) for row in zip(*cols)] if cols else [()] * len(df),
        index=df.index,
        dtype=object,
    )


def replace_rows(
    old: pd.DataFrame | None,
    new: pd.DataFrame,
    key: Sequence[str],
    numbers: Sequence[str] = (),
    new_first: bool = False,
) -> pd.DataFrame:
    """``old``'s rows whose ``key`` ``new`` does not hold, and ``new`` (after them; before them with
    ``new_first``); ``new`` alone where none of them is kept."""
    if old is None:
        return new
    kept = old[~key_text(old, key, numbers).isin(set(key_text(new, key, numbers)))]
    if not len(kept):
        return new
    return pd.concat([new, kept] if new_first else [kept, new], ignore_index=True)


def read_text(path: str) -> pd.DataFrame:
    """A CSV with every cell as its text (an empty cell ""), for a table compared and rewritten as text."""
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:  # an empty file: no rows
        return pd.DataFrame()


def upsert(
    path: str | os.PathLike,
    merge: Merge,
    read: Callable[[str], pd.DataFrame | None] = read_csv,
    writer: Callable[[pd.DataFrame], Callable[[str], object]] = csv_writer,
    also: dict | None = None,
) -> pd.DataFrame:
    """Under the lock of ``path``'s folder: the table at ``path`` read (``read``; None where there is
    no file), ``merge(old)`` written by ``writer`` together with the ``also`` files ({path: write(tmp)},
    one journalled unit); returns the table written."""
    return upsert_all({os.fspath(path): (merge, read)}, writer, also)[os.fspath(path)]


def upsert_all(
    tables: Mapping[str, tuple[Merge, Callable[[str], pd.DataFrame | None]]],
    writer: Callable[[pd.DataFrame], Callable[[str], object]] = csv_writer,
    also: dict | None = None,
) -> dict[str, pd.DataFrame]:
    """``upsert`` of several tables ({path: (merge, read)}) as one unit, under every folder's lock."""
    folders = {os.path.dirname(os.path.abspath(p)) for p in [*tables, *(also or {})]}
    with lock(*folders):
        out = {p: merge(read(p) if os.path.exists(p) else None) for p, (merge, read) in tables.items()}
        atomic_write_many({**{p: writer(t) for p, t in out.items()}, **(also or {})})
    return out
