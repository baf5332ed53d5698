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
from .decode import TargetVerifier, accept_histogram, decode_prompt, prompt_rng
from .drafters import DRAFTERS
from .plans import make_plan
from .registry import UnknownName
from .verify import MODES

CONF_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")
USER_ERRORS = (ValueError, UnknownName, OSError, FloatingPointError)


def resolve_engine(cfg) -> str:
    if cfg.engine not in ("live", "replay", "auto"):
        raise ValueError(f"engine={cfg.engine}: valid engines are live, replay, auto")
    from .replay import why_not_replayable
    reason = why_not_replayable(cfg)
    exact = reason is None
    if cfg.engine == "replay" and not exact:
        raise ValueError(f"engine=replay is exact only for greedy verification in float32 "
                         f"({reason}): use engine=live or engine=auto")
    return "replay" if cfg.engine == "replay" or (cfg.engine == "auto" and exact) else "live"


def validate(cfg) -> None:
    """Cheap checks before any model is loaded or file written."""
    make_plan(cfg.tree)                       # unknown shape, bad budget
    info = MODES.meta(cfg.verify.name)        # unknown mode
    if info.get("chain_only") and cfg.tree.name != "chain":
        raise ValueError(f"verify={cfg.verify.name} verifies a single chain only: use tree=chain")
    if info["children"] == "topk" and float(cfg.verify.get("draft_temperature", 1.0)) <= 0:
        raise ValueError(f"verify.draft_temperature=0 with verify={cfg.verify.name}: top-k siblings "
                         "would tie; use verify.draft_temperature=1 (the ranking is the same at any T > 0)")
    DRAFTERS.get(cfg.pair.get("drafter", "model"))
    if int(cfg.max_new_tokens) < 1:
        raise ValueError(f"max_new_tokens={cfg.max_new_tokens}: must be >= 1")


def make_drafter(cfg, pair):
    kind = cfg.pair.get("drafter", "model")
    cls = DRAFTERS.get(kind)
    t = cfg.verify.get("draft_temperature", cfg.verify.get("temperature", 0.0))
    return cls.from_pair(pair, t, cfg.verify.get("top_p", 1.0)) if hasattr(cls, "from_pair") \
        else cls(pair.draft, t, cfg.verify.get("top_p", 1.0))


def eos_ids(pair) -> set[int]:
    eos = pair.target.generation_config.eos_token_id
    if eos is None:
        eos = pair.tokenizer.eos_token_id
    return set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}


def decode_live(cfg, pair, prompts) -> list:
    drafter = make_drafter(cfg, pair)
    target = TargetVerifier(pair.target, cfg.verify.get("temperature", 0.0), cfg.verify.get("top_p", 1.0))
    eos, records = eos_ids(pair), []
    for i, pr in enumerate(tqdm(prompts, desc=f"live {cfg.tree.name}/{cfg.tree.budget}",
                                disable=not cfg.progress)):
        recs, _ = decode_prompt(pr.id, pr.ids, drafter, target, make_plan(cfg.tree), cfg.verify,
                                int(cfg.max_new_tokens), eos, prompt_rng(cfg.seed, i))
        records += recs
    return records


def run_job(cfg: DictConfig, out_dir: str) -> pd.DataFrame | None:
    """Run one job into out_dir; returns its summary row (None if resumed)."""
    validate(cfg)
    chash = results.config_hash(cfg)
    if cfg.resume and (done := results.find_finished(cfg.out_root, chash)):
        print(f"specbench: skip {chash}: already finished in {done}")
        return None
    pair = models.load_pair(cfg.pair, cfg.dtype, cfg.device)
    prompts = data.load_prompts(cfg.dataset, pair.tokenizer)
    kind = cfg.pair.get("drafter", "model")
    engine = resolve_engine(cfg)
    t0 = time.perf_counter()
    if engine == "replay":
        from . import replay
        drafter = None if replay.by_ranks(cfg, kind) else make_drafter(cfg, pair)
        records = replay.decode_replay(cfg, pair, prompts, eos_ids(pair), drafter)
    else:
        records = decode_live(cfg, pair, prompts)
    wall = time.perf_counter() - t0
    keys = results.row_keys(cfg, (pair.name, pair.draft_name, pair.target_name),
                            MODES.meta(cfg.verify.name)["lossless"], engine)
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
