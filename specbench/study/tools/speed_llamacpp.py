"""`python -m specbench.study.tools.speed_llamacpp [overrides]`: the interleaved speed benchmark with
llama.cpp's ``llama-server`` as the engine (#84 item 5).

    python -m specbench.study.tools.speed_llamacpp pair=qwen_coder dataset=humaneval dataset.limit=16 \\
        max_new_tokens=128 '+llamacpp_candidates=[2/0.75,4/0.75,8/0.75,4/0]' +speed_rounds=2

Per-request speculative settings are compiled out of this server, so every candidate is its own
managed server (``study.tools.llamaserver``; the GGUF files are memory-mapped, the servers share the
page cache, only one decodes at a time): plain decoding (no draft), plain decoding again under a
second name on a second server (the A/A control), each candidate ``N_MAX/P_MIN`` (``--spec-type
draft-simple`` with ``--spec-draft-n-max N_MAX --spec-draft-p-min P_MIN --spec-draft-n-min
llamacpp_n_min``), and the first candidate again on a server of its own under a second name (``X
(twin)``).  Rounds, units (one prompt each), each unit's ABBA order, ``speed_rounds``,
``speed_max_rounds`` and ``speed_until`` are ``study.tools.speed``'s (``speedloop``).  Every request is
greedy (temperature 0, top_k 1, fixed seed, no prompt cache), ``max_new_tokens`` tokens with EOS
ignored, after one untimed warm-up request per server.

Rows are appended to ``results_dir``/speed.csv in its schema with ``engine=llamacpp`` (specbench's rows
lack the column: ``results.speedstats.SPECBENCH``), ``dtype=gguf`` (the files as shipped): ``wall_s`` the
server's prompt + decode time (``timings``; ``client_s`` the request's wall time), ``tokens``, ``drafted``
and ``accepted`` (``timings.draft_n``, ``draft_n_accepted``), ``steps`` (target decode steps: tokens less
accepted drafts), ``same_tokens`` (its tokens equal plain decoding's of the same prompt and round), the
machine (``inputs.machine``).  No step file: the server reports per request.

Keys (top level, all optional): ``llamacpp_candidates`` (default ``[4/0.75]``; ``[]``: plain decoding and its A/A
copy alone), ``llamacpp_n_min`` (default
0), ``llamacpp_target`` / ``llamacpp_draft`` (GGUF files; default the pair's embedded models', assembled),
``llamacpp_prompts`` (``ids``, the default: the token ids specbench decodes, chat template included, as
the pair's tokenizer makes them; ``text``: the prompt text, llama.cpp tokenizes), ``llamacpp_ctx`` (default
4096), ``results_dir``, and the speed keys above.  Bad values are refused in one line before a server starts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import hydra
import pandas as pd
from omegaconf import DictConfig

from ... import CONF_DIR
from ...inputs import llamacpp, machine
from ...results import speedstats
from ..job import argv, identity, jobfiles, toolopts
from ..job.context import context
from ..job.jobspec import ConfigError, from_config, resolved
from . import speed, speedloop
from .llamaserver import LlamaServer, ServerError
from .sizes import WARM_TOKENS

ENGINE, DTYPE = "llamacpp", "gguf"
KEYS = toolopts.keys("speed_llamacpp")
PROMPTS = toolopts.OPTIONS["llamacpp_prompts"].words


@dataclass(frozen=True)
class Candidate:
    """One named server: ``n_max`` 0 is plain decoding."""

    name: str
    n_max: int = 0
    p_min: float = 0.0
    n_min: int = 0

    @property
    def params(self) -> dict:
        return {"n_max": self.n_max, "n_min": self.n_min, "p_min": self.p_min} if self.n_max else {}

    def spec(self, draft: str | Path) -> list[str]:
        """The server's speculative flags (none for plain decoding)."""
        if not self.n_max:
            return []
        return ["--spec-type", "draft-simple", "--spec-draft-model", str(draft), "--spec-draft-n-max",
                str(self.n_max), "--spec-draft-n-min", str(self.n_min), "--spec-draft-p-min", f"{self.p_min:g}"]  # fmt: skip


def parse(item, n_min: int) -> Candidate:
    """'4/0.75' -> draft-simple n_max 4, p_min 0.75 (``toolopts.n_max_p_min``); a ConfigError naming the key otherwise."""
    n_max, p_min = toolopts.n_max_p_min(item, n_min)
    return Candidate(f"draft n_max={n_max} p_min={p_min:g}", n_max, p_min, n_min)


def roster(extra: dict) -> list[Candidate]:
    """Plain decoding, its A/A copy, every candidate of ``llamacpp_candidates``, and the first one's twin (none
    where the list is empty: plain decoding and its A/A copy alone); the keys read by ``toolopts``."""
    n_min, given = toolopts.draft_candidates(extra)
    cands = [Candidate(f"draft n_max={n} p_min={p:g}", n, p, n_min) for n, p in given]
    if not cands:  # plain decoding alone (its tokens/s beside specbench's: ``results.engines``)
        return [Candidate(speedstats.PLAIN), Candidate(speedstats.PLAIN_AA)]
    twin = Candidate(cands[0].name + speedstats.TWIN_SUFFIX, cands[0].n_max, cands[0].p_min, n_min)
    return [Candidate(speedstats.PLAIN), Candidate(speedstats.PLAIN_AA), *cands, twin]


class Stopped(ServerError):
    """A server that died or refused mid-run: its one line, with the rows of every unit finished before (``rows``)."""

    def __init__(self, line: str, rows: list[dict]) -> None:
        super().__init__(line)
        self.rows = rows


def config_hash(c: Candidate, base: dict) -> str:
    """The configuration's hash: engine, models, dataset, length and the drafting rule (a twin's equals its original's)."""
    key = {k: base.get(k) for k in ("engine", "pair_id", "dataset", "max_new_tokens", "seed")} | c.params
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def row(c: Candidate, r: dict, client_s: float, where: dict) -> dict:
    """One timed request's row (module docstring)."""
    t = r.get("timings", {})
    tokens, accepted = int(t.get("predicted_n", 0)), int(t.get("draft_n_accepted", 0))
    return {
        **where,
        "candidate": c.name,
        "config_hash": config_hash(c, where),
        "tree": "draft-simple" if c.n_max else "none",
        "tree_params": json.dumps(c.params, sort_keys=True),
        "budget": c.n_max,
        "wall_s": (float(t.get("prompt_ms", 0.0)) + float(t.get("predicted_ms", 0.0))) / 1000,
        "client_s": client_s,
        "draft_s": float("nan"),
        "verify_s": float("nan"),
        "steps": tokens - accepted,
        "tokens": tokens,
        "accepted": accepted,
        "drafted": int(t.get("draft_n", 0)),
        "tree_depth": c.n_max,
    }


def time_unit(servers: dict, order: list[Candidate], prompt, n: int, where: dict) -> tuple[list[dict], list]:
    """One prompt ``(id, text or ids)`` decoded by every candidate's server in ``order``: its rows."""
    pid, text = prompt
    rows, tokens = [], {}
    for pos, c in enumerate(order):
        t0 = time.perf_counter()
        r = servers[c.name].complete(text, n)
        rows.append(row(c, r, time.perf_counter() - t0, {**where, "order": pos, "prompt_ids": pid}))
        tokens[c.name] = list(r.get("tokens", []))
    for out in rows:
        out["same_tokens"] = tokens[out["candidate"]] == tokens[speedstats.PLAIN]
    return rows, []


def bench(job, prompts: list[tuple], cands: list[Candidate], models: dict, base: dict, ctx: int = 4096) -> list[dict]:
    """Every round, prompt and candidate (``speedloop.interleave``), each candidate on its own server
    (started here, every one stopped when this returns or fails; each logs to its own temp file): the rows.  A server
    that dies or refuses mid-run is ``Stopped``: its line and the rows of the units finished before it."""
    with contextlib.ExitStack() as stack:
        servers = {}
        for c in cands:
            servers[c.name] = stack.enter_context(LlamaServer(models["target"], c.spec(models["draft"]), ctx=ctx))
        for c in cands:  # one untimed request each: none starts the timed units colder than another
            servers[c.name].complete(prompts[0][1], min(WARM_TOKENS, job.max_new_tokens))

        finished: list[dict] = []

        def one_unit(order, prompt, where):
            rows, kept = time_unit(servers, order, prompt, job.max_new_tokens, {**base, **where})
            finished.extend(rows)
            return rows, kept

        try:
            speedloop.interleave(job, prompts, cands, one_unit, base["run_id"], "speed_llamacpp")
        except ServerError as e:
            raise Stopped(str(e), finished) from None
    return finished


def write(out: str, rows: list[dict]) -> None:
    """Append the rows to ``out``/speed.csv (``study.tools.speed.append``; no step rows)."""
    speed.append(out, pd.DataFrame(rows), pd.DataFrame({"run_id": [], "candidate": [], "step": []}))


def base_row(job, ident, run_id: str) -> dict:
    """The run's columns: machine, pair, dataset and settings, ``engine=llamacpp``."""
    me = machine.identity("cpu")
    me["torch_threads"] = os.cpu_count()  # llama.cpp's threads (-t): the machine's
    return {"run_id": run_id, **me, "pair": job.pair.name, "pair_id": identity.pair_id(ident, job.pair.drafter),
            "draft": job.pair.draft.ref if job.pair.draft else "", "target": job.pair.target.ref, "verify": "greedy",
            "temperature": 0.0, "dataset": ident.dataset_label or job.dataset.name, "seed": job.seed,
            "max_new_tokens": job.max_new_tokens, "dtype": DTYPE, "device": "cpu", "batch_size": 1,
            "roster": speedstats.ANSWER, "weights": "pretrained", "engine": ENGINE,
            "engine_version": llamacpp.engine_version()}  # fmt: skip


def models_of(job, roles=("target", "draft")) -> dict:
    """The GGUF files of ``roles``: ``llamacpp_target``/``llamacpp_draft``, else the pair's embedded models'
    (assembled)."""
    out = {}
    for role in roles:
        spec, given = getattr(job.pair, role), toolopts.value(job.extra, f"llamacpp_{role}")
        if given:
            if not os.path.isfile(str(given)):
                raise ConfigError(f"llamacpp_{role}={given}: no such file; give a GGUF file")
            out[role] = str(given)
        elif spec is not None and spec.source == "embedded":
            out[role] = str(llamacpp.assemble_gguf(spec.ref))
        else:
            raise ConfigError(
                f"llamacpp_{role}: pair {job.pair.name} has no embedded {role}; give +llamacpp_{role}=GGUF"
            )
    return out


def prompts_of(job) -> list[tuple]:
    """(prompt id, token ids or text) of the job's prompts (``llamacpp_prompts``), loaded as speed.py loads them."""
    how = toolopts.value(job.extra, "llamacpp_prompts")
    ctx = context(job)
    return [(p.id, list(p.ids) if how == "ids" else p.text) for p in ctx.prompts(ctx.tokenizer())]


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    try:
        job = from_config({**resolved(cfg), "tree": {"name": "none", "budget": 0}})
        toolopts.check(job.extra, "speed_llamacpp")
        cands, out = roster(job.extra), toolopts.value(job.extra, "results_dir")
        speed.check_destination(out)  # read as strictly as write's append, before any server starts
        why = llamacpp.unavailable()
        if why:
            raise ConfigError(why)
        models, prompts = models_of(job), prompts_of(job)
        base = base_row(job, identity.job_identity(job), jobfiles.new_run_id())
        rows = bench(job, prompts, cands, models, base, toolopts.value(job.extra, "llamacpp_ctx"))
    except Stopped as e:  # the finished units kept, then the one line
        if e.rows:
            write(out, e.rows)
        print(f"specbench.study.tools.speed_llamacpp: {e} ({len(e.rows)} rows of finished units kept)", file=sys.stderr)
        sys.exit(2)
    except (ConfigError, ServerError, ValueError) as e:
        print(f"specbench.study.tools.speed_llamacpp: {str(e).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    write(out, rows)
    print(f"specbench: wrote {len(rows)} rows to {out}/{speed.FILE} ({base['machine']}, {ENGINE})")
    print(speed.summary(rows))


def cli() -> None:
    """`python -m specbench.study.tools.speed_llamacpp`: the command line checked as `run` checks it."""
    argv.check_argv(sys.argv[1:], extra=KEYS)
    argv.run_hydra(main)


if __name__ == "__main__":
    cli()
