"""The dataset registry and the readers its loaders share.

``@dataset(name, kind=..., options={...})`` registers a loader ``fn(spec) -> rows`` in ``DATASETS``
with its kind (``KINDS``: instruct prompts get the chat template, completion prompts are fed raw)
and its own options with their defaults, and stores its config option ``dataset=<name>``: the
``COMMON`` keys and those options (``core.options``: Hydra's ConfigStore, no YAML; an unknown key
is refused).  ``kind`` (null: the registered kind) is no part of a job's identity while unset,
unless the loader declares it among its own options (``identity``).  The loaders
themselves, and the entry point ``load_prompts``, are in `specbench.inputs.data`, which registers
them on import: read ``DATASETS`` through that module.  A loader reads a typed ``DatasetSpec``
(the keys every dataset has, checked once, plus the loader's own keys).  The readers:
JSON-lines files with one-line errors (``read_jsonl``, ``rows_from_jsonl``) and our packaged
prompt files (``packaged``).

Imports: ``core.options`` (Hydra's ConfigStore), ``core.jsonl``, ``core.registry``.
"""

from __future__ import annotations

import importlib.resources
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import options as config_options
from ..core.jsonl import json_objects
from ..core.registry import Registry

COMMON = ("name", "limit", "max_prompt_tokens", "kind")  # the keys every dataset config has (DatasetSpec's fields)
UNSET = ("kind",)  # common keys no part of a job's identity while null (unless a loader's own option)
KINDS = ("instruct", "completion")  # instruct: chat template applied; completion: raw text
Rows = list[tuple[str, str, str]]  # (prompt id, text, category)


@dataclass(frozen=True)
class DatasetSpec:
    """What a loader reads: the keys every dataset has, typed and checked once (``of``), and the
    loader's own keys (``path``, ``tasks``, ``per_file``, ...) in ``options``, read with ``get``."""

    name: str
    limit: int | None = None
    max_prompt_tokens: int | None = None
    kind: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, keys: Mapping[str, Any]) -> DatasetSpec:
        """The spec of a dataset config's keys, or a one-line ValueError naming the key."""
        name = keys.get("name")
        if not name:
            raise ValueError("dataset config has no name; pick one with dataset=<name>")
        limit, mpt, kind = keys.get("limit"), keys.get("max_prompt_tokens"), keys.get("kind")
        for key, v in (("limit", limit), ("max_prompt_tokens", mpt)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(
                    f"dataset {name}: dataset.{key}={v} is invalid; use a positive integer or null for all"
                )
        if kind is not None and kind not in KINDS:
            raise ValueError(
                f"dataset {name}: dataset.kind={kind}; set dataset.kind to one of "
                f"{', '.join(KINDS)} (instruct wraps prompts in the chat template)"
            )
        return cls(str(name), limit, mpt, kind, {k: v for k, v in keys.items() if k not in COMMON})

    def get(self, key: str, default: Any = None) -> Any:
        """A key of the dataset config (typed field or loader option), or ``default`` where absent or None."""
        value = getattr(self, key) if key in COMMON else self.options.get(key)
        return default if value is None else value


@dataclass(frozen=True)
class DatasetLoader:
    """A registered dataset: its loader ``load(spec) -> rows``, its declared kind and its own
    options (``path``, ``tasks``, ...) with their defaults."""

    load: Callable[[DatasetSpec], Rows]
    kind: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"dataset kind '{self.kind}' is not one of {', '.join(KINDS)}")

    def __call__(self, spec: DatasetSpec) -> Rows:
        return self.load(spec)

    def schema(self, name: str) -> dict[str, Any]:
        """The keys and defaults of its config option: ``COMMON`` (null) and its own options."""
        return {**dict.fromkeys(COMMON), "name": name, **self.options}

    def identity(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """``config`` less the ``UNSET`` keys left null that are not its own options."""
        return {k: v for k, v in config.items() if not (k in UNSET and v is None and k not in self.options)}


DATASETS: Registry[DatasetLoader] = Registry("dataset")


Loader = Callable[[DatasetSpec], Rows]


def dataset(name: str, kind: str, options: Mapping[str, Any] | None = None) -> Callable[[Loader], Loader]:
    """Register ``fn(spec: DatasetSpec) -> rows`` as dataset ``name`` of ``kind`` (instruct |
    completion) with its own ``options`` ({key: default}) and store its config option."""

    def deco(fn: Loader) -> Loader:
        loader = DATASETS.add(name, DatasetLoader(fn, kind, dict(options or {})))
        config_options.store("dataset", name, loader.schema(name))
        return fn

    return deco


def identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """A dataset config as its job's identity: less the ``UNSET`` keys left null (a registered
    dataset's, ``DatasetLoader.identity``)."""
    name = str(config.get("name"))
    return DATASETS.get(name).identity(config) if name in DATASETS else dict(config)


def read_jsonl(path: Path | str, opener=open) -> Iterable[tuple[int, dict]]:
    try:
        yield from _jsonl_rows(path, opener)
    except UnicodeDecodeError as exc:
        raise ValueError(f"dataset.path: {path} is not UTF-8 text ({exc.reason}); save the file as UTF-8") from None


def _jsonl_rows(path: Path | str, opener=open) -> Iterable[tuple[int, dict]]:
    with opener(path, "rt", encoding="utf-8") as fh:
        yield from json_objects(
            fh, str(path), "fix the line or point dataset.path at a JSON-lines file", '{"id": "...", "text": "..."}'
        )


def rows_from_jsonl(path: Path | str, default_task: str, opener=open) -> list[tuple[str, str, str]]:
    out, seen = [], set()
    for lineno, row in read_jsonl(path, opener):
        missing = [k for k in ("id", "text") if k not in row]
        if missing:
            raise ValueError(
                f'{path}:{lineno}: missing key(s) {", ".join(missing)}; every line needs {{"id": ..., "text": ...}}'
            )
        pid = str(row["id"])
        if pid in seen:
            raise ValueError(f"{path}:{lineno}: duplicate id '{pid}'; ids must be unique")
        seen.add(pid)
        if not isinstance(row["text"], str):
            raise ValueError(
                f'{path}:{lineno}: "text" is {json.dumps(row["text"])}, not a string; give each prompt its text'
            )
        out.append((pid, row["text"], str(row.get("task") or default_task)))
    return out


def packaged(filename: str) -> Path:
    return Path(str(importlib.resources.files("specbench.inputs.prompts").joinpath(filename)))
