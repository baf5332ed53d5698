"""`python -m specbench.study.costs [overrides]`: forward costs and the machine, for the report.

Measures one forward of the drafter's model and of the target over n new tree
tokens on top of a `kv_len`-token cache (best of `repeats`), for the pair in the
config, and writes its rows into results/costs.csv (role, pair, dtype, n_tokens, seconds;
other pairs' and dtypes' rows are kept, so one run per pair and dtype fills the table) and
results/environment.json (hardware, library versions, models).  The drafter's
model is what it forwards per tree depth (``Drafter.forward_model``): the draft
model, the layer-skip view of the target (its own forward), or none (n-gram).
The report's projected speedup turns acceptance into time with these costs.
"""
from __future__ import annotations

import json
import os
import platform
import time

import hydra
import pandas as pd
import torch
from omegaconf import DictConfig
from tqdm import tqdm

from .. import CONF_DIR
from ..inputs import models
from ..drafting.drafters import DRAFTERS, prefill
from ..core.kv import forward_nodes, keep
from .results import atomic_write, write_csv
from ..trees.policies import shape_paths
from ..core.tree import paths_to_parents

SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


def token_range(model) -> tuple[int, int]:
    vocab = model.get_input_embeddings().num_embeddings
    return min(100, vocab // 2), min(1000, vocab)


def forward_cost(model, cache, past: int, n: int, repeats: int) -> float:
    """Best-of-`repeats` seconds for one forward over an n-node binary tree on top of
    the ``past``-token cache, which is cut back to ``past`` after each forward."""
    parents = paths_to_parents(shape_paths("binary", n - 1)) if n > 1 else [-1]
    tokens = torch.randint(*token_range(model), (len(parents),)).tolist()
    best = float("inf")
    sync = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)   # time kernels, not launches
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        forward_nodes(model, cache, past, parents, tokens, 0, len(parents))
        sync()
        best = min(best, time.perf_counter() - t0)
        keep(cache, past, [])
    return best


def environment(pair) -> dict:
    import transformers
    return {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "python": platform.python_version(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "draft": pair.draft_name, "target": pair.target_name,
            "device": str(pair.target.device), "dtype": str(pair.target.dtype).replace("torch.", "")}


def cost_rows(pair, kv_len: int, repeats: int, sizes=SIZES, progress: bool = True) -> list[dict]:
    """Forward-cost rows of the pair's drafter model (role draft) and of its target."""
    drafter_model = DRAFTERS.get(pair.drafter).from_pair(pair).forward_model()
    rows = []
    for role, model in (("draft", drafter_model), ("target", pair.target)):
        if model is None:
            continue
        cache, past = prefill(model, torch.randint(*token_range(model), (kv_len + 1,)).tolist())
        dtype = str(pair.target.dtype).replace("torch.", "")
        for n in tqdm(sizes, desc=f"{role} forward cost", disable=not progress):
            rows.append({"role": role, "pair": pair.name, "dtype": dtype, "n_tokens": n, "kv_len": kv_len,
                         "seconds": forward_cost(model, cache, past, n, repeats)})
    return rows


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


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    pair = models.load_pair(cfg.pair, cfg.dtype, cfg.device)
    rows = cost_rows(pair, int(cfg.get("costs_kv_len", 256)), int(cfg.get("costs_repeats", 3)),
                     progress=cfg.progress)
    out = cfg.get("results_dir", "results")
    write_csv(merge_rows(os.path.join(out, "costs.csv"), rows), os.path.join(out, "costs.csv"))
    env = environment(pair)
    atomic_write(os.path.join(out, "environment.json"),
                 lambda tmp: open(tmp, "w").write(json.dumps(env, indent=1, sort_keys=True) + "\n"))
    print(f"specbench: wrote {out}/costs.csv ({pair.name}) and {out}/environment.json")


if __name__ == "__main__":
    main()
