"""The machine measured first (inputs.machine): its identity, and ``dtype=auto`` picking the faster
dtype from measured rates, resolved into the job spec and recorded once per machine."""

import json
import os

import pytest

from specbench.inputs import machine

AVX512_BF16 = {"bfloat16": {1: 3.1, 64: 51.8}, "float32": {1: 1.8, 64: 15.5}}
AVX2_ONLY = {"bfloat16": {1: 0.3, 64: 0.9}, "float32": {1: 9.0, 64: 60.7}}
AVX2_ROWS = {"bfloat16": {1: 0.3, 4: 0.5, 16: 0.8, 64: 0.9}, "float32": {1: 9.0, 4: 8.0, 16: 30.0, 64: 60.7}}


@pytest.mark.parametrize("rates, want", [(AVX512_BF16, "bfloat16"), (AVX2_ONLY, "float32")])
def test_auto_picks_the_faster_dtype_from_measured_rates(rates, want):
    assert machine.pick(rates) == want


def test_the_pick_weighs_both_widths():
    """bf16 faster at 64 rows, 4x slower at 1 row: fp32 wins on the geometric mean."""
    assert machine.pick({"bfloat16": {1: 1.0, 64: 30.0}, "float32": {1: 4.0, 64: 20.0}}) == "float32"


def test_the_pick_reads_a_decode_step_and_a_prefill_not_the_narrow_widths():
    """The narrow widths price the plan's forwards (study.tools.estimates.row_s); the dtype is picked on 1 and 64 rows."""
    measured = {"bfloat16": {1: 1.0, 4: 90.0, 16: 90.0, 64: 30.0}, "float32": {1: 4.0, 4: 5.0, 16: 9.0, 64: 20.0}}
    assert machine.pick(measured) == "float32"
    assert machine.pick({dt: {str(n): r for n, r in by.items()} for dt, by in measured.items()}) == "float32"


def test_dtype_auto_is_resolved_in_the_job_spec_and_recorded_once_per_machine(tmp_path, monkeypatch):
    from specbench.study.job.jobspec import from_config

    calls = []
    monkeypatch.setattr(machine, "rates", lambda device: calls.append(device) or AVX2_ROWS)
    from specbench.study.job.launch import compose

    overrides = ["pair=qwen_coder", "dtype=auto", f"+replay_cache={tmp_path}"]
    job = from_config(compose(overrides))
    assert job.dtype == "float32" and calls == ["cpu"]
    rec = json.loads(next(tmp_path.glob("machine-*.json")).read_text())
    assert rec["dtype"] == "float32" and rec["rates_gflops"]["float32"]["64"] == 60.7
    assert rec["machine_id"] == machine.identity("cpu")["machine_id"] and rec["cpu"]
    assert from_config(compose(overrides)).dtype == "float32"
    assert calls == ["cpu"]  # measured once: every job of a study resolves auto alike


def test_the_measurement_runs_and_names_each_dtype():
    rates = machine.rates("cpu")
    assert set(rates) == {"bfloat16", "float32"} and all(r > 0 for by in rates.values() for r in by.values())
    assert all(tuple(by) == machine.ROWS for by in rates.values()) and {1, 64} <= set(machine.ROWS)


def test_each_run_measures_the_rates_again_and_keeps_the_cached_dtype(tmp_path, monkeypatch, capsys):
    """The plan is sized by this run's rates; every job resolves dtype=auto by the cached choice; a cached record of
    fewer widths than ``ROWS`` (before the narrow ones) is measured again."""
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    path = machine.cached_path(machine.identity("cpu")["machine_id"])
    assert path.startswith(str(tmp_path / "cache"))
    old = {**machine.identity("cpu"), "dtype": "float32", "rates_gflops": {"float32": {"1": 9.0, "64": 60.7}}}
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        json.dump(old, f)
    calls = []
    monkeypatch.setattr(machine, "rates", lambda device: calls.append(device) or AVX2_ROWS)
    monkeypatch.setattr(machine, "python_s", lambda: 0.1)
    assert machine.auto_dtype("cpu")[1]["rates_gflops"]["float32"]["16"] == 30.0 and calls == ["cpu"]  # re-measured
    cached = json.loads(open(path).read())
    monkeypatch.setattr(machine, "rates", lambda device: calls.append(device) or AVX512_BF16)  # a faster run
    machine.main(["--out", str(tmp_path / "m.json")])
    rec = json.loads((tmp_path / "m.json").read_text())
    assert rec["rates_gflops"]["bfloat16"]["64"] == 51.8 and len(calls) == 2  # this run's rates, measured once
    assert rec["dtype"] == "float32" and json.loads(open(path).read()) == cached  # the cached choice stands
    assert f"favour bfloat16; the cached choice stands: remove {path}" in capsys.readouterr().out
