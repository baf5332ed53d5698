"""User modules a run imports before it resolves any registry name: ``plugins=[my.module]``.

A plugin is one importable module (on ``PYTHONPATH``) that registers entries the way
docs/extending.md's table says: a shape (``@static_shape``), a verify mode
(``register(ModeSpec(...))``), a drafter (``@DRAFTERS.register``), a dataset
(``@dataset``).  A shape's, mode's or dataset's option is its registered schema, no file
(``core.options``); a pair is a file in a config folder of the user's, added with
``hydra.searchpath=[file:///path/to/conf]`` (``pair/NAME.yaml``, extending its drafter's schema
``/schema/pair/<drafter>@_here_``).

* ``import_plugins(names)``: imports each (once per process; Python caches modules); one
  that cannot be imported is a one-line ``ConfigError`` naming the key and the fix.
  ``jobspec.from_config`` calls it before it reads any group, so every job process (a
  joblib or submitit worker too) and every tool that reads a job (calibrate, lossless,
  costs) imports them before any registry lookup; ``argv.check_argv`` calls it before
  Hydra starts, so a bad name fails before any folder is created.
* Identity: ``plugins`` is not part of the config hash (``jobspec.NOT_IDENTITY``), so
  the key leaves every existing job's hash as it was.  A plugin's code is not hashed, as
  specbench's own code is not; the names and parameters of what it registers enter the
  hash through ``tree``, ``verify``, ``pair`` and ``dataset`` like any built-in's (and a
  plugin dataset's prompts through the dataset fingerprint).  A job rerun after its
  plugin's code changed needs ``resume=false`` or another ``out_root``.
* ``config_dirs(searchpath)``: conf/ and the ``file://`` folders of a ``hydra.searchpath``,
  where the command-line checks find a group's option files.
* ``import_registries()``: the built-in tree policies, verify modes, drafters and datasets,
  whose registration stores their config options and schemas in Hydra's ConfigStore
  (``core.options``): imported before anything composes a config or lists a group's options.

Imports: importlib, ``specbench.CONF_DIR``, ``study.job.errors``; the registries (torch) when called.
"""

from __future__ import annotations

import importlib
import os
import re

from ... import CONF_DIR
from .errors import ConfigError

KEY = "plugins"
MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")  # a dotted module name, never a path


def plugin_names(value) -> list[str]:
    """The module names of a ``plugins`` value (a list, one name, or null)."""
    names = [] if value is None else [value] if isinstance(value, str) else value
    ok = isinstance(names, (list, tuple)) and all(isinstance(n, str) and MODULE.fullmatch(n.strip()) for n in names)
    if not ok or len({n.strip() for n in names}) != len(names):
        raise ConfigError(
            f"{KEY}={value!r}: must be a list of importable module names (distinct, dotted, not file paths), "
            f"e.g. {KEY}=[my_pkg.my_entries]"
        )
    return [n.strip() for n in names]


def import_plugins(value) -> tuple[str, ...]:
    """Import every module of a ``plugins`` value (see the module docstring); returns the names."""
    names = plugin_names(value)
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise ConfigError(
                f"{KEY}=[{','.join(names)}]: cannot import {name} ({e}); put its folder on "
                f"PYTHONPATH or fix the name (a module name, e.g. my_pkg.my_entries, not a "
                f"file path)"
            ) from None
    return tuple(names)


def import_registries() -> None:
    """Import the tree-policy, verify-mode, drafter and dataset registries (see the module docstring)."""
    from ...drafting import drafters  # noqa: F401  (heavy: torch, once a config is composed; collect imports describe)
    from ...inputs import data  # noqa: F401  (heavy: hydra's ConfigStore; collect imports no hydra)
    from ...trees import policies  # noqa: F401  (heavy: torch, as drafters above)
    from ...verify import modes  # noqa: F401  (heavy: torch, as drafters above)


def searchpath_dirs(entries) -> list[str] | None:
    """The folders of ``hydra.searchpath`` entries; None where one is not a ``file://`` folder
    (a ``pkg://`` entry: only Hydra can tell what it holds)."""
    out = []
    for entry in entries or []:
        path = str(entry).removeprefix("file://")
        if "://" in path:
            return None
        out.append(os.path.abspath(os.path.expanduser(path)))
    return out


def config_dirs(searchpath=()) -> list[str] | None:
    """conf/ and the ``file://`` folders of ``searchpath`` (None: see ``searchpath_dirs``)."""
    extra = searchpath_dirs(searchpath)
    return None if extra is None else [CONF_DIR, *extra]


def option_file(group: str, option: str, dirs=None) -> str | None:
    """The file of ``group=option`` in conf/ or (``dirs``) the search path's folders, else None."""
    for d in dirs or [CONF_DIR]:
        path = os.path.join(d, group, f"{option}.yaml")
        if os.path.isfile(path):
            return path
    return None
