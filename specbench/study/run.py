"""`python -m specbench.run [overrides]`: one study job (a Hydra app).

A job: read the config once into a JobSpec, take the content identity of its
models and dataset (the config hash), check it (no model yet), skip it if
a finished job with that hash exists (``resume``), load the prompts, check the
context length (from the models' configs, before any weights load), load the
pair, ``decode`` every prompt, and write steps.csv, outputs.jsonl, config.yaml
and summary.csv into the Hydra job folder.
``decode`` is the one place this module calls into the engine.  With
``verify.paired_with``, each paired mode's rows (verdicts on the same drafted
trees, see ``engine.loop.paired_generators``) go to ``paired/<mode>/`` under
the job folder, with their own config hash and the job's as ``pair_key``.
"""
from __future__ import annotations

import functools
import sys
import time

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig
from tqdm import tqdm

from .. import CONF_DIR
from ..core.diskcache import DiskCache, cache_root
from ..drafting.drafters import DRAFTERS
from ..engine import replay
from ..engine.api import drafter_factory, eos_ids
from ..engine.loop import ContinuationVerifier, Decoding, LiveVerifier, PromptResult, accept_histogram
from ..engine.loop import decode as run_loop
from ..inputs import data, models
from ..trees.policies import make_policy, policy_spec
from ..verify.modes import get_mode
from ..verify.modespec import row_tags
from . import argv, checks, identity, jobspec, launch, results
from .jobspec import JobSpec


def new_policy(job: JobSpec):
    return make_policy(job.tree.name, job.tree.budget, job.tree.params)


def by_ranks(job: JobSpec) -> bool:
    """Rank replay (the pure fast path) fits static shapes over a drafter that declares it
    (a draft model, or the target's layer subset: top-k children of one model's ranks)."""
    return DRAFTERS.get(job.pair.drafter).rank_replay and policy_spec(job.tree.name).rank_replayable


def cache_keys(job: JobSpec, ident, eos) -> tuple[dict, dict]:
    """(continuation key, draft-rank key additions) for the replay caches: content
    identities of the models, not their names."""
    v = job.verify
    key = {"target": ident.target, "max_new_tokens": job.max_new_tokens, "dtype": job.dtype,
           "device": job.device, "eos": sorted(int(e) for e in eos),
           "temperature": v.temperature, "top_p": v.top_p}
    draft = identity.pair_id(ident, job.pair.drafter, job.pair.drafter_params)   # a layer subset has no draft model
    return key, {"draft": draft, "draft_temperature": v.draft_temperature, "draft_top_p": v.top_p}


def decode(job: JobSpec, ident, pair, prompts, engine: str) -> list[PromptResult]:
    """Every prompt through the engine (the one place this module calls it): the one
    loop, live or drafted replay, or rank replay for static shapes over a model drafter."""
    mode = get_mode(job.verify.name, job.verify.params)      # drafts with verify.children
    eos = eos_ids(pair)
    paired = tuple((get_mode(n), checks.paired_params(job, n)) for n in job.verify.paired_with)
    run = Decoding(mode, mode.params(job.verify.params), job.max_new_tokens, eos, job.seed, paired=paired)
    bar = functools.partial(tqdm, desc=f"{engine} {job.tree.name}/{job.tree.budget}", disable=not job.progress)
    if engine == "live":
        verifier = LiveVerifier(pair.target, run.params["temperature"], run.params["top_p"])
    else:
        store = DiskCache(cache_root(job.replay_cache, job.out_root))
        key, draft_key = cache_keys(job, ident, eos)
        ids, b = [pr.ids for pr in prompts], job.continuation_batch
        if by_ranks(job):
            table = replay.cached_ranks_many(store, pair.target, DRAFTERS.get(job.pair.drafter).rank_model(pair),
                                              key, draft_key, ids, b, bar)
            return replay.replay_by_ranks(prompts, table, lambda: new_policy(job))
        conts = dict(zip(map(tuple, ids), replay.cached_continuations(store, pair.target, key, ids, b, bar)))
        verifier = ContinuationVerifier(lambda prompt_ids: conts[tuple(prompt_ids)],
                                        pair.target.get_output_embeddings().weight.shape[0])
    return run_loop(prompts, drafter_factory(pair, run.params), verifier, lambda: new_policy(job), run, bar,
                    job.batch_size)


def run_job(cfg: DictConfig, out_dir: str):
    """Run one job into out_dir; returns its summary row (None if resumed)."""
    job = jobspec.from_config(cfg)
    checks.check_no_extra(job)                  # +foo=1: refused, not a silent new hash
    ident = identity.job_identity(job)          # content fingerprints: no model loads
    job, ident = identity.bind(job, ident)   # + what the tree reads (Sequoia's vector)
    engine, mode = checks.validate(job)
    chash = identity.config_hash(job, ident)
    if job.resume and (done := results.find_finished(job.out_root, chash)):
        print(f"specbench: skip {chash}: already finished in {done}")
        results.mark_resumed(out_dir, done)
        return None
    identity.check_hub_models(job)              # offline: one line now, not ~90 s of retries
    results.clear_job(out_dir)                  # this folder never holds files of two runs
    prompts = data.load_prompts(job.dataset.config, models.load_tokenizer(job.pair.as_dict()["target"]),
                                max_prompt_tokens=job.dataset.max_prompt_tokens)
    checks.check_context(job, models.pair_contexts(job.pair.as_dict(), job.dtype), prompts)   # no weights yet
    pair = models.load_pair(job.pair.as_dict(), job.dtype, job.device)
    t0 = time.perf_counter()
    done = decode(job, ident, pair, prompts, engine)
    wall = time.perf_counter() - t0
    records = [r for d in done for r in d.records]
    outputs = [{"prompt_id": d.prompt_id, "token_ids": [int(t) for t in d.tokens]} for d in done]
    keys = results.row_keys(job, ident, (pair.draft_name, pair.target_name), mode.lossless, engine,
                            results.new_run_id())
    steps = results.steps_frame(keys, records)
    summary = results.summarize(keys, steps, wall, accept_histogram(records))
    texts = [{**o, "text": pair.tokenizer.decode(o["token_ids"])} for o in outputs]
    paired = {}
    for k, name in enumerate(job.verify.paired_with):
        recs = [r for d in done for r in d.paired[k]]
        pkeys = {**keys, "config_hash": identity.paired_hash(chash, name), "verify": name,
                 "lossless": get_mode(name).lossless, "pair_role": "paired",
                 **row_tags(get_mode(name), checks.paired_params(job, name))}
        psteps = results.steps_frame(pkeys, recs)
        paired[name] = (psteps, results.summarize(pkeys, psteps, float("nan"), accept_histogram(recs)))
    results.write_job(out_dir, job, ident, steps, summary, texts, paired)
    s = summary.iloc[0]
    print(f"specbench: {chash} {keys['pair']} {keys['tree']}/{keys['budget']} {keys['verify']} "
          f"[{engine}] acceptance_rate={s.acceptance_rate:.3f} acceptance_length={s.acceptance_length:.3f} "
          f"tokens_per_step={s.tokens_per_step:.3f} ({s.n_steps} steps, {wall:.1f}s) -> {out_dir}")
    return summary


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    code = launch.run_guarded(lambda: run_job(cfg, hc.runtime.output_dir), hc.runtime.output_dir,
                              list(hc.overrides.task))
    if code and hc.mode != RunMode.MULTIRUN:
        sys.exit(code)        # a multirun goes on; FailureReport counts the failures at its end


def cli() -> None:
    """`python -m specbench.run`: bad overrides fail in one line before Hydra starts; a disk
    Hydra cannot write is one line too (``study.argv``)."""
    argv.check_argv(sys.argv[1:])
    argv.run_hydra(main)


if __name__ == "__main__":
    cli()
