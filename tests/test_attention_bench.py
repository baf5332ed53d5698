"""Tree-attention benchmark: every implementation matches the reference; the app
writes its CSV and figures.  Nothing here asserts on timings."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from hydra import compose, initialize_config_dir

from specbench.attention import bench as ab
from specbench.attention import impls as ai
from specbench.core.registry import UnknownName
from specbench.core.tree import ancestor_mask, paths_to_parents
from specbench.trees.policies import shape_paths

ROOT = Path(__file__).resolve().parents[1]
GQA = {"heads": 6, "kv_heads": 2, "head_dim": 16}
MHA = {"heads": 4, "kv_heads": 4, "head_dim": 16}


def random_parents(n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return [-1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(1, n + 1)]


def cfg_for(*overrides):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose("attention_bench", overrides=list(overrides))


def test_reference_matches_per_node_softmax():
    """The reference itself: node i attends to the prefix, itself and its ancestors."""
    parents, past = random_parents(9, 1), 5
    case = ai.make_case(parents, past, 2, GQA, torch.float32, seed=3)
    out = ai.reference(case).run()
    anc = ancestor_mask(parents)
    rep = GQA["heads"] // GQA["kv_heads"]
    for i in range(len(parents)):
        keys = list(range(past)) + [past + j for j in range(len(parents)) if anc[i, j]]
        for h in range(GQA["heads"]):
            k, v = case.k[:, h // rep, keys], case.v[:, h // rep, keys]
            w = (case.q[:, h, i : i + 1] @ k.transpose(-1, -2) / 4.0).softmax(-1)
            torch.testing.assert_close(out[:, h, i], (w @ v)[:, 0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("batch,past,dims,seed", [(1, 0, GQA, 0), (3, 7, GQA, 1), (2, 20, MHA, 2), (4, 33, GQA, 3)])
@pytest.mark.parametrize("impl", ["fused", "sequential", "flex"])
def test_impls_agree_with_reference(impl, batch, past, dims, seed, dtype):
    parents = random_parents(12, seed)
    case = ai.make_case(parents, past, batch, dims, dtype, seed=seed)
    ref = ai.reference(case).run()
    prep = ai.IMPLS.get(impl)(case)
    out = prep.output(prep.run())
    assert out.shape == case.q.shape and out.dtype == dtype
    torch.testing.assert_close(out.float(), ref.float(), **ai.TOLERANCE[dtype])


def test_flex_compiled_agrees_or_records_failure():
    case = ai.make_case(paths_to_parents(shape_paths("binary", 6)), 9, 2, GQA, torch.float32)
    prep = ai.flex_compiled(case)
    if prep.run is None:
        assert prep.note.startswith("compile failed")
        pytest.skip(prep.note)
    out = prep.output(prep.run())
    torch.testing.assert_close(out, ai.reference(case).run(), **ai.TOLERANCE[torch.float32])
    assert prep.compile_s > 0


def test_compile_failure_is_a_nan_row_not_a_crash(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(torch, "compile", broken)
    cfg = cfg_for("warmup=0", "repeats=1", "min_repeats=1")
    limits = {"bw": 1e10, "float32": 1e10}
    rows = ab.bench_point(cfg, (1, 8, 4, "binary", "float32"), ["fused", "flex_compiled"], GQA, limits)
    by = {r["impl"]: r for r in rows}
    assert math.isnan(by["flex_compiled"]["median_s"])
    assert "compile failed: RuntimeError: no compiler here" in by["flex_compiled"]["note"]
    assert by["fused"]["median_s"] > 0 and by["fused"]["max_abs_err"] < 1e-4


def test_a_disturbed_burst_is_retimed_and_the_steadiest_kept(monkeypatch):
    """A burst whose IQR is over steady_iqr of its median (interference while it ran) is timed
    again, at most ``bursts`` in all; the steadiest is kept and ``bursts`` says how many ran."""
    from types import SimpleNamespace

    def bursts(times_per_burst):  # perf_counter's readings: each burst's start, then (t0, t1) per call
        ticks = []
        for times in times_per_burst:
            ticks.append(0.0)  # the burst's start
            for t in times:
                ticks += [0.0, float(t)]
            ticks.append(0.0)  # the max_seconds check after the last call
        return iter(ticks)

    disturbed, steady = [1, 5, 1, 9], [3, 3, 3, 3]
    for script, want_bursts, want_median in (
        ([disturbed, steady], 2, 3.0),
        ([steady], 1, 3.0),
        ([disturbed, disturbed, disturbed], 3, 3.0),
    ):
        ticks = bursts(script)
        monkeypatch.setattr(ab, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))
        got = ab.time_call(lambda: None, 0, 4, 4, math.inf, bursts=3, steady=0.25)
        assert (got["bursts"], got["median_s"], got["repeats"], got["steady_iqr"]) == (
            want_bursts,
            want_median,
            4,
            0.25,
        )
    ticks = bursts([disturbed])
    monkeypatch.setattr(ab, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))
    assert ab.time_call(lambda: None, 0, 4, 4, math.inf)["bursts"] == 1  # the default: one burst, as before


def test_branches_are_root_to_leaf_paths():
    parents = paths_to_parents(shape_paths("binary", 6))  # root, 2 children, 4 grandchildren
    assert ai.branches(parents) == [[0, 1, 3], [0, 1, 4], [0, 2, 5], [0, 2, 6]]
    assert ai.branches(paths_to_parents(shape_paths("chain", 3))) == [[0, 1, 2, 3]]
    assert ai.branches([-1]) == [[0]]


def test_grid_errors_name_the_fix():
    with pytest.raises(ValueError, match="grid=nope is unknown; valid: .*tiny"):
        ab.grid_points(cfg_for("grid=nope"))
    with pytest.raises(UnknownName, match="Did you mean 'fused'"):
        ab.grid_points(cfg_for("grid=tiny", "grids.tiny.0.impls=[fussed]"))


@pytest.mark.parametrize(
    "override,match",
    [
        ("grids.tiny.0.batch=[0]", r"^grids.tiny.batch: 0 must be an integer >= 1$"),
        ("grids.tiny.0.tree_size=[-2]", r"^grids.tiny.tree_size: -2 must be an integer >= 1$"),
        ("grids.tiny.0.shape=[bnary]", "bnary"),
        ("grids.tiny.0.dtype=[float64]", r"^grids.tiny.dtype: 'float64' is not one of"),
    ],
)
def test_bad_grid_values_are_refused_before_any_measurement(override, match):
    """grid_points runs before the bandwidth and FLOP measurement (main_run)."""
    with pytest.raises((ValueError, KeyError), match=match):
        ab.grid_points(cfg_for("grid=tiny", override))


def test_an_integer_option_is_read_as_the_study_reads_one():
    """attention/config.validate reads each integer option with study.job.errors.as_int: 3.0 is 3 (and the
    config holds 3 after), 3.5 and true are refused in one line naming the key."""
    cfg = cfg_for("repeats=3.0", "dims={heads:12,kv_heads:2.0,head_dim:128}")
    ab.validate(cfg)
    assert cfg.repeats == 3 and type(cfg.repeats) is int and cfg.dims.kv_heads == 2 and type(cfg.dims.kv_heads) is int
    for bad in ("repeats=3.5", "repeats=true"):
        with pytest.raises(
            ValueError, match=rf"^{bad.replace('true', 'True')}: must be an integer >= 1 and <= 100000; "
        ):
            ab.validate(cfg_for(bad))


def test_default_grid_keeps_the_headline_point():
    pts = ab.grid_points(cfg_for())
    for dt in ("bfloat16", "float32"):
        assert {"fused", "sequential", "flex", "flex_compiled"} <= set(pts[(1, 1024, 64, "binary", dt)])
    full = ab.grid_points(cfg_for("grid=full"))
    assert len(full) == 5 * 5 * 5 * 3 * 2


def test_merge_keeps_unmeasured_rows():
    base = dict(
        level="kernel", kv_len=8, tree_size=4, shape="chain", dtype="float32", bw_bound_s=1.0, compute_bound_s=0.5
    )
    old = pd.DataFrame([dict(base, batch=b, impl=i, median_s=2.0) for b in (1, 2) for i in ("fused", "flex")])
    new = pd.DataFrame([dict(base, batch=1, impl="fused", median_s=4.0)])
    df = ab.finish(ab.merge_rows(ab.finish(old), new, ab.KEY).sort_values(ab.KEY).reset_index(drop=True))
    assert len(df) == 4
    got = df.set_index(["batch", "impl"])
    assert got.loc[(1, "fused"), "median_s"] == 4.0 and got.loc[(2, "flex"), "vs_fused"] == 1.0
    assert got.loc[(1, "flex"), "vs_fused"] == 0.5 and got.loc[(1, "fused"), "roofline_frac"] == 0.25


def test_another_machines_grid_is_kept_apart_and_the_report_shows_the_machine_with_most_rows():
    """A default run's small grid on an AVX2 machine replaced the committed machine's rows before rows named
    their machine (2026-12-02): now both stay, each against its own fused time, and the report shows one."""
    from specbench.report.tree_attention import section, stats

    base = dict(level="kernel", kv_len=8, tree_size=4, shape="chain", dtype="float32", bw_bound_s=1.0,
                compute_bound_s=0.5)  # fmt: skip
    old = pd.DataFrame([dict(base, batch=b, impl=i, median_s=2.0) for b in (1, 2) for i in ("fused", "flex")])
    new = pd.DataFrame([dict(base, batch=1, impl=i, median_s=m, machine="AVX2 box", machine_id="avx2")
                        for i, m in (("fused", 4.0), ("flex", 6.0))])  # fmt: skip
    df = ab.finish(ab.merge_rows(ab.finish(old), new, ab.KEY))
    assert len(df) == 6 and sorted(df.machine_id.unique()) == ["", "avx2"]
    assert df[df.machine_id == "avx2"].set_index("impl").vs_fused.to_dict() == {"fused": 1.0, "flex": 1.5}
    assert (df[df.machine_id == ""].median_s == 2.0).all()  # the unnamed machine's rows, untouched
    assert set(stats.kernels(df).machine_id) == {""}  # the grid with the most rows
    said = section.apart(df)
    assert "2 rows on AVX2 box" in said and "not recorded" in said
    again = ab.merge_rows(df, new.assign(median_s=[5.0, 5.0]), ab.KEY)  # the same machine again: replaced
    assert len(again) == 6 and again[again.machine_id == "avx2"].median_s.tolist() == [5.0, 5.0]


def test_tiny_grid_app_writes_csv_and_figures(tmp_path):
    out = tmp_path / "attention.csv"
    cmd = [
        sys.executable,
        "-m",
        "specbench.attention_bench",
        "grid=tiny",
        f"out_csv={out}",
        f"fig_dir={tmp_path / 'figs'}",
        f"hydra.run.dir={tmp_path / 'hydra'}",
        "progress=false",
        "warmup=0",
        "repeats=1",
        "min_repeats=1",
        "bandwidth_mb=8",
        "matmul_n=128",
        "figures.kv_len=16",
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    df = pd.read_csv(out)
    expected = {
        "level",
        "batch",
        "kv_len",
        "tree_size",
        "nodes",
        "shape",
        "dtype",
        "impl",
        "heads",
        "kv_heads",
        "head_dim",
        "median_s",
        "q25_s",
        "q75_s",
        "iqr_s",
        "repeats",
        "bursts",
        "max_abs_err",
        "bytes_moved",
        "flops",
        "bandwidth_gbs",
        "bw_bound_s",
        "bw_frac",
        "roofline_frac",
        "vs_fused",
        "compile_s",
        "note",
        "n_branches",
        "threads",
        "dims_source",
    }
    assert expected <= set(df.columns)
    assert len(df) == 2 * 1 * 2 * 2 * 2 * 3  # batch x kv x tree x shape x dtype x impl
    assert set(df.impl) == {"fused", "sequential", "flex"}
    assert (df.median_s > 0).all() and (df[df.dtype == "float32"].max_abs_err < 1e-4).all()
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == [
        f"attention_{kind}_{dt}.png" for kind in ("speedup", "time") for dt in ("bfloat16", "float32")
    ]
    assert not list(tmp_path.glob("*.csv.tmp*")) and not list(out.parent.glob("tmp*"))


def test_model_view_rows_with_a_tiny_model(monkeypatch, tiny_target):
    """The model-level view's plumbing (tree forward vs per-branch forwards), on the tiny model."""
    from specbench.inputs import models

    monkeypatch.setattr(models, "load_model", lambda spec, dtype="bfloat16", device="cpu": tiny_target)
    cfg = cfg_for("model.kv_len=16", "model.tree_size=6", "model.repeats=1")
    rows = ab.model_view(cfg)
    assert [(r["shape"], r["impl"]) for r in rows] == [
        (s, i) for s in ("binary", "topk_wide") for i in ("model_tree", "model_branches")
    ]
    assert all(r["level"] == "model" and r["median_s"] > 0 and r["repeats"] == 1 for r in rows)
    assert rows[0]["n_branches"] == 4 and rows[0]["branch_tokens"] == 12
