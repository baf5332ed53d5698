"""The typed job spec: every config in conf/ composes and builds a JobSpec; defaults live in
one place; equal values give equal identities; registries are asked in one function."""

import dataclasses
import os

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from specbench.study.job import checks, jobspec
from specbench.study.job.argv import options  # a group's options: the registries' schemas and conf/'s files
from specbench.study.job.identity import Identity, config_hash

CONF = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")
LOCAL = ["pair.draft.path=/models/draft", "pair.target.path=/models/target"]
# options that only fit a partner option (a drafter grows the policies it supports)
PARTNER = {
    ("pair", "local"): LOCAL,
    ("pair", "merged_qwen"): ["tree=merged"],
    ("tree", "merged"): ["pair=merged_qwen"],
    ("tree", "ngram_trie"): ["pair=ngram_qwen"],
    ("tree", "paths"): ["tree.paths=[[0],[1],[0,0]]"],  # the list is the user's: no default
}


def every_config() -> list[list[str]]:
    """Each option of each group (with the others at their defaults: a tree policy's and a verify
    mode's from their registry entries' schemas), each sweep preset
    and each launcher preset."""
    out = [
        [f"{g}={o}"] + PARTNER.get((g, o), [])
        for g in ("pair", "tree", "verify", "dataset", "sweep")
        for o in options(g)
    ]
    out += [[f"hydra/launcher={o}"] for o in options("hydra/launcher")]
    return out + [["hydra/launcher=submitit_slurm"], ["hydra/launcher=joblib"]]


def composed(overrides):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True)


@pytest.mark.parametrize("overrides", every_config(), ids=lambda o: o[0])
def test_every_config_builds_a_job_spec(overrides):
    cfg = composed(overrides)
    OmegaConf.to_container(cfg.hydra.launcher, resolve=True)  # launcher presets resolve
    job = jobspec.from_config(cfg)
    assert job.tree.budget >= (0 if job.tree.name == "none" else 1)
    assert job.max_new_tokens >= 1 and job.batch_size >= 1
    assert job.engine in jobspec.ENGINES and job.dtype in jobspec.DTYPES
    assert 0 < job.verify.top_p <= 1 and job.verify.temperature >= 0
    assert job.to_dict()["tree"]["name"] == job.tree.name
    if job.tree.name != "sequoia":  # sequoia needs a calibrated vector for its pair
        checks.check_registries(job)
    assert job.extra == {}  # no preset sets a top-level key a job does not read (group keys: their schemas)
    checks.check_temperature(job)


def test_defaults_are_filled_in_one_place_and_equal_values_hash_equal():
    base = {
        "pair": {"name": "p", "draft": {"source": "hub", "id": "d"}, "target": {"source": "hub", "id": "t"}},
        "tree": {"name": "chain", "budget": 4},
        "verify": {"name": "greedy"},
        "dataset": {"name": "smoke"},
    }
    job = jobspec.from_config(base)
    assert (job.max_new_tokens, job.seed, job.engine, job.batch_size) == (64, 0, "live", 1)
    assert (job.verify.temperature, job.verify.draft_temperature, job.verify.top_p) == (0.0, 1.0, 1.0)
    same = jobspec.from_config(
        {
            **base,
            "tree": {"name": "chain", "budget": 4.0},
            "max_new_tokens": 64,
            "out_root": "elsewhere",
            "progress": False,
        }
    )
    ident = Identity("a", "b", "c")
    assert config_hash(job, ident) == config_hash(same, ident)  # 4 == 4.0; run location ignored
    assert config_hash(job, ident) != config_hash(job, Identity("a", "x", "c"))  # content counts
    with pytest.raises(jobspec.ConfigError, match="tree.budget=2.5"):
        jobspec.from_config({**base, "tree": {"name": "chain", "budget": 2.5}})


def test_the_spec_is_frozen():
    job = jobspec.from_config(composed(["pair=local", *LOCAL]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.seed = 3  # type: ignore[misc]
    assert job.pair.name == "local:/models/draft->/models/target"  # a local label shows its folders


def test_replay_in_bf16_is_asked_for_never_automatic():
    """engine=replay runs greedy bf16 jobs against the batched bf16 continuation
    (docs/engines.md); engine=auto replays only where exact (float32); a sampling mode never replays."""
    from specbench.study.job.checks import resolve_engine
    from specbench.study.job.jobspec import ConfigError, from_config

    def job(engine, dtype, verify="greedy"):
        return from_config(
            {
                "pair": {"name": "p", "draft": {"source": "hub", "id": "d"}, "target": {"source": "hub", "id": "t"}},
                "tree": {"name": "chain", "budget": 4},
                "dataset": {"name": "smoke"},
                "verify": {"name": verify},
                "dtype": dtype,
                "engine": engine,
            }
        )

    assert resolve_engine(job("replay", "bfloat16")) == "replay"
    assert resolve_engine(job("auto", "bfloat16")) == "live"
    assert resolve_engine(job("auto", "float32")) == "replay"
    with pytest.raises(ConfigError, match="engine=replay needs greedy"):
        resolve_engine(job("replay", "bfloat16", "mss"))
