"""`python -m specbench.run [overrides]`: one study job (a Hydra app).

A job: load the pair and prompts, decode every prompt with the chosen engine,
write steps.csv + summary.csv (+ config.yaml) into the Hydra job folder.
"""
from __future__ import annotations

import os
import sys
import time

import hydra
import pandas as pd
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig
from tqdm import tqdm

from . import data, models, results
from .api import eos_ids
from .diskcache import DiskCache, cache_root
from .drafters import DRAFTERS, check_supported
from .engine import ContinuationVerifier, Decoding, LiveVerifier, accept_histogram, decode as run_loop
from .modespec import check_compatible
from .policies import make_policy, policy_kind
from .registry import UnknownName
from .verify import get_mode

CONF_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")
USER_ERRORS = (ValueError, UnknownName, OSError, FloatingPointError)
REPLAY_MODES = ("greedy",)      # verify modes whose output is the target's greedy continuation


def why_not_replayable(cfg) -> str | None:
    """None when replay is exact for this job config, else the reason."""
    if cfg.verify.name not in REPLAY_MODES:
        return f"verify={cfg.verify.name} is not greedy"
    if float(cfg.verify.get("temperature", 0.0) or 0.0) != 0.0:
        return "verify.temperature != 0 (first_token_tv would need the target's distributions)"
    if str(cfg.get("dtype", "float32")) != "float32":
        return (f"dtype={cfg.dtype}: replay equals live only in float32 (bf16 tree and "
                "teacher-forced forwards round differently and can reorder draft ranks)")
    return None


def by_ranks(cfg) -> bool:
    """Rank replay (the pure fast path) fits static shapes over a model drafter."""
    return cfg.pair.get("drafter", "model") == "model" and policy_kind(cfg.tree.name) == "paths"


def resolve_engine(cfg) -> str:
    if cfg.engine not in ("live", "replay", "auto"):
        raise ValueError(f"engine={cfg.engine}: valid engines are live, replay, auto")
    reason = why_not_replayable(cfg)
    if cfg.engine == "replay" and reason is not None:
        raise ValueError(f"engine=replay is exact only for greedy verification in float32 "
                         f"({reason}): use engine=live or engine=auto")
    return "replay" if cfg.engine == "replay" or (cfg.engine == "auto" and reason is None) else "live"


def tree_args(cfg) -> tuple[str, object, dict]:
    tree = dict(results.job_config(cfg)["tree"])
    return tree.pop("name"), tree.pop("budget", None), tree


def new_policy(cfg):
    name, budget, params = tree_args(cfg)
    return make_policy(name, budget, params)


def validate(cfg) -> None:
    """Cheap checks before any model is loaded or file written."""
    policy = new_policy(cfg)                  # unknown policy, bad budget / params
    mode = get_mode(cfg.verify.name)          # unknown mode
    params = verify_params(cfg)               # unknown keys, bad temperatures
    if mode.chain_only and cfg.tree.name not in ("chain", "adaptive_chain", "none"):
        raise ValueError(f"verify={cfg.verify.name} verifies a single chain only: use tree=chain")
    if mode.child_rule == "topk" and float(params["draft_temperature"]) <= 0:
        raise ValueError(f"verify.draft_temperature=0 with verify={cfg.verify.name}: top-k siblings "
                         "would tie; use verify.draft_temperature=1 (the ranking is the same at any T > 0)")
    drafter = DRAFTERS.get(cfg.pair.get("drafter", "model"))
    check_supported(drafter, policy.kind, policy.name)
    check_compatible(mode, drafter.child_rule(policy.kind, mode.child_rule))
    if int(cfg.max_new_tokens) < 1:
        raise ValueError(f"max_new_tokens={cfg.max_new_tokens}: must be >= 1")


def verify_params(cfg) -> dict:
    return get_mode(cfg.verify.name).params(results.job_config(cfg)["verify"])


def make_drafter(cfg, pair):
    v = verify_params(cfg)
    return DRAFTERS.get(cfg.pair.get("drafter", "model")).from_pair(pair, v["draft_temperature"], v["top_p"])


def cache_keys(cfg, eos) -> tuple[dict, dict]:
    """(continuation key, draft-rank key additions) for the replay caches."""
    v = verify_params(cfg)
    key = {"target": replay_model_key(cfg.pair.target), "max_new_tokens": int(cfg.max_new_tokens),
           "dtype": str(cfg.dtype), "device": str(cfg.device), "eos": sorted(int(e) for e in eos),
           "temperature": float(v["temperature"]), "top_p": float(v["top_p"])}
    draft = {"draft": replay_model_key(cfg.pair.draft) if cfg.pair.get("draft") else None,
             "draft_temperature": float(v["draft_temperature"]), "draft_top_p": float(v["top_p"])}
    return key, draft


def replay_model_key(spec) -> dict:
    from .replay import model_key
    return model_key(spec)


def decode(cfg, pair, prompts, engine: str) -> list:
    """Every prompt through the engine: the one loop (live or drafted replay), or
    rank replay for static shapes over a model drafter (the pure fast path)."""
    from . import replay
    eos = eos_ids(pair)
    run = Decoding(get_mode(cfg.verify.name), verify_params(cfg), int(cfg.max_new_tokens), eos, int(cfg.seed))
    bar = (lambda it: tqdm(it, desc=f"{engine} {cfg.tree.name}/{cfg.tree.budget}", disable=not cfg.progress))
    if engine == "live":
        verifier = LiveVerifier(pair.target, run.params["temperature"], run.params["top_p"])
        return run_loop(prompts, make_drafter(cfg, pair), verifier, lambda: new_policy(cfg), run, bar)
    store = DiskCache(cache_root(cfg))
    key, draft_key = cache_keys(cfg, eos)
    if by_ranks(cfg):
        return replay.replay_by_ranks(bar(prompts), lambda ids: replay.cached_ranks(
            store, pair.target, pair.draft, key, draft_key, ids), lambda: new_policy(cfg))
    verifier = ContinuationVerifier(lambda ids: replay.cached_continuation(store, pair.target, key, ids),
                                    pair.target.get_output_embeddings().weight.shape[0])
    return run_loop(prompts, make_drafter(cfg, pair), verifier, lambda: new_policy(cfg), run, bar)


def run_job(cfg: DictConfig, out_dir: str) -> pd.DataFrame | None:
    """Run one job into out_dir; returns its summary row (None if resumed)."""
    validate(cfg)
    chash = results.config_hash(cfg)
    if cfg.resume and (done := results.find_finished(cfg.out_root, chash)):
        print(f"specbench: skip {chash}: already finished in {done}")
        return None
    pair = models.load_pair(cfg.pair, cfg.dtype, cfg.device)
    prompts = data.load_prompts(cfg.dataset, pair.tokenizer, pair.chat_template,
                                cfg.dataset.get("max_prompt_tokens"))
    engine = resolve_engine(cfg)
    t0 = time.perf_counter()
    done = decode(cfg, pair, prompts, engine)
    wall = time.perf_counter() - t0
    records = [r for d in done for r in d.records]
    keys = results.row_keys(cfg, (pair.name, pair.draft_name, pair.target_name),
                            get_mode(cfg.verify.name).lossless, engine)
    steps = results.steps_frame(keys, records)
    summary = results.summarize(keys, steps, wall, accept_histogram(records))
    results.write_job(out_dir, cfg, steps, summary)
    s = summary.iloc[0]
    print(f"specbench: {chash} {keys['pair']} {keys['tree']}/{keys['budget']} {keys['verify']} "
          f"[{engine}] acceptance_rate={s.acceptance_rate:.3f} acceptance_length={s.acceptance_length:.3f} "
          f"tokens_per_step={s.tokens_per_step:.3f} ({s.n_steps} steps, {wall:.1f}s) -> {out_dir}")
    return summary


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    try:
        run_job(cfg, hc.runtime.output_dir)
    except USER_ERRORS as e:
        print(f"specbench: error: {e}", file=sys.stderr)
        if hc.mode != RunMode.MULTIRUN:
            sys.exit(2)             # a sweep goes on past one invalid combination


GROUPS = ("pair", "tree", "verify", "dataset", "sweep")


def check_group_overrides(argv) -> None:
    """`tree=foo` with no conf/tree/foo.yaml: one line naming the valid choices."""
    for arg in argv:
        group, eq, value = arg.lstrip("+~").partition("=")
        if not eq or group not in GROUPS:
            continue
        valid = sorted(f[:-5] for f in os.listdir(os.path.join(CONF_DIR, group)) if f.endswith(".yaml"))
        for v in value.split(","):
            if v and v not in valid:
                sys.exit(f"specbench: error: unknown {group} '{v}'. Valid: {', '.join(valid)}")


if __name__ == "__main__":
    check_group_overrides(sys.argv[1:])
    main()
