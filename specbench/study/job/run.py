"""`python -m specbench.run [overrides]`: one study job (a Hydra app).

A job: read the config once into a JobSpec, take the content identity of its
models and dataset (the config hash), check it (no model yet), skip it if
a finished job with that hash exists (``resume``), load the prompts, check the
context length (from the models' configs, before any weights load), load the
pair, decode every prompt, and write steps.csv, outputs.jsonl, config.yaml
and summary.csv into the Hydra job folder.  Prompts, pair and the engine's parts
come from the job's context (``study.job.context``); its ``decode`` is the one place
this module calls into the engine.  With
``verify.paired_with``, each paired mode's rows (verdicts on the same drafted
trees, see ``engine.loop.paired_generators``) go to ``paired/<mode>/`` under
the job folder, with their own config hash and the job's as ``pair_key``.
"""

from __future__ import annotations

import sys
import time

import hydra
import pandas as pd
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from ... import CONF_DIR
from ...engine.loop import accept_histogram
from ...results.metrics import summarize
from ...verify.modes import get_mode
from ...verify.modespec import role_tags, row_tags
from . import argv, checks, identity, jobfiles, jobspec, launch, progress
from .context import context


def run_job(cfg: DictConfig, out_dir: str) -> pd.DataFrame | None:
    """Run one job into out_dir; returns its summary row (None if resumed)."""
    job = jobspec.from_config(cfg)  # +foo=1 was refused before Hydra started (argv.check_keys)
    checks.check_device(job)  # before the fingerprints: a bad device is named, not a model it cannot find
    job, ident, chash = identity.bound(job)  # content fingerprints (no model loads) + what the tree reads
    engine, mode = checks.validate(job)  # after: a Sequoia tree's calib_pair_id=auto is resolved by bound
    if job.resume and (finished := jobfiles.find_finished(job.out_root, chash)):
        say(f"specbench: skip {chash}: already finished in {finished}")
        jobfiles.mark_resumed(out_dir, finished)
        return None
    identity.check_hub_models(job)  # offline: one line now, not ~90 s of retries
    ctx = context(job)
    prompts = ctx.prompts(ctx.tokenizer())
    checks.check_context(job, ctx.positions(), prompts)  # no weights yet
    pair = ctx.load_pair()
    t0 = time.perf_counter()
    done = ctx.decode(pair, prompts, engine, ident)
    wall = time.perf_counter() - t0 - sum(d.analysis_s for d in done)  # decoding only (engine.loop.analyse)
    records = [r for d in done for r in d.records]
    outputs = [{"prompt_id": d.prompt_id, "token_ids": [int(t) for t in d.tokens]} for d in done]
    keys = jobfiles.row_keys(
        job, ident, (pair.draft_name, pair.target_name), mode.lossless, engine, jobfiles.new_run_id()
    )
    steps = jobfiles.steps_frame(keys, records)
    summary = summarize(keys, steps, wall, accept_histogram(records))
    texts = [{**o, "text": pair.tokenizer.decode(o["token_ids"])} for o in outputs]
    paired = {}
    for k, name in enumerate(job.verify.paired_with):
        recs = [r for d in done for r in d.paired[k]]
        pkeys = {
            **keys,
            "config_hash": identity.paired_hash(chash, name),
            "verify": name,
            "lossless": get_mode(name).lossless,
            "pair_role": "paired",
            **row_tags(get_mode(name), checks.paired_params(job.verify, name)),
            **role_tags(get_mode(name)),
        }
        psteps = jobfiles.steps_frame(pkeys, recs)
        paired[name] = (psteps, summarize(pkeys, psteps, float("nan"), accept_histogram(recs)))
    jobfiles.write_job(out_dir, job, ident, steps, summary, texts, paired)
    s = summary.iloc[0]
    say(
        f"specbench: {chash} {keys['pair']} {keys['tree']}/{keys['budget']} {keys['verify']} "
        f"[{engine}] acceptance_rate={s.acceptance_rate:.3f} acceptance_length={s.acceptance_length:.3f} "
        f"tokens_per_step={s.tokens_per_step:.3f} ({s.n_steps} steps, {wall:.1f}s) -> {out_dir}"
    )
    return summary


def say(line: str) -> None:
    """A job's one line, unless its sweep shows a progress bar (``study.job.progress``)."""
    if not (HydraConfig.initialized() and progress.quiet(HydraConfig.get())):
        print(line)


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    if progress.quiet(hc):  # (a launcher may pickle this function by value: no module state here)
        cfg.progress = False  # the sweep's bar, not one per prompt (not in the config hash)
        progress.hush()
    code = launch.run_guarded(
        lambda: run_job(cfg, hc.runtime.output_dir), hc.runtime.output_dir, list(hc.overrides.task)
    )
    if code and hc.mode != RunMode.MULTIRUN:
        sys.exit(code)  # a multirun goes on; FailureReport counts the failures at its end


def cli() -> None:
    """`python -m specbench.run`: bad overrides fail in one line before Hydra starts; a disk
    Hydra cannot write is one line too (``study.job.argv``)."""
    argv.check_argv(sys.argv[1:])
    argv.run_hydra(main)


if __name__ == "__main__":
    cli()
