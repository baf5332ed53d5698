"""Advanced drafters and trees: n-gram, merged, EAGLE-2, Sequoia DP, adaptive chain, medusa63."""

import itertools
import os

import pytest
import yaml

from conftest import decode_one, greedy_reference
from specbench.core.atomic import umask
from specbench.core.tree import depths, max_depth
from specbench.drafting.drafters import ModelDrafter
from specbench.drafting.levels import drafted
from specbench.drafting.merged import MergedDrafter
from specbench.drafting.ngram import NgramDrafter, continuations, ngram_trie
from specbench.trees.eagle2 import grow, select
from specbench.trees.policies import AdaptiveChain, Eagle2Policy, make_policy, shape_paths
from specbench.trees.sequoia import expected_accepted, load_vector, optimal_paths

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VECTORS = [
    [0.62, 0.14, 0.06, 0.04, 0.02, 0.01],
    [0.3, 0.25, 0.2, 0.1, 0.05],
    [0.9, 0.05, 0.02],
    [0.45, 0.3, 0.1, 0.05, 0.04, 0.03, 0.02],
]
STATIC = [
    ("chain", {}),
    ("binary", {}),
    ("kary", {"width": 3}),
    ("kary", {"width": 4}),
    ("topk_wide", {"width": 4}),
    ("specinfer", {}),
]


# ------------------------------------------------------------------ Sequoia DP
def brute_force_best(vector, budget, depth):
    """Best expected value over all prefix-closed trees (tiny sizes only)."""
    k = len(vector)
    universe = [p for d in range(1, depth + 1) for p in itertools.product(range(k), repeat=d)]
    best = 0.0
    for combo in itertools.combinations(universe, budget):
        s = set(combo)
        if all(len(p) == 1 or p[:-1] in s for p in combo):
            best = max(best, expected_accepted(combo, vector))
    return best


def test_expected_accepted_is_exact_for_small_trees():
    v = [0.5, 0.3]
    assert expected_accepted([(0,), (1,), (0, 0)], v) == pytest.approx(0.5 + 0.3 + 0.25)
    assert expected_accepted([(0,), (0, 0), (0, 0, 0)], v) == pytest.approx(0.5 + 0.25 + 0.125)
    assert expected_accepted([(5,)], v) == 0.0


@pytest.mark.parametrize("vector", VECTORS)
def test_dp_tree_beats_every_static_shape(vector):
    for budget in (1, 2, 4, 8, 16, 32, 64):
        for name, params in STATIC:
            shape = shape_paths(name, budget, **params)
            d = max_depth(shape)
            dp = optimal_paths(vector, budget, d)
            assert len(dp) == budget and max_depth(dp) <= d
            assert expected_accepted(dp, vector) >= expected_accepted(shape, vector) - 1e-12, (name, params, budget)


@pytest.mark.parametrize("budget,depth", [(3, 2), (4, 3), (5, 3), (6, 2)])
def test_dp_matches_brute_force(budget, depth):
    v = [0.5, 0.3, 0.1]
    dp = optimal_paths(v, budget, depth)
    assert expected_accepted(dp, v) == pytest.approx(brute_force_best(v, budget, depth))


def test_sequoia_shape_reads_the_calibrated_csv(tmp_path):
    csv = tmp_path / "acceptance_vector.csv"
    csv.write_text(
        "pair,pair_id,dataset,verify,temperature,rank,p_accept,n\n"
        "a,id_a,d,greedy,0.0,0,0.7,100\na,id_a,d,greedy,0.0,1,0.1,100\n"
        "a,id_b,d,greedy,0.0,0,0.2,100\n"
    )  # same name, another pair
    assert load_vector(csv, "id_a", "d", "greedy", 0.0) == [0.7, 0.1]
    assert load_vector(csv, "id_b", "d", "greedy", 0.0) == [0.2]
    paths = shape_paths(
        "sequoia",
        6,
        depth=4,
        vector=str(csv),
        calib_pair_id="id_a",
        calib_dataset="d",
        calib_verify="greedy",
        calib_temperature=0.0,
    )
    assert paths == optimal_paths([0.7, 0.1], 6, 4)
    with pytest.raises(FileNotFoundError, match="python -m specbench.study.tools.calibrate"):
        shape_paths("sequoia", 6, vector=str(csv), calib_pair_id="a")  # a name is not a pair_id
    with pytest.raises(ValueError, match="calib_pair_id=auto"):
        shape_paths("sequoia", 6, vector=str(csv), calib_pair_id="auto")
    with pytest.raises(FileNotFoundError, match="python -m specbench.study.tools.calibrate"):
        make_policy("sequoia", 6, {"vector": str(tmp_path / "none.csv")})


# ------------------------------------------------------------------ n-gram
def _continuations_by_definition(h, max_len, max_ngram=4, min_ngram=1):
    """Every n from longest, every earlier occurrence of the last n tokens from most recent, first seen kept."""
    out = []
    for n in range(max_ngram, min_ngram - 1, -1):
        for i in range(len(h) - n - 1, -1, -1) if len(h) > n else ():
            cont = h[i + n : i + n + max_len]
            if h[i : i + n] == h[-n:] and cont not in out:
                out.append(cont)
    return out


def test_ngram_continuations_and_tries_follow_the_definition_on_random_histories():
    import random

    from specbench.drafting.ngram import Trie

    rng = random.Random(3)
    for _ in range(300):
        h = [rng.randrange(rng.choice([2, 5, 30])) for _ in range(rng.randrange(0, 120))]
        max_len, max_ngram = rng.randrange(1, 9), rng.randrange(1, 6)
        min_ngram = rng.randrange(1, max_ngram + 1)
        want = _continuations_by_definition(h, max_len, max_ngram, min_ngram)
        assert continuations(h, max_len, max_ngram, min_ngram) == want
        if not h:
            continue
        limit = rng.randrange(1, 20)
        trie = Trie(h[-1])  # the trie as drafted: each continuation inserted until it holds limit nodes
        for c in want:
            if trie.size >= limit:
                break
            trie.insert(c, limit, max_len)
        got = ngram_trie(h, limit, max_len, max_ngram, min_ngram)
        assert (got.parents, got.tokens, got.ranks) == (trie.parents, trie.tokens, trie.ranks)


def test_ngram_finds_repeated_spans_and_branches():
    h = [5, 6, 7, 8, 1, 2, 9, 5, 6, 7, 3, 5, 6, 7]
    conts = continuations(h, max_len=3)
    # no earlier 4-gram (3,5,6,7); the 3-gram (5,6,7) occurs twice: most recent first
    assert conts == [[3, 5, 6], [8, 1, 2]]
    d = NgramDrafter()
    d.reset(h)
    tree = d.draft_now(make_policy("ngram_trie", 6), "topk", None)
    assert tree.size == 6 and int(tree.tokens[0]) == 7 and tree.q is None and tree.child_rule == "fixed"
    kids = sorted(int(tree.tokens[c]) for c in tree.children(0))
    assert kids[:2] == [3, 8]  # two matches -> two branches at the root
    assert depths(tree.parents) == sorted(depths(tree.parents))
    chain = d.draft_now(make_policy("chain", 3), "topk", None)
    assert chain.tokens[1:].tolist() == [3, 5, 6]


@pytest.mark.parametrize(
    "name,params", [("binary", {}), ("kary", {"width": 3}), ("chain", {}), ("topk_wide", {"width": 2})]
)
def test_ngram_builds_the_requested_shape_from_its_candidates(name, params):
    """Every node's rank path is a path of the shape: binary has <= 2 children per node."""
    h = [1, 2, 3, 4, 1, 2, 5, 6, 1, 2, 7, 8, 1, 2, 3, 9, 1, 2, 4, 4, 1, 2]
    d = NgramDrafter()
    d.reset(h)
    for budget in (1, 3, 6, 12):
        policy = make_policy(name, budget, params)
        tree = d.draft_now(policy, "topk", None)
        shape = set(policy.paths())
        path_of = {0: ()}
        for i in range(1, len(tree.parents)):
            path_of[i] = path_of[tree.parents[i]] + (tree.ranks[i],)
            assert path_of[i] in shape, (name, budget, path_of[i])
        assert 0 < tree.size <= budget
        if name == "binary":
            assert max(len(tree.children(i)) for i in range(len(tree.parents))) <= 2
    # priority: the 3-gram (4, 1, 2) matched at index 3 (-> 5), then the 2-gram (1, 2), most
    # recent first (-> 4, 3, 7, 5): binary keeps the 2 best-priority distinct root children
    tree = d.draft_now(make_policy("binary", 2), "topk", None)
    assert [int(t) for t in tree.tokens[1:]] == [5, 4]


def test_unsupported_drafter_policy_pairs_are_one_line_errors():
    from specbench.drafting.drafters import check_supported

    check_supported(NgramDrafter, "paths", "binary")
    for cls, name in ((NgramDrafter, "eagle2"), (ModelDrafter, "ngram_trie"), (MergedDrafter, "chain")):
        with pytest.raises(ValueError, match=f"tree={name} is not supported by the .* drafter: use one of") as e:
            check_supported(cls, make_policy(name, 8).kind if name != "merged" else "merged", name)
        assert "\n" not in str(e.value)
    with pytest.raises(KeyError, match="unknown tree policy 'bnary'.*Valid:.*binary") as e:
        make_policy("bnary", 4)
    assert "\n" not in str(e.value)


def test_ngram_proposes_nothing_without_a_match():
    d = NgramDrafter()
    d.reset([1, 2, 3, 4, 5])
    tree = d.draft_now(make_policy("chain", 8), "topk", None)
    assert tree.size == 0 and tree.parents == [-1] and tree.depth == 0


# ------------------------------------------------------------------ EAGLE-2
@pytest.mark.parametrize("budget,width,depth", [(1, 2, 1), (5, 3, 3), (16, 4, 5), (40, 5, 4)])
def test_eagle2_keeps_the_top_n_connected(tiny_draft, tiny_tokenizer, budget, width, depth):
    d = ModelDrafter(tiny_draft)
    d.reset(tiny_tokenizer.encode("def fibonacci(n):"))
    cand = drafted(grow(d, width, depth))
    tree = select(cand, budget)
    assert tree.size == budget and tree.depth <= depth
    ds = depths(tree.parents)  # connected, breadth-first
    assert ds == sorted(ds) and all(p < i for i, p in enumerate(tree.parents) if i)
    mapped = {0: -1}  # tree node -> candidate index
    for i in range(1, budget + 1):
        mapped[i] = next(
            c
            for c in range(len(cand.token))
            if cand.parent[c] == mapped[tree.parents[i]] and cand.token[c] == int(tree.tokens[i])
        )
    assert sorted(mapped[i] for i in range(1, budget + 1)) == sorted(cand.order()[:budget])
    kept = sorted((cand.score[mapped[i]] for i in range(1, budget + 1)), reverse=True)
    assert kept == pytest.approx(sorted(cand.score, reverse=True)[:budget])
    # every node was expanded from its parent: its parent has a q row, forwarded nodes have slots
    for i in range(1, budget + 1):
        assert tree.q[tree.parents[i]].sum() == pytest.approx(1.0, abs=1e-4)


def test_make_policy_kinds():
    assert isinstance(make_policy("eagle2", 8, {"width": 4, "depth": 3}), Eagle2Policy)
    assert make_policy("eagle2", 8, {"width": 4, "depth": 3}).kind == "eagle2"
    assert isinstance(make_policy("adaptive_chain", 8), AdaptiveChain)
    with pytest.raises(ValueError, match="raise tree.width or tree.depth"):
        make_policy("eagle2", 100, {"width": 2, "depth": 2})
    with pytest.raises(ValueError, match="tree.width=0"):
        make_policy("eagle2", 8, {"width": 0, "depth": 2})
    with pytest.raises(ValueError, match="whole number"):
        make_policy("chain", 2.5)
    with pytest.raises(ValueError, match="negative rank"):
        make_policy("paths", 2, {"paths": [[0], [-1]]})
    with pytest.raises(KeyError, match="Valid:.*eagle2"):
        make_policy("eagel2", 8)


def test_adaptive_chain_heuristic():
    plan = make_policy("adaptive_chain", 6, {"start": 4})
    lengths = []
    for accepted in (4, 6, 6, 2, 0, 0, 0, 0, 1):
        plan.observe(accepted, len(plan.paths()))
        lengths.append(len(plan.paths()))
    assert lengths == [6, 6, 6, 5, 4, 3, 2, 1, 3]


def test_medusa63_config_is_the_63_node_tree():
    cfg = yaml.safe_load(open(os.path.join(ROOT, "conf", "tree", "medusa63.yaml")))
    assert cfg["defaults"][0] == "/schema/tree/medusa63@_here_"  # a named variant of the medusa63 shape
    paths = shape_paths("medusa63", 63, paths=cfg["paths"])
    assert len(paths) == 63 and max_depth(paths) == 4 and max(p[-1] for p in paths) == 9
    # trimmed in Medusa's listed (priority) order, stored breadth-first
    assert shape_paths("medusa63", 8, paths=cfg["paths"]) == sorted(
        [tuple(p) for p in cfg["paths"][:8]], key=lambda p: (len(p), p)
    )


# ------------------------------------------------------------------ greedy losslessness
PROMPTS = ("def add(a, b):\n    return a + b\ndef add(a, b):", "The quick brown fox. The quick")
CASES = [
    ("model", "sequoia", {"depth": 4, "vector": [0.5, 0.2, 0.1, 0.05]}),
    ("model", "paths", "medusa63"),
    ("model", "eagle2", {"width": 4, "depth": 4}),
    ("model", "adaptive_chain", {"start": 2}),
    ("ngram", "chain", {}),
    ("ngram", "binary", {}),
    ("ngram", "ngram_trie", {}),
    ("merged", "merged", {"shape": "chain"}),
    ("merged", "merged", {"shape": "binary"}),
    ("merged", "merged", {"shape": "eagle2", "width": 3, "depth": 3}),
]


REFS: dict = {}


@pytest.mark.parametrize("kind,name,params", CASES)
def test_greedy_is_token_identical_to_plain_greedy(tiny_draft, tiny_target, tiny_tokenizer, kind, name, params):
    if params == "medusa63":
        params = {"paths": yaml.safe_load(open(os.path.join(ROOT, "conf/tree/medusa63.yaml")))["paths"]}
    for budget in (1, 5, 21):
        for text in PROMPTS:
            prompt = tiny_tokenizer.encode(text)
            if (text, id(tiny_target)) not in REFS:
                REFS[(text, id(tiny_target))] = greedy_reference(tiny_target, prompt, 24)
            ref = REFS[(text, id(tiny_target))]
            drafter = {
                "model": lambda: ModelDrafter(tiny_draft, 1.0),
                "ngram": NgramDrafter,
                "merged": lambda: MergedDrafter(ModelDrafter(tiny_draft, 1.0)),
            }[kind]()
            recs, out = decode_one(drafter, tiny_target, prompt, make_policy(name, budget, params), 24)
            assert out == ref, (kind, name, budget, text)
            assert all(r.tree_size <= budget for r in recs)
            if kind == "model" and name != "adaptive_chain":
                assert all(r.tree_size == budget for r in recs)


# ------------------------------------------------------------------ calibration
@pytest.mark.parametrize("verify", ["greedy", "sequoia"])
def test_calibrate_writes_a_vector_the_sequoia_shape_reads(tiny_draft, tiny_target, tiny_tokenizer, tmp_path, verify):
    from specbench.inputs.data import Prompt
    from specbench.inputs.models import Pair
    from specbench.study.tools.calibrate import measure, write_vector

    vcfg = {"name": verify}  # the option verify=<name>: the mode's defaults (its schema, core.options)
    from specbench.study.job.identity import Identity
    from specbench.study.job.jobspec import from_config

    job = from_config(
        {
            "verify": vcfg,
            "max_new_tokens": 12,
            "seed": 0,
            "progress": False,
            "dtype": "float32",
            "device": "cpu",
            "replay_cache": str(tmp_path / "cache"),
            "tree": {"name": "chain", "budget": 4},
            "dataset": {"name": "smoke"},
            "pair": {
                "name": "tiny",
                "draft": {"source": "hub", "id": "tiny-draft"},
                "target": {"source": "hub", "id": "tiny-target"},
            },
        }
    )
    pair = Pair("tiny", "d", "t", tiny_draft, tiny_target, tiny_tokenizer, False)
    prompts = [Prompt(str(i), t, tiny_tokenizer.encode(t), "x") for i, t in enumerate(PROMPTS)]
    vec, n = measure(job, Identity("d", "t", "x"), pair, prompts, 4, {0})
    assert len(vec) == 4 and n > 0 and 0 < sum(vec) <= 1 + 1e-9
    out = tmp_path / "acceptance_vector.csv"
    key = {"pair": "tiny", "pair_id": "id_tiny", "dataset": "smoke", "verify": verify, "temperature": 0.0}
    write_vector(out, {**key, "pair_id": "id_other"}, [0.5], 3)  # same name, another pair
    write_vector(out, key, [0.1] * 4, 1)
    write_vector(out, key, vec, n)  # replaces its own rows, keeps the other pair's
    lines = out.read_text().splitlines()
    assert lines[0] == "pair,pair_id,dataset,verify,temperature,rank,p_accept,n,prompt_ids" and len(lines) == 6
    assert load_vector(out, "id_tiny", "smoke", verify) == pytest.approx(vec, abs=1e-6)
    assert load_vector(out, "id_other", "smoke", verify) == [0.5]
    assert os.stat(out).st_mode & 0o777 == 0o666 & ~umask()
    paths = shape_paths(
        "sequoia", 8, depth=4, vector=str(out), calib_pair_id="id_tiny", calib_dataset="smoke", calib_verify=verify
    )
    assert len(paths) == 8
