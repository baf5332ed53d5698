"""Batched engines on tiny fp32 models: per-row slot caches and masks (``kv.SlotKV``),
batched continuations and draft ranks, and the batched live loop, each equal to
batch 1; sampling modes stay lossless through the batched path."""

from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from scipy.stats import chisquare

from specbench.core import kv
from specbench.core.diskcache import DiskCache
from specbench.core.sampling import probs
from specbench.drafting.drafters import ModelDrafter
from specbench.drafting.merged import MergedDrafter
from specbench.drafting.ngram import NgramDrafter
from specbench.engine import replay
from specbench.engine.loop import Decoding, continuation, continuations, decode
from specbench.engine.verifiers import LiveVerifier
from specbench.trees.policies import make_policy
from specbench.verify.modes import get_mode
from specbench.verify.modespec import MODES
from test_replay import same_records

TEXTS = (
    "def add(a, b):\n    return a + b\ndef add(a, b):",
    "x",
    "The quick brown fox. The quick",
    "for i in range(10):",
    "def fibonacci(n):\n    if n < 2:",
    "Write",
)
LAWS = ("first_token_tv", "expected_accepted")
SHAPES = [
    ("chain", {}),
    ("binary", {}),
    ("kary", {"width": 3}),
    ("topk_wide", {"width": 3}),
    ("specinfer", {"expansion": [1, 1, 3, 1, 1, 1, 1, 1]}),
    ("paths", {"paths": [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]}),
]


@pytest.fixture(scope="module")
def prompts(tiny_tokenizer):
    return [tiny_tokenizer.encode(t) for t in TEXTS]


@pytest.fixture(scope="module")
def eos(tiny_target, prompts):
    """An EOS set that cuts some prompts' continuations early: the 3rd greedy token of prompt 0."""
    return frozenset({continuation(tiny_target, prompts[0], 3, {-1})[2]})


def items(prompts):
    return [SimpleNamespace(id=f"p{i}", ids=ids) for i, ids in enumerate(prompts)]


def run_batched(
    make_drafter,
    target,
    prompts,
    policy,
    mode="greedy",
    params=None,
    n=20,
    eos=(0,),
    batch_size=1,
    seed=0,
    measure_shift=True,
    draft=None,
):
    """decode() with ``make_drafter(kv)``: the rows share one draft slot cache over ``draft``
    (their draft forwards batched) when it is given."""
    shared = kv.SlotKV(draft) if draft is not None else None
    new_drafter = lambda: make_drafter(shared)  # noqa: E731
    spec = get_mode(mode)
    params = spec.params({"temperature": 0.0, **(params or {})} if mode == "greedy" else (params or {}))
    run = Decoding(spec, params, n, frozenset(eos), seed, measure_shift)
    return decode(
        items(prompts),
        new_drafter,
        LiveVerifier(target, params["temperature"], params["top_p"]),
        policy,
        run,
        batch_size=batch_size,
    )


def same_results(a, b, laws_tol: float = 0.0):
    """Same tokens and step records; ``laws_tol``: the float32 exact-law columns may differ
    by rounding (a batched forward is not bitwise a batch-1 one)."""
    assert [r.prompt_id for r in a] == [r.prompt_id for r in b]
    for x, y in zip(a, b):
        assert x.tokens == y.tokens, x.prompt_id
        for r, q in zip(x.records, y.records):
            for f in LAWS:
                assert abs(getattr(r, f) - getattr(q, f)) <= laws_tol, (f, r, q)
        same_records(
            [replace(r, **{f: 0.0 for f in LAWS}) for r in x.records],
            [replace(r, **{f: 0.0 for f in LAWS}) for r in y.records],
        )


# --------------------------------------------------------------------------
# per-row caches and masks
# --------------------------------------------------------------------------
def reference_logits(model, prompt, parents, tokens, i):
    path, j = [], i
    while j >= 0:
        path.append(tokens[j])
        j = parents[j]
    return model(torch.tensor([list(prompt[:-1]) + path[::-1]]), use_cache=False).logits[0, -1]


def random_tree(g: torch.Generator, n: int) -> list[int]:
    """Parent pointers of a random n-node tree (root first, parents before children)."""
    return [-1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(1, n)]


def test_slot_cache_equals_plain_forwards_through_trees_commits_drops_and_refills(tiny_target, prompts):
    """Random trees on rows of different prefix lengths (one of 0), random accepted paths
    committed, rows dropped and refilled in place: every node's logits equal a plain
    forward (no cache) of the row's committed tokens + the node's root path, every step."""
    rows, g = kv.SlotKV(tiny_target), torch.Generator().manual_seed(0)
    context = {}  # row -> committed tokens + the next root
    pending = list(prompts)
    for _ in range(4):
        prompt = pending.pop(0)
        context[rows.add(prompt)] = list(prompt)
    for step in range(6):
        trees = {r: random_tree(g, int(torch.randint(1, 9, (1,), generator=g))) for r in context}
        toks = {
            r: [ctx[-1]] + torch.randint(1, 300, (len(trees[r]) - 1,), generator=g).tolist()
            for r, ctx in context.items()
        }
        order = sorted(context, reverse=step % 2 == 1)  # request order need not be row order
        logits = rows.forward([(r, trees[r], toks[r], 0) for r in order])
        for b, r in enumerate(order):
            for i in range(len(trees[r])):
                torch.testing.assert_close(
                    logits[b, i], reference_logits(tiny_target, context[r], trees[r], toks[r], i), atol=1e-5, rtol=1e-5
                )
        for r in list(context):
            leaf = int(torch.randint(0, len(trees[r]), (1,), generator=g))
            path = []
            while leaf > 0:
                path.insert(0, leaf)
                leaf = trees[r][leaf]
            if step % 3 == 2 and r == min(context) and pending:  # drop a row, refill it in place
                rows.drop(r)
                del context[r]
                prompt = pending.pop(0)
                assert rows.add(prompt) == r
                context[r] = list(prompt)
                continue
            rows.commit(r, [0, *path])
            context[r] = context[r] + [toks[r][n] for n in path] + [int(torch.randint(1, 300, (1,), generator=g))]
    assert rows.forwards >= 7


def test_slot_cache_grows_in_place_and_forwards_a_step_in_levels(tiny_target, prompts):
    """A row's step tree forwarded in two levels (start > 0) equals one forward of the
    whole tree; the slots grow by doubling past the first allocation."""
    rows = kv.SlotKV(tiny_target)
    r = rows.add(prompts[0])
    parents, tokens = [-1, 0, 0, 1, 1, 2], [prompts[0][-1], 5, 6, 7, 8, 9]
    first = rows.forward([(r, parents[:3], tokens[:3], 0)])[0, :3]
    second = rows.forward([(r, parents, tokens, 3)])[0, :3]
    whole = torch.cat([first, second])
    for i in range(len(parents)):
        torch.testing.assert_close(
            whole[i], reference_logits(tiny_target, prompts[0], parents, tokens, i), atol=1e-5, rtol=1e-5
        )
    context = list(prompts[0])  # committed tokens + the next root
    for _ in range(40):  # well past MIN_SLOTS: at least one doubling
        rows.commit(r, [0, 1, 3])
        context += [tokens[1], tokens[3], 7]
        tokens = [7] + tokens[1:]
        logits = rows.forward([(r, parents, tokens, 0)])[0]
    for i in range(len(parents)):
        torch.testing.assert_close(
            logits[i], reference_logits(tiny_target, context, parents, tokens, i), atol=1e-5, rtol=1e-5
        )
    layer = rows.cache.layers[0]
    assert layer.keys.shape[2] >= 2 * kv.MIN_SLOTS and rows.lens[r] > kv.MIN_SLOTS


# --------------------------------------------------------------------------
# part 1: batched continuations and draft ranks (replay, calibration)
# --------------------------------------------------------------------------
def test_batched_continuations_equal_batch1(tiny_target, prompts, eos):
    one = [continuation(tiny_target, p, 24, eos) for p in prompts]
    assert min(map(len, one)) < 24 and max(map(len, one)) == 24  # some stop early at EOS
    for b in (1, 2, 4, len(prompts)):
        assert continuations(tiny_target, prompts, 24, eos, batch_size=b) == one, b


def test_batched_draft_ranks_equal_batch1(tiny_draft, tiny_target, prompts, eos):
    conts = continuations(tiny_target, prompts, 24, eos, batch_size=3)
    for t in (0.0, 1.0):
        one = [replay.draft_ranks(tiny_draft, p, c, t) for p, c in zip(prompts, conts)]
        assert all(len(r) == len(c) for r, c in zip(one, conts))
        for b in (2, len(prompts)):
            assert replay.draft_ranks_many(tiny_draft, prompts, conts, t, batch_size=b, chunk=16) == one


def test_batched_cache_records_match_batch1_keyed_by_their_batch(tiny_draft, tiny_target, prompts, eos, tmp_path):
    key = {
        "target": "t",
        "max_new_tokens": 16,
        "dtype": "float32",
        "eos": sorted(eos),
        "temperature": 0.0,
        "top_p": 1.0,
    }
    draft_key = {"draft": "d", "draft_temperature": 1.0, "draft_top_p": 1.0}
    batched = replay.cached_ranks_many(
        DiskCache(tmp_path / "b"), tiny_target, tiny_draft, key, draft_key, prompts, batch_size=4
    )
    single = DiskCache(tmp_path / "s")
    assert batched == [
        replay.cached_ranks_many(single, tiny_target, tiny_draft, key, draft_key, [p])[0] for p in prompts
    ]
    # the same records, under keys that name the batch that computed them (engine.replay.batch_keys)
    names = sorted(p.name for p in (tmp_path / "b").rglob("*.json"))
    assert len(names) == 2 * len(prompts) and not set(names) & {p.name for p in (tmp_path / "s").rglob("*.json")}
    again = replay.cached_ranks_many(DiskCache(tmp_path / "b"), None, None, key, draft_key, prompts, batch_size=4)
    assert again == batched  # every record read back: no model was needed
    with pytest.raises(ValueError, match="greedy"):
        replay.cached_continuations(single, tiny_target, {**key, "temperature": 0.7}, prompts)


# --------------------------------------------------------------------------
# the batched live loop
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name,params", SHAPES)
def test_batched_live_greedy_equals_batch1_static_shapes(tiny_draft, tiny_target, prompts, eos, name, params):
    for budget in (3, 8):
        new = (
            lambda g: ModelDrafter(tiny_draft, 1.0, kv=g),
            tiny_target,
            prompts,
            lambda: make_policy(name, budget, params),
        )
        one = run_batched(*new, eos=eos, params={"draft_temperature": 1.0})
        assert min(len(r.tokens) for r in one) < 20
        for draft in (None, tiny_draft):  # draft forwards row by row, then batched
            same_results(run_batched(*new, eos=eos, params={"draft_temperature": 1.0}, batch_size=4, draft=draft), one)


DRAFTED = [
    ("eagle2", lambda d, g: ModelDrafter(d, 1.0, kv=g), "eagle2", {"width": 3, "depth": 3}, 10),
    ("ngram", lambda d, g: NgramDrafter(), "ngram_trie", {}, 6),
    ("merged", lambda d, g: MergedDrafter(ModelDrafter(d, 1.0, kv=g)), "merged", {"shape": "binary"}, 8),
    ("none", lambda d, g: ModelDrafter(d, 1.0, kv=g), "none", {}, 0),
]


@pytest.mark.parametrize("label,make,name,params,budget", DRAFTED, ids=[d[0] for d in DRAFTED])
def test_batched_live_greedy_equals_batch1_drafters(
    tiny_draft, tiny_target, prompts, eos, label, make, name, params, budget
):
    new = (lambda g: make(tiny_draft, g), tiny_target, prompts, lambda: make_policy(name, budget, params))
    one = run_batched(*new, eos=eos)
    for b in (2, 5):
        same_results(run_batched(*new, eos=eos, batch_size=b, draft=tiny_draft), one)
    same_results(run_batched(*new, eos=eos, batch_size=3), one)


LOSSLESS = [m for m in MODES.names() if get_mode(m).lossless_for and m != "greedy"]


def policy_for(mode: str):
    return make_policy("chain" if get_mode(mode).chain_only else "binary", 4)


@pytest.mark.parametrize("mode", LOSSLESS)
def test_sampling_modes_stay_lossless_batched(tiny_draft, tiny_target, prompts, mode):
    """First emitted token of 400 runs of one prompt, 25 rows per forward: exact law
    (first_token_tv = 0) and chi-square against the target's distribution at T=1."""
    prompt, n = prompts[3], 400
    done = run_batched(
        lambda g: ModelDrafter(tiny_draft, 1.0, kv=g),
        tiny_target,
        [prompt] * n,
        lambda: policy_for(mode),
        mode,
        n=1,
        batch_size=25,
        seed=7,
        draft=tiny_draft,
    )
    assert max(r.records[0].first_token_tv for r in done) < 1e-6
    with torch.no_grad():
        p = probs(tiny_target(torch.tensor([prompt])).logits[0, -1], 1.0).double()
    counts = torch.bincount(torch.tensor([r.tokens[0] for r in done]), minlength=p.numel()).double()
    big = p * n >= 5
    obs = torch.cat([counts[big], counts[~big].sum()[None]])
    want = torch.cat([p[big], p[~big].sum()[None]])
    want = want / want.sum() * n
    assert chisquare(obs.numpy(), want.numpy()).pvalue > 1e-3, mode


@pytest.mark.parametrize("mode", ["mss", "sequoia", "speculative", "naive"])
def test_seeded_batched_sampling_is_reproducible_and_equal_to_batch1(tiny_draft, tiny_target, prompts, mode):
    args = (lambda g: ModelDrafter(tiny_draft, 1.0, kv=g), tiny_target, prompts, lambda: policy_for(mode), mode)
    one = run_batched(*args, n=12, seed=3)
    first = run_batched(*args, n=12, seed=3, batch_size=3, draft=tiny_draft)
    same_results(first, one, laws_tol=1e-5)
    same_results(run_batched(*args, n=12, seed=3, batch_size=3, draft=tiny_draft), first)
    assert [r.tokens for r in run_batched(*args, n=12, seed=4, batch_size=3)] != [r.tokens for r in one]


@pytest.mark.parametrize("tree,drafter", [("chain", "model"), ("eagle2", "model"), ("binary", "ngram")])
def test_study_jobs_batched_live_and_replay_equal_batch1(
    tiny_draft, tiny_target, tiny_tokenizer, prompts, tmp_path, tree, drafter
):
    """The job context's decode: live at batch 3, and replay (rank or drafted) with batched or
    exact (batch-1) continuations, give batch-1 live's tokens and records."""
    from specbench.study.job.context import context
    from specbench.study.job.jobspec import from_config

    pair = SimpleNamespace(target=tiny_target, draft=tiny_draft, tokenizer=tiny_tokenizer, name="tiny")
    ident = SimpleNamespace(target="t", draft="d")
    model = {"source": "local", "path": "m"}

    def job(engine, batch_size, exact=False):
        return from_config(
            {
                "pair": {"name": "p", "draft": model, "target": model, "drafter": drafter},
                "tree": {"name": tree, "budget": 6},
                "dataset": {"name": "smoke"},
                "verify": {"name": "greedy"},
                "dtype": "float32",
                "max_new_tokens": 12,
                "engine": engine,
                "batch_size": batch_size,
                "progress": False,
                "exact_continuations": exact,
                "replay_cache": str(tmp_path / f"c{int(exact)}"),
            }
        )

    ref = context(job("live", 1)).decode(pair, items(prompts), "live", ident)
    for engine, b, exact in (("live", 3, False), ("replay", 4, False), ("replay", 4, True)):
        got = context(job(engine, b, exact)).decode(pair, items(prompts), engine, ident)
        same_results(got, ref, laws_tol=0.0)


def test_rows_sharing_a_draft_cache_batch_their_draft_forwards(tiny_draft, tiny_target, prompts):
    """chain/4 at B=6 over one draft SlotKV: one draft forward per depth for all rows, so
    about a sixth of batch 1's draft forwards (rows finish at different steps)."""

    def forwards(batch_size):
        group = kv.SlotKV(tiny_draft)
        items_ = items(prompts)
        spec = get_mode("greedy")
        run = Decoding(spec, spec.params({"temperature": 0.0}), 16, frozenset({0}), 0, False)
        decode(
            items_,
            lambda: ModelDrafter(tiny_draft, 1.0, kv=group),
            LiveVerifier(tiny_target),
            lambda: make_policy("chain", 4),
            run,
            batch_size=batch_size,
        )
        return group.forwards

    one, six = forwards(1), forwards(len(prompts))
    assert six * 3 < one, (six, one)
