"""docs/extending.md: a shape, a verify mode, a drafter and a dataset, each registered in ONE
user module outside the package (``plugins=[module]``): the shape, the mode and the dataset are
options without any YAML (their schemas, ``core.options``), the pair (a named variant: its models)
sits in a config folder of its own (``hydra.searchpath``), extending the drafter's schema
(``/schema/pair/echo``); run through a real multirun, collected and reported like
built-in entries (rows describe themselves: study.job.describe); and the ``plugins`` key leaves
every job's config hash as it was."""

import glob
import json
import os
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

import forkserver
from conftest import report_text
from specbench.report import build
from specbench.results.files import read_csv
from specbench.study.job import collect, identity, jobspec
from specbench.study.job.launch import compose
from test_hydra import JOB_MODULES

ROOT = Path(__file__).resolve().parents[1]

PLUGIN = '''
"""Throwaway entries of every kind, registered as docs/extending.md's table says."""
from dataclasses import dataclass

from specbench.drafting.drafters import DRAFTERS, Drafter
from specbench.drafting.ngram import Trie
from specbench.inputs.data import dataset
from specbench.trees.base import Params, positive, static_shape
from specbench.verify.modes import get_mode, greedy
from specbench.verify.modespec import ModeParams, ModeSpec, Role, register


@dataclass(frozen=True)
class ZigParams(Params):
    width: int = positive(2)


@static_shape("zigzag", ZigParams)
def zigzag(budget, params):          # the top-`width` first tokens, then top-1 chains
    return [(r,) + (0,) * d for d in range(budget) for r in range(params.width)]


@dataclass(frozen=True, eq=False)
class StrictParams(ModeParams):
    temperature: float = 0.0
    strictness: int = 1


register(ModeSpec(name="strict_greedy", verdict=greedy, child_rule="topk",
                  lossless_for=get_mode("greedy").lossless_for, law=get_mode("greedy").law,
                  params_type=StrictParams, role=Role(token_level=("tree",))))


@DRAFTERS.register("echo")
class EchoDrafter(Drafter):
    """No draft model: proposes the last committed token again, as a chain."""

    @classmethod
    def from_pair(cls, pair, temperature=1.0, top_p=1.0, kv=None):
        return cls()

    @classmethod
    def child_rule(cls, kind, rule):
        return rule if kind == "none" else "fixed"

    def grow_paths(self, policy, rule, rng):
        yield from ()
        trie = Trie(self.history[-1])
        trie.insert([self.history[-1]] * max(map(len, policy.paths())), len(policy.paths()), 99, None)
        return trie.to_tree()

    grows = {**Drafter.grows, "paths": grow_paths}


@dataset("numbered_defs", kind="completion", options={"stem": "def"})
def numbered_defs(spec):
    return [(f"def/{i}", f"{spec.get('stem')} f{i}(x):", "code") for i in range(5)]
'''

# the shape, the mode and the dataset need no preset: registering them stores their options
# (core.options); a pair is a YAML file, in the plugin's own config folder, over its drafter's schema
PRESETS = {
    "pair/echo_local.yaml": "defaults:\n  - /schema/pair/echo@_here_\n  - _self_\nname: echo_local\n"
    "draft: null\ntarget:\n  source: local\n  path: ???\ndrafter: echo\nchat_template: false\n",
}


def package_files() -> dict:
    """(size, mtime) of every file under specbench/ and conf/ (caches aside)."""
    return {
        str(p): (p.stat().st_size, p.stat().st_mtime_ns)
        for top in ("specbench", "conf")
        for p in (ROOT / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def plugin_run(tmp_path, *args):
    env = dict(
        os.environ,
        HYDRA_FULL_ERROR="0",
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=os.pathsep.join([str(tmp_path / "code"), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    # forked from an interpreter that has imported a job's modules, not the plugin (forkserver.py): one server per
    # test (its PYTHONPATH), so a test's several commands import torch and the rest once
    return forkserver.run(["specbench.run", *args], cwd=ROOT, env=env, timeout=600, preload=JOB_MODULES)


@pytest.fixture
def plugin_dirs(tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "feat_entries.py").write_text(textwrap.dedent(PLUGIN))
    for rel, text in PRESETS.items():
        (tmp_path / "conf" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "conf" / rel).write_text(text)
    return f"hydra.searchpath=[file://{tmp_path / 'conf'}]"


def test_a_plugin_modules_shape_mode_drafter_and_dataset_run_through_a_multirun(tiny_pair_dirs, tmp_path, plugin_dirs):
    before = package_files()
    out = tmp_path / "outputs"
    # joblib: the jobs run in worker processes, which import the plugin themselves
    r = plugin_run(
        tmp_path,
        "-m",
        "plugins=[feat_entries]",
        plugin_dirs,
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "pair=echo_local",
        f"pair.target.path={tiny_pair_dirs[1]}",
        "tree=zigzag",
        "tree.width=1,2",
        "tree.budget=3",
        "verify=strict_greedy",
        "verify.strictness=2",
        "dataset=numbered_defs",
        "dataset.limit=2",
        "max_new_tokens=6",
        "dtype=float32",
        "device=cpu",
        "engine=live",
        "progress=false",
        f"out_root={out}",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    summaries = glob.glob(str(out / "**" / "summary.csv"), recursive=True)
    assert len(summaries) == 2
    rows = pd.concat([read_csv(s) for s in summaries]).sort_values("tree_params")
    assert set(rows.tree) == {"zigzag"} and set(rows.verify) == {"strict_greedy"}
    assert set(rows.dataset) == {"numbered_defs"} and set(rows.pair) == {"echo_local"}
    assert set(rows.draft) == {"echo"} and set(rows.child_rule) == {"topk"} and rows.lossless.all()
    assert rows.config_hash.is_unique and list(rows.budget) == [3, 3] and list(rows.n_prompts) == [2, 2]
    assert ((rows.acceptance_rate >= 0) & (rows.acceptance_rate <= 1)).all()
    assert (rows.tokens_per_step >= 1).all() and (rows.n_steps > 0).all() and (rows.new_tokens > 0).all()
    steps = pd.concat([read_csv(s.replace("summary.csv", "steps.csv")) for s in summaries])
    assert set(steps.prompt_id) == {"def/0", "def/1"} and (steps.tree_size <= 3).all()
    config = OmegaConf.load(Path(summaries[0]).with_name("config.yaml"))
    assert list(config.plugins) == ["feat_entries"] and config.verify.strictness == 2
    assert config.dataset.stem == "def" and config.tree.width in (1, 2)
    assert package_files() == before  # nothing under specbench/ or conf/ was touched
    # collected and reported as built-in entries are: each row carries what its entries declare
    # (study.job.describe), so the report, which never imports the plugin, labels and places them
    res = tmp_path / "results"
    collect.main([str(out), "--out", str(res)])
    rows = read_csv(str(res / "summary.csv")).sort_values("tree_params")
    assert [json.loads(p) for p in rows.tree_resolved] == [{"width": 1}, {"width": 2}]
    assert set(rows.mode_family) == {"lossless"} and set(rows.token_level_on) == {"tree"}
    assert rows.baseline_of.isna().all() and set(rows.frontier_rule) == {"fixed"}  # echo: candidates not from q
    assert build.main(["--results", str(res), "--out", str(tmp_path / "REPORT.md")]) == 0
    report = report_text(tmp_path / "REPORT.md")  # with the pages it links
    assert "zigzag(width=1)" in report and "zigzag(width=2)" in report and "strict_greedy T=0" in report


def test_a_plugin_preset_key_is_checked_and_a_bad_plugin_is_one_line(tiny_pair_dirs, tmp_path, plugin_dirs):
    base = [
        "pair=echo_local",
        f"pair.target.path={tiny_pair_dirs[1]}",
        "dataset=numbered_defs",
        "dataset.limit=1",
        "max_new_tokens=2",
        "progress=false",
        f"out_root={tmp_path / 'outputs'}",
    ]
    cases = {  # args -> the one line's text
        (
            "plugins=[feat_entries]",
            plugin_dirs,
            "tree=zigzag",
            "tree.widht=2",
        ): "tree.widht: not a parameter of tree=zigzag (did you mean width?)",
        ("plugins=[feat_entries]", plugin_dirs, "+dataset.stm=x"): (
            "dataset.stm: not a parameter of dataset=numbered_defs (did you mean stem?); remove it "
            "(valid: kind, limit, max_prompt_tokens, name, stem)"
        ),
        ("plugins=[feat_entries]", plugin_dirs, "+pair.foo=1"): "pair.foo: not a parameter of pair.drafter=echo",
        (
            "-m",
            "plugins=[feat_entries,no.such.mod]",
            plugin_dirs,
            "tree=zigzag",
            "tree.budget=2,3",
        ): "plugins=[feat_entries,no.such.mod]: cannot import no.such.mod",
        ("tree=zigzag",): "unknown tree 'zigzag'. Valid:",  # no search path: conf/ only
    }
    for args, needle in cases.items():
        r = plugin_run(tmp_path, *args, *base)
        lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
        assert r.returncode == 2 and lines and lines[-1].startswith("specbench: error:"), r.stderr[-2000:]
        assert needle in lines[-1] and "Traceback" not in r.stderr, lines[-1]
    assert not (tmp_path / "outputs").exists()


# the config hash of conf/config.yaml's default job (hub ids, a fixed content identity) and of one
# other job, as computed before the plugins key existed
IDENT = identity.Identity("draft-fp", "target-fp", "dataset-fp")
HUB = ["pair.draft.source=hub", "pair.target.source=hub"]
HASHES = {(): "4b1cc10a5657", ("tree=binary", "tree.budget=16", "verify=mss", "dataset=smoke"): "499aa1876d94"}


@pytest.mark.parametrize("overrides", sorted(HASHES))
def test_the_plugins_key_leaves_the_config_hash_as_it_was(overrides):
    default = jobspec.from_config(compose([*HUB, *overrides]))
    assert default.plugins == () and identity.config_hash(default, IDENT) == HASHES[overrides]
    # a plugin's modules are not the job's identity: the entries' names and parameters are
    with_plugin = jobspec.from_config(compose([*HUB, *overrides, "plugins=[json]"]))
    assert with_plugin.plugins == ("json",) and identity.config_hash(with_plugin, IDENT) == HASHES[overrides]
    assert with_plugin.to_dict()["plugins"] == ["json"] and "plugins" not in with_plugin.to_dict(identity_only=True)


def test_a_bad_plugins_value_is_one_config_error_before_any_registry_lookup():
    cfg = {**compose(HUB), "tree": {"name": "zigzag", "budget": 2}}
    with pytest.raises(jobspec.ConfigError, match=r"^plugins=\[nope_mod\]: cannot import nope_mod \(No module"):
        jobspec.from_config({**cfg, "plugins": ["nope_mod"]})
    with pytest.raises(jobspec.ConfigError, match=r"^plugins=3: must be a list of importable module names"):
        jobspec.from_config({**cfg, "plugins": 3})


@pytest.mark.real
def test_a_reference_jobs_hash_is_still_the_one_in_results():
    """The reference study's chain/4 HumanEval job (sweep=reference) hashes to its row in
    results/summary.csv: the models' fingerprints are their files' (cached beside them)."""
    from specbench.inputs import embedded

    if not embedded.installed(["qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"]):
        pytest.skip("embedded Qwen pair not installed (bash scripts/setup.sh)")
    job = jobspec.from_config(compose(["sweep=reference", "dataset=humaneval", "tree=chain", "tree.budget=4"]))
    job, ident = identity.bind(job, identity.job_identity(job))
    rows = read_csv(ROOT / "results" / "summary.csv")
    row = rows[rows.config_hash == identity.config_hash(job, ident)]
    assert len(row) == 1 and (row.iloc[0].tree, row.iloc[0].budget, row.iloc[0].pair) == ("chain", 4, "qwen_coder")
