"""llama.cpp's n-gram speculation in ``accept_llamacpp``'s loop (#84 item 4): ``--spec-type ngram-simple``
beside specbench's replay of the same rule and of its own ``ngram`` chain, on the same prompts.

    python -m specbench.study.tools.accept_llamacpp pair=ngram_qwen dataset=humaneval dataset.limit=12 \\
        max_new_tokens=64 '+llamacpp_ngram=[2/4,2/8,4/8]'

Settings: ``llamacpp_ngram``, a list of ``N/M`` (``--spec-ngram-simple-size-n N --spec-ngram-simple-size-m
M``; default ``NGRAM``), the n-gram settings run instead of the draft grid (the default where the pair has no
draft model, e.g. ``pair=ngram_qwen``).  1 <= N <= M <= 1024: llama.cpp takes 1-1024, and M < N never drafts
(``engine.ngramwalk``'s rule).  Each setting is a server of its own in ``accept_llamacpp``'s loop (no draft
model); its rows carry ``spec_type=ngram-simple``, ``size_n`` N and ``n_max`` M (p_min and n_min 0: the type
has neither).

specbench's side, over its target's cached greedy continuation of each prompt (EOS ignored, as llama.cpp's),
with llama.cpp's bounds (no draft before the first token; a draft leaves one token): ``drafter=llamacpp``
rows replay llama.cpp's rule (``ngramwalk.simple_draft``: exact, an n-gram draft depends on the history only),
``drafter=ngram`` rows replay specbench's own ``ngram`` drafter as ``tree=chain`` of budget M
(``ngramwalk.chain_draft``: n = 4..1), the closest shape of ``pair=ngram_qwen``.  Both know every draft's
length, so ``drafted`` = ``drafted_max``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from ...engine import ngramwalk, replay
from ..job import identity, toolopts
from ..job.context import context

SPEC_TYPE = "ngram-simple"
NGRAM = ("1/4", "1/8", "2/4", "2/8", "2/16", "4/4", "4/8", "4/16", "12/48")  # 12/48: llama.cpp's defaults
COLUMNS = {"spec_type", "size_n", "drafter"}  # acceptance_llamacpp.csv's columns of an n-gram setting


@dataclass(frozen=True)
class NgramSetting:
    """One ngram-simple server: lookup length ``size_n``, draft length ``size_m``."""

    size_n: int
    size_m: int

    @property
    def name(self) -> str:
        return f"ngram-simple {self.size_n}/{self.size_m}"

    @property
    def n_max(self) -> int:
        """The most it drafts per step (``accept_llamacpp.served``: a speculative server)."""
        return self.size_m

    @property
    def params(self) -> dict:
        return {"spec_type": SPEC_TYPE, "size_n": self.size_n, "n_max": self.size_m, "p_min": 0.0, "n_min": 0}

    def spec(self, draft=None) -> list[str]:
        """The server's flags (no draft model)."""
        return ["--spec-type", SPEC_TYPE, "--spec-ngram-simple-size-n", str(self.size_n),
                "--spec-ngram-simple-size-m", str(self.size_m)]  # fmt: skip


def wanted(job) -> bool:
    """The run measures n-gram settings: ``llamacpp_ngram`` given, or a pair without a draft model."""
    return "llamacpp_ngram" in job.extra or job.pair.draft is None


def parse(item) -> NgramSetting:
    """'2/8' -> size N 2, M 8 (``toolopts.n_m``); a ConfigError naming the key otherwise."""
    return NgramSetting(*toolopts.n_m(item))


def grid(extra: dict) -> list[NgramSetting]:
    """Every ``llamacpp_ngram`` setting, checked in one line; the draft grid's keys are refused beside it
    (``toolopts.ngram_grid``)."""
    return [NgramSetting(n, m) for n, m in toolopts.ngram_grid(extra, NGRAM)]


def settings_of(rows) -> list[NgramSetting]:
    """The n-gram settings of one run's llama.cpp rows (none where it ran draft-simple's)."""
    if "spec_type" not in rows:
        return []
    ng = rows[rows.spec_type == SPEC_TYPE].drop_duplicates(["size_n", "n_max"])
    return [NgramSetting(int(r.size_n), int(r.n_max)) for r in ng.itertuples()]


def continuations(job, prompts, pair=None) -> list[list[int]]:
    """specbench's target's cached greedy continuation of every prompt (computed where missing; ``pair``: the
    job's pair where the caller loaded it already)."""
    ctx = context(job)
    key, _ = ctx.cache_keys(identity.job_identity(job), frozenset())
    ids = [pr.ids for pr in prompts]
    target = (pair or ctx.load_pair()).target
    conts = replay.cached_continuations(ctx.store(), target, key, ids, job.continuation_batch)
    return [[int(t) for t in c] for c in conts]


def walk_rows(settings: list[NgramSetting], prompts: list[tuple], conts: list[list[int]]) -> list[dict]:
    """specbench's rows from (prompt id, prompt ids) and continuations: per setting and prompt, llama.cpp's rule
    replayed (``drafter=llamacpp``) and specbench's ngram chain of budget M (``drafter=ngram``)."""
    rows = []
    for s in settings:
        rules = {"llamacpp": partial(ngramwalk.simple_draft, size_n=s.size_n, size_m=s.size_m),
                 "ngram": partial(ngramwalk.chain_draft, budget=s.size_m)}  # fmt: skip
        for (pid, ids), cont in zip(prompts, conts):
            for drafter, rule in rules.items():
                got = ngramwalk.totals(ngramwalk.walk(list(map(int, ids)), cont, rule, start=1, reserve=1))
                rows.append({**s.params, "drafter": drafter, "prompt_id": pid, "tokens": len(cont), **got,
                             "drafted_max": got["drafted"], "same_tokens": ""})  # fmt: skip
    return rows


def specbench_rows(job, settings: list[NgramSetting], prompts) -> list[dict]:
    """``walk_rows`` over the job's prompts (``data.Prompt``) and its target's continuations."""
    return walk_rows(settings, [(pr.id, pr.ids) for pr in prompts], continuations(job, prompts))
