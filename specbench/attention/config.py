"""The attention benchmark's config checks and its merge rule (no timing here).

``validate(cfg)``: every scalar the benchmark reads is checked before anything
is measured (``repeats=0``, ``grid=nope``, ``threads=-1``, ``seed=-1``, ``dims.heads=0``...), each integer
within a range that fits this machine (``bounds``: ``threads`` at most its cores, a tensor an option
sizes in half its memory), read as the study reads an integer (``study.job.errors.as_int``: 3.0 is 3, and
``cfg`` holds the integer after): a one-line ValueError naming the key and the fix.  ``merge_rows(old, new, key)``: the rows of
``results/attention.csv`` after a run: a new row replaces the old row of its
point and implementation timed on the same machine (``one_machine``: the figures and report show the
machine that timed the most rows), except that a failed measurement (``note`` starting
with ``failed``) never replaces a good one.  ``all_failed(new)``: the one line
for a run in which nothing was measured (the CSV is then left as it is).
``read_existing(path, key)``: the CSV a run merges into or redraws, checked before any timing.
``check_grid(cfg, ...)``: the grid's slices (their axes, implementations and shapes; ``check_slice``,
``check_impls``), checked by ``bench.grid_points`` before any timing: every check of the config is here.
"""

from __future__ import annotations

import math
import os

import pandas as pd

from ..results.files import read_attention
from ..results.upsert import key_text, replace_rows
from ..study.job.errors import as_int
from .heatmap import machines


def memory_bytes() -> int:
    """This machine's physical memory (the bound of the options that size a tensor)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 2**34


def bounds() -> dict[str, tuple[int, int, str]]:
    """key -> (minimum, maximum, fix): the integer options, each bounded by what this machine holds (a
    tensor an option sizes fits in half its memory, threads at most its cores), null not allowed."""
    half = memory_bytes() // 2
    return {
        "repeats": (1, 10**5, "timed calls per point, e.g. repeats=7"),
        "min_repeats": (1, 10**5, "e.g. min_repeats=3"),
        "bursts": (1, 1000, "bursts of repeats at most, the steadiest kept, e.g. bursts=3"),
        "warmup": (0, 10**5, "untimed calls first, e.g. warmup=2"),
        "bandwidth_mb": (
            1,
            half // 2 // 2**20,
            "the copied tensor and its copy fit in half the memory; e.g. bandwidth_mb=512",
        ),
        "matmul_n": (
            1,
            int((half / 12) ** 0.5),
            "three float32 n x n matrices fit in half the memory; e.g. matmul_n=2048",
        ),
        "check_max_elems": (
            0,
            half // 4,
            "a float32 score matrix that fits in half the memory; e.g. check_max_elems=40000000",
        ),
        "model.repeats": (1, 10**4, "e.g. model.repeats=3"),
        "figures.kv_len": (1, 2**20, "the figures' KV length, e.g. figures={kv_len: 1024, batch: 1}"),
        "figures.batch": (1, 4096, "the heatmap's batch, e.g. figures={kv_len: 1024, batch: 1}"),
        "seed": (0, 2**63 - 1, "e.g. seed=0"),
    }


DIMS = ("heads", "kv_heads", "head_dim")
BOOLS = ("check", "merge", "progress", "model_view")


def _get(cfg, dotted: str):
    node = cfg
    for part in dotted.split("."):
        node = node.get(part) if hasattr(node, "get") else None
    return node


def _set(cfg, dotted: str, value) -> None:
    node = cfg
    *up, last = dotted.split(".")
    for part in up:
        node = node[part]
    node[last] = value


def validate(cfg) -> None:
    """One-line ValueError for the first bad value (see the module docstring)."""
    grids = cfg.get("grids") or {}
    if cfg.get("grid") not in grids:
        raise ValueError(
            f"grid={cfg.get('grid')!r} is unknown: use one of {', '.join(grids)} "
            "(or add a list of slices under grids.<name>)"
        )
    for key, (minimum, maximum, fix) in bounds().items():  # an integral float (3.0) is read as its integer
        _set(cfg, key, as_int(_get(cfg, key), key, minimum, fix, maximum))
    for key in BOOLS:
        if not isinstance(cfg.get(key), bool):
            raise ValueError(f"{key}={cfg.get(key)!r}: must be true or false")
    secs = cfg.get("max_seconds")
    if isinstance(secs, bool) or not isinstance(secs, (int, float)) or not 0 < secs <= 3600:
        raise ValueError(f"max_seconds={secs!r}: must be a number > 0 and <= 3600 (per point); e.g. max_seconds=1.0")
    steady = cfg.get("steady_iqr")
    if isinstance(steady, bool) or not isinstance(steady, (int, float)) or not 0 < steady < math.inf:
        raise ValueError(f"steady_iqr={steady!r}: must be a finite number > 0 (IQR / median); e.g. steady_iqr=0.25")
    if cfg.get("threads") is not None:
        cfg["threads"] = as_int(
            cfg.get("threads"), "threads", 1, "or null for torch's default (every core)", os.cpu_count() or 1
        )
    check_dims(cfg.get("dims"))


def check_dims(dims) -> None:
    """``dims``: null (the target's) or {heads, kv_heads, head_dim}, each an integer in [1, 4096], heads a
    multiple of kv_heads (one line naming the key)."""
    if dims is None:
        return
    if not hasattr(dims, "get") or set(dims) != set(DIMS):
        raise ValueError(
            f"dims={dims!r}: must be null or {{heads: H, kv_heads: K, head_dim: D}}, e.g. dims={{heads: 12, kv_heads: 2, head_dim: 128}}"
        )
    for key in DIMS:
        dims[key] = as_int(dims.get(key), f"dims.{key}", 1, "e.g. dims={heads: 12, kv_heads: 2, head_dim: 128}", 4096)
    if dims.get("heads") % dims.get("kv_heads"):
        raise ValueError(f"dims.heads={dims.get('heads')} is not a multiple of dims.kv_heads={dims.get('kv_heads')}")


def failed(df: pd.DataFrame) -> pd.Series:
    return df.get("note", pd.Series("", index=df.index)).fillna("").astype(str).str.startswith("failed")


def merge_rows(old: pd.DataFrame, new: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """old + new, new replacing old per key on the same machine (``machine_id``: another machine's rows are
    kept beside; ``results.upsert.replace_rows``), except that a failed new row never replaces a good old one."""
    if not set(key) <= set(old.columns):
        return new
    key = [*key, "machine_id"]
    old, new = old.assign(machine_id=machines(old)), new.assign(machine_id=machines(new))
    good_old = set(key_text(old[~failed(old)], key))
    return replace_rows(old, new[~(failed(new) & key_text(new, key).isin(good_old))], key)


def read_existing(path, key: list[str]) -> pd.DataFrame:
    """The CSV a run merges into (``merge=true``) or redraws (``grid=none``), checked before anything is
    measured (``results.files.read_attention``): a cut, binary or foreign file is one line naming ``out_csv``."""
    return read_attention(path, key)


def all_failed(new: pd.DataFrame) -> str | None:
    """The one line for a run whose every measurement failed (None if any succeeded)."""
    bad = failed(new)
    if len(new) and bad.all():
        first = str(new.loc[bad.idxmax(), "note"])
        return (
            f"all {len(new)} measurements failed (first: {first}); results left as they were: fix the cause and rerun"
        )
    return None


GRID_AXES = ("batch", "kv_len", "tree_size", "shape", "dtype")  # every slice's axes


def check_grid(cfg, known, dtypes, shape) -> None:
    """The grid ``cfg.grid`` names and each of its slices, before anything is measured: the grid known, the default
    and each slice's implementations (``check_impls``), each slice's axes present and their values
    (``check_slice``), each shape a static one (``shape(name)`` raises the registry's one line)."""
    grids = cfg.grids
    if cfg.grid not in grids:
        raise ValueError(
            f"grid={cfg.grid} is unknown; valid: {', '.join(grids)} (or add a list of slices under grids.<name>)"
        )
    check_impls("impls", list(cfg.impls), known)  # the default list, also where every slice names its own
    for sl in grids[cfg.grid]:
        missing = [a for a in GRID_AXES if a not in sl]
        if missing:
            raise ValueError(f"grids.{cfg.grid}: a slice lacks {missing}; every slice needs {GRID_AXES}")
        check_impls(f"grids.{cfg.grid}.impls", list(sl.get("impls") or cfg.impls), known)
        check_slice(cfg.grid, sl, dtypes)
        for name in sl.shape:
            shape(name)


def check_slice(grid: str, sl, dtypes) -> None:
    """One grid slice's axes: dtypes known, batch and tree size >= 1, KV length >= 0 (one line
    naming ``grids.<grid>.<axis>``), before anything is measured."""
    for dt in sl["dtype"]:
        if dt not in dtypes:
            raise ValueError(f"grids.{grid}.dtype: '{dt}' is not one of {', '.join(dtypes)}")
    for axis, low in (("batch", 1), ("kv_len", 0), ("tree_size", 1)):
        for v in sl[axis]:
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ValueError(f"grids.{grid}.{axis}: {v!r} must be an integer >= {low}")


def check_impls(key: str, names: list, known) -> None:
    """Each implementation name known (``known(name)`` raises the registry's one line) and named once."""
    for i, name in enumerate(names):
        known(name)
        if name in names[:i]:
            raise ValueError(f"{key}: {name!r} is named twice; give each implementation once")
