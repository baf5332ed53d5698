"""The argparse parser of specbench's flag commands (collect, report, study.calibrate,
study.lossless): a bad or unknown flag is one line naming it, exit status 2, like ``run``."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"specbench: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)
