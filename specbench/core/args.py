"""The argparse parser of specbench's flag commands (collect, report, study.tools.calibrate,
study.tools.lossless): a bad or unknown flag is one line naming it, exit status 2, like ``run``;
``refuse(line)``: the same for a refused input file or value."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from .atomic import command


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
