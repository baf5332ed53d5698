"""The reference modes sweep presets (conf/sweep/reference_modes*.yaml): every sequence-level
rule is paired with its strongest token-level baseline on the same drafted trees (storage-order
mss with replacement, sequoia without, speculative on chains) at T = 0.3, 0.7, 1.0; a paired
traversal drafts like the decode it rides on; rows name the child rule and sibling order."""

from __future__ import annotations

import glob

import pytest
from hydra import compose, initialize_config_dir

from specbench.results.files import read_csv
from specbench.study.job import checks, jobspec
from test_hydra import job_args, specbench
from test_jobspec import CONF

TEMPS = [0.3, 0.7, 1.0]
BASELINE = {
    "reference_modes_chain": ("speculative", "block"),
    "reference_modes_tree": ("mss", "traversal"),
    "reference_modes_noreplace": ("sequoia", "traversal"),
}


def composed(overrides):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True)


@pytest.mark.parametrize("sweep", sorted(BASELINE))
def test_presets_pair_each_rule_with_its_baseline_at_three_temperatures(sweep):
    cfg = composed([f"sweep={sweep}"])
    assert [float(t) for t in str(cfg.hydra.sweeper.params["verify.temperature"]).split(",")] == TEMPS
    base, rule = BASELINE[sweep]
    for t in TEMPS:
        job = jobspec.from_config(composed([f"sweep={sweep}", f"verify.temperature={t}"]))
        assert job.verify.name == base and {base, rule} <= set(job.verify.paired_with)
        assert job.verify.draft_temperature == t
        mode = checks.check_registries(job)
        other = checks.paired_params(job.verify, rule)
        if sweep == "reference_modes_tree":
            assert (
                job.verify.params["order"] == "storage"
                and checks.paired_params(job.verify, "mss")["order"] == "storage"
            )
        if "children" in other:
            assert other["children"] == mode.child_rule


def test_sequoia_paired_with_traversal_runs_on_the_same_trees(tiny_pair_dirs, tmp_path):
    """Once refused ('paired modes must draft alike'); now a tiny multirun of the preset."""
    out = tmp_path / "outputs"
    r = specbench(
        *job_args(
            tiny_pair_dirs,
            out,
            "-m",
            "sweep=reference_modes_noreplace",
            "tree.budget=6",
            "batch_size=1",
            "dataset.limit=1",
            "max_new_tokens=6",
        )
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [read_csv(f) for f in glob.glob(str(out / "**" / "summary.csv"), recursive=True)]
    assert len(rows) == 4 * len(TEMPS)  # decode + paired sequoia, traversal, gbv, per T
    by_key = {}
    for s in rows:
        r0 = s.iloc[0]
        by_key.setdefault(r0.pair_key, []).append(r0)
        assert r0.draft_temperature == r0.temperature
    assert sorted(float(g[0].temperature) for g in by_key.values()) == TEMPS
    for group in by_key.values():
        tags = sorted((r.verify, r.pair_role, r.child_rule, r.sibling_order) for r in group)
        assert tags == [
            ("gbv", "paired", "sample_noreplace", "storage"),
            ("sequoia", "decode", "sample_noreplace", "storage"),
            ("sequoia", "paired", "sample_noreplace", "storage"),
            ("traversal", "paired", "sample_noreplace", "storage"),
        ]
