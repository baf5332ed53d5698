"""Atomic file writes: the one helper every writer of results uses.

``atomic_write(path, write)`` calls ``write(tmp)`` on a temporary file beside
``path`` and renames it over ``path``, so a reader (or a SIGKILL) never leaves
half a file behind.  The file gets the mode an ordinary ``open(path, "w")``
would give it (0666 minus the process umask), not mkstemp's private 0600.
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Callable, Iterable


def umask() -> int:
    """The process umask (read without changing it where /proc allows)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    old = os.umask(0o022)          # portable fallback: set and restore
    os.umask(old)
    return old


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """Call write(tmp_path), then rename over path: readers never see half a file."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=os.path.basename(path))
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
    atomic_write(path, write)


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    """One JSON object per line, every line ending in a newline."""
    write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
