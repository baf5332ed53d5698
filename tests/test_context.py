"""One job context (issue 25): the study commands (run, calibrate, lossless, costs, margins) and the
public API build prompts, pair, drafter, verifier, policy and decoding through
``specbench/study/job/context.py``, and the top-level defaults are written once, in conf/config.yaml."""

import ast
import dataclasses
from pathlib import Path

import pytest
import yaml

from specbench.study.job import jobspec
from specbench.study.job.context import DecodePlan, context

ROOT = Path(__file__).resolve().parents[1]
USERS = [
    "specbench/study/job/run.py",
    "specbench/study/tools/calibrate.py",
    "specbench/study/tools/lossless.py",
    "specbench/study/tools/lossless_check.py",
    "specbench/study/tools/costs.py",
    "specbench/study/tools/margins.py",
    "specbench/api.py",
]
# building an engine part or an input by hand: what only the context does
WIRING = {
    "LiveVerifier",
    "ContinuationVerifier",
    "Decoding",
    "make_policy",
    "load_pair",
    "load_prompts",
    "load_tokenizer",
    "pair_contexts",
    "from_pair",
    "shared_kv",
    "cached_ranks_many",
    "cached_continuations",
}
MODEL = {"source": "local", "path": "m"}


def job(**top):
    return jobspec.from_config(
        {
            "pair": {"name": "p", "draft": MODEL, "target": MODEL},
            "tree": {"name": "binary", "budget": 6},
            "dataset": {"name": "smoke"},
            "verify": {"name": "greedy"},
            **top,
        }
    )


def _by_hand(tree: ast.AST) -> list[str]:
    """Calls of a WIRING name, except on the job context (``ctx.load_pair()``, ``context(job).load_pair()``)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            on_ctx = isinstance(f, ast.Attribute) and (
                (isinstance(f.value, ast.Name) and f.value.id == "ctx")
                or (isinstance(f.value, ast.Call) and getattr(f.value.func, "id", "") == "context")
            )
            if name in WIRING and not on_ctx:
                out.append(f"{name} (line {node.lineno})")
    return out


@pytest.mark.parametrize("path", USERS)
def test_run_calibrate_lossless_costs_and_the_api_wire_nothing_by_hand(path):
    text = (ROOT / path).read_text()
    assert not _by_hand(ast.parse(text)), f"{path} builds engine parts itself: {_by_hand(ast.parse(text))}"
    assert "context" in text


def test_the_wiring_check_sees_a_call_by_hand():
    assert _by_hand(ast.parse("pair = models.load_pair(x)\nrun = Decoding(m)")) == [
        "load_pair (line 1)",
        "Decoding (line 2)",
    ]
    assert not _by_hand(ast.parse("pair = ctx.load_pair()\np = context(job).load_pair()"))


def test_the_top_level_defaults_are_config_yamls():
    with open(ROOT / "conf" / "config.yaml") as fh:
        top = yaml.safe_load(fh)
    own = {f.name for f in dataclasses.fields(jobspec.JobSpec)} - {"pair", "tree", "verify", "dataset", "extra"}
    assert set(jobspec.DEFAULTS) == own
    assert {k: v for k, v in jobspec.DEFAULTS.items() if k not in jobspec.OPTIONAL} == {
        k: top[k] for k in own - set(jobspec.OPTIONAL)
    }
    assert jobspec.JobSpec.__dataclass_fields__["max_new_tokens"].default == top["max_new_tokens"]
    assert job().to_dict()["max_new_tokens"] == top["max_new_tokens"] and job().replay_cache is None


def test_the_plan_of_a_job_is_its_tree_mode_length_seed_and_batch():
    j = job(
        max_new_tokens=9,
        seed=3,
        batch_size=2,
        verify={"name": "traversal", "children": "sample_noreplace", "temperature": 0.5},
    )
    plan = context(j).plan
    assert plan == DecodePlan(j.tree, j.verify, 9, 3, 2)
    assert plan.mode.child_rule == "sample_noreplace" and plan.params["temperature"] == 0.5
    assert plan.new_policy() is not plan.new_policy()  # a fresh policy per prompt
    run = plan.decoding(frozenset({7}))
    assert (run.max_new_tokens, run.seed, run.eos, run.params) == (9, 3, frozenset({7}), plan.params)


def test_the_api_builds_typed_specs_and_refuses_a_bad_key_in_one_line():
    from specbench import api

    plan = api.plan({"name": "chain"}, {"name": "greedy"}, 8)
    assert plan.tree == jobspec.tree_spec({"name": "chain", "budget": 0}) and plan.verify.temperature == 0.0
    with pytest.raises(jobspec.ConfigError, match="tree.width"):
        api.decode_prompts(None, [], {"name": "binary", "budget": 4, "width": 0}, {"name": "greedy"}, 8)
    with pytest.raises(jobspec.ConfigError, match="verify.top_p"):
        api.decode_prompts(None, [], {"name": "chain", "budget": 4}, {"name": "mss", "top_p": 0}, 8)


def test_costs_read_their_keys_from_the_job_spec():
    from specbench.study.tools.costs import settings

    base = job(
        tree={"name": "none", "budget": 0},
        dtype="float32",
        results_dir="r",
        costs_repeats=2,
        costs_dtypes=["float32", "bfloat16"],
    )
    out, repeats, kv_lens, jobs = settings(base)
    assert (out, repeats, kv_lens) == ("r", 2, [128, 512])
    assert [(j.pair, j.dtype) for j in jobs] == [(base.pair, "float32"), (base.pair, "bfloat16")]
    assert settings(dataclasses.replace(base, extra={}))[1] == 7  # >= 7 repeats unless asked otherwise
    for bad in (0, [256, 0]):
        with pytest.raises(jobspec.ConfigError, match="costs_kv_lens"):
            settings(dataclasses.replace(base, extra={"costs_kv_lens": bad}))
    from specbench.study.tools.costs import SIZES, sizes_of

    assert sizes_of(base) == SIZES and sizes_of(dataclasses.replace(base, extra={"costs_max_tokens": None})) == SIZES
    narrow = sizes_of(dataclasses.replace(base, extra={"costs_max_tokens": 17}))  # the default run's narrow curve
    assert narrow == tuple(n for n in SIZES if n <= 17) and narrow[-1] == 17
    for bad in (0, "17", True):
        with pytest.raises(jobspec.ConfigError, match="costs_max_tokens"):
            sizes_of(dataclasses.replace(base, extra={"costs_max_tokens": bad}))
