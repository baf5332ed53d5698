"""The jobs of a multirun, from its overrides alone (no composition of the job configs, no model,
no torch): what the study plan's time estimate counts (``study.tools.eta``) and the sweep's progress bar
follows (``study.job.progress``).

* ``expand(params, task)``: every job's overrides, as Hydra's basic sweeper makes them (the
  preset's ``hydra.sweeper.params``, then the command line's overrides: a command-line axis
  replaces the preset's).  Hydra's own ``BasicSweeper.split_arguments`` does the product.
* ``preset_params(preset)``: a sweep preset's ``hydra.sweeper.params`` as conf/sweep/PRESET.yaml
  declares them (read as YAML; ``tests/test_study_eta.py`` checks them against Hydra's
  composition of every plan preset).
* ``job_dirs(jobs)``: each job's folder name under the sweep folder (``hydra.sweep.subdir``:
  ``resolvers.job_dirname`` of its overrides, conf/config.yaml's excluded keys left out).
* ``finished(folder)``: a job folder that holds its summary or a resume marker (a job skipped
  because the same config hash finished elsewhere).

Imports: yaml, hydra's override parser and basic sweeper, ``study.job.resolvers``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence

import yaml
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from ... import CONF_DIR
from .resolvers import job_dirname

DONE_FILES = ("summary.csv", "resumed.txt")  # jobfiles.RESUMED_FILE: a job skipped by its config hash


def expand(params: Mapping | None, task: Sequence[str]) -> list[list[str]]:
    """Every job's overrides: the basic sweeper's product of ``params`` (``key: values``) then ``task``."""
    given = [f"{k}={v}" for k, v in (params or {}).items()] + [str(t) for t in task]
    overrides = OverridesParser.create().parse_overrides(given)
    return BasicSweeper.split_arguments(overrides, None)[0]


@functools.cache
def preset_params(preset: str) -> dict:
    """``hydra.sweeper.params`` of conf/sweep/PRESET.yaml ({} where it sweeps nothing itself)."""
    with open(os.path.join(CONF_DIR, "sweep", f"{preset}.yaml")) as fh:
        conf = yaml.safe_load(fh) or {}
    return dict(((conf.get("hydra") or {}).get("sweeper") or {}).get("params") or {})


def task(overrides: Sequence[str]) -> list[str]:
    """The job's own overrides (Hydra's ``hydra.overrides.task``): ``hydra.*`` and ``hydra/*`` ones
    (the launcher, the sweep folder) are Hydra's and name no job folder."""
    return [o for o in overrides if not o.lstrip("+~").startswith(("hydra.", "hydra/"))]


@functools.cache
def excluded_keys() -> tuple[str, ...]:
    """conf/config.yaml's ``hydra.job.config.override_dirname.exclude_keys``."""
    with open(os.path.join(CONF_DIR, "config.yaml")) as fh:
        conf = yaml.safe_load(fh)
    return tuple(conf["hydra"]["job"]["config"]["override_dirname"]["exclude_keys"])


def job_dirs(jobs: Sequence[Sequence[str]], exclude: Sequence[str] | None = None) -> list[str]:
    """Each job's folder name under its sweep folder (``hydra.sweep.subdir``)."""
    keys = excluded_keys() if exclude is None else tuple(exclude)
    return [job_dirname(job, keys) for job in jobs]


def finished(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, f)) for f in DONE_FILES)


def count_finished(sweep_dir: str, names: Sequence[str]) -> int:
    """How many of the job folders ``names`` under ``sweep_dir`` hold a finished job."""
    return sum(finished(os.path.join(sweep_dir, n)) for n in names)
