"""What every serving format shares (``study.serving.engines``): the configuration an engine needs
(``Choice``), the one-line refusal naming the engine, the reason and the nearest exportable
configuration (``Refusal``), the verification rule an engine runs for the study's
(``engine_rule``), and the batch-size schedule in each engine's own terms.

The sources each format was checked against, key by key, are ``CHECKED`` (full commits in
docs/serving.md).

**Verification at T > 0.**  All three engines verify a non-greedy request by default with the
draft as one-hot: the target's sample is kept where it is the draft token (vLLM's rejection
sampler with ``draft_sample_method='greedy'``, TensorRT-LLM's exact-match verification with
``use_rejection_sampling=False``, SGLang's target-only tree sampling with accept thresholds 1).
A draft token is thus kept with the target's probability of it, siblings in order, and a
rejection emits the target's sample: the study's ``verify=naive`` law, on a chain or a top-k
tree.  ``verify=speculative`` (drafts sampled from q, kept with min(1, p/q)) is vLLM's
``draft_sample_method='probabilistic'`` and TensorRT-LLM's ``use_rejection_sampling=True``
(Draft_Target one-model); SGLang has it for EAGLE/EAGLE3/NEXTN heads only.  Each engine samples
drafts at the request's temperature.  At T = 0 every engine verifies by argmax match:
``verify=greedy`` (``naive``, and ``speculative`` with ``verify.draft_temperature=0``, are the
same rule there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ...inputs import embedded
from ...results.columns import tree_params
from ...trees.eagle2 import Eagle2Params
from ...trees.policies import policy_spec
from ..job.launch import pair_config

CHECKED = {
    "vllm": "vLLM main at 002e77c1f0ef (vllm/config/speculative.py; v1/spec_decode/dynamic/utils.py at "
    "14b450ca590c, vocab_mapping.py at 0f17ee061e41)",
    "sglang": "SGLang main at 015c872628e3 (python/sglang/srt/arg_groups/fields/spec.py; "
    "arg_groups/speculative_hook.py at 004c82e07d87)",
    "trtllm": "TensorRT-LLM at 0004396720054fd8 (tensorrt_llm/llmapi/llm_args.py)",
    "llamacpp": "llama.cpp vendored by llama-cpp-python==0.3.36 (common/arg.cpp, common/speculative.cpp, "
    "tools/server/server-context.cpp)",
}
ENGINE = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "llamacpp": "llama.cpp"}
RULE_NOTES = {
    "greedy": "serve requests at temperature 0: the engine then keeps a draft token where it is the target's "
    "argmax, as verify=greedy",
    "naive": "serve requests at temperature {t} (top_p {top_p}): the engine keeps a draft token with the target's "
    "probability of it (drafts as one-hot) and else emits the target's sample, which is verify=naive's law",
    "speculative": "serve requests at temperature {t} (top_p {top_p}): drafts are sampled from the draft model at "
    "that temperature and kept with probability min(1, p/q), which is verify=speculative",
}


@dataclass(frozen=True)
class Choice:
    """One study configuration, as an engine needs it."""

    pair: str
    drafter: str  # model | ngram | tli | layerskip | merged
    draft: str | None  # the draft model an engine loads (its hub id where known), None without one
    tree: str
    budget: int
    params: dict
    verify: str
    temperature: float
    draft_temperature: float | None = None  # None: the target's temperature
    top_p: float = 1.0

    @property
    def draft_t(self) -> float:
        return self.temperature if self.draft_temperature is None else self.draft_temperature

    @classmethod
    def of_job(cls, job) -> Choice:
        d, v = job.pair.draft, job.verify
        return cls(
            job.pair.name, job.pair.drafter, d and model_id(d.source, d.ref), job.tree.name, job.tree.budget,
            dict(job.tree.params), v.name, float(v.temperature), float(v.draft_temperature), float(v.top_p),
        )  # fmt: skip

    @classmethod
    def of_row(cls, row) -> Choice:
        """From a committed summary row (its pair's conf/pair file names the drafter)."""
        pair = pair_config(str(row["pair"]))
        d = pair.get("draft") or {}
        ref = d.get("path") or d.get("id")
        draft_t, top_p = (_number(row.get(k)) for k in ("draft_temperature", "top_p"))
        return cls(
            str(row["pair"]), pair.get("drafter", "model"), ref and model_id(d["source"], ref), str(row["tree"]),
            int(row["budget"]), tree_params(row["tree_params"], strict=True), str(row["verify"]), float(row["temperature"]),
            draft_t, 1.0 if top_p is None else top_p,
        )  # fmt: skip


def _number(v) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def model_id(source: str, ref: str) -> str:
    """What an engine loads: an embedded model's hub id, else the hub id or the local folder."""
    return embedded.EMBEDDED.get(ref).hf_name if source == "embedded" else ref


@dataclass(eq=False)
class Refusal(ValueError):
    """What ``fmt`` cannot run as the study ran it: one line naming the engine, the reason and the
    nearest exportable configuration (``nearest``: the Choice fields to change; ``hint``: the
    advice where no change of this configuration will do)."""

    fmt: str
    reason: str
    nearest: dict = field(default_factory=dict)
    hint: str = ""

    def __str__(self) -> str:
        where = overrides(self.nearest) if self.nearest else self.hint or "none"
        return f"format={self.fmt} ({ENGINE[self.fmt]}): {self.reason}; nearest exportable: {where}"


def overrides(change: dict) -> str:
    """The command-line overrides that make a configuration into its ``change``d one."""
    keys = {"tree": "tree", "budget": "tree.budget", "verify": "verify", "temperature": "verify.temperature",
            "draft_temperature": "verify.draft_temperature", "drafter": "pair.drafter"}  # fmt: skip
    out = [f"{keys[k]}={v}" for k, v in change.items() if k in keys]
    out += [f"tree.{k}={v}" for k, v in change.get("params", {}).items()]
    return " ".join(out)


def nearest_choice(c: Choice, r: Refusal) -> Choice:
    return replace(c, **r.nearest)


def chain_of(depth: int) -> dict:
    return {"tree": "chain", "budget": depth, "params": {}}


def check(c: Choice, fmt: str, drafters: tuple[str, ...]) -> None:
    """One-line refusal of a drafter or tree ``fmt`` has no counterpart of."""
    if c.drafter not in drafters:
        raise Refusal(fmt, f"pair.drafter={c.drafter} ({c.pair}) has no counterpart there", *_drafter_nearest(c))
    if c.tree == "none" or c.budget <= 0:
        raise Refusal(fmt, "tree=none is plain decoding", hint="serve without speculative decoding")
    if c.tree in ("adaptive_chain", "ngram_trie", "merged"):
        depth = int(c.params.get("depth") or c.budget)
        raise Refusal(fmt, f"tree={c.tree} is drafted at run time by the study's own policy", chain_of(depth))


def _drafter_nearest(c: Choice) -> tuple[dict, str]:
    if c.drafter == "merged":
        return {"drafter": "model"}, ""  # its draft model alone
    if c.drafter == "tli":
        return {}, "format=vllm (use_heterogeneous_vocab)"
    return {}, "a pair with a separate draft model of the target's vocabulary (drafter=model) or n-gram lookup"


def shape(c: Choice, paths) -> tuple[str, int, int]:
    """("chain" | "eagle2" | "tree", depth, top-k) of the configuration's trees."""
    if c.tree == "eagle2":
        p = Eagle2Params.parse("eagle2", c.params)  # its defaults filled in
        return "eagle2", int(p.depth), int(p.width)
    if policy_spec(c.tree).chain:
        return "chain", c.budget, 1
    p = paths(c)
    return "tree", max(len(x) for x in p), max(x[-1] for x in p) + 1


def engine_rule(c: Choice, fmt: str) -> str:
    """The engine's rule that verifies as the study's did: "greedy" (T = 0, argmax match),
    "naive" (T > 0, drafts as one-hot: the engines' default) or "speculative" (T > 0, drafts
    sampled from q); a refusal for a rule the engines do not run."""
    t = c.temperature
    if t == 0:
        if c.verify in ("greedy", "naive") or (c.verify == "speculative" and c.draft_t == 0):
            return "greedy"
        why = (
            "draws drafts from q at T=0, engines draft greedily" if c.verify == "speculative" else "has no counterpart"
        )
        raise Refusal(fmt, f"verify={c.verify} {why} (at T=0 the engines verify by argmax match)", {"verify": "greedy"})
    if c.verify == "greedy":
        raise Refusal(fmt, "verify=greedy is the target's argmax", {"temperature": 0.0})
    if c.verify == "naive":
        return "naive"
    if c.verify != "speculative":
        raise Refusal(
            fmt, f"verify={c.verify} has no counterpart there (engines verify T>0 requests by rejection sampling, "
            "drafts one-hot or sampled from q)", {"verify": "naive"},
        )  # fmt: skip
    if c.drafter == "ngram":
        raise Refusal(
            fmt, "verify=speculative needs the draft's q, which n-gram drafts have none of", {"verify": "naive"}
        )
    if c.draft_t != t:
        raise Refusal(
            fmt, f"verify.draft_temperature={c.draft_t}: the engine samples drafts at the request's temperature {t}",
            {"draft_temperature": t},
        )  # fmt: skip
    return "speculative"


def one_hot_rule(c: Choice, fmt: str, why: str) -> str:
    """``engine_rule`` for an engine that verifies T > 0 drafts as one-hot only: ``verify=speculative``
    is refused for ``why`` (nearest: ``verify=naive``)."""
    rule = engine_rule(c, fmt)
    if rule == "speculative":
        raise Refusal(fmt, why, {"verify": "naive"})
    return rule


def rule_note(rule: str, c: Choice) -> str:
    return RULE_NOTES[rule].format(t=c.temperature, top_p=c.top_p)


def ranges(schedule: list[tuple[int, int]]) -> list[list[int]]:
    """[(batch size, K), ...] (sizes ascending) -> vLLM's inclusive [start, end, K] ranges: the K
    measured at size b covers the sizes above the previous measured size up to b (from 1 for
    the first), as TensorRT-LLM reads its draft_len_schedule's keys."""
    out = []
    for i, (b, k) in enumerate(schedule):
        start = 1 if i == 0 else schedule[i - 1][0] + 1
        out.append([start, b, k])
    return out


def schedule_note(schedule: list[tuple[int, int]]) -> str:
    """The draft lengths in words, with where they come from (``schedule.source`` where it says)."""
    sizes = ", ".join(f"B={b}: K={k}" for b, k in schedule)
    source = getattr(schedule, "source", "the batch-size study")
    return (
        f"the draft lengths of {source} ({sizes}; K=0: no speculation) hold for the batch sizes above the "
        "previous measured size up to each measured one"
    )


def wrap(engine: str, c: Choice, body: dict, notes: list[str]) -> dict:
    study = {"pair": c.pair, "tree": c.tree, "budget": c.budget, "verify": c.verify, "temperature": c.temperature}
    return {"engine": engine, "checked_against": CHECKED[engine], "study": study, **body, "notes": notes}
