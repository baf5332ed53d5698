"""THE reader of a machine record (machine.json: ``python -m specbench.inputs.machine --out``, and the cached
record ``dtype=auto`` keeps): ``read_machine``.  The standard library only (``study.tools.budget`` reads it at
the shell's start-up, without pandas).
"""

from __future__ import annotations

import json


class RecordError(ValueError):
    """A machine record refused: ``kind`` names what was wrong (OSError, JSONDecodeError, KeyError, ...)."""

    def __init__(self, path: str, kind: str):
        super().__init__(f"{path}: not a machine record ({kind})")
        self.kind = kind


def _names_machine(rec: dict) -> object:
    return str(rec["machine"]) + str(rec["machine_id"])


def read_machine(path: str, check=_names_machine) -> dict:
    """THE reader of a machine record (machine.json, ``python -m specbench.inputs.machine --out``; the cached
    record ``dtype=auto`` keeps): its JSON object, ``check(rec)`` passed (default: it names its machine and
    machine_id; a check raises KeyError, TypeError, ...) or a ``RecordError`` naming what was wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            rec = json.load(f)
        check(rec)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise RecordError(path, type(e).__name__) from None
    return rec
