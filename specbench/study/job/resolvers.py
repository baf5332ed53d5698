"""OmegaConf resolvers that conf/config.yaml's Hydra folders use (omegaconf only, no torch).

Registered on import of ``specbench.study``, so every app composing the study config
(run, costs, calibrate, the tests) resolves ``hydra.*`` the same way.

* ``specbench_jobdir`` (``hydra.sweep.subdir``): the job folder name from the job's
  overrides, with every long value (or one holding a path separator) replaced by a
  short hash, so a folder name is bounded whatever the override (a 60-entry
  ``tree.paths`` included).
* ``specbench_uid`` (``hydra.run.dir``, ``hydra.sweep.dir``): a short id unique to one
  command, cached, and Hydra copies the resolver cache into every job's config
  (launcher workers included): so all the jobs of one command share it, and two
  sweeps started in the same second into one ``out_root`` never share a folder.
"""

from __future__ import annotations

import hashlib
import os
import uuid

from omegaconf import OmegaConf

MAX_VALUE_CHARS = 32
MAX_NAME_CHARS = 160


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
        name = name[: MAX_NAME_CHARS - 12] + "-h" + hashlib.sha1(name.encode()).hexdigest()[:10]
    return name


OmegaConf.register_new_resolver("specbench_jobdir", job_dirname, replace=True)
OmegaConf.register_new_resolver("specbench_uid", lambda: uuid.uuid4().hex[:6], use_cache=True, replace=True)
