"""Per-job CSVs: row keys from the resolved config, the metrics, atomic writes.

Metric definitions (also in README.md and REPORT.md):
  acceptance_rate   = sum(accepted) / sum(tree_size)       (verified / drafted)
  acceptance_length = mean accepted per step               (bonus token NOT counted)
  tokens_per_step   = mean emitted per step                (bonus token counted; Spec-Bench's tau)
  alpha_d           = P(accepted >= d | accepted >= d-1 and tree_depth >= d)   (EAGLE)
CIs are 95% percentile bootstraps over prompts (seeded, 1000 resamples).
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from typing import Sequence

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

KEY_COLUMNS = ["config_hash", "pair", "draft", "target", "tree", "tree_params", "budget",
               "verify", "lossless", "temperature", "draft_temperature", "top_p", "dataset",
               "seed", "max_new_tokens", "dtype", "device", "engine"]
HASH_EXCLUDE = ("hydra", "out_root", "progress", "resume", "replay_cache")  # run-location keys
N_BOOT = 1000


def job_config(cfg) -> dict:
    """The resolved config as a plain dict, without run-location keys."""
    d = OmegaConf.to_container(cfg, resolve=True) if not isinstance(cfg, dict) else dict(cfg)
    return {k: v for k, v in d.items() if k not in HASH_EXCLUDE}


def config_hash(cfg) -> str:
    blob = json.dumps(job_config(cfg), sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def row_keys(cfg, pair_names: tuple[str, str, str], lossless: bool, engine: str) -> dict:
    """The configuration columns every row carries."""
    tree = dict(job_config(cfg)["tree"])
    name, budget = tree.pop("name"), tree.pop("budget")
    v = cfg.verify
    return {
        "config_hash": config_hash(cfg), "pair": pair_names[0], "draft": pair_names[1],
        "target": pair_names[2], "tree": name, "tree_params": json.dumps(tree, sort_keys=True),
        "budget": int(budget), "verify": v.name, "lossless": bool(lossless),
        "temperature": float(v.get("temperature", 0.0)),
        "draft_temperature": float(v.get("draft_temperature", v.get("temperature", 0.0))),
        "top_p": float(v.get("top_p", 1.0)), "dataset": cfg.dataset.name, "seed": int(cfg.seed),
        "max_new_tokens": int(cfg.max_new_tokens), "dtype": str(cfg.dtype),
        "device": str(cfg.device), "engine": engine,
    }


def steps_frame(keys: dict, records: Sequence) -> pd.DataFrame:
    rows = [{**keys, **asdict(r)} for r in records]
    return pd.DataFrame(rows)


def _metrics(df: pd.DataFrame) -> dict:
    return {"acceptance_rate": df.accepted.sum() / max(df.tree_size.sum(), 1),
            "acceptance_length": df.accepted.mean(),
            "tokens_per_step": df.emitted.mean()}


def bootstrap(df: pd.DataFrame, seed: int = 0) -> dict:
    """95% percentile CIs of the job metrics, resampling prompts."""
    groups = [g for _, g in df.groupby("prompt_id", sort=True)]
    rng = np.random.default_rng(seed)
    sums = np.array([[g.accepted.sum(), g.tree_size.sum(), g.emitted.sum(), len(g)] for g in groups], float)
    idx = rng.integers(0, len(groups), size=(N_BOOT, len(groups)))
    s = sums[idx].sum(axis=1)                      # [N_BOOT, 4]
    stats = {"acceptance_rate": s[:, 0] / np.maximum(s[:, 1], 1),
             "acceptance_length": s[:, 0] / s[:, 3],
             "tokens_per_step": s[:, 2] / s[:, 3]}
    out = {}
    for k, v in stats.items():
        out[f"{k}_lo"], out[f"{k}_hi"] = np.percentile(v, [2.5, 97.5])
    return out


def alphas(df: pd.DataFrame) -> dict:
    out = {}
    for d in range(1, (int(df.tree_depth.max()) if len(df) else 0) + 1):
        at_risk = df[(df.accepted >= d - 1) & (df.tree_depth >= d)]
        out[f"alpha_{d}"] = (at_risk.accepted >= d).mean() if len(at_risk) else float("nan")
    return out


def summarize(keys: dict, steps: pd.DataFrame, wall_s: float, hist: list[int]) -> pd.DataFrame:
    row = dict(keys)
    row.update(n_prompts=steps.prompt_id.nunique(), n_steps=len(steps),
               new_tokens=int(steps.emitted.sum()))
    row.update(_metrics(steps))
    row.update(bootstrap(steps, seed=int(keys["seed"])))
    row.update(first_token_tv=steps.first_token_tv.mean(),
               expected_accepted=steps.expected_accepted.mean(),
               draft_s=steps.draft_s.sum(), verify_s=steps.verify_s.sum(), wall_s=wall_s,
               tokens_per_s=(steps.emitted.sum() / wall_s) if wall_s > 0 else float("nan"),
               accept_hist=json.dumps(hist))
    row.update(alphas(steps))
    return pd.DataFrame([row])


def atomic_write(path: str, write) -> None:
    """Call write(tmp_path), then rename over path: readers never see half a file."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=os.path.basename(path))
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


# identifier columns stay text: a hash like 3726142e8142 would otherwise be read as a float
TEXT_COLUMNS = {c: str for c in ("config_hash", "pair", "draft", "target", "tree", "tree_params", "verify",
                                  "dataset", "engine", "prompt_id", "accept_path", "role")}


def read_csv(path: str) -> pd.DataFrame:
    """A specbench CSV (summary, steps, calibration) with identifier columns kept as text."""
    return pd.read_csv(path, dtype=TEXT_COLUMNS, keep_default_na=False, na_values=[""])


def write_csv(df: pd.DataFrame, path: str) -> None:
    atomic_write(path, lambda tmp: df.to_csv(tmp, index=False, float_format="%.6g"))


def write_job(out_dir: str, cfg, steps: pd.DataFrame, summary: pd.DataFrame) -> None:
    """steps.csv, config.yaml, then summary.csv last: a summary marks a finished job."""
    write_csv(steps, os.path.join(out_dir, "steps.csv"))
    atomic_write(os.path.join(out_dir, "config.yaml"),
                 lambda tmp: OmegaConf.save(OmegaConf.create(job_config(cfg)), tmp))
    write_csv(summary, os.path.join(out_dir, "summary.csv"))


def find_finished(root: str, chash: str) -> str | None:
    """The folder of a finished job with this config hash under root, if any."""
    for path in sorted(glob.glob(os.path.join(root, "**", "summary.csv"), recursive=True)):
        try:
            head = pd.read_csv(path, usecols=["config_hash"], dtype=str)
        except (ValueError, pd.errors.EmptyDataError):
            continue
        if chash in set(head.config_hash):
            return os.path.dirname(path)
    return None
