"""Real embedded pair: loads the installed Qwen2.5-Coder models (skipped when absent).

On the shared dev machine run it under the real-model lock:
    flock /tmp/specbench-real.lock .venv/bin/python -m pytest -q -m real
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specbench import embedded, models

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(not embedded.installed(),
                       reason="embedded models not installed (bash scripts/setup.sh)"),
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
    models.check_same_tokenizer(models.load_tokenizer(pair_cfg.draft), p.tokenizer,
                                p.draft_name, p.target_name)
    ids = p.tokenizer("def fibonacci(n):", return_tensors="pt").input_ids
    with torch.no_grad():
        out = p.target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8,
                                do_sample=False, pad_token_id=p.tokenizer.eos_token_id)
    text = p.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    assert out.shape[1] > ids.shape[1] and text.strip()

