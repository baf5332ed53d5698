"""Atomic file writes: the one helper every writer of results uses.

``atomic_write(path, write)`` calls ``write(tmp)`` on a temporary file beside
``path`` and renames it over ``path``, so a reader (or a SIGKILL) never leaves
half a file behind.  The file gets the mode an ordinary ``open(path, "w")``
would give it (0666 minus the process umask), not mkstemp's private 0600.
``atomic_write_many({path: write})`` writes every temp file before renaming
any, so one command's outputs are replaced together or (a full disk) not at all.
Failures are OSErrors naming the real path.  ``atomic_folder(path)`` does the same for a
folder built in place of ``path`` (mode 0777 minus the umask, as ``mkdir`` gives).  Every atomic write in
specbench goes through these.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO


def umask() -> int:
    """The process umask (read without changing it where /proc allows)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    old = os.umask(0o022)  # portable fallback: set and restore
    os.umask(old)
    return old


WRITE_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT}


def os_line(e: OSError, where: str = "", key: str = "out_root") -> str:
    """'<path>: <reason>' for an OSError, with the fix where the disk refused a write
    (``key``: the option that points at the folder)."""
    fix = f"; free space or point {key} at a writable folder" if e.errno in WRITE_ERRNOS else ""
    return f"{e.filename or where or 'a file'}: {e.strerror or e}{fix}"


def named(e: OSError, path: str) -> OSError:
    """The same error naming ``path`` (not a temp file beside it, nor nothing)."""
    return OSError(e.errno, e.strerror or str(e), path)


def write_temp(path: str | os.PathLike, write: Callable[[str], None]) -> str:
    """``write(tmp)`` into a temp file beside ``path``; returns it.  On any failure the temp
    file is removed and an OSError names ``path``."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=os.path.basename(path))
        os.close(fd)
        write(tmp)
        os.chmod(tmp, 0o666 & ~umask())
        return tmp
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(e, OSError):
            raise named(e, path) from e
        raise


def atomic_write(path: str | os.PathLike, write: Callable[[str], object]) -> None:
    """Call write(tmp_path), then rename over path: readers never see half a file."""
    atomic_write_many({path: write})


def atomic_write_many(writers: dict) -> None:
    """{path: write(tmp)}: every temp file is written first; only if all succeed are they
    renamed over their paths, so a full disk replaces none of them."""
    done: dict[str, str] = {}
    try:
        for path, write in writers.items():
            done[os.fspath(path)] = write_temp(path, write)
    except BaseException:
        for tmp in done.values():
            os.remove(tmp)
        raise
    for path, tmp in done.items():
        try:
            os.replace(tmp, path)
        except OSError as e:
            for t in done.values():
                if os.path.exists(t):
                    os.remove(t)
            raise named(e, path) from e


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp folder beside ``path``; on success it replaces ``path`` whole, on
    failure it is removed: readers never see a half-built folder."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{out.name}.", dir=out.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~umask())
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write(path, lambda tmp: write_file(tmp, text))


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    """One JSON object per line, every line ending in a newline."""
    write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def replace_together(
    folder: str | os.PathLike, fill: Callable[[str], object], path: str | os.PathLike, text: str
) -> None:
    """Replace ``folder`` (built by ``fill(tmp_folder)``) and the text file ``path`` together:
    both are written beside their targets first, then swapped in; on any failure neither
    changes (the old folder is put back), no temp file or folder is left, and an OSError
    names the real path."""
    folder, path = os.path.abspath(folder), os.path.abspath(path)
    parent = os.path.dirname(folder)
    made: list[str] = []  # temp folders to remove whatever happens
    tmp, old, swapped = None, None, False
    try:
        os.makedirs(parent, exist_ok=True)
        made.append(tempfile.mkdtemp(prefix=".tmp-new-", dir=parent))
        tmp = write_temp(path, lambda t: write_file(t, text))
        fill(made[0])
        os.chmod(made[0], 0o777 & ~umask())
        if os.path.isdir(folder):
            old = tempfile.mkdtemp(prefix=".tmp-old-", dir=parent)
            made.append(old)
            os.rename(folder, os.path.join(old, "folder"))
        os.rename(made[0], folder)
        swapped = True
        os.replace(tmp, path)
    except BaseException as e:
        if swapped:  # the new folder is in place: take it out again
            shutil.rmtree(folder, ignore_errors=True)
        if old and not os.path.isdir(folder):
            os.rename(os.path.join(old, "folder"), folder)
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and ".tmp-" in str(e.filename or ".tmp-"):
            raise named(e, folder) from e  # the folder, not a temp file in or beside it
        raise
    finally:
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


def write_file(path: str, text: str) -> None:
    """``text`` into ``path`` (UTF-8, "\n" line ends)."""
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


def gzipped(path: str | os.PathLike) -> bool:
    """A results file whose name ends in .gz holds gzip text (results/steps.csv.gz: the step
    records compress about 50x, and a git diff of them stays small)."""
    return os.fspath(path).endswith(".gz")


def gzip_bytes(text: str) -> bytes:
    """``text`` gzipped with no file name and mtime 0 in the header: the same text, the same bytes."""
    return gzip.compress(text.encode("utf-8"), mtime=0)


def open_text(path: str | os.PathLike) -> IO[str]:
    """``path`` opened for reading as utf-8 text (newlines untranslated), through gzip if `gzipped`."""
    if gzipped(path):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _last_byte(path: str | os.PathLike) -> bytes:
    """The file's last byte (of its decompressed text where `gzipped`); b"" when empty.  A gzip
    stream cut short raises EOFError."""
    if not gzipped(path):
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() == 0:
                return b""
            fh.seek(-1, os.SEEK_END)
            return fh.read(1)
    last = b""
    with gzip.open(path, "rb") as gz:
        for block in iter(lambda: gz.read(1 << 22), b""):
            last = block[-1:]
    return last


def incomplete(path: str | os.PathLike) -> str | None:
    """Why a text file written by specbench is not whole ("is empty", "is truncated ..."),
    or None: every writer ends a file with a newline, so a missing one means a cut file."""
    try:
        last = _last_byte(path)
    except (EOFError, gzip.BadGzipFile) as e:
        return f"is truncated or corrupt ({e})"
    if not last:
        return "is empty"
    return None if last == b"\n" else "is truncated (its last line is incomplete)"
