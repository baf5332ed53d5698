"""A measured forward-cost curve read from costs.csv rows (``study.costs`` writes them): the
seconds of one forward against its query tokens, at a ``KV``-token context.

Each row is one (role, pair, dtype, KV length, n_tokens) point with its median ``seconds``;
the curve weights the measured KV lengths that bracket ``KV`` linearly (``kv_weights``) and
interpolates linearly between measured sizes.  Used by the report's cost model (with every
repeat, for its bootstrap) and by Sequoia's hardware-aware size (medians).  csv and numpy only.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable

import numpy as np

KV = 256  # the context a step is costed at: the study's prompts (~50-400 tokens) + up to 128 new


def kv_weights(kvs: Iterable[int]) -> dict[int, float]:
    """Linear interpolation weights of the measured KV lengths at ``KV`` (clamped)."""
    kvs = sorted(set(kvs))
    lo = max([k for k in kvs if k <= KV], default=kvs[0])
    hi = min([k for k in kvs if k >= KV], default=kvs[-1])
    if lo == hi:
        return {lo: 1.0}
    f = (KV - lo) / (hi - lo)
    return {lo: 1 - f, hi: f}


def read_curve(path: str, pair: str, role: str, dtype: str, device: str = "cpu") -> Callable[[float], float]:
    """seconds(n) of this pair's ``role`` forward in ``dtype`` on ``device`` from a costs.csv
    (rows that name no device are the CPU's); one line naming the fix when it has no such rows."""
    with open(path, newline="") as f:
        rows = [
            r
            for r in csv.DictReader(f)
            if (r["pair"], r["role"], r.get("dtype"), r.get("device") or "cpu") == (pair, role, dtype, device)
        ]
    if not rows:
        raise ValueError(
            f"{path}: no {role} costs of pair {pair} in {dtype} on {device}: run `python -m specbench.study.costs "
            f"pair={pair} dtype={dtype} device={device}` first"
        )
    kv = [int(r.get("kv_len") or KV) for r in rows]
    weights = kv_weights(kv)
    points: dict[int, float] = {}
    for r, k in zip(rows, kv):
        if k in weights:
            points[int(r["n_tokens"])] = points.get(int(r["n_tokens"]), 0.0) + weights[k] * float(r["seconds"])
    xs = np.array(sorted(points), float)
    ys = np.array([points[int(x)] for x in xs])
    return lambda n: float(np.interp(n, xs, ys))
