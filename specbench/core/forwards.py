"""The tokens each model's forwards process, counted per model: what a step of ``bash run_all.sh``
asked of the machine, so its wall time can sit beside its compute ceiling (``study.tools.ceiling``).

* ``count(model, name)``: from now on every forward of ``model`` adds one to ``FORWARDS[name]``
  and its tokens (``input_ids``: batch x length, padding included) to ``TOKENS[name]``.  A module
  copied from a counted one (the layer-skip drafter's view of the target) shares its hook and
  counts under the name it is given.
* Where ``SPECBENCH_FORWARDS`` names a CSV, the process appends one ``run,step,model,forwards,tokens``
  row per model when it exits (``SPECBENCH_RUN`` and ``SPECBENCH_STEP``, which run_all.sh sets).

Imports: the standard library only (the hook reads a tensor's shape).
"""

from __future__ import annotations

import atexit
import collections
import csv
import os
from typing import Any

TOKENS: collections.Counter[str] = collections.Counter()
FORWARDS: collections.Counter[str] = collections.Counter()
NAME = "_specbench_forward_name"  # the attribute a counted module carries its name in
COLUMNS = ["run", "step", "model", "forwards", "tokens"]


def _hook(module: Any, args: tuple, kwargs: dict) -> None:
    ids: Any = kwargs.get("input_ids", args[0] if args else None)
    if ids is None:
        ids = kwargs.get("inputs_embeds")
    name = getattr(module, NAME, None)  # None: a module that shares a counted one's hooks, not counted
    if name is not None and getattr(ids, "ndim", 0) >= 2:
        FORWARDS[name] += 1
        TOKENS[name] += int(ids.shape[0]) * int(ids.shape[1])


def count(model: Any, name: str) -> None:
    """Count ``model``'s forward tokens under ``name`` (once hooked, only renamed).  A shallow copy
    of a module shares its hook table, so the hook is looked for there, not in a flag."""
    setattr(model, NAME, name)
    if _hook not in model._forward_pre_hooks.values():
        model.register_forward_pre_hook(_hook, with_kwargs=True)


def _write() -> None:
    path = os.environ.get("SPECBENCH_FORWARDS")
    if not path or not TOKENS:
        return
    run, step = os.environ.get("SPECBENCH_RUN", ""), os.environ.get("SPECBENCH_STEP", "")
    new = not os.path.exists(path)
    with open(path, "a", newline="") as fh:  # one append per process, at its exit
        w = csv.writer(fh)
        if new:
            w.writerow(COLUMNS)
        w.writerows([run, step, model, FORWARDS[model], n] for model, n in sorted(TOKENS.items()))


atexit.register(_write)
