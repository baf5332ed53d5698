"""Command-line checks of ``python -m specbench.run`` before Hydra starts, and the one-line
form of what Hydra itself raises.

* ``check_argv(argv)``: a ``plugins`` module that cannot be imported, an unknown group option
  (``tree=bnary``), an unknown key (``foo=1``, ``+foo=1``, ``tree.widht=3``,
  ``+tree.widht=3``: Hydra would print six lines or, with a ``+``, run it silently under a
  new hash), or an out_root / ``hydra.run.dir`` / ``hydra.sweep.dir`` that cannot be
  written: one line naming the key and the fix, exit status 2, nothing created.  A group
  option's keys are its schema as Hydra composes it (``option_keys``): a tree policy's, verify
  mode's or dataset's registry entry's, a pair's its drafter's (``core.options``, stored when
  the registries and plugins are imported, which happens first).  Group options are the
  ConfigStore's and the files in conf/ or a ``file://`` folder of a ``hydra.searchpath=[...]``
  override (a plugin's pairs, ``study.job.plugins``).
* ``run_hydra(main)``: runs a Hydra app; an OSError (a full or read-only disk at
  a folder or file Hydra writes) or a Hydra composition error becomes one line
  naming the path or key, exit status 1 or 2 (``HYDRA_FULL_ERROR=1`` keeps the
  full traceback of anything but an OSError); a key a group's schema lacks is named with
  the fix and the valid keys (``schema_line``), as ``check_argv`` names it.

Imports: yaml, hydra's override parser, compose API and errors, ``core.options``, ``study.job.plugins``;
``study.job.jobspec`` (the registries) when the plugins are checked.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile

import yaml

from ... import CONF_DIR
from ...core.options import closest, is_node, not_a_parameter, schema_keys, stored
from .errors import ConfigError
from .plugins import KEY, config_dirs, import_plugins, import_registries
from .schema import fields

GROUPS = ("pair", "tree", "verify", "dataset", "sweep")
DIR_KEYS = ("out_root", "hydra.run.dir", "hydra.sweep.dir")
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
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

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


def top_keys() -> set[str]:
    cfg = _yaml(os.path.join(CONF_DIR, "config.yaml"))
    return (set(cfg) - {"defaults"}) | set(GROUPS) | {"hydra", "replay_cache"}


def option_keys(group: str, option: str, argv) -> tuple[str, list[str]] | None:
    """(the option's name, its keys) of ``group=option`` as Hydra composes it (its node's schema,
    ``study.job.schema.fields``, with ``argv``'s search path); None where it extends no schema or
    does not compose (Hydra then says why in one line, ``run_hydra``)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

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
    dirs = search_dirs(argv)
    for arg in argv:
        group, eq, value = arg.lstrip("+~").partition("=")
        if not eq or group not in GROUPS or dirs is None:
            continue
        valid = options(group, dirs)
        for v in value.split(","):
            if v and v not in valid:
                fail(f"unknown {group} '{v}'. Valid: {', '.join(valid)}")


def check_keys(argv, extra=(), top: set[str] | None = None) -> None:
    """A key that no config holds is refused, with or without ``+``: the ONE check of top-level
    keys; a group key is checked against the chosen option's schema (``option_keys``).  With a
    sweep preset, which may pick other options, every job's config is checked against its
    schemas (Hydra's, ``schema_line``; a ``+`` key, ``jobspec.resolved``).  ``extra``: the
    command's own top-level keys (``study.tools.costs``' ``costs_*``); ``top``: the valid top-level
    keys of another config (``attention_bench``, which has no groups; default conf/config.yaml's)."""
    groups = GROUPS[:4] if top is None else ()
    top = (top_keys() if top is None else set(top)) | set(extra)
    sweep = any(a.lstrip("+~").startswith("sweep=") for a in argv)  # a preset may pick the options
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key = arg.partition("=")[0].lstrip("+~")
        head, _, rest = key.partition(".")
        if head == "hydra" or "/" in key:
            continue
        if head not in top:
            fail(
                f"{key}: no such key{closest(head, top)}; remove it (a + does not add keys to a job); "
                f"valid top-level keys: {', '.join(sorted(top))}"
            )
        if head in groups and rest:
            name = rest.split(".")[0]
            if sweep:  # the preset picks the options: a key no option of the group has is refused
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


def schema_line(e: BaseException) -> str | None:
    """The one line for a Hydra error whose cause is a key a group's schema lacks (its node's
    type is named ``group=option`` or ``pair.drafter=name``, ``core.options.node``); None for
    any other error."""
    cause = e.__cause__
    kind = getattr(cause, "object_type", None)
    key = getattr(cause, "key", None)
    if key is None or not is_node(kind):
        return None
    full = str(getattr(cause, "full_key", "") or "")  # pair.draft.foo: a nested node's key
    group = kind.__name__.partition("=")[0].partition(".")[0]
    name = full if full.endswith(f".{key}") else f"{group}.{key}"
    return not_a_parameter(name, kind.__name__, [f.name for f in dataclasses.fields(kind)])


PROBE_BYTES = 1 << 16  # room for Hydra's multirun.yaml (non-atomic) and a job's first files


def probe_write(folder: str) -> OSError | None:
    """Whether PROBE_BYTES can be written (and synced) in folder: a (nearly) full disk says so
    here, before Hydra starts writing."""
    try:
        with tempfile.TemporaryFile(dir=folder) as fh:
            fh.write(b"\0" * PROBE_BYTES)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as e:
        return e
    return None


def check_dirs(argv) -> None:
    """out_root, hydra.run.dir and hydra.sweep.dir must be (or be creatable as) writable folders
    with room for a file."""
    given = {k: "outputs" if k == "out_root" else None for k in DIR_KEYS}
    for arg in argv:
        key, eq, value = arg.lstrip("+~").partition("=")
        if eq and key in given and "${" not in value:
            given[key] = value
    for key, root in given.items():
        if root is None:
            continue
        probe = os.path.abspath(os.path.expanduser(root))
        while not os.path.exists(probe):
            probe = os.path.dirname(probe)
        if not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK):
            why = "is not a directory" if not os.path.isdir(probe) else "is not writable"
            fail(f"{key}={root}: {probe} {why}; point {key} at a writable folder")
        if (e := probe_write(probe)) is not None:
            fail(f"{key}={root}: {probe}: {e.strerror}; free space or point {key} at another folder")
        WRITES.append(root)


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


def check_out(path: str, key: str) -> None:
    """An output file's folder must be (or be creatable as) a writable folder with room for a
    file, and the file itself no folder: one line naming ``key`` before any model loads or measurement."""
    if os.path.isdir(path):
        fail(
            f"{key}={path}: is a folder; give a file path (e.g. {key}={os.path.join(path, os.path.basename(path) or 'out')}.csv)"
        )
    probe = os.path.abspath(os.path.expanduser(os.path.dirname(path) or "."))
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK):
        fail(f"{key}={path}: {probe} {'is not writable' if os.path.isdir(probe) else 'is not a directory'}; "
             f"point {key} at a writable folder")  # fmt: skip
    if (e := probe_write(probe)) is not None:
        fail(f"{key}={path}: {probe}: {e.strerror}; free space or point {key} at another folder")


def run_hydra(main) -> None:
    """``main()`` (a ``@hydra.main`` app) with OSErrors and Hydra's own errors as one line."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from ...core.atomic import command

    command(main.__module__.rsplit(".", 1)[-1])  # the files this command stages (and cleans)
    user_full = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises; we print the one line
    try:
        main()
    except (HydraException, OmegaConfBaseException) as e:  # before OSError: a missing config is both
        if user_full:
            raise
        line = schema_line(e) or (str(e).strip().splitlines() or [type(e).__name__])[0]
        if line.startswith("Ambiguous value"):
            line += ": add -m to sweep over the values, or write key=[a,b] for a list"
        fail(line)
    except OSError as e:
        from ...core.atomic import os_line

        fail(os_line(e, " / ".join(WRITES) or "the output folder", "out_root (or hydra.run.dir)"), 1)
    finally:
        if not user_full:
            os.environ.pop("HYDRA_FULL_ERROR", None)
