"""Hydra glue for study jobs: folder names, failures on disk, checks before Hydra starts.

* The folder resolvers ``specbench_jobdir`` and ``specbench_uid`` live in
  ``study.job.resolvers`` (registered whenever ``specbench.study`` is imported).
* ``run_guarded``: runs a job; a failure leaves ``error.txt`` (one-line reason,
  then the traceback) in the job folder, prints the one line, and is counted in
  this process too (``FAILED``), so a job whose ``error.txt`` cannot be written
  (a full disk) still fails the multirun.  It writes the job's
  ``.hydra/overrides.yaml`` itself, atomically (``hydra.output_subdir`` is null:
  Hydra's own non-atomic writes there would end the whole sweep with a
  traceback on a full disk).
* ``FailureReport`` (a Hydra callback, registered in conf/config.yaml): at the
  end of a multirun, one line counting the failed jobs with their folders, and
  a non-zero exit status if there was any.  It reads the sweep folder, so a job
  of a launcher's worker process (joblib, submitit) counts even where its
  ``error.txt`` could not be written: a job folder with no summary is failed.
* ``check_argv`` (``study.job.argv``): one-line errors for an unknown group option,
  an unknown key, or an unusable ``out_root`` / ``hydra.run.dir`` before Hydra
  creates any folder.
* ``compose(overrides)``: the study config for tools that are not Hydra apps
  (``study.tools.calibrate``, ``study.tools.lossless``).

Lives outside run.py so launcher workers (joblib, submitit) import it by name,
which registers the resolver there too.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import sys
import traceback

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from ... import CONF_DIR
from ...core.atomic import os_line, write_text
from ...core.registry import UnknownName
from . import argv, jobspec
from .plugins import import_registries
from .resolvers import job_dirname  # noqa: F401  (registers conf/config.yaml's resolvers)
from .sweepjobs import finished  # a job folder holding its summary or a resume marker

USER_ERRORS = (ValueError, UnknownName, OSError, FloatingPointError)
ERROR_FILE = "error.txt"
RERUN_ERROR = "rerun-error.txt"  # a failed rerun in a folder that still holds its finished job
FAILED: list[str] = []  # job folders that failed in this process (error.txt or not)
STARTED: list[str] = []  # job folders started in this process


def compose(overrides):
    """conf/config.yaml composed with ``overrides`` (no job folder, no Hydra run); inside a running
    Hydra app (``study.tools.costs``' ``costs_pairs``) through the app's own config loader."""
    import_registries()  # the tree and verify options (core.options)
    running = GlobalHydra.instance().is_initialized()
    with contextlib.nullcontext() if running else initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return hydra_compose("config", overrides=list(overrides))


def compose_tree(cfg, tree: str, budget: int) -> jobspec.TreeSpec:
    """Tree option ``tree`` at ``budget`` as a study job composes it: the option's file included
    (medusa63's path list, sequoia's calibration keys), its interpolations resolved against
    ``cfg`` (the run's config); ``merged:binary`` is option ``merged`` with ``tree.shape=binary``
    (the report's label of that tree).  A bad name or budget is a ``ConfigError`` of one line."""
    name, _, shape = tree.partition(":")
    try:
        node = compose([f"tree={name}", f"tree.budget={budget}", *([f"tree.shape={shape}"] if shape else [])]).tree
        whole = cfg.copy()
        with open_dict(whole):
            whole.tree = node
        group = OmegaConf.to_container(whole.tree, resolve=True)
    except (HydraException, OmegaConfBaseException) as e:
        raise jobspec.ConfigError(f"{tree}/{budget}: {argv.hydra_line(e)}") from None
    assert isinstance(group, dict)
    return jobspec.tree_spec(group)


def checked_job(overrides):
    """The job spec of a command that is not ``run`` (``study.tools.calibrate``, ``study.tools.lossless``)
    from its overrides, checked as ``run`` checks them before any model loads: an unknown
    group option or key (``+`` or not) or a bad value is one line and exit 2."""
    argv.check_plugins(overrides)  # first: a plugin's entries are options
    argv.check_groups(overrides)
    argv.check_keys(overrides)
    try:
        job = jobspec.from_config(compose(overrides))
    except (HydraException, OmegaConfBaseException) as e:
        argv.fail(argv.hydra_line(e))
    except ValueError as e:
        argv.fail((str(e).strip().splitlines() or [type(e).__name__])[0])
    return job


def one_line(e: BaseException) -> str:
    """The first line of an error; an OSError names the path it could not use."""
    if isinstance(e, OSError) and e.filename and e.strerror:
        return os_line(e)
    text = (str(e).strip().splitlines() or [""])[0]
    return text if isinstance(e, USER_ERRORS) and text else f"{type(e).__name__}: {text}"


def clear_stale(out_dir: str) -> None:
    """A stale error.txt (or rerun-error.txt) of an earlier run in this folder goes."""
    for name in (ERROR_FILE, RERUN_ERROR):
        if os.path.exists(os.path.join(out_dir, name)):
            os.remove(os.path.join(out_dir, name))


def run_guarded(job_fn, out_dir: str, overrides=None) -> int:
    """Call job_fn(); 0 on success, else write error.txt (if it can), print one line, return
    2 (bad input) or 1 (anything else).  ``overrides`` go to ``.hydra/overrides.yaml`` first.
    A folder that holds a finished job keeps it whole until a new one completes: a failed or
    refused rerun writes ``rerun-error.txt`` (collect reads the finished job as before), and
    the rerun's overrides replace the old ones only with its results."""
    logging.raiseExceptions = False  # a log record a full disk cannot take is not a traceback
    STARTED.append(os.path.abspath(out_dir))
    holds = finished(out_dir)

    def write_overrides() -> None:
        if overrides is not None:
            write_text(os.path.join(out_dir, ".hydra", "overrides.yaml"), OmegaConf.to_yaml(list(overrides)))

    try:
        if not holds:
            clear_stale(out_dir)
            write_overrides()
        job_fn()
        if holds:
            write_overrides()
            clear_stale(out_dir)
        return 0
    except Exception as e:  # noqa: BLE001  (every failure must reach the disk or the count)
        line = one_line(e)
        FAILED.append(os.path.abspath(out_dir))
        try:
            write_text(
                os.path.join(out_dir, RERUN_ERROR if holds else ERROR_FILE), f"{line}\n\n{traceback.format_exc()}"
            )
        except OSError as e2:
            line += f" (and {ERROR_FILE} could not be written: {e2.strerror})"
        print(f"specbench: error: {line}", file=sys.stderr)
        return 2 if isinstance(e, USER_ERRORS) else 1


def job_folders(sweep_dir: str) -> set[str]:
    """A sweep's job folders: those holding ``.hydra``, and the sweep folder's non-hidden
    subfolders (a job whose disk refused every write leaves only its folder)."""
    marked = {
        os.path.dirname(os.path.abspath(p)) for p in glob.glob(os.path.join(sweep_dir, "**", ".hydra"), recursive=True)
    }
    top = (
        {os.path.abspath(e.path) for e in os.scandir(sweep_dir) if e.is_dir() and not e.name.startswith(".")}
        if os.path.isdir(sweep_dir)
        else set()
    )
    return marked | {d for d in top if not any(m.startswith(d + os.sep) for m in marked)}


def failed_jobs(sweep_dir: str) -> tuple[list[str], list[str], int]:
    """(failed job folders, those of them without an error.txt or rerun-error.txt, number of jobs).  A job failed
    if it left error.txt, failed in this process, or left neither a summary nor a resume
    marker: a launcher's worker (joblib, submitit) whose disk refused error.txt counts too.
    Like error.txt, this reads the sweep folder: with a fixed ``hydra.sweep.dir``, an earlier
    run's unfinished folder there counts as well (collect lists it as skipped too)."""
    jobs = job_folders(sweep_dir) | set(STARTED)
    failed = {
        os.path.dirname(os.path.abspath(p))
        for p in glob.glob(os.path.join(sweep_dir, "**", ERROR_FILE), recursive=True)
    }
    failed |= set(FAILED) | {d for d in jobs if not finished(d)}
    said = (ERROR_FILE, RERUN_ERROR)  # a rerun beside a finished job says why in rerun-error.txt
    silent = sorted(d for d in failed if not any(os.path.exists(os.path.join(d, f)) for f in said))
    return sorted(failed), silent, len(jobs | failed)


class FailureReport(Callback):
    """Multirun end: '<k> of <n> jobs failed: <folders>' and exit status 1 if k > 0."""

    def on_multirun_end(self, config, **kwargs) -> None:
        failed, silent, n = failed_jobs(str(config.hydra.sweep.dir))
        if failed:
            note = (
                f"; {len(silent)} of them could not write error.txt (free space, then rerun): {', '.join(silent)}"
                if silent
                else ""
            )
            print(
                f"specbench: {len(failed)} of {n} jobs failed (see error.txt or rerun-error.txt): "
                f"{', '.join(failed)}{note}",
                file=sys.stderr,
            )
            sys.exit(1)


def pair_config(name: str) -> dict:
    """conf/pair/NAME.yaml as Hydra composes it over its drafter's schema, a plain dict (a study
    pair's config, for scripts and multi-pair commands; interpolations left as written);
    ValueError naming the valid pairs when there is none."""
    path = os.path.join(CONF_DIR, "pair", f"{name}.yaml")
    if not os.path.exists(path):
        valid = sorted(f[:-5] for f in os.listdir(os.path.join(CONF_DIR, "pair")) if f.endswith(".yaml"))
        raise ValueError(f"no pair '{name}' in conf/pair/ (valid: {', '.join(valid)})")
    return dict(OmegaConf.to_container(compose([f"pair={name}"]).pair, resolve=False))  # type: ignore[arg-type]
