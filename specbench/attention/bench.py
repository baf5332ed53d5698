"""`python -m specbench.attention_bench [overrides]`: the tree-attention benchmark.

Times fused / sequential / flex tree attention (`specbench.attention.impls`) over
a grid of batch size x KV length x tree size x tree shape x dtype, checks each
against the reference, measures this machine's memory bandwidth (large tensor
copy) and peak matmul FLOP/s, and writes ``results/attention.csv`` (one row per
point and implementation) plus ``results/figures/attention_*.png``.

Conventions: ``tree_size`` = N draft tokens; attention runs over N+1 nodes (the
root is the last committed token).  ``bw_frac`` = (ideal bytes moved / measured
bandwidth) / median time, i.e. the fraction of the memory-bandwidth roofline
reached; ``roofline_frac`` uses max(bandwidth bound, FLOP bound).
``model_view=true`` adds rows (level=model) timing one real target forward
over a tree against one forward per branch (run it under the real-model lock).
"""

from __future__ import annotations

import itertools
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import hydra
import matplotlib
import matplotlib.ticker
import numpy as np
import pandas as pd
import torch
from hydra.utils import to_absolute_path
from omegaconf import DictConfig
from tqdm import tqdm

from .. import CONF_DIR
from ..core.args import check_out, check_writable
from ..core.atomic import atomic_write, atomic_write_many, lock, staged
from ..core.tree import paths_to_parents
from ..inputs import machine
from ..study.job.argv import check_dirs, check_keys, run_hydra, top_keys
from ..trees.policies import shape_paths
from . import heatmap
from . import impls as ai
from .config import GRID_AXES, all_failed, check_grid, merge_rows, read_existing, validate
from .heatmap import machines, one_machine

DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}
POINT = ["level", "batch", "kv_len", "tree_size", "shape", "dtype"]
KEY = POINT + ["impl"]
COLORS = {"fused": "C0", "flex": "C1", "flex_compiled": "C2", "sequential": "C3"}


# --------------------------------------------------------------------------
# grid
# --------------------------------------------------------------------------
def grid_points(cfg: DictConfig) -> dict[tuple, list[str]]:
    """{(batch, kv_len, tree_size, shape, dtype): [impl, ...]} for cfg.grid (checked first: ``config.check_grid``)."""
    check_grid(cfg, ai.IMPLS.get, DTYPES, lambda shape: tree_parents(shape, 1))
    points: dict[tuple, list[str]] = {}
    for sl in cfg.grids[cfg.grid]:
        impls = list(sl.get("impls") or cfg.impls)
        for pt in itertools.product(*(list(sl[a]) for a in GRID_AXES)):
            have = points.setdefault(tuple(pt), [])
            have += [i for i in impls if i not in have]
    return dict(sorted(points.items(), key=lambda kv: (kv[0][4], kv[0][3], kv[0][0], kv[0][1], kv[0][2])))


def tree_parents(shape: str, tree_size: int) -> list[int]:
    return paths_to_parents(shape_paths(shape, int(tree_size)))


# --------------------------------------------------------------------------
# timing and machine limits
# --------------------------------------------------------------------------
def time_call(
    run, warmup: int, repeats: int, min_repeats: int, max_seconds: float, bursts: int = 1, steady: float = math.inf
) -> dict:
    """Median and quartiles of one burst of timed calls; a burst whose IQR is over ``steady`` of its
    median was disturbed while it ran (a 7-call burst once read 17 ms, IQR 10 ms, for a 3 ms call) and
    is retimed, at most ``bursts`` bursts in all, keeping the steadiest (``bursts``: how many ran; ``steady_iqr``:
    the threshold, which the heatmap's marks read)."""
    for _ in range(warmup):
        run()
    best: dict = {}
    ran = 0
    while ran < bursts and (not best or best["iqr_s"] > steady * best["median_s"]):
        times = burst_times(run, repeats, min_repeats, max_seconds)
        q25, q75 = np.percentile(times, [25, 75])
        got = {"median_s": statistics.median(times), "q25_s": q25, "q75_s": q75, "iqr_s": q75 - q25}
        if not best or got["iqr_s"] / got["median_s"] < best["iqr_s"] / best["median_s"]:
            best = {**got, "repeats": len(times)}
        ran += 1
    return {**best, "bursts": ran, "steady_iqr": steady}


def burst_times(run, repeats: int, min_repeats: int, max_seconds: float) -> list[float]:
    """``repeats`` timed calls, or ``min_repeats`` once ``max_seconds`` have passed."""
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < repeats:
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
        if len(times) >= min_repeats and time.perf_counter() - start > max_seconds:
            break
    return times


def memory_bandwidth(megabytes: int) -> float:
    """Bytes/s of a large tensor copy (read + write counted)."""
    src = torch.ones(int(megabytes) * 2**20 // 4)
    dst = torch.empty_like(src)
    t = time_call(lambda: dst.copy_(src), 2, 7, 7, 1e9)["median_s"]
    return 2 * src.numel() * 4 / t


def peak_flops(n: int, dtype: torch.dtype) -> float:
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    return 2 * n**3 / time_call(lambda: a @ b, 1, 5, 3, 5.0)["median_s"]


# --------------------------------------------------------------------------
# one grid point
# --------------------------------------------------------------------------
def bench_point(cfg, point, impls, dims, limits) -> list[dict]:
    batch, kv_len, tree_size, shape, dt = point
    dtype = DTYPES[dt]
    case = ai.make_case(tree_parents(shape, tree_size), int(kv_len), int(batch), dims, dtype, cfg.seed)
    base = {
        "level": "kernel",
        "batch": batch,
        "kv_len": kv_len,
        "tree_size": tree_size,
        "shape": shape,
        "dtype": dt,
        **case.describe(),
        **dims,
        **ai.cost(case),
        "bandwidth_gbs": limits["bw"] / 1e9,
        "peak_gflops": limits[dt] / 1e9,
    }
    base["bw_bound_s"] = base["bytes_moved"] / limits["bw"]
    base["compute_bound_s"] = base["flops"] / limits[dt]
    ref = None
    scores = batch * dims["heads"] * case.nodes * (kv_len + case.nodes)
    if cfg.check and scores <= cfg.check_max_elems:
        run = ai.reference(case).run
        assert run is not None  # the reference runs everywhere
        ref = run()
    rows = []
    for name in impls:
        row = dict(base, impl=name, note="", compile_s=float("nan"), max_abs_err=float("nan"), median_s=float("nan"))
        try:
            prep = ai.IMPLS.get(name)(case)
            row.update(note=prep.note, compile_s=prep.compile_s)
            if prep.run is not None:
                warmup = cfg.warmup
                if ref is not None:  # the checked call doubles as one warm-up
                    row["max_abs_err"] = ai.max_abs_err(case, prep, ref)
                    warmup = max(0, warmup - 1)
                row.update(
                    time_call(
                        prep.run, warmup, cfg.repeats, cfg.min_repeats, cfg.max_seconds, cfg.bursts, cfg.steady_iqr
                    )
                )
        except Exception as e:  # noqa: BLE001 - one failing implementation must not end the grid
            row["note"] = f"failed: {type(e).__name__}: {str(e).strip()[:160]}"
        rows.append(row)
    return rows


# --------------------------------------------------------------------------
# model-level view (real target model; run under the lock)
# --------------------------------------------------------------------------
def model_view(cfg) -> list[dict]:
    from transformers import DynamicCache  # heavy: transformers and the model loader, for model_view=true only

    from ..core import kv  # heavy: transformers (core.kv), for model_view=true only
    from ..inputs import models  # heavy: transformers, for model_view=true only

    mc = cfg.model
    model = models.load_model({"source": "embedded", "id": mc.target}, mc.dtype)
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(cfg.seed)
    cache = DynamicCache()
    with torch.inference_mode():
        model(input_ids=torch.randint(0, vocab, (1, mc.kv_len), generator=g), past_key_values=cache, use_cache=True)
    rows = []
    for shape in mc.shapes:
        parents = tree_parents(shape, mc.tree_size)
        tokens = torch.randint(0, vocab, (len(parents),), generator=g).tolist()
        brs = ai.branches(parents)

        def tree(parents=parents, tokens=tokens):
            kv.forward_nodes(model, cache, mc.kv_len, parents, tokens, 0, len(parents))
            cache.crop(-len(parents))

        def per_branch(brs=brs, tokens=tokens):
            for nodes in brs:
                kv.forward_nodes(
                    model, cache, mc.kv_len, ai.chain_parents(len(nodes)), [tokens[i] for i in nodes], 0, len(nodes)
                )
                cache.crop(-len(nodes))

        base = {
            "level": "model",
            "batch": 1,
            "kv_len": mc.kv_len,
            "tree_size": mc.tree_size,
            "shape": shape,
            "dtype": mc.dtype,
            "nodes": len(parents),
            "n_branches": len(brs),
            "branch_tokens": sum(map(len, brs)),
            "note": f"real {mc.target} forward",
        }
        for name, fn, warmup in (("model_tree", tree, 1), ("model_branches", per_branch, 0)):
            rows.append(dict(base, impl=name, **time_call(fn, warmup, mc.repeats, mc.repeats, math.inf)))
    return rows


# --------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------
def finish(df: pd.DataFrame) -> pd.DataFrame:
    """Derived columns: roofline fractions and times relative to fused (model_tree
    for the model-level rows)."""
    df = df.copy()
    bound = df[["bw_bound_s", "compute_bound_s"]].max(axis=1)
    df["bw_frac"] = df["bw_bound_s"] / df["median_s"]
    df["roofline_frac"] = bound / df["median_s"]
    df["machine_id"] = machines(df)
    at = [*POINT, "machine_id"]  # each machine's rows against its own fused time
    fused = df[df.impl.isin(["fused", "model_tree"])].set_index(at)["median_s"]
    ref = df.set_index(at).index.map(lambda k: fused.get(k, float("nan")))
    df["vs_fused"] = df["median_s"].to_numpy() / np.asarray(ref, dtype=float)
    return df


def publish_run(df: pd.DataFrame, out: Path, fig_dir: Path, fc) -> None:
    """The CSV and its figures (drawn into a staged folder) replaced as one unit, one writer at a time."""
    fig_dir.parent.mkdir(parents=True, exist_ok=True)
    with lock(out.parent, fig_dir), tempfile.TemporaryDirectory(prefix=staged() + "fig-", dir=fig_dir.parent) as tmp:
        files: dict[Path, Callable[[str], object]] = {out: lambda t: df.to_csv(t, index=False)}
        files |= {fig_dir / p.name: partial(shutil.copyfile, p) for p in draw_figures(df, Path(tmp), fc)}
        atomic_write_many(files)


def draw_figures(df: pd.DataFrame, out: Path, fc) -> list[Path]:
    """attention_time_<dtype>.png: time vs tree size per implementation, a panel per (shape, batch) at
    kv_len=fc.kv_len; attention_speedup_<dtype>.png: sequential/fused time over kv_len x tree size at
    batch=fc.batch, a panel per shape, one colour scale (``attention.heatmap``, as the report draws it)."""
    matplotlib.use("Agg")

    k = one_machine(df[(df.level == "kernel") & df.median_s.notna()])
    written: list[Path] = []
    ratio = heatmap.ratios(k[k.batch == fc.batch])
    norm = heatmap.shared_norm(ratio)
    for dt, d in k.groupby("dtype"):
        written += _time_figure(d[d.kv_len == fc.kv_len], fc, dt, out)
        written += _speedup_figure(ratio[ratio.dtype == dt], norm, fc, dt, out)
    return written


def _time_figure(line: pd.DataFrame, fc, dt, out: Path) -> list[Path]:
    """attention_time_<dt>.png from the kernel rows at kv_len=fc.kv_len ([] without any)."""
    import matplotlib.pyplot as plt  # backend: pyplot after draw_figures' matplotlib.use("Agg")

    shapes, batches = sorted(line["shape"].unique()), sorted(line.batch.unique())
    if not shapes:
        return []
    fig, axes = plt.subplots(
        len(shapes), len(batches), squeeze=False, sharex=True, figsize=(3.2 * len(batches), 2.6 * len(shapes))
    )
    for (i, s), (j, b) in itertools.product(enumerate(shapes), enumerate(batches)):
        ax = axes[i][j]
        for impl, g in line[(line["shape"] == s) & (line.batch == b)].groupby("impl"):
            g = g.sort_values("tree_size")
            ax.errorbar(
                g.tree_size,
                g.median_s * 1e3,
                yerr=[(g.median_s - g.q25_s) * 1e3, (g.q75_s - g.median_s) * 1e3],
                marker="o",
                ms=3,
                capsize=2,
                label=impl,
                color=COLORS.get(impl),
            )
        ax.set(xscale="log", yscale="log", title=f"{s}, batch {b}")
        ticks = sorted(line.tree_size.unique())
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        if j == 0:
            ax.set_ylabel("ms (median, bar = IQR)")
        if i == len(shapes) - 1:
            ax.set_xlabel("tree size N (draft tokens)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"tree attention time, kv_len {fc.kv_len}, {dt}")
    return [_save(fig, out / f"attention_time_{dt}.png")]


def _speedup_figure(ratio: pd.DataFrame, norm, fc, dt, out: Path) -> list[Path]:
    """attention_speedup_<dt>.png: a panel per shape of ``ratio`` (``heatmap.ratios`` at batch=fc.batch),
    drawn as the report draws it (``heatmap.draw``); [] without any."""
    import matplotlib.pyplot as plt  # backend: pyplot after draw_figures' matplotlib.use("Agg")

    shapes = sorted(ratio["shape"].unique())
    if not shapes:
        return []
    fig, axes = plt.subplots(1, len(shapes), squeeze=False, figsize=(4.2 * len(shapes), 3.6))
    for ax, s in zip(axes[0], shapes):
        fig.colorbar(heatmap.draw(ax, ratio[ratio["shape"] == s], norm, s), ax=ax, label=heatmap.COLORBAR)
    fig.suptitle(f"fused speedup over per-branch attention, batch {fc.batch}, {dt}")
    return [_save(fig, out / f"attention_speedup_{dt}.png")]


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt  # backend: pyplot after draw_figures' matplotlib.use("Agg")

    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    plt.close(fig)
    return path


def main_run(cfg: DictConfig) -> pd.DataFrame:
    validate(cfg)
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    points = grid_points(cfg)
    dims, source = (dict(cfg.dims), "config") if cfg.dims else ai.target_dims(cfg.model.target)
    out = Path(to_absolute_path(cfg.out_csv))  # the rows merged or redrawn: checked before any timing
    check_out(str(out), "out_csv")  # a folder, a path under a file, a read-only place: one line, before any timing
    check_writable("fig_dir", cfg.fig_dir, to_absolute_path(cfg.fig_dir))
    old = read_existing(out, KEY) if out.exists() and (cfg.merge or not (points or cfg.model_view)) else None
    t0 = time.perf_counter()
    rows = []
    if points:
        limits = {"bw": memory_bandwidth(cfg.bandwidth_mb)}
        for dt in {p[4] for p in points}:
            limits[dt] = peak_flops(cfg.matmul_n, DTYPES[dt])
        print(
            f"bandwidth {limits['bw'] / 1e9:.1f} GB/s, peak "
            + ", ".join(f"{k} {v / 1e9:.0f} GFLOP/s" for k, v in limits.items() if k != "bw")
        )
        for point, impls in tqdm(points.items(), desc="attention grid", disable=not cfg.progress):
            rows += bench_point(cfg, point, impls, dims, limits)
    if cfg.model_view:
        rows += model_view(cfg)
    if rows:
        df = pd.DataFrame(rows)
        df["dims_source"], df["grid"] = source, cfg.grid
        df["threads"], df["torch"] = torch.get_num_threads(), torch.__version__
        me = machine.identity()  # the benchmark times CPU tensors
        df["machine"], df["machine_id"], df["host"] = me["machine"], me["machine_id"], me["host"]
        df["run_wall_s"] = time.perf_counter() - t0
        if (why := all_failed(df)) is not None:
            raise RuntimeError(why)
        df = merge_rows(old, df, KEY) if old is not None else df
    elif (df := old) is None:  # else grid=none, model_view=false: refresh derived columns, redraw figures
        raise ValueError(f"grid={cfg.grid} with model_view=false measures nothing; no {out} to redraw from")
    df = finish(df.sort_values(KEY, kind="stable").reset_index(drop=True))
    publish_run(df, out, Path(to_absolute_path(cfg.fig_dir)), cfg.figures)
    print(
        f"{'wrote' if rows else 'redrew figures from'} {cfg.out_csv} ({len(df)} rows) "
        f"in {time.perf_counter() - t0:.0f}s"
    )
    return df


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="attention_bench")
def hydra_main(cfg: DictConfig) -> None:
    try:
        main_run(cfg)
    except (ValueError, KeyError, RuntimeError) as e:  # registry's UnknownName is a KeyError
        msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
        print(f"specbench: error: {(msg.strip().splitlines() or [type(e).__name__])[0]}", file=sys.stderr)
        sys.exit(2 if isinstance(e, (ValueError, KeyError)) else 1)


def main() -> None:
    """`python -m specbench.attention_bench`: a bad value, or a disk it cannot write, is one line."""
    check_keys(sys.argv[1:], top=top_keys("attention_bench"))  # foo=1, +foo=1: one line
    check_dirs(sys.argv[1:], ("hydra.run.dir",))  # Hydra's own folder: writable before it starts
    run_hydra(hydra_main)


if __name__ == "__main__":
    main()
