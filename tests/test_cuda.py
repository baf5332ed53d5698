"""device=cuda runs the CPU path's code (marked ``cuda``; skipped where torch sees no GPU).

The study's own command on the tiny pair with ``device=cuda``: every greedy tree's output is
token-identical to plain decoding on the same GPU, replay's acceptance equals live's there,
and rows say the device; ``study.tools.costs`` times the GPU (its rows and its environment file
name it, the CPU's environment.json is left as it was).
"""

import json

import pandas as pd
import pytest
import torch

from conftest import tiny_pair_overrides
from specbench.results.files import OUTPUTS_FILE, read_csv, read_outputs
from test_hydra import job_args, specbench

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available())"),
]

ACCEPT = ["n_steps", "new_tokens", "acceptance_rate", "acceptance_length", "tokens_per_step"]


def cuda_args(dirs, out, *extra):
    return [a if a != "device=cpu" else "device=cuda" for a in job_args(dirs, out, *extra)]


def test_greedy_trees_on_cuda_equal_plain_decoding_and_replay_equals_live(tiny_pair_dirs, tmp_path):
    out, res = tmp_path / "outputs", tmp_path / "results"
    for grid in (
        ("tree=none", "tree.budget=0", "engine=live"),
        ("-m", "tree=chain,binary,specinfer", "tree.budget=4", "engine=live"),
        ("-m", "tree=chain,binary", "tree.budget=4", "engine=replay"),
    ):
        r = specbench(*cuda_args(tiny_pair_dirs, out, *grid, "max_new_tokens=24"))
        assert r.returncode == 0, r.stderr[-3000:]
    r = specbench("specbench.collect", str(out), "--out", str(res))
    assert r.returncode == 0, r.stderr[-2000:]
    rows = read_csv(res / "summary.csv")
    assert set(rows.device.astype(str)) == {"cuda"} and len(rows) == 6
    outputs = read_outputs(str(res / OUTPUTS_FILE))
    plain = rows[rows.tree == "none"].config_hash.iloc[0]
    prompts = sorted(p for h, p in outputs if h == plain)
    assert prompts
    for h in rows.config_hash:
        assert [outputs[(h, p)] for p in prompts] == [outputs[(plain, p)] for p in prompts], h
    for tree in ("chain", "binary"):
        pair = rows[rows.tree == tree].set_index("engine")[ACCEPT]
        pd.testing.assert_series_equal(pair.loc["live"], pair.loc["replay"], check_names=False)


def test_costs_on_cuda_name_the_device_and_keep_the_cpu_environment(tiny_pair_dirs, tmp_path):
    (tmp_path / "environment.json").write_text('{"device": "cpu"}\n')
    args = [a if a != "device=cpu" else "device=cuda" for a in tiny_pair_overrides(tiny_pair_dirs)]
    r = specbench(
        "specbench.study.tools.costs",
        *args,
        "+costs_repeats=3",
        "+costs_kv_lens=[8]",
        f"+results_dir={tmp_path}",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    costs = pd.read_csv(tmp_path / "costs.csv")
    assert set(costs.device) == {"cuda"} and set(costs.role) == {"draft", "target"}
    assert (costs.samples.str.split().str.len() == 3).all() and set(costs.weights) == {"pretrained"}
    env = json.loads((tmp_path / "environment-cuda.json").read_text())
    assert env["gpu"] == torch.cuda.get_device_name(0)
    assert json.loads((tmp_path / "environment.json").read_text()) == {"device": "cpu"}


def test_the_speed_benchmark_on_cuda_times_the_same_decodes(tiny_pair_dirs, tmp_path):
    """The interleaved benchmark with ``device=cuda``: the same code, every greedy tree's tokens equal
    plain decoding's on the GPU, and its rows name the device (the GPU's model in ``machine``)."""
    args = [a if a != "device=cpu" else "device=cuda" for a in tiny_pair_overrides(tiny_pair_dirs)]
    r = specbench(
        "specbench.study.tools.speed",
        *args,
        "dataset=smoke",
        "dataset.limit=2",
        "max_new_tokens=6",
        "+speed_candidates=[chain/2,binary/3]",
        f"+results_dir={tmp_path}",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = read_csv(tmp_path / "speed.csv")
    assert set(rows.device.astype(str)) == {"cuda"} and rows.same_tokens.all() and len(rows) == 2 * 5
    assert torch.cuda.get_device_name(0) in rows.machine.iloc[0] and set(rows.weights) == {"pretrained"}
