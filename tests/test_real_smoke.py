"""Real embedded pair: loads the installed Qwen2.5-Coder models (skipped when absent).

On the shared dev machine run it under the real-model lock:
    flock /tmp/specbench-real.lock .venv/bin/python -m pytest -q -m real
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specbench.inputs import embedded, models

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(
        not embedded.installed(["qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"]),
        reason="embedded Qwen pair not installed (bash scripts/setup.sh)",
    ),
]

PAIR_YAML = Path(__file__).resolve().parents[1] / "conf" / "pair" / "qwen_coder.yaml"


@pytest.fixture(scope="module")
def pair_cfg():
    from omegaconf import OmegaConf

    return OmegaConf.load(PAIR_YAML)


def test_real_pair_loads_and_generates(pair_cfg):
    p = models.load_pair(pair_cfg, dtype="float32", device="cpu")
    assert p.draft is not None and p.target is not None
    assert p.draft.config.vocab_size == p.target.config.vocab_size == 151936
    # the draft's own tokenizer agrees with the target's (raises otherwise)
    models.check_same_tokenizer(models.load_tokenizer(pair_cfg.draft), p.tokenizer, p.draft_name, p.target_name)
    ids = p.tokenizer("def fibonacci(n):", return_tensors="pt").input_ids
    with torch.no_grad():
        out = p.target.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=8,
            do_sample=False,
            pad_token_id=p.tokenizer.eos_token_id,
        )
    text = p.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    assert out.shape[1] > ids.shape[1] and text.strip()


def _decode(pair, prompt, tree, verify, n, seed=0):
    from specbench.api import decode_prompts

    done = decode_prompts(pair, [prompt], tree, verify, n, seed)[0]
    return done.records, done.tokens


@pytest.fixture(scope="module")
def real_fp32(pair_cfg):
    from specbench.inputs import data

    p = models.load_pair(pair_cfg, dtype="float32", device="cpu")
    prompts = data.load_prompts(data.DatasetSpec.of({"name": "humaneval", "limit": 1}), p.tokenizer)
    return p, prompts


@pytest.fixture(scope="module")
def real_greedy(real_fp32):
    """The target's own greedy continuation (32 tokens) of each prompt, computed once for every tree."""
    from specbench.api import eos_ids

    pair, prompts = real_fp32
    refs = []
    for pr in prompts:
        ids = torch.tensor([pr.ids])
        with torch.no_grad():  # the target's plain greedy decode
            ref = pair.target.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=32,
                do_sample=False,
                eos_token_id=sorted(eos_ids(pair)),
                pad_token_id=pair.tokenizer.pad_token_id,
            )
        refs.append(ref[0, ids.shape[1] :].tolist())
    return refs


@pytest.mark.parametrize("tree", [{"name": "chain", "budget": 4}, {"name": "binary", "budget": 8}])
def test_real_pair_greedy_is_lossless(real_fp32, real_greedy, tree):
    pair, prompts = real_fp32
    recs = []
    for pr, ref in zip(prompts, real_greedy):
        r, out = _decode(pair, pr, tree, {"name": "greedy"}, 32)
        assert out == ref
        recs += r
    rate = sum(r.accepted for r in recs) / sum(r.tree_size for r in recs)
    assert 0 < rate <= 1


def test_real_pair_mss_is_lossless_per_step(real_fp32):
    pair, prompts = real_fp32
    recs = []
    for pr in prompts:
        recs += _decode(
            pair, pr, {"name": "binary", "budget": 8}, {"name": "mss", "temperature": 1.0, "draft_temperature": 1.0}, 32
        )[0]
    assert max(r.first_token_tv for r in recs) < 1e-5
    rate = sum(r.accepted for r in recs) / sum(r.tree_size for r in recs)
    assert 0 < rate <= 1
