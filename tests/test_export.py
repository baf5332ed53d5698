"""`python -m specbench.export` (#38): the tree as a rank-path list for every static shape, the
engines' settings, and the speculation profile of committed rows; refusals in one line."""

from __future__ import annotations

import json
import os

import pytest

from specbench.core.tree import paths_to_parents
from specbench.study.serving.engines import Choice
from specbench.study.serving.export import export, paths, profile
from specbench.trees.policies import POLICIES, make_policy
from test_hydra import ROOT, specbench

STATIC = [n for n in POLICIES.names() if POLICIES.get(n).shape is not None and n != "paths"]


def choice(tree="chain", budget=4, drafter="model", verify="greedy", **params) -> Choice:
    return Choice("p", drafter, "org/draft", tree, budget, params, verify, 0.0)


def test_the_command_writes_the_rank_path_list(tmp_path):
    out = tmp_path / "tree.json"
    r = specbench("specbench.export", "pair=qwen_coder", "tree=binary", "tree.budget=16", "format=paths", f"out={out}")
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(out.read_text())
    assert isinstance(got, list) and len(got) == 16 and all(isinstance(x, int) for p in got for x in p)
    assert got == [list(p) for p in make_policy("binary", 16).paths()]


@pytest.mark.parametrize("tree", STATIC)
def test_every_static_shape_round_trips_at_every_budget(tree):
    """The exported list, read back, is the policy's tree: the same parents and sibling ranks."""
    for budget in range(1, 65):
        try:
            want = make_policy(tree, budget).paths()
        except ValueError:
            continue  # a budget the shape does not admit (medusa63 above 63)
        back = json.loads(json.dumps(paths(choice(tree, budget))))
        assert paths_to_parents([tuple(p) for p in back]) == paths_to_parents(want), (tree, budget)
        assert [p[-1] for p in back] == [p[-1] for p in want] and len(back) == len(want) == budget


@pytest.mark.parametrize(
    "argv,line",
    [
        (["tree=eagle2", "tree.budget=16", "format=paths"], "format=paths: tree=eagle2 is drafted at run time"),
        (["tree=binary", "tree.budget=16", "format=vllm"], "format=vllm (vLLM): tree=binary is a tree"),
        (["pair=smollm_qwen", "tree=chain", "tree.budget=4", "format=sglang"], "nearest exportable: format=vllm"),
        (["tree=binary", "tree.budget=4", "format=sglang"], "nearest exportable: tree=eagle2 tree.budget=4"),
        (["tree=chain", "tree.budget=4", "verify=typical", "verify.temperature=1", "format=trtllm"], "verify=typical"),
        (["tree=eagle2", "tree.budget=16", "format=trtllm"], "give eagle_head="),
        (["tree=chain", "tree.budget=4", "format=yaml"], "format=yaml: must be one of"),
        (["tree=chain", "tree.budget=4", "format=paths", "foo=1"], "foo"),
    ],
)
def test_what_a_format_cannot_express_is_one_line(argv, line, tmp_path):
    out = tmp_path / "x.json"
    r = specbench("specbench.export", *argv, f"out={out}")
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and line in lines[0], r.stderr[-2000:]
    assert not out.exists()


def test_nearest_true_exports_the_nearest_configuration_labelled(tmp_path):
    out = tmp_path / "spec.json"
    argv = ["tree=binary", "tree.budget=16", "format=vllm", "nearest=true", f"out={out}"]
    r = specbench("specbench.export", *argv)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["study"]["tree"] == "chain" and got["nearest"]["asked"]["tree"] == "binary"
    assert got["nearest"]["changed"] == ["tree=chain tree.budget=4"] and got["notes"][0].startswith("NEAREST")
    assert got["speculative_config"]["num_speculative_tokens"] == 4


def test_the_profile_of_a_committed_configuration_checks_out_and_equals_the_csvs():
    from specbench.results.files import STEPS_FILE, read_csv

    results = os.path.join(ROOT, "results")
    if not os.path.exists(os.path.join(results, STEPS_FILE)):
        pytest.skip("no committed steps")
    summary = read_csv(os.path.join(results, "summary.csv"))
    row = summary[(summary.engine == "replay") & (summary.tree == "binary") & (summary.budget == 16)].iloc[0]
    obj, _ = export([f"config_hash={row.config_hash}", "format=profile"])
    assert all(obj["checks"].values())
    assert obj["acceptance_length_histogram"] == json.loads(row.accept_hist)
    assert obj["acceptance_length_token_weighted"] == pytest.approx(1 + row.acceptance_length, abs=1e-5)
    assert obj["n_steps"] == row.n_steps and obj["n_requests"] == row.n_prompts
    assert obj["marginal_acceptance"][0] == pytest.approx(1 - obj["acceptance_length_histogram"][0] / row.n_steps)
    lengths = read_csv(os.path.join(results, "acceptance_length.csv")).set_index("config_hash").loc[row.config_hash]
    assert lengths.al_per_request == pytest.approx(obj["acceptance_length_per_request"], abs=1e-5)
    assert lengths.al_token_weighted == pytest.approx(obj["acceptance_length_token_weighted"], abs=1e-5)


def test_a_hand_made_profile():
    """Two prompts: accepted 2, 0 | 1 (depth 2): marginals 2/3, 1/3; AL 2 token-weighted, per
    request mean(2, 2) = 2; conditional P(>=2 | >=1) = 1/2."""
    import pandas as pd

    steps = pd.DataFrame({"prompt_id": ["a", "a", "b"], "accepted": [2, 0, 1], "tree_depth": [2, 2, 2]})
    row = pd.Series({"config_hash": "h", "pair": "p", "dataset": "d", "tree": "chain", "tree_params": "{}",
                     "budget": 2, "verify": "greedy", "temperature": 0.0})  # fmt: skip
    p = profile(row, steps)
    assert p["acceptance_length_histogram"] == [1, 1, 1]
    assert p["marginal_acceptance"] == pytest.approx([2 / 3, 1 / 3])
    assert p["conditional_acceptance"] == pytest.approx([2 / 3, 1 / 2])
    assert p["acceptance_length_token_weighted"] == pytest.approx(2.0)
    assert p["acceptance_length_per_request"] == pytest.approx(((1 + 1) + (1 + 1)) / 2)
    assert all(p["checks"].values())


def test_acceptance_lengths_token_weighted_and_per_request_by_hand():
    """collect's acceptance_length.csv: prompt a accepts 2, 0; b accepts 1: token-weighted
    1 + 3/3 = 2; per request mean(1 + 1, 1 + 1) = 2; with a third step on b accepting 3: 1 + 6/4 and
    mean(2, 3)."""
    import pandas as pd

    from specbench.results.acceptance import acceptance_lengths

    steps = pd.DataFrame({"config_hash": "h", "prompt_id": ["a", "a", "b", "b"], "accepted": [2, 0, 1, 3]})
    r = acceptance_lengths(steps).iloc[0]
    assert (r.n_requests, r.n_steps) == (2, 4)
    assert r.al_token_weighted == pytest.approx(1 + 6 / 4) and r.al_per_request == pytest.approx((2 + 3) / 2)


def test_recommend_exports_the_reports_answer():
    """recommend=true picks what REPORT.md's TL;DR names for the pair and dataset (committed results)."""
    import re

    report = os.path.join(ROOT, "REPORT.md")
    if not os.path.exists(os.path.join(ROOT, "results", "speedup.csv")) or not os.path.exists(report):
        pytest.skip("no committed results")
    pattern = re.compile(r"^\| qwen_coder/humaneval \| (\w+) N=(\d+)[^|]* \| [\d.]+× \[")  # the per-pair table's row
    shape, budget = next(m for ln in open(report, encoding="utf-8") if (m := pattern.search(ln))).groups()
    from specbench.results.files import read_csv
    from specbench.study.serving.export import recommended

    results = os.path.join(ROOT, "results")
    chash = recommended(results, {"pair": "qwen_coder", "dataset": "humaneval"})
    row = read_csv(os.path.join(results, "summary.csv")).set_index("config_hash").loc[chash]
    assert (row.tree, int(row.budget), row.engine) == (shape, int(budget), "replay")  # its full replay
    if POLICIES.get(shape).shape is not None:  # a static shape exports as its rank-path list
        got, _ = export(["recommend=true", "pair=qwen_coder", "dataset=humaneval", "format=paths"])
        assert got == paths(choice(shape, int(budget)))
