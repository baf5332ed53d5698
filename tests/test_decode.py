"""The live engine on tiny fp32 models: greedy is lossless, the mask is right."""

import pytest
import torch

from conftest import decode_one, greedy_reference
from specbench.core import kv
from specbench.core.tree import paths_to_parents
from specbench.drafting.drafters import ModelDrafter
from specbench.trees.policies import make_policy, shape_paths

SHAPES = [
    ("chain", {}),
    ("binary", {}),
    ("kary", {"width": 3}),
    ("topk_wide", {"width": 3}),
    ("specinfer", {"expansion": [1, 1, 3, 1, 1, 1, 1, 1]}),
    ("paths", {"paths": [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]}),
]


def run(draft, target, prompt, policy, n=24):
    return decode_one(ModelDrafter(draft), target, prompt, policy, n)


@pytest.mark.parametrize("name,params", SHAPES)
def test_greedy_is_token_identical_to_plain_greedy(tiny_draft, tiny_target, tiny_tokenizer, name, params):
    prompts = [tiny_tokenizer.encode(t) for t in ("def add(a, b):", "The quick brown")]
    for budget in (1, 2, 3, 5, 8, 13, 21, 32):
        for prompt in prompts:
            ref = greedy_reference(tiny_target, prompt, 24)
            recs, out = run(tiny_draft, tiny_target, prompt, make_policy(name, budget, params))
            assert out == ref, (name, budget)
            assert sum(r.emitted for r in recs) == len(out)
            assert all(r.tree_size == budget for r in recs)
            assert all(r.emitted == r.accepted + 1 for r in recs[:-1])


def test_tree_logits_equal_sequential_forward_of_each_path(tiny_target, tiny_tokenizer):
    prompt = tiny_tokenizer.encode("def fibonacci(n):")
    paths = shape_paths("binary", 14)
    parents = paths_to_parents(paths)
    torch.manual_seed(3)
    tokens = [prompt[-1]] + torch.randint(0, len(tiny_tokenizer), (len(paths),)).tolist()
    cache, past_len = kv.prefill(tiny_target, prompt)
    logits = kv.forward_nodes(tiny_target, cache, past_len, parents, tokens, 0, len(parents))
    for i in range(len(parents)):
        path, j = [], i
        while j >= 0:
            path.append(tokens[j])
            j = parents[j]
        seq = torch.tensor([prompt[:-1] + path[::-1]])
        ref = tiny_target(seq, use_cache=False).logits[0, -1]
        torch.testing.assert_close(logits[i], ref, atol=1e-5, rtol=1e-5)


def test_self_pair_chain_accepts_everything(tiny_target, tiny_tokenizer):
    prompt = tiny_tokenizer.encode("for i in range(10):")
    for budget in (1, 4, 7):
        recs, out = run(tiny_target, tiny_target, prompt, make_policy("chain", budget), n=40)
        assert len(recs) > 1
        for r in recs[:-1]:  # only the sequence end may cut a step short
            assert (r.accepted, r.emitted, r.tree_size) == (budget, budget + 1, budget)
        assert recs[-1].accepted == min(budget, recs[-1].emitted)


def test_tree_none_is_plain_decoding(tiny_draft, tiny_target, tiny_tokenizer):
    """tree=none: budget 0, one token per step, identical to plain greedy; no draft forward."""
    prompt = tiny_tokenizer.encode("def add(a, b):")
    recs, out = run(tiny_draft, tiny_target, prompt, make_policy("none", 0))
    assert out == greedy_reference(tiny_target, prompt, 24)
    assert all((r.tree_size, r.accepted, r.emitted, r.accept_path) == (0, 0, 1, "") for r in recs)
    assert len(recs) == len(out)
    with pytest.raises(ValueError, match="tree.budget=0"):
        make_policy("none", 4)


def test_tree_none_summary_has_no_acceptance_rate(tiny_draft, tiny_target, tiny_tokenizer):
    """Nothing drafted: acceptance_rate (and its CI) is NaN, tokens_per_step is exactly 1."""
    import math

    from specbench.results.metrics import summarize
    from specbench.study.job.jobfiles import steps_frame

    recs, _ = run(tiny_draft, tiny_target, tiny_tokenizer.encode("for i in"), make_policy("none", 0), n=6)
    steps = steps_frame({"seed": 0}, recs)
    row = summarize({"seed": 0}, steps, 1.0, [len(recs)]).iloc[0]
    assert row.tokens_per_step == 1 and row.acceptance_length == 0
    assert math.isnan(row.acceptance_rate) and math.isnan(row.acceptance_rate_lo)


def test_the_registered_verdict_is_the_one_that_runs():
    """No wrapper swapped in at registration: ``ModeSpec.verdict`` is the function registered;
    the check is ``checked_verdict``, called by the loop where it is applied."""
    from specbench.verify import modes
    from specbench.verify.modes import get_mode

    assert get_mode("greedy").verdict is modes.greedy
    traversal = get_mode("traversal")  # a spec configured for another child rule keeps the verdict too
    assert traversal.configured({"children": "sample_noreplace"}).verdict is traversal.verdict


def test_analysis_is_off_the_step_clock(tiny_draft, tiny_target, tiny_tokenizer):
    """The exact law and paired verdicts run after the step's clock stops (``loop.analyse``):
    a slow paired verdict shows in ``analysis_s``, not in any step's draft or verify seconds."""
    import time
    from dataclasses import replace

    from specbench.engine.loop import Decoding, decode_prompt
    from specbench.engine.verifiers import LiveVerifier
    from specbench.verify.modes import get_mode

    greedy = get_mode("greedy")

    def slow(tree, p, q, rng, params):
        time.sleep(0.6)
        return greedy.verdict(tree, p, q, rng, params)

    params = greedy.params({"temperature": 0.0})
    run = Decoding(greedy, params, 8, frozenset(), paired=((replace(greedy, verdict=slow), params),))
    res = decode_prompt(
        "p0",
        tiny_tokenizer.encode("def add(a, b):"),
        ModelDrafter(tiny_draft),
        LiveVerifier(tiny_target, 0.0, 1.0),
        make_policy("chain", 3),
        run,
        torch.Generator().manual_seed(0),
    )
    steps = len(res.records)
    assert steps == len(res.paired[0]) and steps >= 2
    assert res.analysis_s >= 0.6 * steps
    assert all(r.verify_s < 0.3 and r.draft_s < 0.3 for r in res.records)
