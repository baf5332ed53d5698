"""results/costs.csv: THE table definition every reader and writer of it uses.

Each row is one (role, pair, dtype, device, KV length, n_tokens) point measured on one machine
(``study.tools.costs``; llama.cpp's points name their ``engine``).  Here, once: its columns and their
types (``COLUMNS``, checked by ``core.readers``: ``COSTS`` a costs.csv merged into, ``CURVES`` what a
model's cost curve needs, ``COSTS_MERGE`` another machine's costs.csv), the columns read as text
(``TEXT``), its keys (``CURVE``: one machine's curve of a pair, dtype and device; ``ROW``: one point of
it; the widths compared as numbers, ``WIDTHS``), and how a row without a device is read: on the CPU
(``DEVICE``; costs.csv before the column timed the CPU alone), by ``devices`` and ``read``; ``read_checked``
is ``read`` after ``core.readers``' checks against one of the kinds (what every command reads it with).

Imports pandas, ``core.readers`` and ``results.files`` (``lenient``: ``read_checked``'s lenient mode).
"""

from __future__ import annotations

import os
from dataclasses import replace

import pandas as pd

from ..core import readers
from ..core.readers import Col, Kind
from .files import lenient

FIX = "give a costs.csv that python -m specbench.study.tools.costs wrote"
DEVICE = "cpu"  # the device of a row that names none
TEXT = ("role", "pair", "dtype", "device", "model", "samples", "machine", "machine_id", "host")  # never numbers (a
# model id, space-separated samples, a hex digest that may be all digits)
WIDTHS = ("kv_len", "n_tokens")  # the key's numbers: a CSV reads 128.0 back as 128
CURVE = ["pair", "dtype", "device", "machine_id"]  # one machine's curve of a pair (machine last)
ROW = ["pair", "dtype", "device", "role", "kv_len", "n_tokens", "machine_id"]  # one point of it

_SECONDS = Col("float", lo=0, above=True)
_SPREAD = Col("float", lo=0, empty=True, optional=True)
COLUMNS = {
    "role": Col("str"),
    "pair": Col("str"),
    "dtype": Col("str"),
    "device": Col("str", optional=True),
    "model": Col("str", empty=True, optional=True),
    "kv_len": Col("int", lo=0, optional=True),
    "n_tokens": Col("int", lo=1),
    "seconds": _SECONDS,
    "repeats": Col("int", lo=1, empty=True, optional=True),
    **{f"seconds_{s}": _SPREAD for s in ("min", "max", "q25", "q75")},
    "samples": Col("floats", lo=0, empty=True, optional=True),
    "machine": Col("str", empty=True, optional=True),  # the machine that measured the row (speed.csv's)
    "machine_id": Col("str", empty=True, optional=True),
    "host": Col("str", empty=True, optional=True),  # machine.host(): this boot of the host (newer rows)
}
COSTS = Kind("a costs.csv", COLUMNS, FIX)
CURVES = Kind(  # what study.tools.ceiling reads of a costs.csv: each model's curve
    "a costs.csv",
    {
        **{c: Col("str", optional=True) for c in ("role", "pair")},
        **{c: Col("str") for c in ("device", "dtype")},
        "kv_len": Col("int", lo=0),
    }
    | {c: col for c, col in COLUMNS.items() if c not in ("role", "pair", "device", "dtype", "kv_len")},
    FIX,
)
COSTS_MERGE = Kind(
    "a costs.csv",
    {**COLUMNS, "device": Col("str"), "samples": Col("floats", lo=0, empty=True)},
    "give a costs.csv that python -m specbench.study.tools.costs wrote on the other machine",
    min_rows=1,
)


def devices(costs: pd.DataFrame) -> pd.Series:
    """Each row's device: ``DEVICE`` where the row (or the table) names none."""
    if "device" not in costs.columns:
        return pd.Series(DEVICE, index=costs.index, dtype=object)
    return costs.device.fillna(DEVICE)


def read(path: str | os.PathLike) -> pd.DataFrame:
    """The costs.csv at ``path`` as every reader gets it: ``TEXT`` as text, a missing device ``DEVICE``."""
    costs = pd.read_csv(path, dtype=dict.fromkeys(TEXT, str))
    return costs.assign(device=devices(costs))


@lenient
def read_checked(path: str | os.PathLike, kind: Kind = COSTS, key: str = "", fix: str | None = None) -> pd.DataFrame:
    """``read`` after the checks of ``kind`` (``core.readers``: a ``TableError`` in one line naming ``key``, the
    file and ``fix``, the kind's own where none is given); ``strict=False``: the plan's lenient read
    (``study.tools.llamaplan``: it takes the columns it finds, else falls back), the file parsed alone as the specbench CSV
    (``files.read_csv``), unchecked."""
    return readers.read(path, kind if fix is None else replace(kind, fix=fix), key, reader=read)
