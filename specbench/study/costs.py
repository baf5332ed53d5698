"""`python -m specbench.study.costs [overrides]`: forward costs and the machine, for the report.

Measures one forward of the draft and of the target over n new tree tokens on
top of a `kv_len`-token cache (best of `repeats`), for the pair in the config,
and writes results/costs.csv (role, pair, n_tokens, seconds) and
results/environment.json (hardware, library versions, models).  The report's
projected speedup turns acceptance into time with these costs.
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
from ..drafting.drafters import prefill
from ..core.kv import forward_nodes
from .results import atomic_write, write_csv
from ..trees.policies import shape_paths
from ..core.tree import paths_to_parents

SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


def forward_cost(model, kv_len: int, n: int, repeats: int) -> float:
    """Best-of-`repeats` seconds for one forward over an n-node binary tree."""
    parents = paths_to_parents(shape_paths("binary", n - 1)) if n > 1 else [-1]
    tokens = torch.randint(100, 1000, (len(parents),)).tolist()
    prompt = torch.randint(100, 1000, (kv_len + 1,)).tolist()
    best = float("inf")
    for _ in range(repeats):
        cache, past = prefill(model, prompt)
        t0 = time.perf_counter()
        forward_nodes(model, cache, past, parents, tokens, 0, len(parents))
        best = min(best, time.perf_counter() - t0)
    return best


def environment(pair) -> dict:
    import transformers
    return {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "python": platform.python_version(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "draft": pair.draft_name, "target": pair.target_name,
            "device": str(pair.target.device), "dtype": str(pair.target.dtype).replace("torch.", "")}


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    pair = models.load_pair(cfg.pair, cfg.dtype, cfg.device)
    kv_len, repeats = int(cfg.get("costs_kv_len", 256)), int(cfg.get("costs_repeats", 3))
    rows = []
    for role, model in (("draft", pair.draft), ("target", pair.target)):
        if model is None:
            continue
        for n in tqdm(SIZES, desc=f"{role} forward cost", disable=not cfg.progress):
            rows.append({"role": role, "pair": pair.name, "n_tokens": n, "kv_len": kv_len,
                         "seconds": forward_cost(model, kv_len, n, repeats)})
    out = cfg.get("results_dir", "results")
    write_csv(pd.DataFrame(rows), os.path.join(out, "costs.csv"))
    env = environment(pair)
    atomic_write(os.path.join(out, "environment.json"),
                 lambda tmp: open(tmp, "w").write(json.dumps(env, indent=1, sort_keys=True) + "\n"))
    print(f"specbench: wrote {out}/costs.csv and {out}/environment.json")


if __name__ == "__main__":
    main()
