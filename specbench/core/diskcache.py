"""On-disk caches for the replay engine: small JSON records keyed by content.

Two kinds of record are stored (see ``specbench/engine/replay.py``):

* ``continuation``: the target's greedy continuation c of one prompt, keyed by
  the target model, the prompt's token ids, max_new_tokens, dtype, device and
  the EOS ids;
* ``ranks``: the draft rank of every token of c, keyed like c plus the draft
  model and the draft temperature / top-p the ranks were taken under.

A key is a dict of plain values; its SHA-256 (over sorted JSON) names the file
``<root>/<kind>/<hh>/<hash>.json``.  The file repeats the key, and a read
checks it, so a hash collision or a foreign file is a miss, never a wrong hit.
Writes go through ``core.atomic`` (a temp file renamed into place), so a
killed process never leaves half a record and two processes writing the same
record both leave a whole one.

Location: the ``replay_cache`` config key if set, else ``$SPECBENCH_CACHE/replay``,
else ``<out_root>/.cache/replay``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .atomic import atomic_write

VERSION = 1  # bump when the meaning of a record changes


def cache_root(explicit: str | None = None, out_root: str = "outputs") -> Path:
    """Where replay records live (see the module docstring for the order)."""
    if explicit:
        return Path(str(explicit)).expanduser()
    env = os.environ.get("SPECBENCH_CACHE")
    if env:
        return Path(env).expanduser() / "replay"
    return Path(str(out_root)) / ".cache" / "replay"


def ids_digest(ids: Sequence[int]) -> str:
    """A short content hash of a token-id list (prompt ids go into keys this way)."""
    return hashlib.sha256(json.dumps([int(i) for i in ids]).encode()).hexdigest()[:24]


def key_digest(kind: str, key: dict) -> str:
    blob = json.dumps({"kind": kind, "v": VERSION, **key}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class DiskCache:
    """``get(kind, key)`` -> stored value or None; ``put(kind, key, value)``."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path(self, kind: str, key: dict) -> Path:
        h = key_digest(kind, key)
        return self.root / kind / h[:2] / f"{h}.json"

    def get(self, kind: str, key: dict) -> Any | None:
        path = self.path(kind, key)
        try:
            with open(path) as f:
                rec = json.load(f)
        except (OSError, ValueError):
            return None
        want = json.loads(json.dumps({"kind": kind, "v": VERSION, **key}, sort_keys=True, default=str))
        if rec.get("key") != want:
            return None
        return rec.get("value")

    def put(self, kind: str, key: dict, value: Any) -> Path:
        path = self.path(kind, key)
        rec = {"key": {"kind": kind, "v": VERSION, **key}, "value": value}

        def write(tmp: str) -> None:
            with open(tmp, "w") as f:
                json.dump(rec, f, sort_keys=True, default=str)

        atomic_write(path, write)
        return path

    def get_or_compute(self, kind: str, key: dict, compute) -> Any:
        """The cached value, or ``compute()`` stored and returned."""
        value = self.get(kind, key)
        if value is None:
            value = compute()
            self.put(kind, key, value)
        return value

    def get_or_compute_many(self, kind: str, keys: Sequence[dict], compute_missing) -> list:
        """The cached values of ``keys``; the missing ones computed together by
        ``compute_missing(indices) -> values`` (e.g. in batches), stored and returned."""
        values = [self.get(kind, key) for key in keys]
        miss = [i for i, v in enumerate(values) if v is None]
        for i, value in zip(miss, compute_missing(miss) if miss else []):
            self.put(kind, keys[i], value)
            values[i] = value
        return values
