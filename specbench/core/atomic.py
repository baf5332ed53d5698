"""Atomic file writes: the one helper every writer of results uses.

``atomic_write(path, write)`` calls ``write(tmp)`` on a temporary file beside
``path`` and renames it over ``path``, so a reader (or a SIGKILL) never leaves
half a file behind.  The file gets the mode an ordinary ``open(path, "w")``
would give it (0666 minus the process umask), not mkstemp's private 0600.
``atomic_write_many({path: write})`` writes every temp file before renaming
any, so one command's outputs are replaced together or (a full disk) not at all.
Several paths (files or folders) are replaced as one unit by ``publish``: its renames are
journalled first, a copy of the journal in each folder it writes into, so a SIGKILL at any instant
is finished by the next ``recover`` of any of them (collect, report and every reader of a job
folder call it; ``lock`` serialises writers of one folder).  A command's staged files are named
``.tmp-<command>-*`` (``command``), and its cleanup removes only its own.
Failures are OSErrors naming the real path.  ``atomic_folder(path)`` does the same for a
folder built in place of ``path`` (mode 0777 minus the umask, as ``mkdir`` gives).  Every atomic write in
specbench goes through these.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from .oserrors import os_line  # noqa: F401  (its callers import it from here)


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
        fd, tmp = tempfile.mkstemp(dir=d, prefix=staged(), suffix=os.path.basename(path))
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
    renamed over their paths (``publish``: one unit, a kill is rolled forward), so a full
    disk replaces none of them."""
    done: dict[str, str] = {}
    try:
        for path, write in writers.items():
            done[os.fspath(path)] = write_temp(path, write)
    except BaseException:
        for tmp in done.values():
            os.remove(tmp)
        raise
    if len(done) == 1:  # one rename is atomic by itself
        ((path, tmp),) = done.items()
        try:
            os.replace(tmp, path)
        except OSError as e:
            os.remove(tmp)
            raise named(e, path) from e
        return
    try:
        publish({tmp: path for path, tmp in done.items()})
    except OSError as e:
        raise named(e, e.filename or next(iter(done))) from e


# --------------------------------------------------------------------------
# publishing several files (and folders) as one unit
# --------------------------------------------------------------------------
_COMMAND = ["specbench"]  # the running command's name: its staged files are .tmp-<name>-*


def command(name: str) -> None:
    """Name the running command (``collect``, ``report``, ...): the files it stages are
    ``.tmp-<name>-*`` and its journals ``.publish-<name>.json``, and its cleanup (``recover``)
    removes only those, never what another command staged in a shared folder."""
    _COMMAND[0] = name


def staged(name: str | None = None) -> str:
    """The prefix of the files and folders a command stages: ``.tmp-<command>-``."""
    return f".tmp-{name or _COMMAND[0]}-"


def journal(name: str | None = None) -> str:
    return f".publish-{name or _COMMAND[0]}.json"


def publish(moves: dict[str, str]) -> None:
    """Rename each temp file or folder over its path (``moves``: {temp: path}) as one unit:
    the renames are written down first, in a journal beside what they publish (one copy in each
    folder of a path, written before any rename), so a kill at any instant is finished by the next
    ``recover`` of any of those folders: old or new, never mixed.  A failure before the journals
    are all down leaves every path as it was."""
    moves = {os.path.abspath(t): os.path.abspath(p) for t, p in moves.items()}
    folders = sorted({os.path.dirname(p) for p in moves.values()})
    name, written = journal(), []
    try:
        for f in folders:
            write_text(os.path.join(f, name), json.dumps(_body(f, folders, moves), sort_keys=True) + "\n")
            written.append(os.path.join(f, name))
    except BaseException as e:
        for path in [*written, *moves]:
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.remove(path)
        if isinstance(e, OSError):
            raise named(e, next(iter(moves.values()))) from e  # a path the caller asked for
        raise
    _roll(folders[0], name, _body(folders[0], folders, moves))


def _body(where: str, folders: list[str], moves: dict[str, str]) -> dict:
    """A journal in ``where``: every path relative to it (so any copy finishes the publish)."""
    rel = {os.path.relpath(t, where): os.path.relpath(p, where) for t, p in moves.items()}
    return {"prefix": staged(), "folders": [os.path.relpath(f, where) for f in folders], "moves": rel}


def _old(path: str, prefix: str) -> str:
    return os.path.join(os.path.dirname(path), prefix + "old-" + os.path.basename(path))


def _roll(where: str, name: str, body: dict) -> None:
    """Do (or finish) the journal's renames, then drop its copies and the replaced folders."""
    prefix = body["prefix"]
    targets = []
    for t, p in sorted(body["moves"].items()):
        t, p = os.path.normpath(os.path.join(where, t)), os.path.normpath(os.path.join(where, p))
        targets.append(p)
        if not os.path.lexists(t):
            continue  # renamed already
        if os.path.isdir(t) and os.path.isdir(p):
            shutil.rmtree(_old(p, prefix), ignore_errors=True)
            os.rename(p, _old(p, prefix))
        os.replace(t, p)
    for f in body["folders"]:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(where, f, name))
    for p in targets:
        shutil.rmtree(_old(p, prefix), ignore_errors=True)


def _finish(where: str, name: str, clean: bool) -> None:
    """Finish the publish whose journal ``name`` lies in ``where``: with a copy in each of its
    folders it rolls forward; else it was killed while its journals were written (no rename yet)
    or dropped (every rename done), and with ``clean`` the copies left are removed."""
    with open(os.path.join(where, name), encoding="utf-8") as fh:
        body = json.load(fh)
    if "moves" not in body:  # a journal written before journals went beside what they publish
        body = {"prefix": ".tmp-", "folders": ["."], "moves": body}
    copies = [os.path.join(where, f, name) for f in body["folders"]]
    if all(os.path.isfile(c) for c in copies):
        _roll(where, name, body)
    elif clean:
        for c in copies:
            with contextlib.suppress(FileNotFoundError):
                os.remove(c)


def recover(where: str | os.PathLike, clean: bool = True) -> None:
    """Finish every publish into ``where`` that a kill interrupted (its journals, whichever
    command wrote them); with ``clean`` (the caller holds the folder's ``lock``), also remove
    the files and folders this command (``command``) staged there and a kill left behind;
    another command's staged files stay for that command's next run."""
    where = os.fspath(where)
    if not os.path.isdir(where):
        return
    for e in sorted(os.scandir(where), key=lambda e: e.name):
        if e.name.startswith(".publish") and e.name.endswith(".json") and e.is_file():
            _finish(where, e.name, clean)
    if clean:
        for e in os.scandir(where):
            if e.name.startswith(staged()):
                shutil.rmtree(e.path, ignore_errors=True) if e.is_dir() else os.remove(e.path)


@contextlib.contextmanager
def lock(*wheres: str | os.PathLike) -> Iterator[None]:
    """One writer at a time in each folder (an flock per folder, taken in a fixed order; a second
    writer waits), and what an earlier killed writer left there is recovered first.  The lock is a
    file in the folder it guards (``lock_file``), so every process that writes the folder takes the
    same one: under any ``TMPDIR``, through any spelling of its path (a symlink, a bind mount), and on
    every node of a shared file system whose locking flock reaches (NFS, Lustre, GPFS: docs/cluster.md).
    The lock file is removed on release (a waiter that then holds a removed file takes the lock again),
    and so is a folder made for it and left empty; a folder the lock file cannot be made
    in (read-only, full) is not written by this process either: it goes on unlocked, and the write
    that needs the folder is refused, naming its file."""
    with contextlib.ExitStack() as stack:
        for where in sorted({os.path.realpath(w) for w in wheres}):
            stack.enter_context(_locked(where))
            recover(where)
        yield


@contextlib.contextmanager
def _locked(where: str) -> Iterator[None]:
    made: list[str] = []  # the folders this lock makes (innermost first), removed again if left empty
    d = where
    while not os.path.isdir(d) and os.path.dirname(d) != d:
        made, d = [*made, d], os.path.dirname(d)
    with contextlib.suppress(OSError):
        os.makedirs(where, exist_ok=True)
    path = lock_file(where)
    while True:
        try:
            fh = open(path, "a")
        except OSError as e:
            if e.errno not in WRITE_ERRNOS | {errno.ENOENT, errno.ENOTDIR}:
                raise named(e, where) from e
            yield  # nothing can be written there by this process: nothing to guard
            return
        fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file closes
        try:
            if os.path.samestat(os.fstat(fh.fileno()), os.stat(path)):
                break  # still the folder's lock (its holder removes it on release)
        except FileNotFoundError:
            pass
        fh.close()
        os.makedirs(where, exist_ok=True)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # removed while held: a waiter finds it gone and takes a new one
            os.remove(path)
            for d in made:  # a folder made for the lock and left empty
                os.rmdir(d)
        fh.close()


LOCK_NAME = ".specbench.lock"


def lock_file(where: str) -> str:
    """The lock of folder ``where``: ``.specbench.lock`` in it (one file per folder, whatever path or
    ``TMPDIR`` a process has; its resolved path, so the name is one string however it is spelled)."""
    return os.path.join(os.path.realpath(where), LOCK_NAME)


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp folder beside ``path``; on success it replaces ``path`` whole, on
    failure it is removed: readers never see a half-built folder."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{staged()}{out.name}.", dir=out.parent))
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


def replace_together(
    folder: str | os.PathLike,
    fill: Callable[[str], object],
    path: str | os.PathLike,
    text: str,
    more: dict | None = None,
    files: dict | None = None,
) -> None:
    """Replace ``folder`` (built by ``fill(tmp_folder)``), the text file ``path``, each further
    folder of ``more`` ({folder: fill}) and each file of ``files`` ({path: write(tmp)}) together
    (``publish``): all are written beside their targets first; on a failure before the swap none
    changes and no temp is left; a kill during it is finished by ``recover``; an OSError names the
    real path."""
    folders = {os.path.abspath(folder): fill, **{os.path.abspath(f): g for f, g in (more or {}).items()}}
    writes = {os.path.abspath(path): lambda t: write_file(t, text)}
    writes.update({os.path.abspath(p): w for p, w in (files or {}).items()})
    made: dict[str, str] = {}  # temp -> final
    try:
        for final, write in writes.items():
            made[write_temp(final, write)] = final
        for final, fill_one in folders.items():
            os.makedirs(os.path.dirname(final), exist_ok=True)
            new = tempfile.mkdtemp(prefix=staged() + "new-", dir=os.path.dirname(final))
            made[new] = final
            fill_one(new)
            os.chmod(new, 0o777 & ~umask())
    except BaseException as e:
        for new in made:
            shutil.rmtree(new, ignore_errors=True) if os.path.isdir(new) else os.unlink(new)
        if isinstance(e, OSError) and ".tmp-" in str(e.filename or ".tmp-"):
            raise named(e, next(iter(folders))) from e  # the folder, not a temp file in or beside it
        raise
    publish(made)


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
