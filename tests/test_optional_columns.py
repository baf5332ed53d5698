"""results.optional: each results file's optional columns are decided once, where the report reads it: a
file without one reads as a file whose column is empty (or holds its documented default), and a column a
file has is never touched."""

from __future__ import annotations

import math

import pandas as pd

from specbench.report import load
from specbench.results.files import STEPS_FILE
from specbench.results.optional import OPTIONAL, filled


def test_every_declared_file_is_one_the_report_reads():
    read = {*load.OPTIONAL_CSV.values(), "summary.csv", STEPS_FILE, "acceptance_vector.csv"}
    assert set(OPTIONAL) <= read


def test_a_missing_column_gets_its_default_and_a_present_one_is_kept():
    old = pd.DataFrame({"run_id": ["r"], "pair": ["p"]})
    new = pd.DataFrame({"run_id": ["r"], "pair": ["p"], "engine": [None], "same_tokens": ["True"]})
    got = filled(old, "results/speed.csv")
    assert got.engine.iloc[0] == "specbench" and got.weights.iloc[0] == "pretrained"  # the documented defaults
    assert got.same_tokens.isna().all() and got.same_tokens.dtype == object  # a text column: empty cells
    kept = filled(new, "speed.csv")
    assert kept.engine.isna().all() and kept.same_tokens.iloc[0] == "True"  # present: untouched, empty cells too
    assert list(old.columns) == ["run_id", "pair"]  # the frame read is not changed in place
    assert filled(None, "speed.csv") is None


def test_attention_files_default_their_level_and_threads():
    row = pd.DataFrame({"impl": ["fused"], "median_s": [1.0]})
    assert filled(row, "attention.csv").level.iloc[0] == "kernel"
    assert filled(row, "attention.csv").threads.iloc[0] == 0  # attention.csv's threads unrecorded
    assert filled(row, "attention_threads1.csv").threads.iloc[0] == 1
    assert math.isnan(filled(row, "attention.csv").roofline_frac.iloc[0])


def test_a_vector_file_of_any_suffix_reads_as_acceptance_vector():
    v = filled(pd.DataFrame({"pair": ["p"], "rank": [0]}), "results/acceptance_vector-gpu.csv")
    assert v.temperature.iloc[0] == 0.0 and v.pair_id.isna().all() and v.prompt_ids.isna().all()
