"""Sequoia's optimal static tree (Chen et al. 2024, "Sequoia", Sec. 3.1).

Acceptance vector P: P[k] = probability that the sibling of rank k is the
accepted child of an accepted node (measured by ``python -m
specbench.study.tools.calibrate``; Sequoia's positional acceptance assumption says it does
not depend on the node).  Under that assumption the expected number of
accepted draft tokens of a tree is exactly

    E = sum over draft nodes v of  prod over the nodes u on v's path of P[rank(u)]

(`expected_accepted`).  The DP maximises E over trees of N draft nodes, at
most K = len(P) children per node and depth <= D.  With G_d[m] the best value
of a subtree of m nodes (its root counted as 1) and depth <= d below its root,
and T_d[n, b] the best value of n nodes whose root has b children,

    T_d[n, b] = max_m  T_d[n - m, b - 1] + P[b-1] * G_{d-1}[m],    T_d[1, 0] = 1
    G_d[n]    = max_b  T_d[n, b]

(Sequoia's T[n,b] = max_m T[n-m, b-1] + P[b]·Tmax[m] with a depth index;
ranks here are 0-based).  The tree of N draft tokens is G_D[N + 1] - 1.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.tree import RankPath, sort_paths
from ..results.costcurve import AT_CONTEXT, read
from ..results.files import vector_rows
from .base import Params, optional, positive, static_shape

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VECTOR = "results/acceptance_vector.csv"
CALIBRATE_HINT = "python -m specbench.study.tools.calibrate"
AUTO = "auto"  # tree.calib_pair_id: the job's own pair_id


def expected_accepted(paths: Sequence[Sequence[int]], vector: Sequence[float]) -> float:
    """Exact expected accepted draft tokens of a rank-path tree under `vector`
    (ranks beyond the vector have probability 0)."""
    value: dict[RankPath, float] = {(): 1.0}
    total = 0.0
    for p in sort_paths(paths):
        r = p[-1]
        v = value[p[:-1]] * (float(vector[r]) if r < len(vector) else 0.0)
        value[p] = v
        total += v
    return total


@functools.lru_cache(maxsize=256)
def _solve(vector: tuple[float, ...], n_nodes: int, depth: int):
    """DP tables for subtrees of up to n_nodes nodes (root included)."""
    K, P = len(vector), np.asarray(vector, dtype=np.float64)
    size = n_nodes + 1
    g_prev = np.full(size, -np.inf)
    g_prev[1] = 1.0  # depth 0: a lone node
    tables = []  # per d: (arg_m [size, K+1], best_b [size])
    for _ in range(depth):
        t = np.full((size, K + 1), -np.inf)
        t[1, 0] = 1.0
        arg_m = np.zeros((size, K + 1), dtype=np.int64)
        feasible = np.isfinite(g_prev)
        for b in range(1, K + 1):
            child = np.where(feasible, P[b - 1] * np.where(feasible, g_prev, 0.0), -np.inf)
            for n in range(2, size):
                m = np.arange(1, n)  # size of the rank-(b-1) child's subtree
                vals = t[n - m, b - 1] + child[m]
                j = int(np.argmax(vals))
                t[n, b], arg_m[n, b] = vals[j], m[j]
        best_b = np.argmax(t, axis=1)
        g_prev = t[np.arange(size), best_b]
        tables.append((arg_m, best_b, g_prev))
    return tables, g_prev


def _vector(vector: Sequence[float], budget: int, depth: int | None) -> tuple[tuple[float, ...], int, int]:
    """(vector, budget, depth) checked; zero-probability ranks appended where len(vector)
    ranks cannot place ``budget`` nodes within ``depth``."""
    vec = tuple(float(x) for x in vector)
    if not vec or any(not (0.0 <= x <= 1.0) for x in vec):
        raise ValueError(f"acceptance vector {list(vec)}: needs >= 1 probabilities in [0, 1]")
    budget = int(budget)
    depth = budget if depth is None else min(int(depth), budget)
    if budget < 1 or depth < 1:
        raise ValueError(f"sequoia: budget={budget} and depth={depth} must be >= 1")
    while sum(len(vec) ** d for d in range(1, depth + 1)) < budget:
        vec += (0.0,)  # too few ranks to place N nodes: extra ranks are worth 0
    return vec, budget, depth


def optimal_paths(vector: Sequence[float], budget: int, depth: int | None = None) -> list[RankPath]:
    """Rank paths of the tree with `budget` draft nodes and depth <= `depth`
    (default: unbounded) that maximises `expected_accepted`.  Children per
    node are limited to len(vector), unless that cannot hold `budget` nodes
    within the depth; then zero-probability ranks are appended as needed."""
    vec, budget, depth = _vector(vector, budget, depth)
    tables, g = _solve(vec, budget + 1, depth)
    assert math.isfinite(g[budget + 1])
    return _paths(tables, budget + 1, depth)


def _paths(tables, n_nodes: int, depth: int) -> list[RankPath]:
    """The DP's tree of ``n_nodes`` nodes (root included) and depth <= ``depth``."""
    paths: list[RankPath] = []

    def build(prefix: RankPath, n: int, d: int) -> None:  # subtree of n nodes, depth budget d
        if n == 1:
            return
        arg_m, best_b, _ = tables[d - 1]
        b = int(best_b[n])
        while b > 0:  # peel children b-1, b-2, ..., 0
            m = int(arg_m[n, b])
            child = prefix + (b - 1,)
            paths.append(child)
            build(child, m, d - 1)
            n, b = n - m, b - 1

    build((), n_nodes, depth)
    return sort_paths(paths)


def draft_forwards(paths: Sequence[RankPath]) -> list[int]:
    """Tokens per draft forward of a static tree: the root, then each depth's nodes with children."""
    parents = {p[:-1] for p in paths if len(p) > 1}
    depth = max((len(p) for p in parents), default=0)
    return [1] + [sum(len(p) == d for p in parents) for d in range(1, depth + 1)]


def fastest_paths(vector: Sequence[float], budget: int, depth: int | None, t_draft, t_target) -> list[RankPath]:
    """Sequoia's hardware-aware size: among the DP trees of n <= ``budget`` nodes and depth
    <= ``depth``, the one with the most expected tokens per second, (1 + E) / (its draft
    forwards, ``draft_forwards``, + a target forward over n + 1 tokens) on the cost curves."""
    vec, budget, depth = _vector(vector, budget, depth)
    tables, _ = _solve(vec, budget + 1, depth)
    best: list[RankPath] = [(0,)]
    best_rate = -1.0
    for d in range(1, depth + 1):
        g = tables[d - 1][2]
        for n in range(1, budget + 1):
            if not math.isfinite(g[n + 1]):
                continue
            paths = _paths(tables, n + 1, d)
            cost = sum(t_draft(k) for k in draft_forwards(paths)) + t_target(n + 1)
            rate = float(g[n + 1]) / cost  # g counts the root: 1 + expected accepted
            if rate > best_rate + 1e-12:
                best, best_rate = paths, rate
    return best


def _resolve(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p if p.is_absolute() or p.exists() else ROOT / p


@functools.lru_cache(maxsize=8)
def _read_rows(file: str, mtime_ns: int) -> tuple[dict, ...]:
    """The rows of an acceptance_vector.csv, checked first (``results.files.vector_rows``: a cut, binary
    or garbled file, a rank or p_accept out of range, is one ValueError naming it)."""
    return vector_rows(file, "tree.vector")


def load_vector(
    path: str | os.PathLike = DEFAULT_VECTOR,
    pair_id: str | None = None,
    dataset: str | None = None,
    verify: str | None = None,
    temperature: float | None = None,
) -> list[float]:
    """The calibrated vector (p_accept by rank) for one pair/dataset/verify/temperature
    from an acceptance_vector.csv; None keys match anything (first match wins).  A pair is
    matched by its ``pair_id`` (draft + target content, ``study.job.identity``), never by name."""
    want = {"pair_id": pair_id, "dataset": dataset, "verify": verify}
    file = _resolve(path)
    what = ", ".join(f"{k}={v}" for k, v in {**want, "temperature": temperature}.items() if v is not None)
    hint = (
        f"no calibrated acceptance vector for {what or 'any pair'} in {file}: run "
        f"`{CALIBRATE_HINT} pair=... dataset={dataset or '...'} verify={verify or '...'}` for this pair first"
    )
    if not file.exists():
        raise FileNotFoundError(hint)
    rows: dict[tuple, dict[int, float]] = {}
    for row in _read_rows(str(file), file.stat().st_mtime_ns):
        if any(v is not None and row.get(k) != str(v) for k, v in want.items()):
            continue
        if temperature is not None and not math.isclose(float(row["temperature"]), float(temperature)):
            continue
        key = (row.get("pair_id"), row["dataset"], row["verify"], row["temperature"])
        rows.setdefault(key, {})[int(row["rank"])] = float(row["p_accept"])
    if not rows:
        raise FileNotFoundError(hint)
    by_rank = next(iter(rows.values()))
    return [by_rank.get(r, 0.0) for r in range(max(by_rank) + 1)]


@dataclass(frozen=True)
class SequoiaParams(Params):
    """`vector`: a list of probabilities or the path of an acceptance_vector.csv (rows
    picked by the calib_* keys; ``calib_pair_id=auto`` is the job's own pair, filled in by
    the study layer before the policy is made)."""

    depth: int | None = positive()
    vector: Any = DEFAULT_VECTOR
    max_children: int | None = positive()
    calib_pair_id: str | None = None
    calib_dataset: str | None = None
    calib_verify: str | None = None
    calib_temperature: float | None = None
    # hardware-aware size (``fastest_paths``): with a costs.csv, the budget and depth are the
    # largest tried and the tree is the fastest DP tree on this pair's cost curves
    costs: str | None = optional()
    cost_pair: str | None = optional()
    cost_dtype: str | None = optional()
    cost_device: str | None = optional()  # the curves' device (default cpu)

    @property
    def chooses_size(self) -> bool:
        """With cost curves the tree has the size it chose (at most the budget)."""
        return bool(self.costs)


@static_shape("sequoia", SequoiaParams)
def sequoia(budget: int, params: SequoiaParams) -> list[RankPath]:
    """The DP-optimal tree (``SequoiaParams``)."""
    p = params
    if isinstance(p.vector, (str, os.PathLike)):
        if p.calib_pair_id == AUTO:
            raise ValueError(
                "tree.calib_pair_id=auto names the job's own pair and is resolved by "
                "`python -m specbench.run`: pass a pair_id from the acceptance_vector.csv"
            )
        vec = load_vector(p.vector, p.calib_pair_id, p.calib_dataset, p.calib_verify, p.calib_temperature)
    else:
        vec = [float(x) for x in p.vector]
        if sum(vec) > 1 + 1e-4:  # at most one child is the accepted one: rank k's chances exclude each other
            raise ValueError(
                f"tree.vector={vec} sums to {sum(vec):.4g} > 1: the probability that the rank-k child is the "
                "accepted one, summed over k, is at most 1; calibrate one (python -m specbench.study.tools.calibrate)"
            )
    if p.max_children:
        vec = vec[: int(p.max_children)]
    if p.costs:
        if not (p.cost_pair and p.cost_dtype):
            raise ValueError("tree.costs needs tree.cost_pair and tree.cost_dtype (the curves' pair and dtype)")
        path = _resolve(p.costs)
        return list(
            _fastest(
                tuple(vec),
                budget,
                p.depth,
                str(path),
                (p.cost_pair, p.cost_dtype, p.cost_device or "cpu"),
                path.stat().st_mtime_ns,
            )
        )
    return optimal_paths(vec, budget, p.depth)


@functools.lru_cache(maxsize=32)
def _fastest(vec, budget: int, depth, path: str, curve: tuple, mtime_ns: int) -> tuple[RankPath, ...]:
    """``fastest_paths`` on the (pair, dtype, device) curves of a costs.csv (cached per file
    version: a policy is made per prompt)."""
    pair, dtype, device = curve
    t_draft, t_target = (read(path, AT_CONTEXT, pair, role, dtype, device).seconds for role in ("draft", "target"))
    return tuple(fastest_paths(vec, budget, depth, t_draft, t_target))
