"""The dataset registry and the readers its loaders share.

``@dataset(name, kind=...)`` registers a loader ``fn(spec) -> rows`` in ``DATASETS`` with its kind
(``KINDS``: instruct prompts get the chat template, completion prompts are fed raw).  The loaders
themselves, and the entry point ``load_prompts``, are in `specbench.inputs.data`, which registers
them on import: read ``DATASETS`` through that module.  The readers: a spec's keys (``spec_get``),
JSON-lines files with one-line errors (``read_jsonl``, ``rows_from_jsonl``) and our packaged
prompt files (``packaged``).
"""

from __future__ import annotations

import importlib.resources
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.registry import Registry

KINDS = ("instruct", "completion")  # instruct: chat template applied; completion: raw text
Rows = list[tuple[str, str, str]]  # (prompt id, text, category)


@dataclass(frozen=True)
class DatasetLoader:
    """A registered dataset: its loader ``load(spec) -> rows`` and its declared kind."""

    load: Callable[[Any], Rows]
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"dataset kind '{self.kind}' is not one of {', '.join(KINDS)}")

    def __call__(self, spec) -> Rows:
        return self.load(spec)


DATASETS: Registry[DatasetLoader] = Registry("dataset")


def dataset(name: str, kind: str) -> Callable[[Callable[[Any], Rows]], Callable[[Any], Rows]]:
    """Register ``fn(spec) -> rows`` as dataset ``name`` of ``kind`` (instruct | completion)."""

    def deco(fn: Callable[[Any], Rows]) -> Callable[[Any], Rows]:
        DATASETS.add(name, DatasetLoader(fn, kind))
        return fn

    return deco


def spec_get(spec: Mapping[str, Any] | None, key: str, default: Any = None) -> Any:
    """``spec[key]``, or ``default`` where the key is absent or None."""
    value = None if spec is None else spec.get(key, default)
    return default if value is None else value


def read_jsonl(path: Path | str, opener=open) -> Iterable[tuple[int, dict]]:
    try:
        yield from _jsonl_rows(path, opener)
    except UnicodeDecodeError as exc:
        raise ValueError(f"dataset.path: {path} is not UTF-8 text ({exc.reason}); save the file as UTF-8") from None


def _jsonl_rows(path: Path | str, opener=open) -> Iterable[tuple[int, dict]]:
    with opener(path, "rt", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"{path}:{lineno}: not valid JSON ({exc.msg}); "
                    "fix the line or point dataset.path at a JSON-lines file"
                ) from None
            if not isinstance(row, dict):
                raise ValueError(f'{path}:{lineno}: expected a JSON object like {{"id": "...", "text": "..."}}')
            yield lineno, row


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
        out.append((pid, str(row["text"]), str(row.get("task") or default_task)))
    return out


def packaged(filename: str) -> Path:
    return Path(str(importlib.resources.files("specbench.inputs.prompts").joinpath(filename)))
