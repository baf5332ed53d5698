"""Typed registries: what a tree policy, verify mode, drafter or dataset can do is declared
where it is registered (no list beside the registry), and a throwaway entry of each kind,
registered here, is usable by the rest of the code without touching another module."""

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from conftest import decode_one
from specbench.core.registry import Registry, UnknownName
from specbench.drafting.drafters import DRAFTERS, Drafter, ModelDrafter, check_supported
from specbench.drafting.levels import Levels
from specbench.drafting.ngram import Trie
from specbench.inputs import data
from specbench.report import analysis
from specbench.report.analysis import cross_shapes, shape_label
from specbench.study.job import describe
from specbench.study.job.checks import argmax
from specbench.trees import base
from specbench.trees.policies import POLICIES, Params, make_policy, param_checks, policy_spec, positive, shape_paths
from specbench.verify.modes import MODES, get_mode, greedy
from specbench.verify.modespec import ModeParams, ModeSpec, Role, register, role_tags


@pytest.fixture
def scratch(monkeypatch):
    """Registrations made in a test are forgotten after it."""
    for reg in (POLICIES, MODES, DRAFTERS, data.DATASETS):
        monkeypatch.setattr(reg, "_items", dict(reg._items))


def test_registry_is_typed_names_its_entries_and_suggests():
    class Entry:
        name = ""

    reg: Registry[Entry] = Registry("widget", name_attr="name")

    @reg.register("alpha")
    class Alpha(Entry):
        pass

    assert reg.get("alpha") is Alpha and Alpha.name == "alpha" and list(reg.entries()) == [Alpha]
    with pytest.raises(UnknownName, match=r"unknown widget 'alpah'. Valid: alpha. Did you mean 'alpha'\?"):
        reg.get("alpah")
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("alpha", Entry())


def test_capabilities_replace_the_old_lists():
    # the former CHAIN_TREES, POSITIVE_TREE_PARAMS / RANK_LIST_PARAMS and ARGMAX_MODES, now declared
    assert sorted(s.name for s in POLICIES.entries() if s.chain) == ["adaptive_chain", "chain", "none", "pmin_chain"]
    checks = param_checks()
    assert sorted(k for k, c in checks.items() if c["check"] == base.POSITIVE) == [
        "depth",
        "max_children",
        "start",
        "top_k",
        "width",
    ]
    assert sorted(k for k, c in checks.items() if c["check"] != base.POSITIVE) == ["expansion", "paths"]
    assert [n for n in MODES.names() if argmax(n)] == ["greedy"]
    assert policy_spec("sequoia").rank_replayable and not policy_spec("eagle2").rank_replayable
    # drafters: which policy kinds they grow, what they need from a pair, how they are charged
    assert sorted(DRAFTERS.get("ngram").grows) == ["ngram_trie", "none", "paths"]
    assert dict(DRAFTERS.get("layerskip").pair_keys) == {"layers": "???"} and DRAFTERS.get("model").name == "model"
    assert [n for n in DRAFTERS.names() if DRAFTERS.get(n).rank_replay] == ["layerskip", "model", "tli"]
    assert data.DATASETS.get("mt_bench").kind == "instruct"


def test_calibration_and_cost_rules_read_declared_capabilities():
    # study.tools.calibrate measures a drafter at every position only where it declares teacher_forced
    # (it was `pair.drafter != "model"`), which its greedy path reads through rank_replay
    assert [n for n in DRAFTERS.names() if DRAFTERS.get(n).teacher_forced] == ["model"]
    for cls in filter(lambda c: c.teacher_forced, DRAFTERS.entries()):
        assert cls.rank_replay and cls.draft_model and not cls.own_tokenizer, cls.name
    # the report charges each step the draft forwards it recorded (steps.csv `scored`), by no policy name
    pkg = Path(describe.__file__).parents[2]
    assert not re.search(r"drafter\s*[!=]=", (pkg / "study" / "tools" / "calibrate.py").read_text())
    assert "eagle2" not in (pkg / "report" / "speedup.py").read_text()


def test_rows_carry_each_shapes_resolved_parameters_and_the_report_reads_them():
    """A merged tree is given only the keys of its model part: its row's tree_resolved holds the
    model shape's defaults (study.job.describe, from the registry), so the report (no copy of the
    registry) compares merged specinfer with specinfer; a row without the column keeps what it was given."""
    assert json.loads(describe.tree_resolved("kary", {})) == {"width": 3}
    assert json.loads(describe.tree_resolved("eagle2", {"depth": 3})) == {"width": 10, "depth": 3}
    merged = describe.tree_resolved("merged", {"shape": "specinfer", "ngram_share": 0.5})
    assert json.loads(merged) == {
        "ngram_share": 0.5,
        "shape": "specinfer",
        "model": {"expansion": [1, 1, 3, 1, 1, 1, 1, 1]},
    }
    given = ['{"shape": "specinfer", "ngram_share": 0.5}']
    assert cross_shapes(["merged"], given, [merged], [""]) == [
        shape_label("specinfer", '{"expansion": [1, 1, 3, 1, 1, 1, 1, 1]}')
    ]
    assert cross_shapes(["merged"], given, [float("nan")], [""]) == ["specinfer"]
    assert cross_shapes(
        ["kary"], ['{"width": 3}'], [describe.tree_resolved("kary", {"width": 3})], ["kary(width=3)"]
    ) == ["kary(width=3)"]


def test_mode_roles_are_declared_on_the_entries_and_carried_by_rows():
    """The report's former REFERENCE_MODE / TOKEN_LEVEL / LOSSY lists, now each mode's declared Role."""
    tags = {n: role_tags(get_mode(n)) for n in MODES.names()}
    assert {n for n, t in tags.items() if t["mode_family"] == "lossy"} == {
        "conservative",
        "epsilon",
        "hsd",
        "ratio",
        "typical",
    }
    assert {n: t["baseline_of"] for n, t in tags.items() if t["baseline_of"]} == {
        "speculative": "chain",
        "mss": "tree",
        "naive": analysis.LOSSY_BASELINE,
    }
    assert {n: t["token_level_on"] for n, t in tags.items() if t["token_level_on"]} == {
        "speculative": "chain",
        "mss": "chain,tree",
        "sequoia": "tree",
        "naive": "tree",
    }
    with pytest.raises(ValueError, match="role: unknown kinds"):
        Role(baseline_of=("forest",))
    assert describe.frontier_rule("model", "eagle2", "sample") == "topk"
    assert describe.frontier_rule("ngram", "chain", "topk") == "fixed"
    assert describe.frontier_rule("model", "binary", "sample_noreplace") == "sample_noreplace"


def test_typed_params_are_checked_once_naming_the_key():
    assert make_policy("kary", 8, {"width": 3.0}).params.width == 3
    with pytest.raises(ValueError, match=r"^tree.widht: not a parameter of tree=kary; valid: width$"):
        make_policy("kary", 8, {"widht": 3})
    with pytest.raises(ValueError, match=r"^tree.depth=0: must be an integer >= 1$"):
        make_policy("eagle2", 8, {"depth": 0})
    with pytest.raises(ValueError, match=r"^pair.layer: not a key of pair.drafter=layerskip"):
        DRAFTERS.get("layerskip").check_params({"layer": 3})
    p = get_mode("mss").params({"order": "storage"})
    assert p.order == "storage" and p["temperature"] == 1.0 and p == {**p}


def test_a_drafter_refuses_kinds_it_does_not_declare():
    check_supported(ModelDrafter, "eagle2", "eagle2")
    with pytest.raises(
        ValueError,
        match=r"tree=eagle2 is not supported by the ngram drafter: use one of "
        r"adaptive_chain, binary, chain, kary, medusa63, ngram_trie, none, ",
    ):
        check_supported(DRAFTERS.get("ngram"), "eagle2", "eagle2")


@dataclass(frozen=True)
class ZigParams(Params):
    width: int = positive(2)


def test_throwaway_shape_mode_drafter_and_dataset(scratch, tiny_target, tiny_tokenizer):
    @base.static_shape("zigzag", ZigParams)
    def zigzag(budget, params):  # rank r at depth d: top-width at the root, then chains
        return [(r,) + (0,) * d for d in range(budget) for r in range(params.width)]

    assert shape_paths("zigzag", 4, width=2) == [(0,), (1,), (0, 0), (1, 0)]
    prompt = tiny_tokenizer.encode("def add(a, b):")
    recs, out = decode_one(ModelDrafter(tiny_target, 0.0), tiny_target, prompt, make_policy("zigzag", 4), 12)
    plain, _ = decode_one(ModelDrafter(tiny_target, 0.0), tiny_target, prompt, make_policy("none", 0), 12)
    assert out == decode_one(ModelDrafter(tiny_target, 0.0), tiny_target, prompt, make_policy("chain", 3), 12)[1]
    assert all(r.tree_size == 4 for r in recs) and len(recs) < len(plain)

    @dataclass(frozen=True, eq=False)
    class StrictParams(ModeParams):
        temperature: float = 0.0
        strictness: int = 1

    register(
        ModeSpec(
            name="strict_greedy",
            verdict=greedy,
            child_rule="topk",
            lossless_for=frozenset({"topk"}),
            law=get_mode("greedy").law,
            params_type=StrictParams,
        )
    )
    assert get_mode("strict_greedy").params({"strictness": 2}).strictness == 2
    with pytest.raises(ValueError, match="verify.strict: not a parameter of verify=strict_greedy"):
        get_mode("strict_greedy").params({"strict": 2})
    assert (
        decode_one(
            ModelDrafter(tiny_target, 0.0), tiny_target, prompt, make_policy("zigzag", 4), 12, mode="strict_greedy"
        )[1]
        == out
    )

    @DRAFTERS.register("echo")
    class EchoDrafter(Drafter):
        """Proposes the last committed token again along each rank path."""

        def grow_paths(self, policy, rule: str, rng: torch.Generator) -> Levels:
            yield from ()
            trie = Trie(self.history[-1])
            trie.insert([self.history[-1]] * max(map(len, policy.paths())), len(policy.paths()), 99, None)
            return trie.to_tree()

        grows = {**Drafter.grows, "paths": grow_paths}

    assert EchoDrafter.name == "echo"
    # a throwaway shape under a merged tree is labelled with its defaults, as a built-in one is
    merged = describe.tree_resolved("merged", {"shape": "zigzag"})
    assert cross_shapes(["merged"], ['{"shape": "zigzag"}'], [merged], [""]) == ["zigzag(width=2)"]
    assert describe.frontier_rule("echo", "zigzag", "topk") == "topk"
    assert decode_one(EchoDrafter(), tiny_target, prompt, make_policy("zigzag", 4), 12)[1] == out
    with pytest.raises(ValueError, match="not supported by the echo drafter"):
        EchoDrafter().draft_now(make_policy("eagle2", 4, {"width": 2, "depth": 2}), "topk", torch.Generator())

    data.dataset("two_lines", kind="completion")(lambda spec: [("a", "x = 1", "code"), ("b", "y = 2", "code")])
    assert data.dataset_kind(data.DatasetSpec.of({"name": "two_lines"})) == "completion"
    assert [pr.id for pr in data.load_prompts(data.DatasetSpec.of({"name": "two_lines"}), tiny_tokenizer)] == ["a", "b"]
