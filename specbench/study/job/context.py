"""One job context: every part a job is built from, built from its typed spec in one place.

``context(job)`` gives a ``JobContext``: the target's tokenizer, the job's prompts, the
models' positions and the loaded pair (``inputs``), and the decode wiring, ``DecodePlan``:
the verify mode and its parameters, the tree-policy and drafter factories, the verifier
(the live target, or replay's cached continuation), the ``engine.loop.Decoding``, and
``JobContext.decode``: every prompt through the engine (the one loop, live or drafted
replay, or rank replay for static shapes over a drafter that declares it).

run, calibrate, lossless, costs and the public API (``specbench.api``) build through it:
none of them wires drafter, verifier, policy or decoding by hand.  A ``DecodePlan`` needs
only a tree and a verify spec (``jobspec.tree_spec`` / ``verify_spec``), so the API and
the lossless check build one for a loaded pair without a whole job.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from functools import cached_property

from tqdm import tqdm

from ...core.diskcache import DiskCache, cache_root
from ...drafting.drafters import DRAFTERS
from ...engine import replay
from ...engine.loop import Decoding, decode
from ...engine.records import PromptResult
from ...engine.verifiers import ContinuationVerifier, LiveVerifier
from ...inputs import data, models
from ...inputs.models import eos_ids
from ...trees.policies import make_policy, policy_spec
from ...verify.modes import get_mode
from ...verify.modespec import ModeParams
from .checks import paired_params
from .identity import pair_id
from .jobspec import JobSpec, TreeSpec, VerifySpec


def new_drafters(pair, draft_temperature: float, top_p: float):
    """A factory of new drafters of the pair's kind (``pair.drafter``), every one a row of one
    shared draft cache, so that a batch of rows drafts in lockstep."""
    cls = DRAFTERS.get(getattr(pair, "drafter", "model"))
    kv = cls.shared_kv(pair)
    return lambda: cls.from_pair(pair, draft_temperature, top_p, kv)


@dataclass(frozen=True)
class DecodePlan:
    """How prompts are decoded: tree policy, verify mode, length, seed and batch."""

    tree: TreeSpec
    verify: VerifySpec
    max_new_tokens: int
    seed: int = 0
    batch_size: int = 1
    measure_shift: bool = True  # exact first_token_tv / expected_accepted per step

    @classmethod
    def of(cls, job: JobSpec) -> DecodePlan:
        return cls(job.tree, job.verify, job.max_new_tokens, job.seed, job.batch_size)

    @cached_property
    def mode(self):
        """The verify mode spec, configured by its parameters (it drafts with ``verify.children``)."""
        return get_mode(self.verify.name, self.verify.params)

    @cached_property
    def params(self) -> ModeParams:
        return self.mode.params(self.verify.params)

    def new_policy(self):
        """A fresh tree policy (one per prompt: adaptive policies keep state)."""
        return make_policy(self.tree.name, self.tree.budget, self.tree.params)

    def decoding(self, eos: frozenset) -> Decoding:
        paired = tuple((get_mode(n), paired_params(self.verify, n)) for n in self.verify.paired_with)
        return Decoding(self.mode, self.params, self.max_new_tokens, eos, self.seed, self.measure_shift, paired)

    def drafters(self, pair):
        return new_drafters(pair, self.params["draft_temperature"], self.params["top_p"])

    def live_verifier(self, pair) -> LiveVerifier:
        return LiveVerifier(pair.target, self.params["temperature"], self.params["top_p"])

    def run(self, pair, prompts, verifier, progress=None) -> list[PromptResult]:
        """Every prompt (objects with ``.id`` and ``.ids``) through the one loop."""
        return decode(
            prompts,
            self.drafters(pair),
            verifier,
            self.new_policy,
            self.decoding(eos_ids(pair)),
            progress,
            self.batch_size,
        )


@dataclass(frozen=True)
class JobContext:
    """A job's inputs and engine parts, all from its spec (``context(job)``)."""

    job: JobSpec

    @cached_property
    def plan(self) -> DecodePlan:
        return DecodePlan.of(self.job)

    # ---------------------------------------------------------------- inputs
    def tokenizer(self):
        """The target's tokenizer (no weights load)."""
        return models.load_tokenizer(self.job.pair.target.as_dict())

    def prompts(self, tokenizer, whole: bool = False) -> list[data.Prompt]:
        """The job's prompts: the dataset's first ``dataset.limit``, or every prompt (``whole``,
        for calibration, which takes the last ones)."""
        spec = self.job.dataset.loader_spec()
        return data.load_prompts(
            replace(spec, limit=None) if whole else spec,
            tokenizer,
            max_prompt_tokens=self.job.dataset.max_prompt_tokens,
        )

    def positions(self) -> dict:
        """{role: positions or None} of the pair's models, from their configs (no weights load)."""
        return models.pair_contexts(self.job.pair.as_dict(), self.job.dtype)

    def load_pair(self) -> models.Pair:
        return models.load_pair(self.job.pair.as_dict(), self.job.dtype, self.job.device)

    # ---------------------------------------------------------------- engine
    def by_ranks(self) -> bool:
        """Rank replay (the pure fast path) fits static shapes over a drafter that declares it
        (a draft model, or the target's layer subset: top-k children of one model's ranks)."""
        return DRAFTERS.get(self.job.pair.drafter).rank_replay and policy_spec(self.job.tree.name).rank_replayable

    def cache_keys(self, ident, eos) -> tuple[dict, dict]:
        """(continuation key, draft-rank key additions) for the replay caches: content
        identities of the models, not their names."""
        job, v = self.job, self.job.verify
        key = {
            "target": ident.target,
            "max_new_tokens": job.max_new_tokens,
            "dtype": job.dtype,
            "device": job.device,
            "eos": sorted(int(e) for e in eos),
            "temperature": v.temperature,
            "top_p": v.top_p,
        }
        draft = pair_id(ident, job.pair.drafter, job.pair.drafter_params)  # a layer subset has no draft model
        return key, {"draft": draft, "draft_temperature": v.draft_temperature, "draft_top_p": v.top_p}

    def store(self) -> DiskCache:
        return DiskCache(cache_root(self.job.replay_cache, self.job.out_root))

    def draft_ranks(self, pair, prompts, ident, eos, progress=None) -> list:
        """(ranks, continuation) of every prompt, from the replay cache (computed where missing)."""
        key, draft_key = self.cache_keys(ident, eos)
        drafter = DRAFTERS.get(self.job.pair.drafter)
        return replay.cached_ranks_many(
            self.store(),
            pair.target,
            drafter.rank_model(pair),
            key,
            draft_key,
            [pr.ids for pr in prompts],
            self.job.continuation_batch,
            progress,
            drafter.rank_vocab(pair),
        )

    def continuation_verifier(self, pair, prompts, ident, progress=None) -> ContinuationVerifier:
        """Replay's verifier: the target's cached continuation of each prompt."""
        key, _ = self.cache_keys(ident, eos_ids(pair))
        ids = [pr.ids for pr in prompts]
        conts = replay.cached_continuations(self.store(), pair.target, key, ids, self.job.continuation_batch, progress)
        by_prompt = dict(zip(map(tuple, ids), conts))
        return ContinuationVerifier(
            lambda prompt_ids: by_prompt[tuple(prompt_ids)], pair.target.get_output_embeddings().weight.shape[0]
        )

    def decode(self, pair, prompts, engine: str, ident) -> list[PromptResult]:
        """Every prompt through the engine: the one loop, live or drafted replay, or rank
        replay for static shapes over a drafter that declares it (``by_ranks``)."""
        job = self.job
        bar = functools.partial(tqdm, desc=f"{engine} {job.tree.name}/{job.tree.budget}", disable=not job.progress)
        if engine == "live":
            return self.plan.run(pair, prompts, self.plan.live_verifier(pair), bar)
        if self.by_ranks():
            table = self.draft_ranks(pair, prompts, ident, eos_ids(pair), bar)
            vocab = DRAFTERS.get(self.job.pair.drafter).rank_vocab(pair)
            return replay.replay_by_ranks(prompts, table, self.plan.new_policy, vocab)
        return self.plan.run(pair, prompts, self.continuation_verifier(pair, prompts, ident, bar), bar)


def context(job: JobSpec) -> JobContext:
    """The job's context (build it after ``identity.bind``, whose spec the tree reads)."""
    return JobContext(job)
