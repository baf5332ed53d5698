"""The study plan (specbench/results/plan.py; its command: specbench/study/tools/plan.py) is the one
declaration of the reference study: run_all.sh starts every reference sweep from it and none of its own,
every reference preset is in it, and each part's sweeps, composed by Hydra as run_all.sh runs them, cover
that part's floor (the floors the report checks, report/floors.py)."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from specbench.report import floors
from specbench.results import plan
from specbench.study.job.plugins import import_registries

ROOT = Path(__file__).resolve().parents[1]
GROUPS = ("pair", "tree", "verify", "dataset")


def test_run_all_runs_every_reference_sweep_from_the_plan():
    text = (ROOT / "scripts" / "full_study.sh").read_text()
    own = set(re.findall(r"sweep=(reference\w*)", text))
    assert own <= {"reference_validate"}, own  # the live check's jobs come from the projection, not a preset grid
    presets = {p.stem for p in (ROOT / "conf" / "sweep").glob("reference*.yaml")}
    planned = {s.preset for p in plan.PARTS for s in p.sweeps}
    assert planned | {"reference_validate"} == presets
    assert "plan_runs hour" in text and "plan_runs extended" in text
    folders = [s.folder for p in plan.PARTS for s in p.sweeps]
    assert len(folders) == len(set(folders))  # one sweep folder each


def test_the_plan_prints_one_line_per_sweep_in_run_order():
    out = subprocess.run(
        [sys.executable, "-m", "specbench.study.tools.plan", "runs", "--phase", "hour"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert [line.split("\t")[:3] for line in out] == [[i, s.folder, s.preset] for i, s in plan.runs("hour")]
    assert out[0].split("\t")[0] == "1"  # part 1 first: the priority order


def test_the_reports_floors_are_the_plans():
    assert floors.FLOORS == plan.floors() and len(floors.FLOORS) == 15


def _axes(sweep: plan.Sweep, preset_params: dict) -> tuple[list[str], dict[str, list]]:
    """(fixed overrides, sweep axes): the preset's sweeper params, then the sweep's own overrides (a
    command-line axis replaces the preset's, as in Hydra's basic sweeper)."""
    parser = OverridesParser.create()
    fixed, axes = [], {}
    for key, value in preset_params.items():
        o = parser.parse_override(f"{key}={value}")
        axes[key] = list(o.sweep_string_iterator()) if o.is_sweep_override() else [str(value)]
    for arg in sweep.args:
        o = parser.parse_override(arg)
        if o.is_sweep_override():
            axes[o.key_or_group] = list(o.sweep_string_iterator())
        else:
            axes.pop(o.key_or_group, None)
            fixed.append(arg)
    return fixed, axes


def sweep_cells(sweep: plan.Sweep) -> list[dict]:
    """Every job of a sweep as Hydra composes it: pair, tree label, budget, dataset, rules, T, prompts,
    tokens, engine and batch size.  One composition per choice of the groups swept; the other axes
    (budgets, temperatures, ...) are set on a copy of it."""
    import_registries()  # the tree and verify options are the registries' structured configs (core.options)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        base = compose("config", overrides=[f"sweep={sweep.preset}"], return_hydra_config=True)
        fixed, axes = _axes(sweep, dict(base.hydra.sweeper.params or {}))
        groups = [k for k in axes if k in GROUPS]
        values = [k for k in axes if k not in GROUPS]
        cells = []
        for choice in itertools.product(*(axes[k] for k in groups)):
            over = [f"sweep={sweep.preset}", *fixed, *(f"{k}={v}" for k, v in zip(groups, choice))]
            composed = compose("config", overrides=over)
            for combo in itertools.product(*(axes[k] for k in values)):
                cfg = composed.copy()
                for key, value in zip(values, combo):
                    OmegaConf.update(cfg, key, yaml.safe_load(value), force_add=True)
                cells.append(_cell(cfg))
    return cells


def _cell(cfg) -> dict:
    label = f"merged:{cfg.tree.shape}" if cfg.tree.name == "merged" else cfg.tree.name
    return dict(
        pair=cfg.pair.name,
        label=label,
        budget=int(cfg.tree.get("budget") or 0),
        dataset=cfg.dataset.name,
        rules={cfg.verify.name, *cfg.verify.get("paired_with", [])},
        T=round(float(cfg.verify.get("temperature", 0.0)), 3),
        prompts=int(cfg.dataset.limit),
        tokens=int(cfg.max_new_tokens),
        live=cfg.engine == "live",
        batch=int(cfg.batch_size),
    )


def _meets(cell: dict, floor: plan.Floor) -> bool:
    if floor.engine == "live":
        return cell["live"] and cell["batch"] > 1
    if floor.engine == "live-b1":
        return cell["live"] and cell["batch"] == 1
    return True


@pytest.mark.parametrize("part", [p for p in plan.PARTS if p.floor is not None], ids=lambda p: p.id)
def test_each_parts_sweeps_cover_its_floor(part):
    floor = part.floor
    jobs = [c for s in part.sweeps for c in sweep_cells(s)]
    assert jobs, part.id
    for pair, label, budget, dataset, rule, temp in floor.cells():
        assert any(
            (c["pair"], c["label"], c["budget"], c["dataset"]) == (pair, label, budget, dataset)
            and rule in c["rules"]
            and c["T"] == temp
            and c["prompts"] >= floor.min_prompts
            and c["tokens"] >= floor.min_tokens
            and _meets(c, floor)
            for c in jobs
        ), (part.id, pair, label, budget, dataset, rule, temp)
