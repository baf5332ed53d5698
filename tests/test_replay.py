"""The replay engine: pure rank/trajectory logic, the disk cache, and replay == live
step records on tiny fp32 models for every static shape."""

import dataclasses
import math
import os

import pytest
import torch

from conftest import decode_one
from specbench.core.diskcache import DiskCache, cache_root
from specbench.core.sampling import choose_children, probs, ranks_of
from specbench.drafting.drafters import ModelDrafter
from specbench.engine import replay
from specbench.engine.loop import continuation
from specbench.engine.records import StepRecord
from specbench.engine.verifiers import ContinuationVerifier, follow
from specbench.trees.policies import make_policy, policy_spec

TIMING = ("draft_s", "verify_s")
STATIC = [
    ("chain", {}),
    ("binary", {}),
    ("kary", {"width": 3}),
    ("topk_wide", {"width": 3}),
    ("specinfer", {"expansion": [1, 1, 3, 1, 1, 1, 1, 1]}),
    ("paths", {"paths": [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]}),
]
# shapes built by specbench/trees/policies.py or given as conf/tree presets
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLANNED = {
    "medusa63": None,  # conf/tree/medusa63.yaml
    "sequoia": {"name": "sequoia", "vector": [0.6, 0.2, 0.1, 0.05], "depth": 6},
    "adaptive_chain": {"name": "adaptive_chain", "start": 2},
}


class V(dict):
    """A verify config stand-in (dict with attribute access)."""

    __getattr__ = dict.get


# --------------------------------------------------------------------------
# pure parts
# --------------------------------------------------------------------------
def test_ranks_match_the_drafters_topk_order_including_ties():
    g = torch.Generator().manual_seed(0)
    q = torch.randint(0, 4, (50, 37), generator=g).float()  # many exact ties
    q = q / q.sum(1, keepdim=True)
    tokens = torch.randint(0, 37, (50,), generator=g).tolist()
    got = replay.ranks_from_probs(q, tokens)
    assert got == [ranks_of(q[j], torch.tensor([tokens[j]]))[0] for j in range(50)]
    for j in range(50):  # the token of rank r is the r-th child choose_children picks
        kids, _ = choose_children(q[j], got[j] + 1, "topk")
        assert kids[got[j]] == tokens[j]


def test_one_hot_draft_ranks_follow_token_ids():
    q = probs(torch.tensor([[0.1, 0.5, 3.0, 0.2]]), 0.0)  # greedy drafter: one-hot
    assert [replay.ranks_from_probs(q, [t])[0] for t in range(4)] == [1, 2, 0, 3]


def test_replayable_for_greedy_float32_ranks_only_for_static_model_drafts():
    from specbench.study.job.checks import why_not_replayable
    from specbench.study.job.context import context
    from specbench.study.job.jobspec import from_config

    def job(tree="chain", verify="greedy", t=0.0, drafter="model", dtype="float32"):
        model = {"source": "local", "path": "m"}
        return from_config(
            {
                "pair": {"name": "p", "draft": model, "target": model, "drafter": drafter},
                "tree": {"name": tree, "budget": 8},
                "dataset": {"name": "smoke"},
                "verify": {"name": verify, "temperature": t},
                "dtype": dtype,
            }
        )

    for ok in (
        job(),
        job("binary"),
        job("adaptive_chain"),
        job("eagle2"),
        job(drafter="ngram"),
        job("merged", drafter="merged"),
    ):
        assert why_not_replayable(ok) is None
    assert why_not_replayable(job(verify="mss", t=1.0)) and why_not_replayable(job(verify="typical"))
    assert why_not_replayable(job(t=0.7))
    assert "float32" in why_not_replayable(job(dtype="bfloat16"))
    assert context(job()).by_ranks() and context(job("adaptive_chain")).by_ranks()
    assert not context(job("eagle2")).by_ranks() and not context(job(drafter="ngram")).by_ranks()
    assert not context(job("merged", drafter="merged")).by_ranks()


def rec(step, size, depth, acc, emit, path):
    return (step, size, depth, acc, emit, path)


def short(records):
    return [rec(r.step, r.tree_size, r.tree_depth, r.accepted, r.emitted, r.accept_path) for r in records]


def test_chain_trajectory_by_hand():
    ranks = [0, 0, 1, 0, 0, 0, 2, 0, 0]
    got = short(replay.replay_prompt("p", ranks, make_policy("chain", 3)))
    # t=0: accept 0,0 (rank 1 breaks) -> emit 3; t=3: 0,0,0 -> emit 4; t=7: 0,0 then end of c
    assert got == [rec(0, 3, 3, 2, 3, "0.0"), rec(1, 3, 3, 3, 4, "0.0.0"), rec(2, 3, 3, 2, 2, "0.0")]


def test_tree_accepts_longest_rank_run_in_the_shape():
    plan = make_policy("paths", 4, {"paths": [[0], [1], [1, 0], [1, 0, 2]]})
    got = short(replay.replay_prompt("p", [1, 0, 2, 5, 0, 3, 4, 9, 1, 1], plan))
    # rank 5 and 3 are bonus tokens (never looked up); (1, 1) is not a path
    assert got == [
        rec(0, 4, 3, 3, 4, "1.0.2"),
        rec(1, 4, 3, 1, 2, "0"),
        rec(2, 4, 3, 0, 1, ""),
        rec(3, 4, 3, 0, 1, ""),
        rec(4, 4, 3, 1, 2, "1"),
    ]


def test_length_limit_and_eos_cut_emitted_and_accepted():
    # c has 5 tokens (ends at EOS or the limit): a long chain accepts all 5, no bonus
    assert short(replay.replay_prompt("p", [0] * 5, make_policy("chain", 8))) == [rec(0, 8, 8, 5, 5, "0.0.0.0.0")]
    assert short(replay.replay_prompt("p", [0] * 5, make_policy("chain", 4))) == [rec(0, 4, 4, 4, 5, "0.0.0.0")]
    assert replay.replay_prompt("p", [], make_policy("chain", 4)) == []


def test_observe_is_called_after_every_step():
    from specbench.trees.policies import TreePolicy

    class Spy(TreePolicy):
        seen: list

        def paths(self):
            return [(0,) * d for d in range(1, self.budget + 1)]

        def observe(self, accepted, tree_size):
            self.seen.append((accepted, tree_size))
            self.budget += 1  # adaptive: the shape changes per step

    plan = Spy("chain", 1)
    plan.seen = []
    recs = replay.replay_prompt("p", [0] * 10, plan)
    assert [r.tree_size for r in recs] == [1, 2, 3, 4]  # emits 2 + 3 + 4 + 1 tokens
    assert plan.seen == [(1, 1), (2, 2), (3, 3), (1, 4)]
    assert [r.emitted for r in recs] == [2, 3, 4, 1]


# --------------------------------------------------------------------------
# disk cache
# --------------------------------------------------------------------------
def test_disk_cache_roundtrip_miss_and_atomicity(tmp_path):
    store = DiskCache(tmp_path)
    key = {"target": {"source": "local", "path": "/x"}, "prompt": "abc", "max_new_tokens": 8}
    assert store.get("continuation", key) is None
    calls = []
    assert store.get_or_compute("continuation", key, lambda: calls.append(1) or [5, 6]) == [5, 6]
    assert store.get_or_compute("continuation", key, lambda: calls.append(1) or [0]) == [5, 6]
    assert calls == [1]
    assert store.get("continuation", {**key, "max_new_tokens": 9}) is None
    assert store.get("ranks", key) is None
    path = store.path("continuation", key)
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp-")]
    path.write_text('{"key": ')  # a torn file is a miss, not an error
    assert store.get("continuation", key) is None


def test_cache_location(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "env"))
    assert cache_root(None, "o") == tmp_path / "env" / "replay"
    assert cache_root(str(tmp_path / "k"), "o") == tmp_path / "k"
    monkeypatch.delenv("SPECBENCH_CACHE")
    assert str(cache_root(None, "o")) == os.path.join("o", ".cache", "replay")


# --------------------------------------------------------------------------
# replay == live on tiny fp32 models
# --------------------------------------------------------------------------
def same_records(live, rep):
    assert len(live) == len(rep)
    for a, b in zip(live, rep):
        for f in dataclasses.fields(StepRecord):
            if f.name in TIMING:
                continue
            x, y = getattr(a, f.name), getattr(b, f.name)
            if isinstance(x, float) and math.isnan(x):
                assert isinstance(y, float) and math.isnan(y), (f.name, a, b)
            else:
                assert x == y, (f.name, a, b)


def live_and_replay(draft, target, prompt, make, n, draft_t):
    verify = {"temperature": 0.0, "draft_temperature": draft_t}
    live, out = decode_one(ModelDrafter(draft, draft_t), target, prompt, make(), n, params=verify)
    cont = continuation(target, prompt, n, {0})
    assert cont == out
    ranks = replay.draft_ranks(draft, prompt, cont, draft_t)
    return live, replay.replay_prompt("p0", ranks, make())


PROMPTS = ("def add(a, b):", "The quick brown", "for i in range(10):")


@pytest.mark.parametrize("draft_t", [0.0, 1.0])
@pytest.mark.parametrize("name,params", STATIC)
def test_replay_equals_live_static_shapes(tiny_draft, tiny_target, tiny_tokenizer, name, params, draft_t):
    for budget in (1, 3, 8, 21):
        for text, n in zip(PROMPTS, (24, 7, 40)):  # 7: the length limit cuts long trees
            prompt = tiny_tokenizer.encode(text)
            live, rep = live_and_replay(
                tiny_draft, tiny_target, prompt, lambda: make_policy(name, budget, dict(params)), n, draft_t
            )
            same_records(live, rep)


@pytest.mark.parametrize("shape", sorted(PLANNED))
def test_replay_equals_live_planned_shapes(tiny_draft, tiny_target, tiny_tokenizer, shape):
    from omegaconf import OmegaConf

    tree = PLANNED[shape] or OmegaConf.to_container(OmegaConf.load(os.path.join(ROOT, "conf", "tree", f"{shape}.yaml")))
    for budget in (5, 16):
        cfg = {k: v for k, v in tree.items() if k not in ("name", "budget", "defaults")}
        name = tree.get("name", shape)  # a conf/tree/ variant is named by its file (it extends the schema)
        assert policy_spec(name).rank_replayable
        for text in PROMPTS:
            live, rep = live_and_replay(
                tiny_draft, tiny_target, tiny_tokenizer.encode(text), lambda: make_policy(name, budget, cfg), 32, 1.0
            )
            same_records(live, rep)


def test_prompt_ranks_are_cached_on_disk(tiny_draft, tiny_target, tiny_tokenizer, tmp_path):
    key = {"target": "t", "max_new_tokens": 16, "dtype": "float32", "eos": [0], "temperature": 0.0, "top_p": 1.0}
    draft_key = {"draft": "d", "draft_temperature": 1.0, "draft_top_p": 1.0}
    store = DiskCache(tmp_path)
    prompt = tiny_tokenizer.encode("def add(a, b):")
    [first] = replay.cached_ranks_many(store, tiny_target, tiny_draft, key, draft_key, [prompt])
    assert replay.cached_ranks_many(store, None, None, key, draft_key, [prompt]) == [first]  # no model call on a hit
    cont = continuation(tiny_target, prompt, 16, {0})
    assert first == (replay.draft_ranks(tiny_draft, prompt, cont, 1.0), cont)


def test_replay_equals_live_when_the_length_limit_cuts_an_accepted_path(tiny_target, tiny_tokenizer):
    """Self pair: every draft token is accepted, so the last step's tree reaches past the
    limit.  Live must then record what replay can know: accepted = emitted tokens and
    expected_accepted (greedy: deterministic) clipped the same way."""
    prompt = tiny_tokenizer.encode("def add")
    for budget, n in ((8, 5), (4, 11)):
        live, rep = live_and_replay(tiny_target, tiny_target, prompt, lambda: make_policy("chain", budget), n, 1.0)
        assert live[-1].accepted == rep[-1].accepted == live[-1].emitted
        same_records(live, rep)


# --------------------------------------------------------------------------
# drafted replay (n-gram, merged, dynamic trees): the drafter runs, the target is c
# --------------------------------------------------------------------------
DRAFTED = [
    ("ngram", "chain", {}),
    ("ngram", "binary", {}),
    ("ngram", "ngram_trie", {}),
    ("model", "eagle2", {"width": 3, "depth": 3}),
    ("model", "none", {}),
    ("merged", "merged", {"shape": "binary"}),
    ("merged", "merged", {"shape": "eagle2", "width": 3, "depth": 3}),
]
REPEATS = ("def add(a, b):\n    return a + b\ndef add(a, b):", "The quick brown fox. The quick")


@pytest.mark.parametrize("kind,name,params", DRAFTED)
def test_drafted_replay_equals_live(tiny_draft, tiny_target, tiny_tokenizer, kind, name, params):
    from specbench.drafting.merged import MergedDrafter
    from specbench.drafting.ngram import NgramDrafter

    make = {
        "model": lambda: ModelDrafter(tiny_draft, 1.0),
        "ngram": NgramDrafter,
        "merged": lambda: MergedDrafter(ModelDrafter(tiny_draft, 1.0)),
    }[kind]
    verify = {"temperature": 0.0, "draft_temperature": 1.0}
    for budget in (0,) if name == "none" else (1, 5, 16):
        for text, n in zip(REPEATS, (24, 9)):
            prompt = tiny_tokenizer.encode(text)
            policy = lambda: make_policy(name, budget, params)  # noqa: E731
            live, out = decode_one(make(), tiny_target, prompt, policy(), n, params=verify)
            cont = ContinuationVerifier(lambda ids: out, tiny_target.config.vocab_size)
            rep, rep_out = decode_one(make(), None, prompt, policy(), n, params=verify, verifier=cont)
            assert rep_out == out
            same_records(live, rep)
            assert all(math.isnan(r.verify_s) for r in rep)  # no target forward


def test_follow_reads_the_greedy_verdict_off_the_continuation():
    from specbench.core.tree import DraftTree

    tree = DraftTree(parents=[-1, 0, 0, 1, 2], tokens=torch.tensor([9, 5, 6, 7, 7]), ranks=[0, 0, 1, 0, 0])
    assert follow(tree, [6, 7, 1]) == [2, 4]
    assert follow(tree, [5, 7]) == [1, 3]
    assert follow(tree, [4]) == [] and follow(tree, []) == []


def one_hot_rows(tree, rest, vocab):
    """The [N+1, V] rows replay used to build: one-hot along the path spelling ``rest``, zero elsewhere."""
    p = torch.zeros(len(tree.parents), vocab)
    for j, node in enumerate([0, *follow(tree, rest)][: len(rest)]):
        p[node, rest[j]] = 1.0
    return p


def test_replay_argmax_ids_give_the_verdict_of_one_hot_rows():
    """Replay hands greedy token ids (``TargetArgmax``), no [N+1, V] rows: on random trees
    and continuations (the end of c included) the verdict equals greedy's on the one-hot rows."""
    from specbench.core.tree import DraftTree
    from specbench.verify.modes import get_mode
    from specbench.verify.modespec import TargetArgmax

    greedy, g = get_mode("greedy"), torch.Generator().manual_seed(0)
    params = greedy.params({"temperature": 0.0})
    for _ in range(300):
        n, vocab = int(torch.randint(1, 12, (1,), generator=g)), 4  # few tokens: many siblings alike
        parents = [-1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(1, n + 1)]
        tree = DraftTree(parents, torch.randint(0, vocab, (n + 1,), generator=g), [0] * (n + 1))
        rest = torch.randint(0, vocab, (int(torch.randint(1, 6, (1,), generator=g)),), generator=g).tolist()
        ids = ContinuationVerifier.argmax(tree, rest)
        assert isinstance(ids, TargetArgmax) and len(ids.ids) == n + 1
        want = greedy.checked_verdict(tree, one_hot_rows(tree, rest, vocab), g, params)
        assert greedy.checked_verdict(tree, ids, g, params) == want


def test_only_an_argmax_mode_takes_replays_argmax_ids():
    from specbench.core.tree import DraftTree
    from specbench.verify.modes import get_mode
    from specbench.verify.modespec import TargetArgmax

    tree = DraftTree(parents=[-1, 0], tokens=torch.tensor([3, 1]), ranks=[0, 0])
    naive = get_mode("naive")
    with pytest.raises(ValueError, match="verify=naive needs the target's distributions.*greedy"):
        naive.checked_verdict(tree, TargetArgmax([1, 2]), torch.Generator(), naive.params({}))
