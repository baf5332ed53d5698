"""tree=pmin_chain, llama.cpp's draft rule (n_max, p_min, n_min over the draft's top-10 shares): the live
model drafter grows it, and the teacher-forced walk (``replay.pmin_walk``, what the llama.cpp acceptance
comparison replays) gives the live loop's steps exactly."""

import pytest
import torch

from conftest import decode_one
from specbench.drafting.drafters import ModelDrafter
from specbench.engine import replay
from specbench.engine.loop import continuation
from specbench.trees.pminchain import top_share
from specbench.trees.policies import make_policy

PROMPTS = ("def add(a, b):", "The quick brown", "for i in range(10):")


def test_top_share_is_the_best_tokens_share_of_the_top_k_softmax():
    logits = torch.tensor([[3.0, 1.0, 2.0, -5.0, 0.5], [0.0, 0.0, 0.0, 0.0, 0.0]])
    top3 = torch.softmax(torch.tensor([3.0, 2.0, 1.0]), 0)[0]
    assert float(top_share(logits, 3)[0]) == pytest.approx(float(top3))
    assert float(top_share(logits, 10)[1]) == pytest.approx(1 / 5)  # k past the vocabulary: all of it


def live_steps(draft, target, prompt, budget, p_min, n):
    records, out = decode_one(
        ModelDrafter(draft, 0.0), target, prompt, make_policy("pmin_chain", budget, {"p_min": p_min}), n
    )
    assert out == continuation(target, prompt, n, {0})  # greedy: the target's own tokens
    return [(r.tree_size > 0, r.accepted) for r in records], records


@pytest.mark.parametrize("self_pair", [False, True])
def test_the_walk_over_teacher_forced_marks_gives_the_live_loops_steps(
    tiny_draft, tiny_target, tiny_tokenizer, self_pair
):
    draft = tiny_target if self_pair else tiny_draft  # the self pair accepts every draft token
    for text, n in zip(PROMPTS, (24, 7, 40)):
        prompt = tiny_tokenizer.encode(text)
        cont = continuation(tiny_target, prompt, n, {0})
        [marks] = replay.teacher_forced(draft, [prompt], [cont], replay.pmin_marks(10))
        shares = sorted(s for _, s in marks)
        half = (shares[len(shares) // 2 - 1] + shares[len(shares) // 2]) / 2  # between two: no rounding tie
        for p_min in (0.0, half, 1.0):  # never, about half the positions, always stops
            for budget in (1, 3, 8):
                live, records = live_steps(draft, tiny_target, prompt, budget, p_min, n)
                assert live == replay.pmin_walk(marks, budget, p_min), (text, p_min, budget)
                steps = replay.pmin_steps(marks, budget, p_min)  # the drafted length: bracketed, exact where seen
                assert all(s.least <= r.tree_size <= s.most <= s.room for s, r in zip(steps, records)), text
                assert all(r.tree_size == s.least for s, r in zip(steps, records) if p_min == 0 or s.least == s.most)
                assert all(r.tree_depth == r.tree_size <= budget for r in records)  # a chain of at most n_max


def test_a_chain_stops_before_its_first_unsure_token(tiny_draft, tiny_target, tiny_tokenizer):
    prompt = tiny_tokenizer.encode(PROMPTS[0])
    _, none = live_steps(tiny_draft, tiny_target, prompt, 4, 1.0, 12)
    assert all(r.tree_size == 0 for r in none)  # a random draft is never sure: plain decoding
    _, full = live_steps(tiny_draft, tiny_target, prompt, 4, 0.0, 12)
    assert all(r.tree_size == 4 for r in full)  # p_min 0: always n_max


def test_n_min_drops_a_short_chain(tiny_draft, tiny_target, tiny_tokenizer):
    prompt = tiny_tokenizer.encode(PROMPTS[2])
    cont = continuation(tiny_target, prompt, 24, {0})
    [marks] = replay.teacher_forced(tiny_draft, [prompt], [cont], replay.pmin_marks(10))
    p_min = sorted(s for _, s in marks)[len(marks) // 3]
    policy = make_policy("pmin_chain", 6, {"p_min": p_min, "n_min": 3})
    records, _ = decode_one(ModelDrafter(tiny_draft, 0.0), tiny_target, prompt, policy, 24)
    assert all(r.tree_size == 0 or r.tree_size >= 3 for r in records)


def sizes(*args, **kw) -> list[tuple[int, int, int]]:
    """``replay.pmin_steps``' (least, most, room) per step."""
    return [(s.least, s.most, s.room) for s in replay.pmin_steps(*args, **kw)]


def test_the_llamacpp_walk_drafts_after_the_first_token_and_leaves_one_to_predict():
    sure = [(0, 1.0)] * 10  # every token the draft's sure best
    assert replay.pmin_walk(sure, 16, 0.5) == [(True, 10)]  # one step: all of c (the live loop stops at the length)
    steps = replay.pmin_walk(sure, 16, 0.5, start=1, reserve=1)
    assert steps == [(False, 0), (True, 8)]  # the prompt's forward gives token 0; a draft leaves 1 token
    assert replay.pmin_walk([(0, 0.4)] * 5, 4, 0.5) == [(False, 0)] * 5  # never sure: never drafts
    assert replay.pmin_walk([(0, 0.9), (1, 0.9), (2, 0.9)], 4, 0.5) == [(True, 1), (True, 0)]
    assert sizes([(0, 0.9), (1, 0.9), (2, 0.9)], 4, 0.5) == [(2, 4, 4), (1, 4, 4)]  # rejected: a+1..room
    assert sizes([(0, 0.9), (0, 0.3), (2, 0.9)], 4, 0.5) == [(1, 1, 4), (1, 4, 4)]  # unsure: exact
    assert sizes([(0, 0.9), (1, 0.9), (2, 0.9)], 4, 0.0) == [(4, 4, 4), (4, 4, 4)]  # p_min 0: n_max
    assert sizes(sure, 16, 0.5, start=1, reserve=1) == [(0, 0, 0), (8, 8, 8)]
    assert sizes([(0, 0.4)], 4, 0.5) == [(0, 0, 4)]  # unsure at once: may draft, drafts nothing
    # llama.cpp's draft() samples once per drafted token, plus the one below p_min where it stopped short
    assert [replay.draft_samples(d, r) for d, r in ((0, 4), (2, 4), (4, 4), (0, 0))] == [1, 3, 4, 0]


@pytest.mark.parametrize(
    "params,key",
    [
        ({"p_min": 1.5}, "tree.p_min=1.5"),
        ({"p_min": -0.1}, "tree.p_min"),
        ({"n_min": 5}, "tree.n_min=5"),
        ({"top_k": 0}, "tree.top_k"),
    ],
)
def test_bad_parameters_are_one_line_naming_the_key(params, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.").replace("-", r"\-")) as e:
        make_policy("pmin_chain", 4, params)
    assert "\n" not in str(e.value)
