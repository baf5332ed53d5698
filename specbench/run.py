"""`python -m specbench.run [overrides]`: one study job (a Hydra app).

A job: read the config once into a JobSpec and check it (no model yet), take
the content identity of its models and dataset (the config hash), skip it if
a finished job with that hash exists (``resume``), load the pair and prompts,
check the context length, ``decode`` every prompt, and write steps.csv,
outputs.jsonl, config.yaml and summary.csv into the Hydra job folder.
``decode`` is the one place this module calls into the engine.
"""
from __future__ import annotations

import sys
import time

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from . import data, identity, jobspec, launch, models, results
from .jobspec import ConfigError, JobSpec


def eos_ids(pair) -> set[int]:
    eos = pair.target.generation_config.eos_token_id
    if eos is None:
        eos = pair.tokenizer.eos_token_id
    return set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}


def decode(job: JobSpec, pair, prompts) -> tuple[list, list[dict]]:
    """Every prompt through the engine: (step records, [{"prompt_id", "token_ids"}]).
    Replay leaves the outputs empty (the continuation engine will fill them)."""
    from .decode import TargetVerifier, decode_prompt, prompt_rng
    from .drafters import DRAFTERS
    from .plans import make_plan
    cfg = OmegaConf.create(job.to_dict())      # the engine still reads cfg-like nodes
    v, eos = job.verify, eos_ids(pair)
    cls = DRAFTERS.get(job.pair.drafter)
    drafter = cls.from_pair(pair, v.draft_temperature, v.top_p) if hasattr(cls, "from_pair") \
        else cls(pair.draft, v.draft_temperature, v.top_p)
    if jobspec.resolve_engine(job) == "replay":
        from . import replay
        by_ranks = replay.by_ranks(cfg, job.pair.drafter)
        return replay.decode_replay(cfg, pair, prompts, eos, None if by_ranks else drafter), []
    target = TargetVerifier(pair.target, v.temperature, v.top_p)
    records, outputs = [], []
    for i, pr in enumerate(tqdm(prompts, desc=f"live {job.tree.name}/{job.tree.budget}",
                                disable=not job.progress)):
        recs, tokens = decode_prompt(pr.id, pr.ids, drafter, target, make_plan(job.tree.as_dict()),
                                     cfg.verify, job.max_new_tokens, eos, prompt_rng(job.seed, i))
        records += recs
        outputs.append({"prompt_id": pr.id, "token_ids": [int(t) for t in tokens]})
    return records, outputs


def context_length(model) -> int | None:
    """The number of positions a model was built for (None if its config does not say)."""
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        n = getattr(model.config, attr, None)
        if isinstance(n, int) and n > 0:
            return n
    return None


def check_context(job: JobSpec, pair, prompts) -> None:
    """prompt + max_new_tokens + a tree of tree.budget nodes must fit both models' positions."""
    for role, model in (("target", pair.target), ("draft", pair.draft)):
        n = context_length(model) if model is not None else None
        for pr in prompts if n else []:
            need = len(pr.ids) + job.max_new_tokens + job.tree.budget
            if need > n:
                raise ConfigError(
                    f"dataset {job.dataset.name}: prompt '{pr.id}' has {len(pr.ids)} tokens; with "
                    f"max_new_tokens={job.max_new_tokens} and tree.budget={job.tree.budget} that is {need} "
                    f"positions > the {role}'s {n}: lower max_new_tokens, or set dataset.max_prompt_tokens="
                    f"{max(n - job.max_new_tokens - job.tree.budget, 0)} to refuse such prompts")


def run_job(cfg: DictConfig, out_dir: str):
    """Run one job into out_dir; returns its summary row (None if resumed)."""
    from .decode import accept_histogram
    job = jobspec.from_config(cfg)
    engine, mode = jobspec.validate(job)
    ident = identity.job_identity(job)
    chash = identity.config_hash(job, ident)
    if job.resume and (done := results.find_finished(job.out_root, chash)):
        print(f"specbench: skip {chash}: already finished in {done}")
        return None
    pair = models.load_pair(job.pair.as_dict(), job.dtype, job.device)
    prompts = data.load_prompts(job.dataset.config, pair.tokenizer, pair.chat_template,
                                job.dataset.max_prompt_tokens)
    check_context(job, pair, prompts)
    t0 = time.perf_counter()
    records, outputs = decode(job, pair, prompts)
    wall = time.perf_counter() - t0
    keys = results.row_keys(job, ident, (pair.draft_name, pair.target_name), mode["lossless"], engine,
                            results.new_run_id())
    steps = results.steps_frame(keys, records)
    summary = results.summarize(keys, steps, wall, accept_histogram(records))
    texts = [{**o, "text": pair.tokenizer.decode(o["token_ids"])} for o in outputs]
    results.write_job(out_dir, job, ident, steps, summary, texts)
    s = summary.iloc[0]
    print(f"specbench: {chash} {keys['pair']} {keys['tree']}/{keys['budget']} {keys['verify']} "
          f"[{engine}] acceptance_rate={s.acceptance_rate:.3f} acceptance_length={s.acceptance_length:.3f} "
          f"tokens_per_step={s.tokens_per_step:.3f} ({s.n_steps} steps, {wall:.1f}s) -> {out_dir}")
    return summary


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    code = launch.run_guarded(lambda: run_job(cfg, hc.runtime.output_dir), hc.runtime.output_dir)
    if code and hc.mode != RunMode.MULTIRUN:
        sys.exit(code)        # a multirun goes on; FailureReport counts the failures at its end


if __name__ == "__main__":
    launch.check_argv(sys.argv[1:])
    main()
