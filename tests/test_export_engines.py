"""`python -m specbench.export format=vllm|sglang|trtllm` (#54): every export passes the engine's
own validation, transcribed below key by key from the sources in ``engines.CHECKED`` (the engines
need a GPU to install, so their config classes cannot run here); what an engine cannot run as the
study ran it is one line naming the engine, the reason and the nearest exportable configuration.
No model loads: these call the format functions on hand-made configurations."""

from __future__ import annotations

import json

import pytest

from specbench.study.serving import engines
from specbench.study.serving.engines import Choice, Refusal, settings
from specbench.study.serving.export import paths

SCHEDULE = [(1, 4), (2, 4), (4, 1), (8, 0), (16, 0)]


def choice(tree="chain", budget=4, drafter="model", verify="greedy", t=0.0, dt=None, **params) -> Choice:
    return Choice("p", drafter, "org/draft", tree, budget, params, verify, t, dt)


# --- vLLM: vllm/config/speculative.py SpeculativeConfig (fields, __post_init__, _verify_args) and
# vllm/v1/spec_decode/dynamic/utils.py validate_and_normalize_dynamic_sd_schedule
VLLM_KEYS = {"num_speculative_tokens": int, "model": str, "method": str, "prompt_lookup_min": int,
             "prompt_lookup_max": int, "use_heterogeneous_vocab": bool, "draft_sample_method": str,
             "rejection_sample_method": str, "num_speculative_tokens_per_batch_size": list}  # fmt: skip


def vllm_validate(cfg: dict) -> None:
    assert set(cfg) <= set(VLLM_KEYS) and all(isinstance(v, VLLM_KEYS[k]) for k, v in cfg.items()), cfg
    assert cfg["num_speculative_tokens"] > 0  # Field(gt=0)
    assert cfg["method"] in ("ngram", "draft_model")
    if cfg["method"] == "ngram":
        assert 1 <= cfg["prompt_lookup_min"] <= cfg["prompt_lookup_max"] and "model" not in cfg
    else:
        assert isinstance(cfg["model"], str) and "prompt_lookup_min" not in cfg
    assert cfg.get("draft_sample_method", "greedy") in ("greedy", "probabilistic")
    assert cfg.get("rejection_sample_method", "standard") in ("standard", "synthetic", "block")
    if cfg.get("use_heterogeneous_vocab"):  # "only works with method='draft_model'", greedy draft sampling only
        assert cfg["method"] == "draft_model" and cfg.get("draft_sample_method", "greedy") == "greedy"
    sched = cfg.get("num_speculative_tokens_per_batch_size")
    if sched is not None:
        assert sched and all(isinstance(e, list) and len(e) == 3 and all(type(x) is int for x in e) for e in sched)
        assert all(lo > 0 and hi > 0 and lo <= hi and k >= 0 for lo, hi, k in sched)
        prev = 0
        for lo, hi, _ in sorted(sched):
            assert lo > prev  # non-overlapping and sorted
            prev = hi
        assert min(sched)[0] == 1  # every runtime batch size has a K


# --- SGLang: python/sglang/srt/arg_groups/fields/spec.py (the flags) and speculative_hook.py
# (_handle_eagle_family, _handle_ngram); returns what the server runs: (steps, topk, draft tokens)
SGLANG_ARGS = {"--speculative-algorithm": str, "--speculative-draft-model-path": str, "--speculative-num-steps": int,
               "--speculative-eagle-topk": int, "--speculative-num-draft-tokens": int,
               "--speculative-ngram-min-bfs-breadth": int, "--speculative-ngram-max-bfs-breadth": int}  # fmt: skip


def sglang_validate(args: dict) -> tuple[int, int, int]:
    assert set(args) <= set(SGLANG_ARGS) and all(isinstance(v, SGLANG_ARGS[k]) for k, v in args.items()), args
    if args["--speculative-algorithm"] == "NGRAM":
        topk = args.get("--speculative-ngram-max-bfs-breadth", 10)  # topk = max_bfs_breadth
        assert args.get("--speculative-ngram-min-bfs-breadth", 1) <= topk
        tokens = args.get("--speculative-num-draft-tokens", 12)
        return tokens // topk, topk, tokens
    assert args["--speculative-algorithm"] == "STANDALONE" and args["--speculative-draft-model-path"]
    steps, topk, tokens = (args[k] for k in ("--speculative-num-steps", "--speculative-eagle-topk",
                                            "--speculative-num-draft-tokens"))  # fmt: skip
    assert steps >= 1 and topk >= 1 and tokens >= 2
    if topk == 1:
        assert tokens == steps + 1  # else SGLang overrides num_draft_tokens to num_steps + 1
    return steps, topk, tokens


# --- TensorRT-LLM: tensorrt_llm/llmapi/llm_args.py DecodingBaseConfig (extra keys forbidden),
# DraftTargetDecodingConfig, NGramDecodingConfig, Eagle3DecodingConfig (EagleDecodingConfig's
# validators) and TorchLlmArgs.validate_speculative_config (use_rejection_sampling)
TRT_BASE = {"decoding_type": str, "max_draft_len": int, "max_total_draft_tokens": int, "speculative_model": str,
            "draft_len_schedule": dict, "use_rejection_sampling": bool}  # fmt: skip
TRT_KEYS = {
    "Draft_Target": TRT_BASE,
    "NGram": {**TRT_BASE, "max_matching_ngram_size": int, "is_keep_all": bool, "is_use_oldest": bool,
              "is_public_pool": bool},
    "Eagle3": {**TRT_BASE, "eagle_choices": list, "use_dynamic_tree": bool, "dynamic_tree_max_topK": int},
}  # fmt: skip


def trtllm_validate(cfg: dict) -> None:
    keys = TRT_KEYS[cfg["decoding_type"]]
    assert set(cfg) <= set(keys) and all(isinstance(v, keys[k]) for k, v in cfg.items()), cfg
    assert cfg["max_draft_len"] > 0
    if cfg["decoding_type"] in ("Draft_Target", "Eagle3"):
        assert cfg.get("speculative_model")  # "Draft model must be provided for EAGLE" / "... for DraftTarget"
    if cfg["decoding_type"] == "NGram":
        assert cfg["max_matching_ngram_size"] > 0 and not cfg.get("use_rejection_sampling")  # NGram has no q
    sched = cfg.get("draft_len_schedule")
    if sched is not None:
        ks = {int(b): k for b, k in sched.items()}
        assert all(b >= 1 for b in ks) and all(k >= 0 for k in ks.values())
        assert ks[min(ks)] == cfg["max_draft_len"] and max(ks.values()) <= cfg["max_draft_len"]
    if cfg["decoding_type"] == "Eagle3":
        assert (cfg.get("eagle_choices") is None) == bool(cfg.get("use_dynamic_tree"))  # mutually exclusive
        if cfg.get("use_dynamic_tree"):
            k, d = cfg["dynamic_tree_max_topK"], cfg["max_draft_len"]
            assert k > 0 and d <= cfg["max_total_draft_tokens"] <= k * d
        else:
            choices = cfg["eagle_choices"]
            assert all(c[:-1] in choices for c in choices if len(c) > 1)  # connected
            assert sorted(choices, key=lambda x: (len(x), x)) == choices and len(set(map(tuple, choices))) == len(
                choices
            )
            assert max(map(len, choices)) == cfg["max_draft_len"]


VALIDATE = {"vllm": vllm_validate, "trtllm": trtllm_validate}


def _ok(fmt: str, c: Choice, **kw) -> dict:
    out = settings(fmt, c, paths, **kw)
    json.loads(json.dumps(out))  # plain JSON
    assert out["checked_against"] == engines.CHECKED[fmt] and all(isinstance(n, str) for n in out["notes"])
    if fmt == "sglang":
        sglang_validate(out["server_args"])
    else:
        VALIDATE[fmt](out["speculative_config"])
    return out


@pytest.mark.parametrize("verify,t", [("greedy", 0.0), ("naive", 0.7), ("speculative", 0.7)])
def test_vllm_exports_pass_its_validation(verify, t):
    cfg = _ok("vllm", choice(verify=verify, t=t), schedule=SCHEDULE)["speculative_config"]
    assert cfg["num_speculative_tokens_per_batch_size"] == [[1, 1, 4], [2, 2, 4], [3, 4, 1], [5, 8, 0], [9, 16, 0]]
    want = {"greedy": None, "naive": "greedy", "speculative": "probabilistic"}[verify]
    assert cfg.get("draft_sample_method") == want and cfg["method"] == "draft_model"
    ng = _ok("vllm", choice(drafter="ngram", verify="naive" if t else "greedy", t=t))["speculative_config"]
    assert ng == {"num_speculative_tokens": 4, "method": "ngram", "prompt_lookup_min": 1, "prompt_lookup_max": 4,
                  **({"rejection_sample_method": "standard"} if t else {})}  # fmt: skip
    if verify != "speculative":  # vLLM's TLI: draft_model, greedy draft sampling
        assert _ok("vllm", choice(drafter="tli", verify=verify, t=t))["speculative_config"]["use_heterogeneous_vocab"]


def test_vllm_schedule_semantics_are_stated():
    out = _ok("vllm", choice(), schedule=SCHEDULE)
    assert any("carries the last K (0) to every batch size above 16" in n for n in out["notes"])
    assert engines.ranges([(1, 3), (4, 2), (16, 1)]) == [[1, 1, 3], [2, 4, 2], [5, 16, 1]]  # inclusive, up to b


@pytest.mark.parametrize("verify,t", [("greedy", 0.0), ("naive", 1.0)])
def test_sglang_exports_pass_its_validation(verify, t):
    assert sglang_validate(_ok("sglang", choice("chain", 3, verify=verify, t=t))["server_args"]) == (3, 1, 4)
    e = _ok("sglang", choice("eagle2", 16, verify=verify, t=t, depth=5, width=4))["server_args"]
    assert sglang_validate(e) == (5, 4, 17)  # SGLang counts the root among the draft tokens
    ng = _ok("sglang", choice(drafter="ngram", verify=verify, t=t))["server_args"]
    assert sglang_validate(ng)[1] == 1 and ng["--speculative-num-draft-tokens"] == 5  # a chain: BFS breadth 1
    out = _ok("sglang", choice(), schedule=SCHEDULE)
    assert any("no per-batch-size draft length" in n for n in out["notes"])


@pytest.mark.parametrize("verify,t", [("greedy", 0.0), ("naive", 0.7), ("speculative", 0.7)])
def test_trtllm_exports_pass_its_validation(verify, t):
    dt = _ok("trtllm", choice(verify=verify, t=t), schedule=SCHEDULE)["speculative_config"]
    assert dt["decoding_type"] == "Draft_Target" and dt["draft_len_schedule"] == {
        "1": 4,
        "2": 4,
        "4": 1,
        "8": 0,
        "16": 0,
    }
    assert dt.get("use_rejection_sampling") == {"greedy": None, "naive": False, "speculative": True}[verify]
    if verify == "speculative":
        return
    ng = _ok("trtllm", choice(drafter="ngram", verify=verify, t=t))["speculative_config"]
    assert ng["decoding_type"] == "NGram" and not ng["is_public_pool"]
    head = "org/eagle3-head"
    e = _ok("trtllm", choice("eagle2", 16, verify=verify, t=t, depth=5, width=4), eagle_head=head)["speculative_config"]
    assert (e["decoding_type"], e["speculative_model"], e["dynamic_tree_max_topK"]) == ("Eagle3", head, 4)
    st = _ok("trtllm", choice("binary", 8, verify=verify, t=t), eagle_head=head)["speculative_config"]
    assert st["eagle_choices"] == paths(choice("binary", 8)) and st["max_total_draft_tokens"] == 8


def test_trtllm_schedule_it_cannot_take_is_a_note_and_beyond_the_range_is_stated():
    out = _ok("trtllm", choice("chain", 3), schedule=SCHEDULE)  # K at batch 1 is 4, not max_draft_len 3
    assert "draft_len_schedule" not in out["speculative_config"] and "export tree.budget=4" in out["notes"][-1]
    out = _ok("trtllm", choice(), schedule=SCHEDULE)
    assert "above 16" in out["notes"][-1] and "without speculation" in out["notes"][-1]


@pytest.mark.parametrize(
    "fmt,c,kw,words,nearest",
    [
        ("vllm", choice("binary", 16), {}, "vLLM drafts chains only", {"tree": "chain", "budget": 4, "params": {}}),
        ("vllm", choice(drafter="tli", verify="speculative", t=0.7), {}, "greedy draft sampling", {"verify": "naive"}),
        ("vllm", choice(drafter="ngram", verify="speculative", t=0.7), {}, "n-gram", {"verify": "naive"}),
        ("vllm", choice(verify="speculative", t=0.7, dt=1.0), {}, "request's temperature", {"draft_temperature": 0.7}),
        ("vllm", choice(verify="mss", t=1.0), {}, "verify=mss", {"verify": "naive"}),
        ("vllm", choice(verify="typical", t=0.0), {}, "verify=typical", {"verify": "greedy"}),
        ("vllm", choice(drafter="merged"), {}, "pair.drafter=merged", {"drafter": "model"}),
        ("vllm", choice("adaptive_chain", 6), {}, "drafted at run time", {"tree": "chain", "budget": 6, "params": {}}),
        ("sglang", choice(verify="speculative", t=0.7), {}, "EAGLE/EAGLE3/NEXTN", {"verify": "naive"}),
        ("sglang", choice(drafter="ngram", tree="binary", budget=8), {}, "BFS trie", {"tree": "chain", "budget": 3,
                                                                                      "params": {}}),
        ("sglang", choice("binary", 8), {}, "fixed tree", {"tree": "eagle2", "budget": 8,
                                                           "params": {"depth": 3, "width": 2}}),
        ("sglang", choice(drafter="tli"), {}, "pair.drafter=tli", {}),
        ("trtllm", choice(drafter="ngram", tree="binary", budget=16), {}, "linear chains only",
         {"tree": "chain", "budget": 4, "params": {}}),
        ("trtllm", choice("eagle2", 16, depth=5, width=4), {}, "give eagle_head=", {"tree": "chain", "budget": 5,
                                                                                  "params": {}}),
        ("trtllm", choice("binary", 8), {}, "EAGLE-3 head", {"tree": "chain", "budget": 3, "params": {}}),
        ("trtllm", choice("none", 0), {}, "plain decoding", {}),
    ],
)  # fmt: skip
def test_each_refusal_is_one_line_naming_the_engine_the_reason_and_the_nearest(fmt, c, kw, words, nearest):
    with pytest.raises(Refusal) as e:
        settings(fmt, c, paths, **kw)
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"format={fmt} ({engines.ENGINE[fmt]}): ") and words in line
    assert "; nearest exportable: " in line and e.value.nearest == nearest
    if nearest:  # nearest=true exports it, labelled, and it passes the engine's validation
        out = _ok(fmt, c, nearest=True, **kw)
        assert out["nearest"]["asked"]["tree"] == c.tree and out["notes"][0].startswith("NEAREST")
