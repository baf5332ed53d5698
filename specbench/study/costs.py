"""`python -m specbench.study.costs [overrides]`: forward costs and the machine, for the report.

Measures one forward of the drafter's model and of the target over n new tree
tokens on top of a `kv_len`-token cache, through the engine's own slot cache
(``kv.SlotKV``, the tree is dropped again after each forward), ``costs_repeats``
times per shape (median as ``seconds``, with ``seconds_min`` / ``seconds_max``), for
the pair in the config, and writes its rows into results/costs.csv (role, pair,
dtype, n_tokens; other pairs' and dtypes' rows are kept, so one run per pair and
dtype fills the table) and results/environment.json (hardware, library versions,
models).  The drafter's model is what it forwards per tree depth
(``Drafter.forward_model``): the draft model, the layer-skip view of the target
(its own forward), or none (n-gram).  The report's projected speedup turns
acceptance into time with these costs.

One process can measure several pairs and dtypes (``+costs_pairs=[qwen_coder,smollm_qwen]``,
``+costs_dtypes=[bfloat16,float32]``): a model shared by pairs (every pair's target here)
is measured once per dtype, and its rows are written under each pair.

Keys (top level, all optional): ``results_dir`` (default results), ``costs_repeats``
(default 5, >= 1), ``costs_kv_len`` (default 256, >= 1), ``costs_pairs`` (pair config
names; default the ``pair`` group's), ``costs_dtypes`` (default ``dtype``).  Bad values,
a bad dtype, pair or device are refused in one line before any model loads.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable

import hydra
import pandas as pd
import torch
from omegaconf import DictConfig
from tqdm import tqdm

from .. import CONF_DIR
from ..core.kv import SlotKV
from ..core.tree import paths_to_parents
from ..trees.policies import shape_paths
from .context import context, new_drafters
from .jobspec import ConfigError, JobSpec, from_config, resolved
from .launch import pair_config
from .results import atomic_write, write_csv

SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


def token_range(model) -> tuple[int, int]:
    vocab = model.get_input_embeddings().num_embeddings
    return min(100, vocab // 2), min(1000, vocab)


def synchronizer(model) -> Callable[[], None]:
    """What waits for the model's kernels before a clock is read: CUDA runs them
    asynchronously (time kernels, not launches); on the CPU, nothing."""
    return torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)


def forward_costs(kv: SlotKV, row: int, n: int, repeats: int) -> list[float]:
    """Seconds of ``repeats`` forwards over an n-node binary tree on the row's cache
    (each tree dropped again: nothing is committed)."""
    parents = paths_to_parents(shape_paths("binary", n - 1)) if n > 1 else [-1]
    tokens = torch.randint(*token_range(kv.model), (len(parents),)).tolist()
    sync = synchronizer(kv.model)
    out = []
    for _ in range(repeats):
        kv.flush()
        sync()
        t0 = time.perf_counter()
        kv.forward([(row, parents, tokens, 0)])
        sync()
        out.append(time.perf_counter() - t0)
        kv.commit(row, [])
    return out


def environment(pair) -> dict:
    import transformers

    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "draft": pair.draft_name,
        "target": pair.target_name,
        "device": str(pair.target.device),
        "dtype": str(pair.target.dtype).replace("torch.", ""),
    }


def cost_rows(
    pair, kv_len: int, repeats: int, sizes=SIZES, progress: bool = True, memo: dict | None = None
) -> list[dict]:
    """Forward-cost rows of the pair's drafter model (role draft) and of its target;
    ``memo`` (model -> its measurements) measures a model shared by pairs once."""
    drafter_model = new_drafters(pair, 1.0, 1.0)().forward_model()
    dtype = str(pair.target.dtype).replace("torch.", "")
    memo = {} if memo is None else memo
    rows = []
    for role, model in (("draft", drafter_model), ("target", pair.target)):
        if model is None:
            continue
        key = (id(model), role)
        if key not in memo:
            memo[key] = measure(model, kv_len, repeats, sizes, f"{pair.name} {role} forward cost", progress)
        rows += [
            {"role": role, "pair": pair.name, "dtype": dtype, "kv_len": kv_len, "repeats": repeats, **m}
            for m in memo[key]
        ]
    return rows


def measure(model, kv_len: int, repeats: int, sizes, desc: str, progress: bool) -> list[dict]:
    """Median, min and max seconds of each forward size on a ``kv_len``-token slot cache."""
    kv = SlotKV(model)
    row = kv.add(torch.randint(*token_range(model), (kv_len + 1,)).tolist())
    forward_costs(kv, row, 1, 1)  # warm-up: the prefill and the first allocation
    out = []
    for n in tqdm(sizes, desc=desc, disable=not progress):
        secs = forward_costs(kv, row, n, repeats)
        out.append(
            {"n_tokens": n, "seconds": statistics.median(secs), "seconds_min": min(secs), "seconds_max": max(secs)}
        )
    return out


def merge_rows(path: str, rows: list[dict]) -> pd.DataFrame:
    """The cost table at ``path`` with this pair's rows of this dtype replaced by ``rows``
    (rows from before costs had a dtype column are dropped)."""
    new = pd.DataFrame(rows)
    if not os.path.exists(path):
        return new
    old = pd.read_csv(path)
    if not {"pair", "dtype"} <= set(old.columns):
        return new
    if not new.empty:
        mine = set(zip(new.pair.astype(str), new.dtype.astype(str)))
        old = old[[k not in mine for k in zip(old.pair.astype(str), old.dtype.astype(str))]]
    return pd.concat([old, new], ignore_index=True)


def settings(job: JobSpec) -> tuple[str, int, int, list[JobSpec]]:
    """(results_dir, repeats, kv_len, [the job of each (pair, dtype) measured]) from the job
    spec's own keys (``JobSpec.extra``), refused in one line when out of range (no model load)."""
    from .checks import validate

    opts = job.extra
    out = str(opts.get("results_dir", "results"))
    repeats, kv_len = opts.get("costs_repeats", 5), opts.get("costs_kv_len", 256)
    for key, value in (("costs_repeats", repeats), ("costs_kv_len", kv_len)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{key}={value!r}: must be an integer >= 1 (e.g. +{key}=5)")
    jobs = []
    for name in list(opts.get("costs_pairs") or [job.pair.name]):
        try:
            pair_cfg = job.pair.as_dict() if name == job.pair.name else pair_config(name)
        except ValueError as e:
            raise ConfigError(f"costs_pairs: {e}") from None
        for dtype in list(opts.get("costs_dtypes") or [job.dtype]):
            one = from_config({**job.to_dict(), "pair": pair_cfg, "dtype": dtype})
            validate(one)  # dtype, device, pair: the job spec's checks
            jobs.append(one)
    return out, repeats, kv_len, jobs


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    try:  # costs measure forwards: the tree group plays no part
        job = from_config({**resolved(cfg), "tree": {"name": "none", "budget": 0}})
        out, repeats, kv_len, jobs = settings(job)
    except ConfigError as e:
        print(f"specbench.study.costs: {e}", file=sys.stderr)
        sys.exit(2)
    rows: list[dict] = []
    memo: dict = {}
    for one in jobs:
        pair = context(one).load_pair()
        rows += cost_rows(pair, kv_len, repeats, progress=job.progress, memo=memo)
    write_csv(merge_rows(os.path.join(out, "costs.csv"), rows), os.path.join(out, "costs.csv"))
    pair = context(job).load_pair()
    env = environment(pair)
    atomic_write(
        os.path.join(out, "environment.json"),
        lambda tmp: open(tmp, "w").write(json.dumps(env, indent=1, sort_keys=True) + "\n"),
    )
    print(f"specbench: wrote {out}/costs.csv ({pair.name}) and {out}/environment.json")


if __name__ == "__main__":
    main()
