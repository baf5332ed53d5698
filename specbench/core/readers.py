"""Checked CSV inputs: one declared reader per input file kind, so every command that reads a kind
inherits its checks.

``read(path, kind, key)`` returns the table at ``path`` (``check``: its text cells) or raises a
``TableError``: one line naming the option (``key``), the file, the line or column, and the fix.
Checked, in order: the file exists and is a file; it is UTF-8 text (no NUL byte: a binary file);
its last line is whole (every writer ends a file with a newline, so a missing one is a cut file,
``atomic.incomplete``); every row has the header's number of fields; the declared columns are
there; each cell of a declared column has its type and range (``Col``: numbers finite, integers
whole, bounds); and the table has ``Kind.min_rows`` rows.  ``check_text`` is the first four alone,
for readers that parse a file themselves; ``table`` reads a results table a command uses in part
(declared columns, a large gzipped one without the row scan).

The kinds here: ``STEP_TIMES`` (run_all.sh's step_times.csv), ``FORWARDS`` (``core.forwards``).  The results
files' kinds are the results layer's (``results.costtable``: costs.csv; ``results.schemas``: speedup.csv,
acceptance_vector.csv, summary.csv, speed.csv).

Imports: pandas and ``core.atomic``.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from .atomic import gzipped, incomplete, open_text


class TableError(ValueError):
    """An input file refused: one line naming it and the fix."""


@dataclass(frozen=True)
class Col:
    """A declared column: ``kind`` "str", "int", "float" or "floats" (space-separated numbers);
    numbers lie in [``lo``, ``hi``] (``lo`` excluded with ``above``) and are finite; ``empty``:
    a cell may be empty; ``optional``: the column may be absent."""

    kind: str = "float"
    lo: float | None = None
    hi: float | None = None
    above: bool = False
    empty: bool = False
    optional: bool = False

    def wants(self) -> str:
        what = {"int": "an integer", "float": "a finite number", "floats": "space-separated finite numbers"}
        bounds = [f"> {self.lo:g}" if self.above else f">= {self.lo:g}"] if self.lo is not None else []
        bounds += [f"<= {self.hi:g}"] if self.hi is not None else []
        return what.get(self.kind, "text") + (" " + " and ".join(bounds) if bounds else "")

    def ok(self, cell: str) -> bool:
        if cell == "":
            return self.empty
        if self.kind == "str":
            return True
        values = cell.split() if self.kind == "floats" else [cell]
        return bool(values) and all(self._number_ok(v) for v in values)

    def _number_ok(self, text: str) -> bool:
        try:
            x = float(text)
        except ValueError:
            return False
        if not math.isfinite(x) or (self.kind == "int" and not x.is_integer()):
            return False
        if self.lo is not None and (x <= self.lo if self.above else x < self.lo):
            return False
        return self.hi is None or x <= self.hi


@dataclass(frozen=True)
class Kind:
    """An input file kind: its declared columns, the fix a refusal names, the rows it must hold and
    ``key``: the columns no two rows may share (a row written twice, a file merged into itself);
    ``closed``: a column it does not declare is refused (a command that rewrites the file would drop it)."""

    name: str
    columns: dict[str, Col]
    fix: str
    min_rows: int = 0
    key: tuple[str, ...] = ()
    closed: bool = False


def _where(path: str, key: str) -> str:
    return f"{key}={path}" if key else str(path)


def check_file(path: str | os.PathLike, fix: str, key: str = "", whole: bool = True) -> None:
    """Refuse a missing, binary or non-UTF-8 file, or (``whole``) one cut mid-line: a ``TableError``
    naming ``key``, the file and ``fix``.  For text files that are not CSV (a server's dump)."""
    path = os.fspath(path)
    at = _where(path, key)
    if not os.path.exists(path):
        raise TableError(f"{at}: no such file; {fix}")
    if not os.path.isfile(path):
        raise TableError(f"{at}: not a file; {fix}")
    try:
        why = incomplete(path)
        _text(path)
    except UnicodeDecodeError as e:
        raise TableError(f"{at}: not UTF-8 text (byte {e.start}: a binary file?); {fix}") from None
    except EOFError as e:  # a gzip stream cut short
        raise TableError(f"{at}: the file is truncated or corrupt ({e}); {fix}") from None
    except OSError as e:  # gzip.BadGzipFile among them
        raise TableError(f"{at}: {e.strerror or e}; {fix}") from None
    if why and (whole or why == "is empty"):
        raise TableError(f"{at}: the file {why}; {fix}")


def check_text(path: str | os.PathLike, fix: str, key: str = "") -> None:
    """Refuse a missing, binary, non-UTF-8 or cut file (``check_file``), or one whose rows have the
    wrong number of fields (a ``TableError`` naming ``key``, the file and ``fix``)."""
    path = os.fspath(path)
    at = _where(path, key)
    check_file(path, fix, key)
    with open_text(path) as fh:
        rows = csv.reader(fh)
        try:
            width = len(next(rows, []))
            for row in rows:
                if row and len(row) != width:
                    raise TableError(
                        f"{at}: line {rows.line_num} has {len(row)} fields, the header {width} "
                        f"(a cut or garbled file); {fix}"
                    )
        except csv.Error as e:
            raise TableError(f"{at}: line {rows.line_num}: {e}; {fix}") from None


def _text(path: str) -> None:
    """Raise UnicodeDecodeError where the (decompressed) file is not UTF-8 or holds a NUL byte."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    done = 0
    with gzip.open(path, "rb") if gzipped(path) else open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            if b"\0" in block:
                i = block.index(b"\0")
                raise UnicodeDecodeError("utf-8", block, i, i + 1, "a NUL byte")
            try:
                decoder.decode(block)
            except UnicodeDecodeError as e:
                raise UnicodeDecodeError("utf-8", block, done + e.start, done + e.end, e.reason) from None
            done += len(block)
    decoder.decode(b"", final=True)


def check(path: str | os.PathLike, kind: Kind, key: str = "") -> pd.DataFrame:
    """The table at ``path`` as text cells, checked against ``kind`` (``check_text``, then its
    declared columns, cells and rows); a ``TableError`` (one line) otherwise."""
    path = os.fspath(path)
    at = _where(path, key)
    check_text(path, kind.fix, key)
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError) as e:
        raise TableError(f"{at}: cannot be read as a CSV ({str(e).splitlines()[0]}); {kind.fix}") from None
    missing = [c for c, col in kind.columns.items() if not col.optional and c not in raw.columns]
    if missing:
        raise TableError(f"{at}: not {kind.name}: it lacks the column(s) {', '.join(missing)}; {kind.fix}")
    extra = [str(c) for c in raw.columns if c not in kind.columns] if kind.closed else []
    if extra:
        raise TableError(
            f"{at}: not {kind.name} as this version writes it: column(s) {', '.join(extra)} would be dropped; {kind.fix}"
        )
    check_cells(raw, kind.columns, at, kind.fix)
    if len(raw) < kind.min_rows:
        raise TableError(f"{at}: holds no rows (only its header); {kind.fix}")
    check_key(raw, kind.key, at, kind.fix)
    return raw


def check_key(df: pd.DataFrame, key: Sequence[str], at: str, fix: str) -> None:
    """No two rows of ``df`` share their ``key`` (the columns it holds): a ``TableError`` naming the line."""
    cols = [c for c in key if c in df.columns]
    twice = df.duplicated(cols) if cols else pd.Series(False, index=df.index)
    if twice.any():
        i = int(twice.to_numpy().argmax())
        same = ", ".join(f"{c}={df[c].iloc[i]}" for c in cols)
        raise TableError(f"{at}: line {i + 2} repeats the row of {same} (a row written twice?); {fix}")


def check_cells(df: pd.DataFrame, columns: dict[str, Col], at: str, fix: str) -> None:
    """Each cell of the declared ``columns`` that ``df`` holds (text or parsed; a missing value is
    an empty cell) has its type and range: a ``TableError`` naming ``at``, the line and ``fix``."""
    for name, col in columns.items():
        if name not in df.columns:
            continue
        cells = df[name].astype(object).where(df[name].notna(), "").astype(str)
        bad = [i for i, cell in enumerate(cells) if not col.ok(cell.strip())]
        if bad:
            raise TableError(f"{at}: line {bad[0] + 2}: {name}={cells.iloc[bad[0]]!r} is not {col.wants()}; {fix}")


def read(path: str | os.PathLike, kind: Kind, key: str = "", reader=pd.read_csv) -> pd.DataFrame:
    """``check``, then the table parsed by ``reader`` (a ``TableError``, one line, where it is refused)."""
    check(path, kind, key)
    return reader(path)


def table(
    path: str | os.PathLike, columns: Sequence[str], fix: str, key: str = "", reader=pd.read_csv, scan: bool = True
) -> pd.DataFrame:
    """A results table read by ``reader`` with the ``columns`` a command uses, or a ``TableError``
    (one line naming ``key``, the file and ``fix``): missing, not a file, cut, binary or not UTF-8,
    unparseable, or lacking a column.  ``scan=False`` (a large gzipped table, e.g. steps.csv.gz)
    skips ``check_text``'s row-by-row scan: its last line and the parse are still checked."""
    path = os.fspath(path)
    at = _where(path, key)
    if scan:
        check_text(path, fix, key)
    elif not os.path.isfile(path):
        raise TableError(f"{at}: {'not a file' if os.path.exists(path) else 'no such file'}; {fix}")
    elif why := incomplete(path):
        raise TableError(f"{at}: the file {why}; {fix}")
    try:
        df = reader(path)
    except (ValueError, UnicodeDecodeError, EOFError, OSError, pd.errors.ParserError) as e:  # BadGzipFile: OSError
        raise TableError(
            f"{at}: cannot be read ({(str(e).strip().splitlines() or [type(e).__name__])[0]}); {fix}"
        ) from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise TableError(f"{at}: lacks the column(s) {', '.join(missing)} (a garbled or foreign file); {fix}")
    return df


STEP_TIMES = Kind(
    "run_all.sh's step_times.csv",
    {"run": Col("str"), "step": Col("str"), "seconds": Col("float", lo=0)},
    "give the step_times.csv bash run_all.sh writes (run,step,seconds)",
    min_rows=1,
)
FORWARDS = Kind(
    "a forward-count CSV",
    {"run": Col("str"), "step": Col("str"), "model": Col("str")}
    | {"forwards": Col("int", lo=0), "tokens": Col("int", lo=0)},
    "give the forwards.csv that SPECBENCH_FORWARDS names in bash run_all.sh (run,step,model,forwards,tokens)",
)
