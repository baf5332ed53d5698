"""An OSError as one line: the file it names, the actual problem (the system's words: No such file or
directory, Permission denied, Is a directory, Not a directory, No space left on device, Read-only file
system) and the fix that works: a path the command writes is pointed elsewhere by its option, a file it
reads is checked or made readable.  Imports nothing from specbench (``core.atomic`` re-exports ``os_line``)."""

from __future__ import annotations

import errno
import os

# errno: (the fix where the path is written (``key``: the option naming it), the fix where it is read)
OS_FIXES = {
    errno.ENOENT: ("create its folder or point {key} at one that exists", "check the path (does it exist?)"),
    errno.EACCES: ("point {key} at a folder you may write (or chmod it)", "make it readable (chmod) or give a copy"),
    errno.EISDIR: ("point {key} at a file path, not a folder", "a file is expected there, not a folder"),
    errno.ENOTDIR: ("point {key} at a folder: a part of the path is a file", "check the path: a part of it is a file"),
    errno.ENOSPC: ("free space or point {key} at a writable folder on another disk", "free space on its disk"),
    errno.EDQUOT: ("free space or point {key} at a writable folder on another disk", "free space on its disk"),
    errno.EROFS: ("point {key} at a writable folder", "point {key} at a writable folder"),
}
OS_FIXES[errno.EPERM] = OS_FIXES[errno.EACCES]
ALWAYS_WRITTEN = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}  # a full or read-only disk refused a write


def os_line(e: OSError, where: str = "", key: str = "out_root") -> str:
    """'<path>: <problem>; <fix>' for an OSError.  ``where``: the path(s) the command writes (' / '-joined),
    ``key``: the option that points at them; an error on a path under them is the output's (point ``key``
    elsewhere), else an input's (the file named cannot be read: check it)."""
    path = str(e.filename or where or "a file")
    wrote, read = OS_FIXES.get(e.errno or 0, ("", ""))
    roots = [os.path.abspath(w) for w in where.split(" / ") if w]
    mine = os.path.abspath(path)
    written = (
        e.errno in ALWAYS_WRITTEN
        or os.path.basename(path).startswith(".tmp-")
        or any(
            mine == r or mine.startswith(r.rstrip(os.sep) + os.sep) or r.startswith(mine.rstrip(os.sep) + os.sep)
            for r in roots
        )
    )
    fix = (wrote if written else read).format(key=key)
    return f"{path}: {e.strerror or e}" + (f"; {fix}" if fix else "")
