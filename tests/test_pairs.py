"""More draft-target pairs: the Token-Level-Intersection drafter (drafting/crossvocab.py)
and layer-skip self-drafting (drafting/layerskip.py), on tiny fp32 models with two
DIFFERENT tokenizers (a byte-level BPE and a SentencePiece-style one with byte fallback);
plus a real smoke test per new embedded pair (marked real)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch
from scipy.stats import chisquare

from conftest import CORPUS, REAL_PROMPTS, build_model, decode_one, greedy_reference, noisy_copy, real_target_greedy
from specbench.drafting.crossvocab import TLIDrafter, VocabMap, scheme, token_bytes
from specbench.drafting.drafters import DRAFTERS
from specbench.drafting.layerskip import LayerSkipDrafter, describe, layer_view, resolve_layers
from specbench.inputs import embedded
from specbench.trees.policies import make_policy
from test_replay import PLANNED, STATIC

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --------------------------------------------------------------------------
# a second tokenizer and a draft model over it
# --------------------------------------------------------------------------
def build_sp_tokenizer(vocab_size: int = 400, corpus=CORPUS):
    """A SentencePiece-style BPE (Gemma's layout: '▁' for spaces, <0xNN> byte-fallback
    tokens, <bos> added to every encoding): a vocabulary unlike conftest's byte-level one."""
    import json

    from tokenizers import Tokenizer, decoders, models, normalizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", "<bos>", "<unk>"]
    trained = Tokenizer(models.BPE(unk_token="<unk>"))
    trained.normalizer = normalizers.Replace(" ", "\u2581")
    trained.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials))
    spec = json.loads(trained.to_str())["model"]
    learned = [t for t, _ in sorted(spec["vocab"].items(), key=lambda kv: kv[1]) if t not in specials]
    vocab = {t: i for i, t in enumerate(specials + [f"<0x{b:02X}>" for b in range(256)] + learned)}
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["merges"]]
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens(specials)
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 2)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", unk_token="<unk>", pad_token="<pad>"
    )


@pytest.fixture(scope="module")
def sp_tokenizer():
    return build_sp_tokenizer()


@pytest.fixture(scope="module")
def vmap(sp_tokenizer, tiny_tokenizer, tiny_target):
    return VocabMap(sp_tokenizer, tiny_tokenizer, tiny_target.config.vocab_size)


@pytest.fixture(scope="module")
def cross_draft(tiny_target, vmap, sp_tokenizer):
    """A Llama draft over sp_tokenizer's vocabulary that mirrors the Qwen2 tiny_target:
    noisy copies of its layers (o_proj bias 0), and the target's embedding / LM-head rows
    at the drafter ids of the tokens both vocabularies share (random rows elsewhere).
    Llama, not Qwen2: AutoTokenizer picks the tokenizer class by model type, and
    Qwen2's would rebuild the saved SentencePiece-style tokenizer as byte-level."""
    from transformers import LlamaConfig, LlamaForCausalLM

    t = tiny_target.config
    torch.manual_seed(7)
    draft = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(sp_tokenizer),
            hidden_size=t.hidden_size,
            intermediate_size=t.intermediate_size,
            num_hidden_layers=t.num_hidden_layers,
            num_attention_heads=t.num_attention_heads,
            num_key_value_heads=t.num_key_value_heads,
            max_position_embeddings=t.max_position_embeddings,
            rms_norm_eps=t.rms_norm_eps,
            attention_bias=True,
            tie_word_embeddings=False,
            initializer_range=0.3,
            bos_token_id=2,
            eos_token_id=1,
            pad_token_id=0,
        )
    ).eval()
    noisy = noisy_copy(tiny_target, 0.1, seed=8)
    missing = draft.model.layers.load_state_dict(noisy.model.layers.state_dict(), strict=False).missing_keys
    assert all(k.endswith("o_proj.bias") for k in missing)
    with torch.no_grad():
        for layer in draft.model.layers:
            layer.self_attn.o_proj.bias.zero_()
    draft.model.norm.load_state_dict(noisy.model.norm.state_dict())
    with torch.no_grad():
        for mine, theirs in ((draft.model.embed_tokens, noisy.model.embed_tokens), (draft.lm_head, noisy.lm_head)):
            mine.weight[vmap.draft_ids] = theirs.weight[vmap.target_ids]
    return draft


# --------------------------------------------------------------------------
# the vocabulary map (token strings -> bytes -> intersection)
# --------------------------------------------------------------------------
PROMPTS = ("def add(a, b):", "The quick brown", "for i in range(10):")


def test_token_strings_become_bytes(tiny_tokenizer, sp_tokenizer):
    assert (scheme(tiny_tokenizer), scheme(sp_tokenizer)) == ("bytelevel", "sentencepiece")
    bl, sp = token_bytes(tiny_tokenizer), token_bytes(sp_tokenizer)
    assert bl[tiny_tokenizer.convert_tokens_to_ids("Ġ")][0] == b" "  # byte-level marker
    assert bl[tiny_tokenizer.eos_token_id] is None  # special: no text
    assert sp[sp_tokenizer.convert_tokens_to_ids("<0xC3>")] == (b"\xc3", 2)  # byte fallback
    assert sp[sp_tokenizer.convert_tokens_to_ids("\u2581")][0] == b" "
    assert all(sp[i] is None for i in sp_tokenizer.all_special_ids)


def test_intersection_is_a_bijection_by_bytes(vmap, tiny_tokenizer, sp_tokenizer):
    bl, sp = token_bytes(tiny_tokenizer), token_bytes(sp_tokenizer)
    assert 0 < vmap.size < len(tiny_tokenizer)
    assert vmap.target_ids.unique().numel() == vmap.draft_ids.unique().numel() == vmap.size
    for t, d in zip(vmap.target_ids.tolist(), vmap.draft_ids.tolist()):
        assert bl[t][0] == sp[d][0]
    # 'a' is a learned token of the drafter and also its byte fallback <0x61>: the learned one wins
    assert vmap.t2d[tiny_tokenizer.convert_tokens_to_ids("a")] == sp_tokenizer.convert_tokens_to_ids("a")
    logits = torch.randn(2, len(sp_tokenizer))
    q = torch.softmax(vmap.to_target(logits), -1)
    assert torch.all(q[:, ~vmap.mask()] == 0)
    torch.testing.assert_close(q[:, vmap.target_ids], torch.softmax(logits[:, vmap.draft_ids], -1))


def test_re_encoding_spells_the_same_bytes(vmap, tiny_tokenizer):
    g = torch.Generator().manual_seed(0)
    text = "def fibonacci(n): é€ zebra quokka\n"
    for ids in [tiny_tokenizer.encode(text)] + [
        torch.randint(1, len(tiny_tokenizer), (12,), generator=g).tolist() for _ in range(20)
    ]:
        want = b"".join(vmap.target_text(t) for t in ids)
        assert b"".join(vmap.draft_entries[d][0] for d in vmap.to_draft(ids)) == want
    assert 0 < vmap.outside_share(tiny_tokenizer.encode(text)) < 1


# --------------------------------------------------------------------------
# the TLI drafter in the one decode loop
# --------------------------------------------------------------------------
class Recording(TLIDrafter):
    """A TLI drafter that keeps every tree it drafted."""

    def draft(self, policy, rule, rng):
        tree = yield from super().draft(policy, rule, rng)
        self.trees = getattr(self, "trees", []) + [tree]
        return tree


def proposes_only_shared(drafter, vmap) -> bool:
    """No drafted token outside the intersection, and no q mass there."""
    return all(int(x) in vmap.t2d for t in drafter.trees for x in t.tokens[1:]) and all(
        t.q is None or torch.all(t.q[:, ~vmap.mask()] == 0) for t in drafter.trees
    )


GREEDY = {"temperature": 0.0, "draft_temperature": 1.0}
SHAPES = [
    ("chain", 4, {}),
    ("binary", 8, {}),
    ("kary", 9, {"width": 3}),
    ("specinfer", 6, {"expansion": [2, 1, 1]}),
    ("eagle2", 8, {"width": 3, "depth": 4}),
    ("none", 0, {}),
]


@pytest.mark.parametrize("name,budget,params", SHAPES, ids=[s[0] for s in SHAPES])
def test_tli_greedy_is_token_identical_to_plain_greedy(
    name, budget, params, cross_draft, tiny_target, tiny_tokenizer, vmap
):
    accepted = 0
    for text in PROMPTS:
        prompt = tiny_tokenizer.encode(text)
        drafter = Recording(cross_draft, vmap)
        recs, out = decode_one(drafter, tiny_target, prompt, make_policy(name, budget, params), 24, params=GREEDY)
        assert out == greedy_reference(tiny_target, prompt, 24)
        assert all(r.tree_size == budget for r in recs)
        assert proposes_only_shared(drafter, vmap)
        accepted += sum(r.accepted for r in recs)
    assert accepted > 0 or budget == 0  # the mirrored draft does agree with the target


def first_token_pvalue(drafter, target, prompt, policy, mode, n: int = 400) -> float:
    """chi^2 p-value of the first emitted token over n seeds against the target's distribution."""
    counts = torch.zeros(target.config.vocab_size, dtype=torch.float64)
    for seed in range(n):
        counts[decode_one(drafter, target, prompt, policy(), 1, mode, {"temperature": 1.0}, seed=seed)[1][0]] += 1
    with torch.no_grad():
        p = torch.softmax(target(torch.tensor([prompt])).logits[0, -1].double(), -1)
    big = p * n >= 5
    obs = torch.cat([counts[big], counts[~big].sum()[None]])
    exp = torch.cat([p[big], p[~big].sum()[None]]) * n
    return chisquare(obs.numpy(), exp.numpy() * obs.sum().item() / exp.sum().item()).pvalue


@pytest.mark.parametrize(
    "mode,name,budget,params",
    [("speculative", "chain", 3, {}), ("mss", "binary", 6, {}), ("sequoia", "kary", 6, {"width": 3})],
)
def test_tli_sampling_modes_stay_lossless(mode, name, budget, params, cross_draft, tiny_target, tiny_tokenizer, vmap):
    prompt = tiny_tokenizer.encode("def add(a, b):")
    drafter = Recording(cross_draft, vmap, temperature=1.0)
    policy = lambda: make_policy(name, budget, params)  # noqa: E731
    recs, _ = decode_one(drafter, tiny_target, prompt, policy(), 16, mode, {"temperature": 1.0})
    assert max(r.first_token_tv for r in recs) < 1e-6  # exact law, every step
    assert sum(r.accepted for r in recs) > 0
    assert proposes_only_shared(drafter, vmap)
    assert first_token_pvalue(drafter, tiny_target, prompt, policy, mode) > 1e-3


def test_a_sliced_head_drafts_the_same_trees(cross_draft, tiny_target, tiny_tokenizer, vmap):
    """#35: the TLI drafter computes only the intersection's LM-head rows (``slice_head``,
    done by ``prepare`` as the pair loads); fp32: every drafted tree and its q rows equal the full head's."""
    import copy

    pair = SimpleNamespace(
        name="x",
        draft=copy.deepcopy(cross_draft),
        draft_tokenizer=vmap.draft_tokenizer,
        tokenizer=tiny_tokenizer,
        target=tiny_target,
    )
    TLIDrafter.prepare(pair)
    TLIDrafter.prepare(pair)  # once per model
    assert TLIDrafter.rank_vocab(pair) is pair.vocab and TLIDrafter.from_pair(pair, 1.0).vocab is pair.vocab
    rows = pair.draft.get_output_embeddings().weight.shape[0]
    assert rows == vmap.size < cross_draft.get_output_embeddings().weight.shape[0]
    for name, budget, params in SHAPES[:-1]:
        for text in PROMPTS:
            prompt = tiny_tokenizer.encode(text)
            full, sliced = Recording(cross_draft, vmap), Recording(pair.draft, vmap)
            for drafter in (full, sliced):
                decode_one(drafter, tiny_target, prompt, make_policy(name, budget, params), 16, params=GREEDY)
            assert [t.tokens.tolist() for t in full.trees] == [t.tokens.tolist() for t in sliced.trees]
            for a, b in zip(full.trees, sliced.trees):
                torch.testing.assert_close(a.q, b.q)


TLI_SHAPES = [s for s in STATIC if s[0] != "paths"] + [
    (name, {k: v for k, v in PLANNED[name].items() if k != "name"}) for name in ("sequoia", "adaptive_chain")
]


@pytest.mark.parametrize("draft_t", [0.0, 1.0])
@pytest.mark.parametrize("name,params", TLI_SHAPES, ids=[s[0] for s in TLI_SHAPES])
def test_tli_rank_replay_equals_live(name, params, draft_t, cross_draft, tiny_target, tiny_tokenizer, vmap):
    """#35: a TLI drafter's context is the committed tokens mapped one by one, so one
    teacher-forced pass in the drafter's tokens gives its static trees at every budget:
    every step record equals live (fp32), across target tokens outside the intersection."""
    from specbench.engine import replay
    from specbench.engine.loop import continuation
    from test_replay import same_records

    assert DRAFTERS.get("tli").rank_replay
    outside = 0
    for text, n in zip(PROMPTS, (24, 7, 40)):
        prompt = tiny_tokenizer.encode(text)
        cont = continuation(tiny_target, prompt, n, {0})
        outside += sum(t not in vmap.t2d for t in cont)
        ranks = replay.draft_ranks(cross_draft, prompt, cont, draft_t, vocab=vmap)
        for budget in (1, 3, 8, 21):
            make = lambda: make_policy(name, budget, dict(params))  # noqa: E731
            params_v = {"temperature": 0.0, "draft_temperature": draft_t}
            live, out = decode_one(
                TLIDrafter(cross_draft, vmap, draft_t), tiny_target, prompt, make(), n, params=params_v
            )
            assert out == cont
            same_records(live, replay.replay_prompt("p0", ranks, make(), replay.widths(vmap, cont)))
    assert outside > 0  # the target emitted tokens the drafter cannot propose


# --------------------------------------------------------------------------
# layer-skip self-drafting
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def deep_target(tiny_tokenizer):
    return build_model(len(tiny_tokenizer), seed=3, layers=4)


def test_layer_view_shares_weights_and_all_layers_equal_the_target(deep_target, tiny_tokenizer):
    view = layer_view(deep_target, range(4))
    assert {p.data_ptr() for p in view.parameters()} <= {p.data_ptr() for p in deep_target.parameters()}
    assert len(deep_target.model.layers) == 4  # the target is untouched
    sub = layer_view(deep_target, [0, 3])
    assert len(sub.model.layers) == 2
    assert all(a is b for a, b in zip(sub.model.layers[1].parameters(), deep_target.model.layers[3].parameters()))
    assert sub.model.layers[1].self_attn.layer_idx == 1 and deep_target.model.layers[3].self_attn.layer_idx == 3
    ids = torch.tensor([tiny_tokenizer.encode("def add(a, b):")])
    with torch.no_grad():
        torch.testing.assert_close(view(ids).logits, deep_target(ids).logits)
        assert not torch.allclose(sub(ids).logits, deep_target(ids).logits)


@pytest.mark.parametrize("name,budget", [("chain", 4), ("binary", 6), ("eagle2", 6)])
def test_layerskip_with_all_layers_accepts_everything(name, budget, deep_target, tiny_tokenizer):
    prompt = tiny_tokenizer.encode("for i in range(10):")
    params = {"width": 2, "depth": 3} if name == "eagle2" else {}
    recs, out = decode_one(
        LayerSkipDrafter(deep_target, range(4)),
        deep_target,
        prompt,
        make_policy(name, budget, params),
        30,
        params=GREEDY,
    )
    assert out == greedy_reference(deep_target, prompt, 30)
    assert all(r.accept_path == ".".join("0" * r.accepted) for r in recs)  # only the draft's argmax path
    # static shapes: that path down to the deepest level, every step (eagle2 may keep a shorter one)
    assert all(r.accepted == r.tree_depth if name != "eagle2" else r.accepted >= 1 for r in recs[:-1])
    if name == "chain":
        assert sum(r.accepted for r in recs) / sum(r.tree_size for r in recs) > 0.9


def test_layerskip_subset_is_lossless(deep_target, tiny_tokenizer):
    prompt = tiny_tokenizer.encode("def add(a, b):")
    _, out = decode_one(
        LayerSkipDrafter(deep_target, [0, 1, 3]), deep_target, prompt, make_policy("binary", 8), 24, params=GREEDY
    )
    assert out == greedy_reference(deep_target, prompt, 24)
    recs, _ = decode_one(
        LayerSkipDrafter(deep_target, [0, 1, 3], temperature=1.0),
        deep_target,
        prompt,
        make_policy("binary", 6),
        12,
        "mss",
        {"temperature": 1.0},
    )
    assert max(r.first_token_tv for r in recs) < 1e-6


def test_layer_specs():
    assert resolve_layers(3, 28) == (0, 1, 2)
    assert resolve_layers([27, 0, 1, 1], 28) == (0, 1, 27)
    assert describe((0, 1, 2, 5, 7, 8)) == "0-2,5,7-8"
    assert resolve_layers("0-2,5,7-8", 28) == (0, 1, 2, 5, 7, 8)
    assert resolve_layers(40) == tuple(range(40))  # no bound before the target loads
    for bad in (0, 29, [], [0, 28], "x", "3-", None, True):
        with pytest.raises(ValueError, match="pair.layers"):
            resolve_layers(bad, 28)


# --------------------------------------------------------------------------
# pairs from config: job spec, load_pair, costs, a real tiny job, replay == live
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cross_dirs(tmp_path_factory, tiny_pair_dirs, sp_tokenizer, cross_draft):
    """(draft folder with its own tokenizer, target folder): a cross-vocabulary local pair."""
    d = tmp_path_factory.mktemp("cross_draft")
    cross_draft.save_pretrained(d)
    sp_tokenizer.save_pretrained(d)
    return str(d), tiny_pair_dirs[1]


def local(path):
    return {"source": "local", "path": path}


def test_job_spec_reads_what_the_new_drafters_need():
    from specbench.study.job.jobspec import ConfigError, from_config

    base = {"tree": {"name": "chain", "budget": 4}, "verify": {"name": "greedy"}, "dataset": {"name": "smoke"}}
    model = {"source": "hub", "id": "x"}
    job = from_config(
        {**base, "pair": {"name": "s", "draft": None, "target": model, "drafter": "layerskip", "layers": "0-1,3"}}
    )
    assert job.pair.draft is None and job.pair.drafter_params == {"layers": "0-1,3"}
    assert from_config({**base, "pair": {"name": "t", "draft": model, "target": model, "drafter": "tli"}}).pair.draft
    for pair, msg in (
        ({"drafter": "layerskip"}, "pair.layers=None"),
        ({"drafter": "layerskip", "layers": "3-"}, "pair.layers='3-'"),
        ({"drafter": "tli", "draft": None}, "pair.draft is not set"),
        ({"drafter": "tlli"}, "pair.drafter='tlli': must be one of .*tli"),
    ):
        with pytest.raises(ConfigError, match=msg):
            from_config({**base, "pair": {"name": "p", "draft": model, "target": model, **pair}})


def test_load_pair_tli_and_layerskip(cross_dirs, sp_tokenizer):
    from specbench.drafting.drafters import DRAFTERS
    from specbench.inputs import models

    p = models.load_pair({"drafter": "tli", "draft": local(cross_dirs[0]), "target": local(cross_dirs[1])}, "float32")
    assert p.draft_tokenizer.get_vocab() == sp_tokenizer.get_vocab() != p.tokenizer.get_vocab()
    assert isinstance(DRAFTERS.get("tli").from_pair(p), TLIDrafter)
    with pytest.raises(ValueError, match="tokenizer"):  # drafter=model still checks
        models.load_pair({"drafter": "model", "draft": local(cross_dirs[0]), "target": local(cross_dirs[1])}, "float32")
    s = models.load_pair({"drafter": "layerskip", "layers": [0], "target": local(cross_dirs[1])}, "float32")
    assert s.draft is None and s.layers == (0,) and s.draft_name.endswith("@layers=0")
    d = DRAFTERS.get("layerskip").from_pair(s)
    assert isinstance(d, LayerSkipDrafter)
    assert d.model.model.layers[0].self_attn.q_proj is s.target.model.layers[0].self_attn.q_proj
    with pytest.raises(ValueError, match="pair.layers=5"):
        models.load_pair({"drafter": "layerskip", "layers": 5, "target": local(cross_dirs[1])})


def test_forward_costs_cover_the_new_drafters(cross_dirs, tmp_path):
    import pandas as pd

    from specbench.inputs import machine, models
    from specbench.study.tools.costs import cost_rows, merge_rows

    rows = []
    for name, cfg in (("tli", {"draft": local(cross_dirs[0])}), ("layerskip", {"layers": 1}), ("ngram", {})):
        p = models.load_pair({"name": name, "drafter": name, "target": local(cross_dirs[1]), **cfg}, "float32")
        got = cost_rows(p, kv_lens=[8], repeats=1, sizes=(1, 4), progress=False)
        assert {r["role"] for r in got} == ({"target"} if name == "ngram" else {"draft", "target"})
        assert {r["machine_id"] for r in got} == {machine.identity()["machine_id"]}  # every point names its machine
        rows += got
    path = tmp_path / "costs.csv"
    pd.DataFrame([{**r, "samples": None} for r in rows]).to_csv(path, index=False)
    assert len(merge_rows(str(path), rows[:1])) == 1  # rows without their repeats are dropped
    merge_rows(str(path), rows[:4]).to_csv(path, index=False)
    merged = merge_rows(str(path), rows)  # this run's pairs replace their old rows
    assert len(merged) == len(rows) and set(merged.pair) == {"tli", "layerskip", "ngram"}
    assert set(merged.dtype) == {"float32"}
    merged.to_csv(path, index=False)  # another dtype's rows sit beside them
    both = merge_rows(str(path), [{**r, "dtype": "bfloat16"} for r in rows])
    assert len(both) == 2 * len(rows) and set(both.dtype) == {"float32", "bfloat16"}
    both.to_csv(path, index=False)  # another machine's curve in the same dtype sits beside this one's: nothing lost
    there = merge_rows(str(path), [{**r, "machine_id": "another"} for r in rows])
    assert len(there) == 3 * len(rows) and set(there.machine_id) == {machine.identity()["machine_id"], "another"}
    there.to_csv(path, index=False)  # and this machine's rerun replaces its own rows alone, as do rows naming none
    pd.concat([there, pd.DataFrame(rows).assign(machine_id=None)]).to_csv(path, index=False)
    again = merge_rows(str(path), rows)
    assert len(again) == 3 * len(rows) and (again.machine_id == "another").sum() == len(rows)


def test_costs_measure_a_shared_model_once_with_median_and_spread(cross_dirs):
    """Two pairs on one target: its rows are measured once (equal under both pairs);
    every row has its median between its min and max over the repeats, at every KV length,
    and carries each repeat (``samples``) for the report's bootstrap."""
    from specbench.inputs import models
    from specbench.study.tools.costs import cost_rows

    memo: dict = {}
    got = {}
    for name, cfg in (("skip", {"drafter": "layerskip", "layers": 1}), ("lookup", {"drafter": "ngram"})):
        p = models.load_pair({"name": name, "target": local(cross_dirs[1]), **cfg}, "float32")
        got[name] = cost_rows(p, kv_lens=[8, 16], repeats=3, sizes=(1, 4), progress=False, memo=memo)
    target = {
        name: [(r["kv_len"], r["n_tokens"], r["seconds"]) for r in rows if r["role"] == "target"]
        for name, rows in got.items()
    }
    assert target["skip"] == target["lookup"] and len(target["skip"]) == 4
    rows = got["skip"] + got["lookup"]
    assert all(r["seconds_min"] <= r["seconds"] <= r["seconds_max"] and r["repeats"] == 3 for r in rows)
    assert all(len(r["samples"].split()) == 3 and r["device"] == "cpu" for r in rows)


@pytest.mark.parametrize(
    "arg,key",
    [
        ("+costs_repeats=0", "costs_repeats"),
        ("dtype=float64", "dtype"),
        # a valid pair composes inside the running Hydra app first (run_all.sh's costs step), then the bad one
        ("+costs_pairs=[ngram_qwen,nope]", "costs_pairs: no pair 'nope' in conf/pair/"),
    ],
)
def test_costs_refuse_bad_values_in_one_line_before_loading(tmp_path, arg, key):
    import subprocess
    import sys

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "specbench.study.tools.costs",
            "pair=qwen_coder",
            arg,
            f"+results_dir={tmp_path}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode != 0 and len(lines) == 1 and key in lines[0], r.stderr
    assert not (tmp_path / "costs.csv").exists()


def composed_job(dirs, extra, tmp_path):
    from hydra import compose, initialize_config_dir

    from conftest import tiny_pair_overrides
    from test_jobspec import CONF

    over = (
        tiny_pair_overrides(dirs)
        + extra
        + ["dataset=smoke", "dataset.limit=2", "max_new_tokens=8", f"out_root={tmp_path}"]
    )
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("config", overrides=over)


NEW_DRAFTERS = {"tli": ["pair.drafter=tli"], "layerskip": ["pair.drafter=layerskip", "+pair.layers=1"]}


@pytest.mark.parametrize("drafter", sorted(NEW_DRAFTERS))
def test_run_job_replays_the_new_drafters_equal_to_live(drafter, cross_dirs, tmp_path):
    """tli's static shapes replay by the draft's ranks over its own tokens, layerskip's by the
    layer view's ranks (Drafter.rank_replay): through run_job, both equal live (every column
    but the timings, ``scored`` included)."""
    import pandas as pd

    from specbench.study.job.checks import validate
    from specbench.study.job.context import context
    from specbench.study.job.jobspec import from_config
    from specbench.study.job.run import run_job

    rows = {}
    for engine in ("live", "replay"):
        cfg = composed_job(
            cross_dirs, NEW_DRAFTERS[drafter] + ["tree=binary", "tree.budget=4", f"engine={engine}"], tmp_path
        )
        job = from_config(cfg)
        assert validate(job)[0] == engine and context(job).by_ranks()
        run_job(cfg, str(tmp_path / engine))
        rows[engine] = pd.read_csv(tmp_path / engine / "steps.csv")
    cols = ["prompt_id", "step", "tree_size", "tree_depth", "accepted", "emitted", "accept_path", "scored"]
    pd.testing.assert_frame_equal(rows["live"][cols], rows["replay"][cols])
    assert rows["live"].accepted.sum() > 0


@pytest.mark.parametrize(
    "name,budget,params", [("chain", 4, {}), ("binary", 16, {}), ("eagle2", 8, {"width": 3, "depth": 3})]
)
def test_drafted_replay_equals_live_for_the_new_drafters(
    name, budget, params, cross_draft, vmap, deep_target, tiny_target, tiny_tokenizer
):
    from specbench.engine.verifiers import ContinuationVerifier
    from test_replay import same_records

    for make, target in (
        (lambda: TLIDrafter(cross_draft, vmap), tiny_target),
        (lambda: LayerSkipDrafter(deep_target, [0, 2]), deep_target),
    ):
        for text, n in zip(PROMPTS, (24, 9, 16)):
            prompt = tiny_tokenizer.encode(text)
            live, out = decode_one(make(), target, prompt, make_policy(name, budget, params), n, params=GREEDY)
            cont = ContinuationVerifier(lambda ids: out, target.config.vocab_size)
            rep, rep_out = decode_one(
                make(), None, prompt, make_policy(name, budget, params), n, params=GREEDY, verifier=cont
            )
            assert rep_out == out
            same_records(live, rep)


def test_pair_identity_covers_the_layer_subset():
    from specbench.study.job.identity import Identity, pair_id, short_hash

    ident = Identity(None, "t" * 64, "d")
    assert pair_id(ident, "layerskip", {"layers": "0-9"}) != pair_id(ident, "layerskip", {"layers": "0-11"})
    assert pair_id(ident, "model", {}) == short_hash({"draft": None, "target": "t" * 64, "drafter": "model"})


# --------------------------------------------------------------------------
# real smoke tests: each new embedded pair (skipped when its models are absent)
#   flock /tmp/specbench-real.lock .venv/bin/python -m pytest -q -m real tests/test_pairs.py
# --------------------------------------------------------------------------
QWEN15 = "qwen2.5-coder-1.5b-instruct"
REAL_PAIRS = {
    "smollm_qwen": [QWEN15, "smollm2-135m-instruct"],
    "gemma_qwen": [QWEN15, "gemma-3-270m"],
    "qwen_skip": [QWEN15],
}


@pytest.mark.real
@pytest.mark.parametrize("name", sorted(REAL_PAIRS))
def test_real_new_pair_greedy_is_lossless(name):
    """One short code prompt (``REAL_PROMPTS``), 12 tokens, binary/8 in fp32: the pair's drafter
    through the one loop gives the target's own greedy tokens and accepts some drafts.  Every pair's
    target is the same 1.5B model, so its greedy reference is computed once (``real_target_greedy``)."""
    from specbench.api import decode_prompts
    from specbench.inputs import data, models
    from specbench.study.job.launch import pair_config

    if not embedded.installed(REAL_PAIRS[name]):
        pytest.skip(f"{name}: embedded models {REAL_PAIRS[name]} not installed (bash scripts/setup.sh)")
    pair = models.load_pair(pair_config(name), "float32", "cpu")
    pr = data.load_prompts(data.DatasetSpec.of(REAL_PROMPTS), pair.tokenizer)[0]
    done = decode_prompts(pair, [pr], {"name": "binary", "budget": 8}, {"name": "greedy"}, 12)[0]
    assert done.tokens == real_target_greedy(pair, pr.ids, 12)
    assert sum(r.accepted for r in done.records) > 0


@pytest.mark.parametrize("drafter,extra", [("tli", []), ("layerskip", ["+pair.layers=2"])])
def test_calibrate_measures_the_new_drafters_by_a_star_replay(drafter, extra, cross_dirs, tmp_path, capsys):
    """Greedy acceptance vectors for drafters without a same-vocabulary draft model: one rank
    per step of a one-level star tree (drafted replay); layer-skip with every layer is the
    target itself, so its top child is always accepted."""
    from specbench.api import eos_ids
    from specbench.inputs import data, models
    from specbench.study.job import identity
    from specbench.study.job.jobspec import from_config
    from specbench.study.tools.calibrate import measure

    cfg = composed_job(cross_dirs, [f"pair.drafter={drafter}", *extra, f"+replay_cache={tmp_path}/c"], tmp_path)
    job = from_config(cfg)
    pair = models.load_pair(job.pair.as_dict(), job.dtype, job.device)
    prompts = data.load_prompts(job.dataset.loader_spec(), pair.tokenizer)
    vec, n = measure(job, identity.job_identity(job), pair, prompts, 4, eos_ids(pair))
    assert len(vec) == 4 and n > 0 and 0 < sum(vec) <= 1 + 1e-9
    if drafter == "layerskip":
        assert vec == [1.0, 0.0, 0.0, 0.0]
    from conftest import tiny_pair_overrides
    from specbench.study.tools.calibrate import main

    with pytest.raises(SystemExit) as e:  # before any model load
        main(
            tiny_pair_overrides(cross_dirs)
            + [f"pair.drafter={drafter}", *extra, "verify=speculative", "dataset=smoke", f"--out={tmp_path}/v.csv"]
        )
    assert e.value.code == 2 and "calibrate it with verify=greedy" in capsys.readouterr().err


@pytest.mark.parametrize("name,budget", [("chain", 4), ("binary", 8), ("specinfer", 6)])
def test_layerskip_rank_replay_equals_live(name, budget, deep_target, tiny_tokenizer):
    """A layer subset declares rank replay: its static trees are top-k of one model (the
    view), so replaying the view's teacher-forced ranks gives the live step records."""
    from specbench.engine import replay
    from specbench.engine.loop import continuation

    cls = DRAFTERS.get("layerskip")
    assert cls.rank_replay
    pair = SimpleNamespace(name="s", target=deep_target, layers=(0, 1, 3))
    for text, n in (("def add(a, b):", 24), ("for i in range(10):", 9)):
        prompt = tiny_tokenizer.encode(text)
        live, out = decode_one(
            cls.from_pair(pair, 0.0), deep_target, prompt, make_policy(name, budget), n, params=GREEDY
        )
        cont = continuation(deep_target, prompt, n, {0})
        assert cont == out
        rep = replay.replay_prompt(
            "p0", replay.draft_ranks(cls.rank_model(pair), prompt, cont), make_policy(name, budget)
        )
        assert [(r.accepted, r.emitted, r.accept_path, r.tree_size) for r in live] == [
            (r.accepted, r.emitted, r.accept_path, r.tree_size) for r in rep
        ]


def test_another_machines_costs_merge_in_without_a_model_load(tmp_path):
    """``+costs_merge``: a GPU's rows join the CPU's (kept) with their environment file; a
    file of CPU rows or of the wrong columns is refused in one line, nothing written."""
    import pandas as pd

    from specbench.study.tools.costs import merge_file

    row = {"role": "target", "pair": "p", "dtype": "bfloat16", "n_tokens": 1, "seconds": 0.2, "samples": "0.2"}
    home, gpu = tmp_path / "home", tmp_path / "gpu"
    home.mkdir(), gpu.mkdir()
    pd.DataFrame([{**row, "device": "cpu"}]).to_csv(home / "costs.csv", index=False)
    pd.DataFrame([{**row, "device": "cuda", "seconds": 0.02}]).to_csv(gpu / "costs.csv", index=False)
    (gpu / "environment-cuda.json").write_text('{"gpu": "H100"}\n')
    merge_file(str(home), str(gpu / "costs.csv"))
    got = pd.read_csv(home / "costs.csv")
    assert sorted(zip(got.device, got.seconds)) == [("cpu", 0.2), ("cuda", 0.02)]
    assert (home / "environment-cuda.json").read_text() == '{"gpu": "H100"}\n'
    before = (home / "costs.csv").read_bytes()
    for bad in (home / "costs.csv", tmp_path / "nope.csv"):
        with pytest.raises(ValueError, match=r"^costs_merge=\S+: "):  # main: one line, exit 2
            merge_file(str(home), str(bad))
    assert (home / "costs.csv").read_bytes() == before


def test_a_layer_range_past_the_target_is_refused_before_its_weights_load(cross_dirs, monkeypatch):
    from specbench.inputs import models

    def no_load(*a, **kw):
        raise AssertionError("weights loaded before the layer range was checked")

    monkeypatch.setattr(models, "load_model", no_load)
    with pytest.raises(ValueError, match=r"pair.layers='0-9': layer indices must lie in 0..1 \(the target has 2"):
        models.load_pair({"drafter": "layerskip", "layers": "0-9", "target": local(cross_dirs[1])})
