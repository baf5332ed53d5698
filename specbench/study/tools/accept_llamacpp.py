"""`python -m specbench.study.tools.accept_llamacpp [overrides]`: llama.cpp's acceptance beside specbench's
replay of the same drafting rule, on the same prompts (#84 item 4).

    python -m specbench.study.tools.accept_llamacpp pair=qwen_coder dataset=humaneval dataset.limit=8 \\
        max_new_tokens=64 '+llamacpp_n_max=[1,2,4,8,16]' '+llamacpp_p_min=[0,0.75]'

llama.cpp: per setting (n_max, p_min) its own managed server (``llamaserver``; in turn, nothing is timed),
``--spec-type draft-simple`` with the pair's GGUF files, every prompt (the token ids specbench decodes)
greedy for ``max_new_tokens`` tokens, EOS ignored; a response's ``timings.draft_n`` / ``draft_n_accepted``
and the drafts it verified (the server's ``llamacpp:spec_decode_num_drafts_total`` before and after it: one
slot, one request at a time); ``same_tokens``: its tokens equal those of a server without a draft.

specbench: the same rule as ``tree=pmin_chain`` (``trees.pminchain``) replayed over the target's own greedy
continuation (``engine.replay.pmin_walk`` over the draft's teacher-forced ranks and top-10 shares,
``replay.pmin_marks``; a test keeps it equal to the live loop), with llama.cpp's bounds: the first token
comes from the prompt's forward and a draft leaves one token to predict.  Exact for n_min <= 1.

Rows (one per engine, setting and prompt) go to ``results_dir``/acceptance_llamacpp.csv, this tool's file,
a run's rows keyed by its ``run_id`` (``results.upsert``); ``results.llamaaccept`` compares them.
Keys: ``llamacpp_n_max`` (default [1,2,3,4,6,8,12,16]), ``llamacpp_p_min`` (default [0,0.5,0.75,0.9]),
``llamacpp_n_min`` (0 or 1, default 0), ``llamacpp_target`` / ``llamacpp_draft``, ``llamacpp_ctx`` and
``results_dir`` as ``speed_llamacpp``'s; ``llamacpp_replay_only`` (default false: ``rereplay``, specbench's side
of the newest such run derived again, no server).  Bad values are refused in one line before a model loads.

``drafted``/``drafted_max``: llama.cpp's ``timings.draft_n`` (both); specbench's replay knows a chain's length up
to its first rejected token only (``replay.pmin_steps``): the least and the most the rule can have drafted;
``draft_samples``/``draft_samples_max`` (specbench only): the draft's one-token forwards of llama.cpp's drafting
loop at those two ends (``replay.draft_samples``), what ``results.llamaproject`` prices.

``llamacpp_ngram`` (a list of ``N/M``; the default where the pair has no draft model, e.g. ``pair=ngram_qwen``):
llama.cpp's n-gram speculation (``--spec-type ngram-simple``) instead of the draft grid, through the same loop,
with specbench's side from ``accept_ngram`` (its rule replayed, and specbench's own ngram chain beside it).
``llamacpp_threads`` (default the machine's cores; the rows' ``torch_threads``): the servers' ``-t``; one thread
waits for none, so a machine busy with other work does not stall it (the acceptance is not timed).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from functools import partial

import hydra
import pandas as pd
from omegaconf import DictConfig

from ... import CONF_DIR
from ...engine import replay
from ...inputs import llamacpp, machine
from ...results import llamaaccept
from ...results.upsert import replace_rows, upsert
from ..job import argv, identity, jobfiles, toolopts
from ..job.context import context
from ..job.jobspec import ConfigError, from_config, resolved
from . import accept_ngram
from .llamaserver import LlamaServer, ServerError
from .speed_llamacpp import Candidate, base_row, models_of

FILE = "acceptance_llamacpp.csv"
KEYS = toolopts.keys("accept_llamacpp")
N_MAX, P_MIN = (tuple(toolopts.OPTIONS[k].default) for k in ("llamacpp_n_max", "llamacpp_p_min"))
POLL = ("--poll", "0")  # llama.cpp's threads wait without spinning
Setting = Candidate | accept_ngram.NgramSetting  # a server's speculative settings
DRAFTS = re.compile(r"^llamacpp:spec_decode_num_drafts_total\s+(\S+)$", re.M)


def grid(extra: dict) -> list[Candidate]:
    """Every (n_max, p_min) of ``llamacpp_n_max`` x ``llamacpp_p_min``, checked (``toolopts.draft_grid``: one line
    naming the key)."""
    return [Candidate(f"n_max={n} p_min={p:g}", n, p, n_min) for n, p, n_min in toolopts.draft_grid(extra)]


def drafts(server: LlamaServer) -> int:
    """The server's drafts verified so far (its Prometheus counter)."""
    m = DRAFTS.search(server.metrics())
    return int(float(m.group(1))) if m else 0


def served(models: dict, c: Setting, prompts: list, n: int, ctx: int, extra=POLL, threads=None) -> list[dict]:
    """One server of setting ``c`` (plain decoding where n_max is 0): per prompt its tokens and counts.  Not timed:
    its threads wait asleep (``POLL``), so a busy machine does not stall them; ``extra``: the server's further flags;
    ``threads``: its ``-t`` (default the machine's cores)."""
    out = []
    spec = c.spec(models.get("draft", ""))
    with LlamaServer(models["target"], spec, ctx=ctx, threads=threads, extra=extra) as server:
        for pid, ids in prompts:
            before = drafts(server) if c.n_max else 0
            r = server.complete(ids, n)
            t = r.get("timings", {})
            out.append({"prompt_id": pid, "tokens_out": list(r.get("tokens", [])), "tokens": int(t.get("predicted_n", 0)),
                        "drafts": drafts(server) - before if c.n_max else 0, "drafted": int(t.get("draft_n", 0)),
                        "drafted_max": int(t.get("draft_n", 0)), "accepted": int(t.get("draft_n_accepted", 0))})  # fmt: skip
    return out


def llamacpp_rows(models: dict, cands: Sequence[Setting], prompts: list, n: int, ctx: int, threads=None) -> list[dict]:
    """llama.cpp's rows: every setting's server in turn, each response beside plain decoding's tokens."""
    run = partial(served, models, prompts=prompts, n=n, ctx=ctx, threads=threads)
    plain = {r["prompt_id"]: r["tokens_out"] for r in run(Candidate("plain"))}
    rows = []
    for c in cands:
        for r in run(c):
            same = r.pop("tokens_out") == plain[r["prompt_id"]]
            rows.append({**c.params, **r, "same_tokens": same})
    return rows


def specbench_rows(job, cands: list[Candidate], prompts) -> list[dict]:
    """specbench's replay of every setting over its target's greedy continuations (EOS ignored, as llama.cpp's):
    ``replay.pmin_steps`` per prompt, its drafted bracket and the draft's samples at both ends."""
    pair = context(job).load_pair()
    conts = accept_ngram.continuations(job, prompts, pair)
    marks = replay.teacher_forced(pair.draft, [pr.ids for pr in prompts], conts, replay.pmin_marks(10))
    rows = []
    for c in cands:
        for pr, m in zip(prompts, marks):
            steps = replay.pmin_steps(m, c.n_max, c.p_min, start=1, reserve=1)
            rows.append({**c.params, "prompt_id": pr.id, "tokens": len(m), "drafts": sum(s.drafts for s in steps),
                         "drafted": sum(s.least for s in steps), "drafted_max": sum(s.most for s in steps),
                         "draft_samples": sum(replay.draft_samples(s.least, s.room) for s in steps),
                         "draft_samples_max": sum(replay.draft_samples(s.most, s.room) for s in steps),
                         "accepted": sum(s.accepted for s in steps), "same_tokens": ""})  # fmt: skip
    return rows


def rereplay(job, out: str) -> list[dict]:
    """``llamacpp_replay_only``: the newest run of this machine, pair, dataset and max_new_tokens in ``out``'s
    file with specbench's side derived again (its settings, prompts and run id; llama.cpp's rows kept as they
    are): the replay is deterministic, so a change to it needs no server.  Refused in one line where no such
    run exists or its prompts are not this job's."""
    path = os.path.join(out, FILE)
    rows = llamaaccept.read(path) if os.path.exists(path) else pd.DataFrame()
    me, label = machine.identity("cpu")["machine_id"], identity.job_identity(job).dataset_label or job.dataset.name
    if len(rows):
        rows = rows[(rows.machine_id.astype(str) == str(me)) & (rows.pair == job.pair.name)
                    & (rows.dataset == label) & (rows.max_new_tokens.astype(int) == job.max_new_tokens)]  # fmt: skip
    if rows.empty:
        raise ConfigError(f"llamacpp_replay_only=true: {path} holds no run of {job.pair.name}/{label} at "
                          f"max_new_tokens={job.max_new_tokens} on this machine; run without it first")  # fmt: skip
    run = rows[rows.run_id == rows.run_id.max()]
    ctx = context(job)
    prompts = ctx.prompts(ctx.tokenizer())
    lc = run[run.engine == "llamacpp"]
    if set(lc.prompt_id.astype(str)) != {str(p.id) for p in prompts}:
        raise ConfigError(f"llamacpp_replay_only=true: run {run.run_id.iloc[0]} decoded other prompts than "
                          f"dataset.limit={job.dataset.limit}; give that run's dataset.limit")  # fmt: skip
    settings = lc.drop_duplicates(["n_max", "p_min", "n_min"])
    ngram: list[Setting] = list(accept_ngram.settings_of(lc))
    cands = ngram or [Candidate("", int(r.n_max), float(r.p_min), int(r.n_min)) for r in settings.itertuples()]
    base = run[run.engine == "specbench"].iloc[0].to_dict()
    result = {"n_max", "p_min", "n_min", "prompt_id", "tokens", "drafts", "drafted", "drafted_max", "accepted",
              "draft_samples", "draft_samples_max"}  # fmt: skip
    base = {k: v for k, v in base.items() if k not in result | accept_ngram.COLUMNS | {"same_tokens"}}
    lc = lc.assign(drafted_max=lc.drafted)  # llama.cpp's count is exact (a run before the column lacks it)
    return lc.to_dict("records") + [{**base, **r} for r in replayed(job, cands, prompts)]


def replayed(job, cands: list, prompts) -> list[dict]:
    """specbench's side of the settings: ``accept_ngram``'s for n-gram settings, else ``specbench_rows``."""
    if cands and isinstance(cands[0], accept_ngram.NgramSetting):
        return accept_ngram.specbench_rows(job, cands, prompts)
    return specbench_rows(job, cands, prompts)


def write(out: str, rows: list[dict]) -> None:
    """The run's rows into ``out``/acceptance_llamacpp.csv, every other run's kept (read strictly first)."""
    upsert(os.path.join(out, FILE), partial(replace_rows, new=pd.DataFrame(rows), key=["run_id"]), llamaaccept.read)


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    try:
        job = from_config({**resolved(cfg), "tree": {"name": "none", "budget": 0}})
        ngram, out = accept_ngram.wanted(job), toolopts.value(job.extra, "results_dir")
        cands = accept_ngram.grid(job.extra) if ngram else grid(job.extra)
        toolopts.check(job.extra, "accept_llamacpp")
        threads = toolopts.value(job.extra, "llamacpp_threads", os.cpu_count() or 1)
        if toolopts.value(job.extra, "llamacpp_replay_only"):
            rows = rereplay(job, out)
            write(out, rows)
            print(f"specbench: replayed specbench's side of run {rows[0]['run_id']} again ({out}/{FILE})")
            return
        why = llamacpp.unavailable()
        if why:
            raise ConfigError(why)
        models, ctx = models_of(job, ("target",) if ngram else ("target", "draft")), context(job)
        prompts = ctx.prompts(ctx.tokenizer())
        base = {**base_row(job, identity.job_identity(job), jobfiles.new_run_id()), "torch_threads": threads}
        lc = llamacpp_rows(
            models,
            cands,
            [(p.id, list(p.ids)) for p in prompts],
            job.max_new_tokens,
            toolopts.value(job.extra, "llamacpp_ctx"),
            threads,
        )
        sb = replayed(job, cands, prompts)
    except (ConfigError, ServerError, ValueError) as e:
        print(f"specbench.study.tools.accept_llamacpp: {str(e).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    rows = [{**base, **r} for r in lc] + [
        {**base, **r, "engine": "specbench", "dtype": job.dtype, "engine_version": ""} for r in sb
    ]
    write(out, rows)
    print(f"specbench: wrote {len(rows)} rows to {out}/{FILE} ({base['machine']})")


def cli() -> None:
    """`python -m specbench.study.tools.accept_llamacpp`: the command line checked as `run` checks it."""
    argv.check_argv(sys.argv[1:], extra=KEYS)
    argv.run_hydra(main)


if __name__ == "__main__":
    cli()
