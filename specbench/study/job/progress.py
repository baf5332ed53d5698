"""A multirun's progress as one tqdm bar (jobs finished of the sweep's total, with its ETA) instead of
a line per job: ``hydra.callbacks.progress.bar=true`` (conf/config.yaml registers the callback, off;
``scripts/sweeps.sh`` turns it on for every sweep of the study).

* ``SweepBar`` (a Hydra callback): at the multirun's start it counts the sweep's jobs from its
  overrides (``study.job.sweepjobs``: the basic sweeper's product, each job's folder name) and
  follows their folders under ``hydra.sweep.dir``: a job is done when its folder holds a summary
  or a resume marker (skipped: same config hash), failed when an ``error.txt`` appears there.  It
  reads the folders, not the launcher, so the bar is the same for the basic launcher, joblib's
  worker processes and SLURM array tasks (a shared file system).  Jobs a rerun finds finished
  start the bar (resumable: they are skipped by their config hash, not rerun).  The launchers'
  per-job log lines are silenced while it runs.
* ``quiet(hydra_config)``: whether a job runs under the bar; ``study.job.run`` then prints no
  per-job line, no per-prompt bar and (``hush``) no model-load line (a failure still prints its
  one line).

Imports: tqdm, hydra's callback, omegaconf, ``study.job.sweepjobs``, ``study.job.launch``.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import warnings

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import OmegaConf
from tqdm import tqdm

from . import sweepjobs
from .launch import ERROR_FILE

# the loggers of Hydra's launchers that log one line per job
LAUNCHER_LOGGERS = (
    "hydra._internal.core_plugins.basic_launcher",
    "hydra_plugins.hydra_joblib_launcher",
    "hydra_plugins.hydra_submitit_launcher",
)


def quiet(hydra_config) -> bool:
    """A multirun job whose sweep shows the bar (``hydra.callbacks.progress.bar``)."""
    cb = (hydra_config.get("callbacks") or {}).get("progress") or {}
    return hydra_config.mode == RunMode.MULTIRUN and bool(cb.get("bar", False))


def hush() -> None:
    """A job under the bar: its INFO lines (model loads) and the weight-loading bars off; warnings
    and errors stay."""
    logging.getLogger("specbench").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"(transformers|torch)\.")  # once per worker
    try:
        from transformers.utils import logging as hf_logging  # optional: no transformers, no loading bars
    except ImportError:
        return
    hf_logging.disable_progress_bar()


def sweep_folders(config) -> tuple[str, list[str]]:
    """(the sweep folder, each job's folder name) of a multirun's config."""
    h = config.hydra
    params = h.sweeper.get("params")
    params = OmegaConf.to_container(params, resolve=False) if params is not None else {}
    task = OmegaConf.to_container(h.overrides.task, resolve=False)
    jobs = sweepjobs.expand(params, task)  # type: ignore[arg-type]
    exclude = list(h.job.config.override_dirname.exclude_keys)
    return str(h.sweep.dir), sweepjobs.job_dirs(jobs, exclude)


class SweepBar(Callback):
    """One tqdm bar per multirun (see the module docstring); ``bar``: on, ``interval``: seconds between looks."""

    def __init__(self, bar: bool = False, interval: float = 2.0) -> None:
        self.on, self.interval = bool(bar), float(interval)
        self.tqdm: tqdm | None = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __getstate__(self) -> dict:  # a launcher pickles the callbacks to its workers: the settings only
        return {"bar": self.on, "interval": self.interval}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def on_multirun_start(self, config, **kwargs) -> None:
        if not self.on or "BasicSweeper" not in str(config.hydra.sweeper.get("_target_", "")):
            return  # another sweeper makes its own jobs: nothing to count
        self.sweep_dir, self.names = sweep_folders(config)
        self.t0 = time.time()
        for name in LAUNCHER_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        tty = sys.stderr.isatty()
        self.tqdm = tqdm(
            total=len(self.names),
            initial=self.count()[0],
            desc=f"sweep {os.path.basename(self.sweep_dir.rstrip(os.sep))}",
            unit="job",
            file=sys.stderr,
            mininterval=1.0 if tty else 60.0,  # a log file gets a line a minute, not one per job
            dynamic_ncols=tty,
        )
        self.thread = threading.Thread(target=self.follow, name="sweep-bar", daemon=True)
        self.thread.start()

    def count(self) -> tuple[int, int]:
        """(jobs done or failed, of them failed in this run)."""
        done = failed = 0
        for name in self.names:
            folder = os.path.join(self.sweep_dir, name)
            if sweepjobs.finished(folder):
                done += 1
            elif self.fresh_error(folder):
                failed += 1
        return done + failed, failed

    def fresh_error(self, folder: str) -> bool:
        try:
            return os.path.getmtime(os.path.join(folder, ERROR_FILE)) >= self.t0 - 1
        except OSError:
            return False

    def refresh(self) -> None:
        assert self.tqdm is not None
        n, failed = self.count()
        if failed:
            self.tqdm.set_postfix(failed=failed, refresh=False)
        if n > self.tqdm.n:
            self.tqdm.update(n - self.tqdm.n)

    def follow(self) -> None:
        while not self.stop.wait(self.interval):
            self.refresh()

    def on_multirun_end(self, config, **kwargs) -> None:
        if self.tqdm is None:
            return
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        self.refresh()
        self.tqdm.close()
        self.tqdm = None
