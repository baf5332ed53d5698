"""The argparse parser of specbench's flag commands (collect, report, study.tools.calibrate,
study.tools.lossless): a bad or unknown flag is one line naming it, exit status 2, like ``run``;
``refuse(line)``: the same for a refused input file or value; ``number(...)``: a flag's type, a finite
number in its range (argparse's one line then names the flag, the value and the range); ``check_out``
and ``check_writable``: an output path or folder that can be written, checked before any work."""

from __future__ import annotations

import argparse
import errno
import math
import os
import sys
import tempfile
from collections.abc import Callable
from typing import NoReturn

from .atomic import command, named, os_line


class Parser(argparse.ArgumentParser):
    """``prog`` names the command (``core.atomic.command``: the files it stages, and cleans)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        command(self.prog.split()[-1].rsplit(".", 1)[-1])

    def error(self, message: str) -> NoReturn:
        print(f"specbench: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def refuse(line: str) -> NoReturn:
    """One line on stderr (``specbench: error: <line>``) and exit status 2: a refused input."""
    print(f"specbench: error: {line}", file=sys.stderr)
    sys.exit(2)


def number(
    kind: type = float,
    lo: float | None = None,
    hi: float | None = None,
    above: bool = False,
    allow: tuple = (),
    below: bool = False,
) -> Callable[[str], object]:
    """An argparse ``type``: a finite ``kind`` (int: a whole number) in [``lo``, ``hi``] (``lo`` excluded with
    ``above``, ``hi`` with ``below``), or one of the words ``allow``; else argparse's one line names the flag and
    this range."""
    show = (lambda v: str(int(v))) if kind is int else (lambda v: f"{v:g}")
    rng = [f"> {show(lo)}" if above else f">= {show(lo)}"] if lo is not None else []
    rng += [f"< {show(hi)}" if below else f"<= {show(hi)}"] if hi is not None else []
    want = ("an integer" if kind is int else "a finite number") + (" " + " and ".join(rng) if rng else "")
    want += "".join(f" or {w}" for w in allow)

    def parse(text: str):
        if text in allow:
            return text
        try:
            x = float(text)
        except ValueError:
            x = math.nan
        low = lo is not None and (x <= lo if above else x < lo)
        high = hi is not None and (x >= hi if below else x > hi)
        if not math.isfinite(x) or (kind is int and not x.is_integer()) or low or high:
            raise argparse.ArgumentTypeError(f"{text!r} is not {want}")
        return int(x) if kind is int else x

    return parse


def listed(one: Callable[[str], object]) -> Callable[[str], list]:
    """An argparse ``type``: comma-separated items, each parsed by ``one`` (e.g. ``number(int, 0)``)."""

    def parse(text: str) -> list:
        items = [w.strip() for w in text.split(",") if w.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"{text!r} holds no comma-separated values")
        return [one(w) for w in items]

    return parse


PROBE_BYTES = 1 << 16  # room for Hydra's multirun.yaml (non-atomic) and a job's first files


def check_writable(key: str, value: str, folder: str) -> None:
    """``folder`` (``key=value``'s) must be, or be creatable as, a writable folder with room for
    PROBE_BYTES (written and synced: a nearly full disk says so here, before Hydra starts writing)."""
    probe = os.path.abspath(os.path.expanduser(folder))
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK):
        why = "is not a directory" if not os.path.isdir(probe) else "is not writable"
        refuse(f"{key}={value}: {probe} {why}; point {key} at a writable folder")
    try:
        with tempfile.TemporaryFile(dir=probe) as fh:
            fh.write(b"\0" * PROBE_BYTES)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as e:  # a full disk, or a folder no file can be made in (/proc): the problem and its fix
        line = os_line(named(e, probe), probe, key)
        if e.errno == errno.ENOENT:  # the folder exists: its file system makes no files
            line = f"{probe}: no file can be created there; point {key} at a writable folder"
        refuse(f"{key}={value}: {line}")


def check_out(path: str, key: str) -> None:
    """An output file's folder must be (or be creatable as) a writable folder with room for a
    file, and the file itself no folder: one line naming ``key`` before any model loads or measurement."""
    if os.path.isdir(path):
        refuse(
            f"{key}={path}: is a folder; give a file path (e.g. {key}={os.path.join(path, os.path.basename(path) or 'out')}.csv)"
        )
    check_writable(key, path, os.path.dirname(path) or ".")
