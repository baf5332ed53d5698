"""Real embedded pair: loads the installed Qwen2.5-Coder models (skipped when absent).

On the shared dev machine run it under the real-model lock:
    flock /tmp/specbench-real.lock .venv/bin/python -m pytest -q -m real
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REAL_PROMPTS, real_target_greedy
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


def test_real_pair_loads_and_generates(pair_cfg, real_fp32, real_greedy):
    """The pair loads (one vocabulary, one tokenizer) and its target generates text: its own greedy
    continuation of the prompt (``real_greedy``, which the lossless tests compare against)."""
    p, _ = real_fp32  # models.load_pair(pair_cfg, "float32", "cpu")
    assert p.draft is not None and p.target is not None
    assert p.draft.config.vocab_size == p.target.config.vocab_size == 151936
    # the draft's own tokenizer agrees with the target's (raises otherwise)
    models.check_same_tokenizer(models.load_tokenizer(pair_cfg.draft), p.tokenizer, p.draft_name, p.target_name)
    out = real_greedy[0]
    text = p.tokenizer.decode(out, skip_special_tokens=True)
    assert len(out) > 0 and text.strip()


def _decode(pair, prompt, tree, verify, n, seed=0):
    from specbench.api import decode_prompts

    done = decode_prompts(pair, [prompt], tree, verify, n, seed)[0]
    return done.records, done.tokens


@pytest.fixture(scope="module")
def real_fp32(pair_cfg):
    from specbench.inputs import data

    p = models.load_pair(pair_cfg, dtype="float32", device="cpu")
    prompts = data.load_prompts(data.DatasetSpec.of(REAL_PROMPTS), p.tokenizer)
    return p, prompts


@pytest.fixture(scope="module")
def real_greedy(real_fp32):
    """The target's own greedy continuation (16 tokens) of each prompt, computed once for every tree
    (and shared with test_pairs' real tests, whose target is the same: ``real_target_greedy``)."""
    pair, prompts = real_fp32
    return [real_target_greedy(pair, pr.ids, 16) for pr in prompts]


@pytest.mark.parametrize("tree", [{"name": "chain", "budget": 4}, {"name": "binary", "budget": 8}])
def test_real_pair_greedy_is_lossless(real_fp32, real_greedy, tree):
    """Greedy through the loop gives the target's own greedy tokens and accepts drafts.  16 tokens
    are 4-5 verify/rollback cycles (32 were 8-9): chain/4 accepts all 4 drafts and rejects all in
    turn, binary/8 accepts 2-3 tokens a step."""
    pair, prompts = real_fp32
    recs = []
    for pr, ref in zip(prompts, real_greedy):
        r, out = _decode(pair, pr, tree, {"name": "greedy"}, 16)
        assert out == ref
        recs += r
    rate = sum(r.accepted for r in recs) / sum(r.tree_size for r in recs)
    assert 0 < rate <= 1


def test_real_pair_mss_is_lossless_per_step(real_fp32):
    """MSS on binary/8 at temperature 1: each step's first emitted token follows the target's law
    (measured exactly on the step's tree), and drafts are accepted.  16 tokens are 5 steps (32 were 11),
    each a tree checked on its own, 2-3 tokens accepted a step."""
    pair, prompts = real_fp32
    recs = []
    for pr in prompts:
        recs += _decode(
            pair, pr, {"name": "binary", "budget": 8}, {"name": "mss", "temperature": 1.0, "draft_temperature": 1.0}, 16
        )[0]
    assert max(r.first_token_tv for r in recs) < 1e-5
    rate = sum(r.accepted for r in recs) / sum(r.tree_size for r in recs)
    assert 0 < rate <= 1
