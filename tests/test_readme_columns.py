"""The documentation (README.md + docs/*.md) documents every column of every CSV specbench writes:
the columns the code produces (summary, steps, calibration, lossless check) and the headers of
results/*.csv."""

import dataclasses
import glob
import re
from pathlib import Path

import pandas as pd

from conftest import docs_text
from specbench.engine.records import StepRecord
from specbench.results.columns import KEY_COLUMNS
from specbench.results.metrics import summarize
from specbench.study.tools import calibrate, lossless, margins

ROOT = Path(__file__).resolve().parents[1]


def documented() -> set[str]:
    return set(re.findall(r"`([a-z_0-9*]+)`", docs_text()))


def undocumented(columns) -> list[str]:
    names, out = documented(), []
    for c in columns:
        if re.fullmatch(r"alpha_\d+", c):
            c = "alpha_d"
        elif re.fullmatch(r".+_(lo|hi)", c) and "*_lo" in names and c.rsplit("_", 1)[0] in names:
            continue
        if c not in names:
            out.append(c)
    return out


def produced_columns() -> list[str]:
    steps = pd.DataFrame([dataclasses.asdict(StepRecord("p", i, 2, 2, 1, 2, "0")) for i in range(3)])
    keys = {k: 0 for k in KEY_COLUMNS}
    summary = summarize(keys, steps, 1.0, [0, 3])
    return list(steps.columns) + list(summary.columns) + calibrate.COLUMNS + lossless.COLUMNS + margins.COLUMNS


def test_every_column_the_code_writes_is_in_the_readme():
    assert undocumented(produced_columns()) == []


def test_every_committed_results_csv_column_is_in_the_readme():
    files = sorted(glob.glob(str(ROOT / "results" / "*.csv")))
    assert files
    missing = {Path(f).name: undocumented(pd.read_csv(f, nrows=0).columns) for f in files}
    assert {k: v for k, v in missing.items() if v} == {}
