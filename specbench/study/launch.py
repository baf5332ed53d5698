"""Hydra glue for study jobs: folder names, failures on disk, checks before Hydra starts.

* ``specbench_jobdir`` (an OmegaConf resolver, used by ``hydra.sweep.subdir``):
  the job folder name from the job's overrides, with every long value (or one
  holding a path separator) replaced by a short hash, so a folder name is
  bounded whatever the override (a 60-entry ``tree.paths`` included).
* ``run_guarded``: runs a job; a failure leaves ``error.txt`` (one-line reason,
  then the traceback) in the job folder and prints the one line.
* ``FailureReport`` (a Hydra callback, registered in conf/config.yaml): at the
  end of a multirun, one line counting the failed jobs with their folders, and
  a non-zero exit status if there was any.
* ``check_argv``: one-line errors for an unknown group option or an unusable
  ``out_root`` before Hydra creates any folder.

Lives outside run.py so launcher workers (joblib, submitit) import it by name,
which registers the resolver there too.
"""
from __future__ import annotations

import glob
import hashlib
import os
import sys
import traceback

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from ..core.atomic import write_text
from ..core.registry import UnknownName

from .. import CONF_DIR
GROUPS = ("pair", "tree", "verify", "dataset", "sweep")
USER_ERRORS = (ValueError, UnknownName, OSError, FloatingPointError)
MAX_VALUE_CHARS = 32
MAX_NAME_CHARS = 160
ERROR_FILE = "error.txt"


def job_dirname(overrides, exclude=()) -> str:
    """Sorted ``key=value`` items joined by commas; long or path-like values hashed."""
    items = []
    for item in sorted(str(o) for o in overrides):
        key, eq, value = item.partition("=")
        if key.lstrip("+~") in set(exclude):
            continue
        if len(value) > MAX_VALUE_CHARS or "/" in value or os.sep in value:
            value = "h" + hashlib.sha1(value.encode()).hexdigest()[:10]
        items.append(f"{key}{eq}{value}")
    name = ",".join(items) or "default"
    if len(name) > MAX_NAME_CHARS:
        name = name[:MAX_NAME_CHARS - 12] + "-h" + hashlib.sha1(name.encode()).hexdigest()[:10]
    return name


OmegaConf.register_new_resolver("specbench_jobdir", job_dirname, replace=True)


def one_line(e: BaseException) -> str:
    text = (str(e).strip().splitlines() or [""])[0]
    return text if isinstance(e, USER_ERRORS) and text else f"{type(e).__name__}: {text}"


def run_guarded(job_fn, out_dir: str) -> int:
    """Call job_fn(); 0 on success, else write error.txt, print one line, return 2 (bad
    input) or 1 (anything else).  A stale error.txt from an earlier run is removed first."""
    err = os.path.join(out_dir, ERROR_FILE)
    if os.path.exists(err):
        os.remove(err)
    try:
        job_fn()
        return 0
    except Exception as e:           # noqa: BLE001  (every failure must reach the disk)
        line = one_line(e)
        try:
            write_text(err, f"{line}\n\n{traceback.format_exc()}")
        except OSError:
            pass
        print(f"specbench: error: {line}", file=sys.stderr)
        return 2 if isinstance(e, USER_ERRORS) else 1


def failed_jobs(sweep_dir: str) -> tuple[list[str], int]:
    """(folders with error.txt, number of job folders) under a multirun folder."""
    jobs = glob.glob(os.path.join(sweep_dir, "**", ".hydra"), recursive=True)
    failed = glob.glob(os.path.join(sweep_dir, "**", ERROR_FILE), recursive=True)
    return sorted(os.path.dirname(p) for p in failed), len(jobs)


class FailureReport(Callback):
    """Multirun end: '<k> of <n> jobs failed: <folders>' and exit status 1 if k > 0."""

    def on_multirun_end(self, config, **kwargs) -> None:
        failed, n = failed_jobs(str(config.hydra.sweep.dir))
        if failed:
            print(f"specbench: {len(failed)} of {n} jobs failed (see error.txt): {', '.join(failed)}",
                  file=sys.stderr)
            sys.exit(1)


def check_out_root(argv) -> None:
    """out_root must be (or be creatable as) a writable folder."""
    root = next((a.partition("=")[2] for a in reversed(argv) if a.startswith("out_root=")), "outputs")
    probe = os.path.abspath(os.path.expanduser(root))
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK):
        why = "is not a directory" if not os.path.isdir(probe) else "is not writable"
        sys.exit(f"specbench: error: out_root={root}: {probe} {why}; point out_root at a writable folder")


def check_argv(argv) -> None:
    """`tree=foo` with no conf/tree/foo.yaml, or a bad out_root: one line, exit 2."""
    for arg in argv:
        group, eq, value = arg.lstrip("+~").partition("=")
        if not eq or group not in GROUPS:
            continue
        valid = sorted(f[:-5] for f in os.listdir(os.path.join(CONF_DIR, group)) if f.endswith(".yaml"))
        for v in value.split(","):
            if v and v not in valid:
                sys.exit(f"specbench: error: unknown {group} '{v}'. Valid: {', '.join(valid)}")
    check_out_root(argv)
