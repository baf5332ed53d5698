"""`python -m specbench.study.tools.costs [overrides]`: forward costs and the machine, for the report.

Measures one forward of the drafter's model and of the target over n new tree
tokens on top of a `kv_len`-token cache (each of ``costs_kv_lens``), through the engine's
own slot cache (``kv.SlotKV``, the tree is dropped again after each forward), ``costs_repeats``
times per shape, interleaved across shapes (``measure``: median as ``seconds``, with min, max,
quartiles and every repeat in ``samples``), for
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

Another machine's curve (a GPU's: ``device=cuda``, rows and ``environment-cuda.json`` name
it) comes home with ``+costs_merge=PATH/costs.csv`` (no model load).  A model spec with
``weights: random`` times its architecture alone (the rows' ``weights`` column says so), for
a machine the model files cannot reach.

Keys (top level, all optional): ``results_dir`` (default results), ``costs_repeats``
(default 7, >= 1), ``costs_kv_lens`` (default [128, 512], each >= 1), ``costs_pairs`` (pair config
names; default the ``pair`` group's), ``costs_dtypes`` (default ``dtype``), ``costs_max_tokens`` (default
none: every width 1..128; 17 keeps the batch-1 trees' widths, 1..17, the default run's narrow curve on a slow
machine).  Bad values,
a bad dtype, pair or device, KV lengths past a model's positions (``check_positions``, from its
config), a garbled costs.csv to merge into or to merge (``core.readers``) are refused in one line,
exit 2, before any model loads.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from typing import NoReturn

import hydra
import numpy as np
import pandas as pd
import torch
import transformers
from omegaconf import DictConfig
from tqdm import tqdm

from ... import CONF_DIR
from ...core import forwards, readers
from ...core.kv import SlotKV
from ...core.tree import paths_to_parents
from ...inputs import machine
from ...results import costtable
from ...results.costtable import CURVE, ROW
from ...results.upsert import key_text, replace_rows, upsert
from ...trees.policies import shape_paths
from ..job import argv, toolopts
from ..job.checks import validate
from ..job.context import context, new_drafters
from ..job.errors import ConfigError
from ..job.jobspec import JobSpec, from_config, resolved
from ..job.launch import pair_config
from .sizes import COST_SIZES, cost_sizes

SIZES = COST_SIZES  # every draft frontier and verify width of the dense budget grid (sizes.py)
# the study's contexts lie between (prompts of ~50-400 tokens + 128 new)
KV_LENS = tuple(toolopts.OPTIONS["costs_kv_lens"].default)


def token_range(model) -> tuple[int, int]:
    vocab = model.get_input_embeddings().num_embeddings
    return min(100, vocab // 2), min(1000, vocab)


def synchronizer(model) -> Callable[[], None]:
    """What waits for the model's kernels before a clock is read: CUDA runs them
    asynchronously (time kernels, not launches); on the CPU, nothing."""
    return torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)


def forward_cost(kv: SlotKV, row: int, n: int) -> float:
    """Seconds of one forward over an n-node binary tree on the row's cache (the tree is
    dropped again: nothing is committed)."""
    parents = paths_to_parents(shape_paths("binary", n - 1)) if n > 1 else [-1]
    tokens = torch.randint(*token_range(kv.model), (len(parents),)).tolist()
    sync = synchronizer(kv.model)
    kv.flush()
    sync()
    t0 = time.perf_counter()
    kv.forward([(row, parents, tokens, 0)])
    sync()
    secs = time.perf_counter() - t0
    kv.commit(row, [])
    return secs


def environment(pair) -> dict:
    me = machine.identity(pair.target.device)
    return {
        "cpu": me["cpu"],
        **{k: me[k] for k in ("machine_id", "host")},  # speed.csv's: same machine and host or not
        "machine": platform.machine(),
        "measured_on": time.strftime("%Y-%m-%d"),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "draft": pair.draft_name,
        "target": pair.target_name,
        "device": str(pair.target.device),
        "gpu": torch.cuda.get_device_name(pair.target.device) if pair.target.device.type == "cuda" else None,
        "dtype": str(pair.target.dtype).replace("torch.", ""),
    }


def cost_rows(
    pair, kv_lens, repeats: int, sizes=SIZES, progress: bool = True, memo: dict | None = None, weights="pretrained"
) -> list[dict]:
    """Forward-cost rows of the pair's drafter model (role draft) and of its target;
    ``memo`` (model -> its measurements) measures a model shared by pairs once; ``weights``
    says whether the models had their own weights or random ones (``models.WEIGHTS``)."""
    drafter_model = new_drafters(pair, 1.0, 1.0)().forward_model()
    dtype = str(pair.target.dtype).replace("torch.", "")
    device = pair.target.device.type
    memo = {} if memo is None else memo
    where = machine.identity(pair.target.device)  # every cost point names its machine, as speed.csv's rows do
    rows = []
    for role, model in (("draft", drafter_model), ("target", pair.target)):
        if model is None:
            continue
        key = (id(model), role)
        if key not in memo:
            memo[key] = measure(model, kv_lens, repeats, sizes, f"{pair.name} {role} forward cost", progress)
        rows += [
            {
                "role": role,
                "pair": pair.name,
                "model": getattr(model.get_decoder(), forwards.NAME, ""),  # as the forward counts name it
                "dtype": dtype,
                "device": device,
                "weights": weights,
                "repeats": repeats,
                "machine": where["machine"],
                "machine_id": where["machine_id"],
                "host": where["host"],
                **m,
            }
            for m in memo[key]
        ]
    return rows


def measure(model, kv_lens, repeats: int, sizes, desc: str, progress: bool) -> list[dict]:
    """Each (forward size, KV length) timed ``repeats`` times, the repeats interleaved: every
    round times every shape once, in a fresh random order, so a slow spell of the machine
    spreads over all shapes instead of biasing one.  Per shape: the median (``seconds``),
    min, max, quartiles and every repeat (``samples``, space-separated: the report's
    bootstrap over cost repeats resamples them)."""
    kv = SlotKV(model)
    rows = {k: kv.add(torch.randint(*token_range(model), (k + 1,)).tolist()) for k in kv_lens}
    for k in kv_lens:
        forward_cost(kv, rows[k], 1)  # warm-up: the prefill and the first allocation
    shapes = [(k, n) for k in kv_lens for n in sizes]
    secs: dict[tuple[int, int], list[float]] = {s: [] for s in shapes}
    order = random.Random(0)
    for _ in tqdm(range(repeats), desc=desc, disable=not progress):
        for k, n in order.sample(shapes, len(shapes)):
            secs[(k, n)].append(forward_cost(kv, rows[k], n))
    return [
        {
            "kv_len": k,
            "n_tokens": n,
            "seconds": statistics.median(v),
            "seconds_min": min(v),
            "seconds_max": max(v),
            "seconds_q25": float(np.quantile(v, 0.25)),
            "seconds_q75": float(np.quantile(v, 0.75)),
            "samples": " ".join(f"{x:.6g}" for x in v),
        }
        for (k, n), v in secs.items()
    ]


def keys(df: pd.DataFrame, key: list[str]) -> list[tuple[str, ...]]:
    """Each row's ``key`` as text (``results.upsert.key_text``: the widths as numbers, a missing one empty), machine last."""
    return list(key_text(df, key, numbers=costtable.WIDTHS))


def merge_rows(path: str, rows: list[dict], key: list[str] = CURVE) -> pd.DataFrame:
    """``merged`` into the cost table at ``path`` (none: ``rows`` alone)."""
    return merged(read_old(path), rows, key)


def merged(old: pd.DataFrame | None, rows: list[dict], key: list[str] = CURVE) -> pd.DataFrame:
    """The cost table ``old`` with the rows whose ``key`` ``rows`` hold replaced by ``rows`` (and rows
    of those keys that name no machine: measured before rows named one); every other row is kept.  A
    measurement replaces its whole curve (``CURVE``: this machine's pair, dtype and device), a merge
    exactly the points it holds (``ROW``).  Rows measured before every repeat was kept (no ``samples``:
    nothing to bootstrap, no spread) are dropped, and so are rows from before costs had a dtype."""
    new = pd.DataFrame(rows)
    if not new.empty and "machine_id" not in new:  # rows measured before they named their machine
        new = new.assign(machine_id="")
    if old is None or not {"pair", "dtype", "samples"} <= set(old.columns):
        return new
    old = old.assign(device=costtable.devices(old), machine_id=old.get("machine_id", ""))
    old = old[old.samples.notna()]
    if not new.empty:
        unnamed = {k[:-1] + ("",) for k in keys(new, key)}
        old = old[[k not in unnamed for k in keys(old, key)]]
    return replace_rows(old, new, key, numbers=costtable.WIDTHS)


def write_costs(out: str, rows: list[dict], key: list[str] = CURVE, also: dict | None = None) -> str:
    """``rows`` upserted into ``out``/costs.csv (``merged``, ``results.upsert``: under the folder's lock, with
    the ``also`` files in one journalled unit); its path."""
    path = os.path.join(out, "costs.csv")
    upsert(path, lambda old: merged(old, rows, key), read_old, also=also)
    return path


def check_merge(path: str, new: pd.DataFrame) -> None:
    """Each point once, each curve the same widths at every KV length (not cut mid-curve), or a ``ConfigError``."""
    seen: dict[tuple, int] = {}
    for i, k in enumerate(keys(new, ROW)):
        if k in seen:
            raise ConfigError(
                f"costs_merge={path}: line {i + 2} repeats line {seen[k] + 2} (pair, dtype, device, role, kv_len, "
                f"n_tokens, machine {', '.join(x or '-' for x in k)}); give a costs.csv that holds each point once"
            )
        seen[k] = i
    widths: dict[tuple, dict[str, set]] = {}
    for k in seen:
        widths.setdefault(k[:4] + k[-1:], {}).setdefault(k[4], set()).add(k[5])
    for curve, by_kv in widths.items():
        if len({frozenset(w) for w in by_kv.values()}) > 1:
            sizes = ", ".join(f"{len(w)} at kv_len {kv}" for kv, w in sorted(by_kv.items()))
            raise ConfigError(
                f"costs_merge={path}: the {curve[3]} curve of {curve[0]} ({curve[1]}, {curve[2]}) has {sizes} widths: "
                "a file cut mid-curve; give the whole costs.csv the other machine measured"
            )


def read_old(path: str) -> pd.DataFrame | None:
    """The costs.csv rows are merged into (None where there is none), checked (``core.readers``: a
    cut, binary or garbled file is a ``TableError``; a table of the current columns, their values)."""
    if not os.path.exists(path):
        return None
    fix = f"restore it (git checkout -- {path}) or move it away, then rerun"
    readers.check_text(path, fix)
    old = costtable.read(path)
    if {"pair", "dtype", "samples"} <= set(old.columns):
        return costtable.read_checked(path, fix=fix)
    return old


def check_positions(jobs: list[JobSpec], kv_lens: list[int], sizes=SIZES) -> None:
    """The longest KV length, its prefill's one token and the widest forward (of ``sizes``) must fit
    every measured model's positions (read from its config: no weights load)."""
    need, wide = max(kv_lens) + 1 + max(sizes), max(sizes)
    for one in jobs:
        for role, n in context(one).positions().items():
            if n and need > n:
                fix = f"lower it to {n - 1 - wide} or less" if n - 1 - wide >= 1 else "measure a model with more"
                raise ConfigError(
                    f"costs_kv_lens={kv_lens}: a {wide}-token forward on a {max(kv_lens)}-token cache needs "
                    f"{need} positions > the {role}'s {n} (pair {one.pair.name}); {fix} (e.g. '+costs_kv_lens=[128]')"
                )


def sizes_of(job: JobSpec) -> tuple[int, ...]:
    """``costs_max_tokens`` (default none: every width of ``SIZES``): the widths measured (``toolopts``: refused in
    one line when not an integer >= 1)."""
    return cost_sizes(toolopts.value(job.extra, "costs_max_tokens"))


def settings(job: JobSpec) -> tuple[str, int, list[int], list[JobSpec]]:
    """(results_dir, repeats, kv_lens, [the job of each (pair, dtype) measured]) from the job
    spec's own keys (``JobSpec.extra``, read by ``toolopts``: refused in one line, no model load)."""
    opts = job.extra
    toolopts.check(opts, "costs")
    out, repeats = str(toolopts.value(opts, "results_dir")), toolopts.value(opts, "costs_repeats")
    kv_lens = toolopts.value(opts, "costs_kv_lens")
    jobs = []
    for name in toolopts.value(opts, "costs_pairs", [job.pair.name]):
        try:
            pair_cfg = job.pair.as_dict() if name == job.pair.name else pair_config(name)
        except ValueError as e:
            raise ConfigError(f"costs_pairs: {e}") from None
        for dtype in toolopts.value(opts, "costs_dtypes", [job.dtype]):
            one = from_config({**job.to_dict(), "pair": pair_cfg, "dtype": dtype})
            validate(one)  # dtype, device, pair: the job spec's checks
            jobs.append(one)
    return out, repeats, kv_lens, jobs


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    try:  # costs measure forwards: the tree group plays no part
        job = from_config({**resolved(cfg), "tree": {"name": "none", "budget": 0}})
        out, repeats, kv_lens, jobs = settings(job)
        if merge := toolopts.value(job.extra, "costs_merge"):
            merge_file(out, merge)
            return
        sizes = sizes_of(job)
        check_positions(jobs, kv_lens, sizes)
        read_old(os.path.join(out, "costs.csv"))  # a garbled table is refused before the measuring, not after
    except (ConfigError, readers.TableError) as e:
        refuse(str(e))
    rows: list[dict] = []
    memo: dict = {}
    try:
        for one in jobs:
            pair = context(one).load_pair()
            rows += cost_rows(pair, kv_lens, repeats, sizes, job.progress, memo, one.pair.weights)
        pair = context(job).load_pair()
    except ValueError as e:  # a model it cannot load (not installed, a bad file): one line
        refuse(str(e).splitlines()[0])
    env = {**environment(pair), "weights": job.pair.weights}
    path = os.path.join(out, env_file(pair.target.device.type))
    # the rows and their machine together, one writer at a time
    write_costs(
        out, rows, also={path: lambda tmp: open(tmp, "w").write(json.dumps(env, indent=1, sort_keys=True) + "\n")}
    )
    print(f"specbench: wrote {out}/costs.csv ({pair.name}) and {path}")


def merge_file(out: str, path: str) -> None:
    """``+costs_merge=PATH``: the rows of a costs.csv measured elsewhere (a GPU machine's) merged
    into ``out``/costs.csv point by point (``ROW``: the rows it holds replace the rows of their key, every
    other row is kept), with the environment-<device>.json beside it; no model loads.  A ``TableError`` when the file is not such a table (``core.readers``:
    missing, cut, binary, wrong columns, a seconds value not a number > 0), a ``ConfigError`` when
    it holds CPU rows, a point twice or a curve cut mid-way (``check_merge``) (``main``: one line, exit 2)."""
    new = costtable.read_checked(path, costtable.COSTS_MERGE, "costs_merge")  # columns, seconds > 0, whole lines
    if (new.device == "cpu").any():
        raise ConfigError(
            f"costs_merge={path}: holds cpu rows; give another device's costs.csv (this machine's CPU is measured here)"
        )
    check_merge(path, new)
    target = os.path.join(out, "costs.csv")
    envs = [env_file(d) for d in sorted(set(new.device))]
    found = {e: os.path.join(os.path.dirname(path), e) for e in envs}
    copies = {
        os.path.join(out, n): functools.partial(shutil.copyfile, s) for n, s in found.items() if os.path.isfile(s)
    }
    write_costs(out, new.to_dict("records"), ROW, also=copies)  # read, merge and replace: one writer at a time
    print(f"specbench: merged {len(new)} rows of {path} into {target} ({', '.join(envs)} beside it)")


def env_file(device: str) -> str:
    """environment.json names the study's machine (the CPU); another device's own file sits
    beside it (environment-cuda.json), so measuring a GPU never replaces the CPU's record."""
    return "environment.json" if device == "cpu" else f"environment-{device}.json"


KEYS = toolopts.keys("costs")


def refuse(line: str) -> NoReturn:
    print(f"specbench.study.tools.costs: {line}", file=sys.stderr)
    sys.exit(2)


def cli() -> None:
    """`python -m specbench.study.tools.costs`: the command line checked as `run` checks it (its own
    keys: ``KEYS``), and the results folder writable, before any model loads."""
    argv.check_argv(sys.argv[1:], extra=KEYS)
    results_dir = argv.override_value(sys.argv[1:], "results_dir", "results")
    argv.check_out(os.path.join(str(results_dir), "costs.csv"), "results_dir")
    argv.run_hydra(main)


if __name__ == "__main__":
    cli()
