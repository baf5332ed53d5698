"""A Hydra app's command line around Hydra, and Hydra's own errors as the project's one line (the key
and the fix, exit status 2, no folder written).

* ``run_hydra(main)``: Hydra composes the config once and refuses, before any folder, a key the config
  lacks without ``+`` (``foo=1``) or a key a group option's schema lacks (``tree.widht=3``,
  ``core.options``); each, and an unknown group option, becomes one line (``hydra_line``); an OSError
  (a full or read-only disk where Hydra writes) one line naming the path, exit status 1.
* ``check_argv(argv)``, before Hydra starts, what Hydra does not check before it writes: a ``plugins``
  module that cannot be imported (first: its entries are options); each group option, in the command
  line's order (Hydra checks a sweep's options per job, in its sweep folder); a ``+`` key no config
  holds (Hydra adds it under a new hash): top-level against conf/config.yaml, a group's against the
  chosen option's schema as Hydra composes it (``option_keys``) or, under a sweep preset, every
  option's; an out_root / ``hydra.run.dir`` / ``hydra.sweep.dir`` that cannot be written.

Imports: yaml, hydra, ``core.options``, ``study.job.plugins``, ``study.job.schema``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys

import yaml
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from ... import CONF_DIR
from ...core.args import check_out, check_writable  # noqa: F401  (check_out: the study commands import it from here)
from ...core.atomic import command, os_line
from ...core.options import closest, is_node, not_a_parameter, schema_keys, stored
from .errors import ConfigError
from .plugins import KEY, config_dirs, import_plugins, import_registries
from .schema import fields

GROUPS = ("pair", "tree", "verify", "dataset", "sweep")
DIR_KEYS = ("out_root", "hydra.run.dir", "hydra.sweep.dir", "replay_cache")  # folders a job writes
WRITES: list[str] = []  # the folders check_dirs accepted (named if Hydra's write fails later)


def fail(msg: str, code: int = 2):
    print(f"specbench: error: {msg}", file=sys.stderr)
    sys.exit(code)


def options(group: str, dirs=None) -> list[str]:
    """The options of ``group``: the registries' (ConfigStore) and the files in conf/ or (``dirs``)
    the search path's folders."""
    import_registries()
    folders = [os.path.join(d, group) for d in dirs or [CONF_DIR]]
    files = {f[:-5] for d in folders if os.path.isdir(d) for f in os.listdir(d) if f.endswith(".yaml")}
    return sorted(files | set(stored(group)))


def override_value(argv, key: str, default=None):
    """The value of the last ``key=...`` override (Hydra's grammar: ``[a,b]`` is a list);
    ``default`` if none, None if it is a sweep (``a,b``)."""
    for arg in reversed(argv):
        if arg.lstrip("+~").partition("=")[0] == key and "=" in arg:
            try:
                o = OverridesParser.create().parse_override(arg)
            except HydraException:
                return default  # Hydra reports it in one line (run_hydra)
            return None if o.is_sweep_override() else o.value()
    return default


def search_dirs(argv) -> list[str] | None:
    """conf/ and the folders of a ``hydra.searchpath`` override (None: a ``pkg://`` entry)."""
    value = override_value(argv, "hydra.searchpath", [])
    return config_dirs(value if isinstance(value, list) else [value])


def _yaml(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh) or {}


def defaults() -> dict:
    """{group: default option} and the top-level keys of conf/config.yaml."""
    cfg = _yaml(os.path.join(CONF_DIR, "config.yaml"))
    out = {}
    for item in cfg.get("defaults", []):
        if isinstance(item, dict):
            for k, v in item.items():
                out[k.split(" ")[-1]] = v
    return out


def top_keys(config: str = "config") -> set[str]:
    """The top-level keys a command line may set: conf/<config>.yaml's (its ``defaults`` list aside) and hydra;
    the study's config adds its groups and ``replay_cache`` (``attention_bench`` has neither)."""
    keys = (set(_yaml(os.path.join(CONF_DIR, f"{config}.yaml"))) - {"defaults"}) | {"hydra"}
    return (keys | set(GROUPS) | {"replay_cache"}) if config == "config" else keys


def option_keys(group: str, option: str, argv) -> tuple[str, list[str]] | None:
    """(the option's name, its keys) of ``group=option`` as Hydra composes it (its node's schema,
    ``study.job.schema.fields``, with ``argv``'s search path); None where it extends no schema or
    does not compose (Hydra then says why in one line, ``run_hydra``)."""
    import_registries()
    # the search path, and a pair's drafter where the command line sets it (its schema: the drafter's)
    keep = ("hydra.searchpath=", "pair.drafter=") if group == "pair" else ("hydra.searchpath=",)
    given = [a for a in argv if a.startswith(keep) and "," not in a.partition("=")[2]]
    try:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose("config", overrides=[f"{group}={option}", *given])
    except (HydraException, OmegaConfBaseException):
        return None
    known = fields(group, cfg[group])
    return None if known is None else (known[0], [f.name for f in dataclasses.fields(known[1])])


def chosen(argv, group: str) -> list[str]:
    """The option(s) of ``group`` on the command line (a sweep's list), else the default."""
    for arg in reversed(argv):
        key, eq, value = arg.lstrip("+~").partition("=")
        if eq and key == group:
            return [v for v in value.split(",") if v]
    default = defaults().get(group)
    return [default] if default else []


def check_groups(argv) -> None:
    """Each group option on the command line is one of its group's, in the command line's order (Hydra
    names one missing option of its defaults list and checks a sweep's per job, once the sweep folder
    is written)."""
    dirs = search_dirs(argv)
    for arg in argv:
        group, eq, value = arg.lstrip("+~").partition("=")
        if not eq or group not in GROUPS or dirs is None:
            continue
        valid = options(group, dirs)
        for v in value.split(","):
            if v and v not in valid:
                fail(unknown_option(group, v, valid))


def unknown_option(group: str, option: str, valid) -> str:
    return f"unknown {group} '{option}'. Valid: {', '.join(valid)}"


def no_such_key(key: str, valid) -> str:
    """The one line for a top-level key no config holds."""
    head = key.partition(".")[0]
    return (
        f"{key}: no such key{closest(head, valid)}; remove it (a + does not add keys to a job); "
        f"valid top-level keys: {', '.join(sorted(valid))}"
    )


def check_keys(argv, extra=(), top: set[str] | None = None) -> None:
    """A ``+`` key that no config holds is refused (without ``+``, Hydra refuses it: ``hydra_line``): a
    top-level one against the config's keys, a group key against the chosen option's schema
    (``option_keys``) or, under a sweep preset, which may pick other options, against every option
    of the group (a key some option has is left to its jobs: ``jobspec.resolved``).  ``extra``: the
    command's own top-level keys (``study.tools.costs``' ``costs_*``); ``top``: the valid top-level keys
    of another config (``top_keys("attention_bench")``, which has no groups; default conf/config.yaml's)."""
    groups = GROUPS[:4] if top is None else ()
    top = (top_keys() if top is None else set(top)) | set(extra)
    sweep = any(a.lstrip("+~").startswith("sweep=") for a in argv)  # a preset may pick the options
    for arg in argv:
        if not arg.startswith("+") or "=" not in arg:
            continue
        key = arg.partition("=")[0].lstrip("+")
        head, _, rest = key.partition(".")
        if head == "hydra" or "/" in key:
            continue
        if head not in top:
            fail(no_such_key(key, top))
        if head in groups and rest:
            name = rest.split(".")[0]
            if sweep:
                union = any_option_keys(head)
                if union and name not in union:
                    fail(not_a_parameter(f"{head}.{name}", f"any {head} option", union))
                continue
            for option in chosen(argv, head):
                known = option_keys(head, option, argv)
                if known is not None and name not in known[1]:
                    fail(not_a_parameter(f"{head}.{name}", *known))


def any_option_keys(group: str) -> set[str]:
    """The keys of every schema stored for ``group`` (its entries', a pair's drafters')."""
    import_registries()
    return {k for name in stored(f"schema/{group}") for k in schema_keys(group, name) or ()}


MISSING_OPTION = re.compile(r"Could not find '(\w+)/([^']+)'")


def hydra_line(e: BaseException) -> str:
    """The one line for an error Hydra raised composing the config: an unknown group option with its
    group's options, a key a group's schema lacks (its node's type is named ``group=option`` or
    ``pair.drafter=name``, ``core.options.node``) with the fix and the valid keys, a top-level key
    the config lacks (``no_such_key``); else Hydra's first line."""
    text = str(e).strip()
    if m := MISSING_OPTION.search(text):  # "Available options in 'tree':" then one per line
        return unknown_option(m[1], m[2], re.findall(r"^\t(\S+)$", text, flags=re.M))
    cause = e.__cause__
    kind = getattr(cause, "object_type", None)
    key = getattr(cause, "key", None)
    if key is not None and is_node(kind):
        full = str(getattr(cause, "full_key", "") or "")  # pair.draft.foo: a nested node's key
        group = kind.__name__.partition("=")[0].partition(".")[0]
        name = full if full.endswith(f".{key}") else f"{group}.{key}"
        return not_a_parameter(name, kind.__name__, [f.name for f in dataclasses.fields(kind)])
    parent = getattr(cause, "parent_node", None)
    if key is not None and parent is not None and parent._get_parent() is None:  # the config's root
        return no_such_key(str(key), [str(k) for k in parent])
    line = (text.splitlines() or [type(e).__name__])[0]
    if line.startswith("Ambiguous value"):
        line += ": add -m to sweep over the values, or write key=[a,b] for a list"
    return line


def check_dirs(argv, keys=DIR_KEYS) -> None:
    """out_root, hydra.run.dir and hydra.sweep.dir (``keys``: the command's) must be (or be creatable as)
    writable folders with room for a file; hydra.sweep.subdir (a job's folder) stays inside hydra.sweep.dir."""
    given = {k: "outputs" if k == "out_root" else None for k in keys}
    for arg in argv:
        key, eq, value = arg.lstrip("+~").partition("=")
        if eq and key in given and "${" not in value:
            given[key] = value
    for key, root in given.items():
        if root is not None:
            check_writable(key, root, root)
            WRITES.append(root)
    sub = override_value(argv, "hydra.sweep.subdir")
    if isinstance(sub, str) and "${" not in sub and "hydra.sweep.dir" in given:
        inner = os.path.normpath(sub)
        if os.path.isabs(inner) or inner == ".." or inner.startswith(".." + os.sep):
            fail(f"hydra.sweep.subdir={sub}: leaves the sweep folder (hydra.sweep.dir); give a relative path inside it")
        sweep = given["hydra.sweep.dir"] or os.path.join(str(given.get("out_root")), "multirun")  # config.yaml's
        check_writable("hydra.sweep.subdir", sub, os.path.join(sweep, inner))


def check_plugins(argv) -> None:
    """A ``plugins=[...]`` module that cannot be imported: one line now (``study.job.plugins``)."""
    value = override_value(argv, KEY)
    try:
        import_plugins(value)
    except ConfigError as e:
        fail(str(e))


def check_argv(argv, extra=()) -> None:
    """Everything about the command line that needs no composed config (see the docstring);
    ``extra``: the command's own top-level keys.  The plugins first: their entries are options."""
    check_plugins(argv)
    check_groups(argv)
    check_keys(argv, extra)
    check_dirs(argv)


def run_hydra(main) -> None:
    """``main()`` (a ``@hydra.main`` app) with OSErrors and Hydra's own errors as one line."""
    command(main.__module__.rsplit(".", 1)[-1])  # the files this command stages (and cleans)
    user_full = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises; we print the one line
    try:
        main()
    except (HydraException, OmegaConfBaseException) as e:  # before OSError: a missing config is both
        if user_full:
            raise
        fail(hydra_line(e))
    except OSError as e:
        fail(os_line(e, " / ".join(WRITES) or "the output folder", "out_root (or hydra.run.dir)"), 1)
    finally:
        if not user_full:
            os.environ.pop("HYDRA_FULL_ERROR", None)
