"""The committed speed answer (#34): costs you can rank on, every projection with an interval,
every dense grid's best budget bracketed, and the projection checked against live timing."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from conftest import report_text
from specbench.results.files import read_csv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "results")


def committed(name: str) -> pd.DataFrame:
    path = os.path.join(RESULTS, name)
    if not os.path.exists(path):
        pytest.skip(f"results/{name} is not committed")
    return read_csv(path)


def test_every_cost_point_has_seven_interleaved_repeats_and_its_spread():
    """Seven in the full study; the default run (`bash run_all.sh`) re-measures its plan's pairs with
    fewer, and its record (results/default_run.json) names them and the count."""
    costs = committed("costs.csv")
    record = os.path.join(RESULTS, "default_run.json")
    run = json.load(open(record)) if os.path.exists(record) else {}
    fewer = costs.pair.isin(run.get("costs_pairs", [])) & (costs.device.fillna("cpu") == "cpu")
    assert (costs.repeats.astype(int)[~fewer] >= 7).all()
    assert (costs.repeats.astype(int)[fewer] >= int(run.get("costs_repeats", 7))).all()
    assert ((costs.seconds_min <= costs.seconds) & (costs.seconds <= costs.seconds_max)).all()
    samples = costs.samples.str.split()
    assert (samples.map(len) == costs.repeats.astype(int)).all()
    assert np.allclose(samples.map(lambda s: np.median([float(x) for x in s])), costs.seconds, rtol=1e-4)
    kvs = costs.groupby(["pair", "role", "dtype"]).kv_len.nunique()
    assert (kvs >= 2).all(), kvs[kvs < 2]
    env = json.load(open(os.path.join(RESULTS, "environment.json")))
    assert env["device"] and env["cpu"] and env["torch_threads"] >= 1


def test_another_devices_curve_names_its_machine_and_is_marked_in_the_report():
    """A GPU's rows (device=cuda) come with environment-cuda.json naming the GPU; the report's
    hardware section says what was timed there and marks the point for every pair it timed."""
    costs = committed("costs.csv")
    other = costs[costs.device.fillna("cpu") != "cpu"]
    if other.empty:
        pytest.skip("no other device's costs are committed")
    report = report_text(os.path.join(ROOT, "REPORT.md"))
    for device, g in other.groupby("device"):
        env = json.load(open(os.path.join(RESULTS, f"environment-{device}.json")))
        assert env["gpu"] and env["measured_on"]
        assert f"- {device} ({env['gpu']}" in report
        if (g.weights == "random").any():
            assert "with random weights" in report
        for pair in set(g.pair):
            assert f"this {device} bfloat16 curve sits at" in report and pair in report


def test_every_projected_speedup_has_an_interval():
    speed = committed("speedup.csv")
    p = speed[speed.projected.notna()]
    assert len(p) and p.projected_lo.notna().all() and p.projected_hi.notna().all()
    assert ((p.projected_lo <= p.projected + 1e-9) & (p.projected <= p.projected_hi + 1e-9)).all()


def dense_groups(speed: pd.DataFrame):
    """(pair, dataset, tree) of the replayed greedy study whose grid is dense at the low end."""
    g = speed[(speed.engine == "replay") & (speed.verify == "greedy") & speed.projected.notna()]
    g = g[g.max_new_tokens == g.groupby("pair").max_new_tokens.transform("max")]
    for key, s in g.groupby(["pair", "dataset", "tree", "tree_params"], sort=True):
        if {1, 2, 3, 4} <= set(s.budget.astype(int)):
            yield key, s


def test_every_dense_grids_best_budget_is_bracketed():
    """The best projected budget of each shape is interior to the budgets tried or the smallest
    the shape admits (N = 1); grids not yet run dense are reported as edges (tables.bracket)."""
    speed = committed("speedup.csv")
    groups = list(dense_groups(speed))
    assert len(groups) >= 20  # qwen_coder's 8 static shapes x 3 datasets at least
    for key, s in groups:
        best = int(s.sort_values("projected", ascending=False).budget.iloc[0])
        assert best < s.budget.max(), (key, best)


def test_the_projection_was_checked_against_live_timing_on_this_machine():
    speed = committed("speedup.csv")
    own = speed[(speed.engine == "live") & (speed.measured_hash == speed.config_hash) & speed.projected.notna()]
    assert len(own) >= 8
    assert own.error.notna().all() and own.draft_s_step.notna().all() and own.verify_s_step.notna().all()
