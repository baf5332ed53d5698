"""README.md and docs/*.md name only things that exist: every file path (``specbench/``, ``conf/``,
``scripts/``, ``results/``, ``tests/``, ``notebooks/``, ``docs/``), every ``specbench.x.y`` module,
every backticked ``module.name`` and ``name()``; every docs page is linked from README.md and every
relative link resolves.  No model loads: modules are imported, never run."""

from __future__ import annotations

import ast
import builtins
import glob
import importlib
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from conftest import DOC_FILES, ROOT

PKG = ROOT / "specbench"
LAYERS = ("core", "results", "trees", "verify", "drafting", "engine", "inputs", "study", "attention", "report")
# results/ files a command writes that the committed study does not hold: {path: the command}
GENERATED = {
    "results/served.csv": "python -m specbench.import_metrics",
    "results/default_run.json": "bash run_all.sh (the default run's record)",
    "results/acceptance_check.csv": "bash run_all.sh (the acceptance-sample check)",
}
# config groups whose keys read like module.attribute (`tree.budget`, `verify.paired_with`)
CONFIG_GROUPS = {"tree", "verify", "pair", "dataset", "hydra", "grids", "draft", "target", "sweep"}
# names in backticks that stand for something the reader writes (a placeholder), not a name of ours
PLACEHOLDERS = {"fn"}
PATH = re.compile(r"(?<![\w./-])((?:specbench|conf|scripts|results|tests|notebooks|docs)/[\w./*{},-]*)")
LAYER_PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(LAYERS)})/\w+\.py)")
MODULE = re.compile(r"(?<![\w./-])(specbench(?:\.\{[\w,]+\}|\.\w+)+)")
SPAN = re.compile(r"`([^`\n]+)`")
CALL = re.compile(r"(?<![\w.])@?([A-Za-z_][\w.]*)\(")
DOTTED = re.compile(r"^([A-Za-z_][\w/]*\.py)::([\w.]+)$|^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)$")


def texts() -> dict[Path, str]:
    return {p: p.read_text() for p in DOC_FILES}


def prose(text: str) -> str:
    """The text outside fenced code blocks (backticked names are checked in prose only)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def expand(ref: str) -> list[str]:
    """`specbench.{run,collect}` -> both names."""
    m = re.search(r"\{([^}]*)\}", ref)
    if not m:
        return [ref]
    return [x for alt in m.group(1).split(",") for x in expand(ref[: m.start()] + alt + ref[m.end() :])]


@cache
def tracked() -> frozenset[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return frozenset(out.splitlines())


def path_exists(ref: str) -> bool:
    ref = ref.split("::")[0].rstrip(".,;:)")
    if not ref:
        return True
    if "*" in ref:
        return bool(glob.glob(str(ROOT / ref)))
    if ref.startswith("results/") and ref.rstrip("/") != "results":
        return ref.rstrip("/") in tracked() or ref in GENERATED or any(t.startswith(ref) for t in tracked())
    return (ROOT / ref).exists()


@cache
def modules() -> dict[str, list[str]]:
    """{short name: dotted modules}: `loop` -> specbench.engine.loop, `trees` -> specbench.trees."""
    out: dict[str, list[str]] = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        out.setdefault(parts[-1], []).append(".".join(parts))
    return out


@cache
def defined() -> dict[str, list[str]]:
    """{top-level class or function name: the modules defining it}."""
    out: dict[str, list[str]] = {}
    for mods in modules().values():
        for mod in mods:
            path = ROOT / (mod.replace(".", "/") + ".py")
            path = path if path.exists() else ROOT / mod.replace(".", "/") / "__init__.py"
            for node in ast.parse(path.read_text()).body:
                targets = (
                    [node.name]
                    if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
                    else [
                        t.id
                        for t in getattr(node, "targets", [getattr(node, "target", None)])
                        if isinstance(t, ast.Name)
                    ]
                )
                for t in targets:
                    out.setdefault(t, []).append(mod)
    return out


def has(obj, name: str) -> bool:
    return hasattr(obj, name) or name in getattr(obj, "__dataclass_fields__", {})


def walk(obj, names: list[str]) -> bool:
    """``obj.a.b`` exists (a package's modules are imported on the way; a dataclass field counts)."""
    for i, name in enumerate(names):
        if hasattr(obj, name):
            obj = getattr(obj, name)
        elif hasattr(obj, "__path__"):
            try:
                obj = importlib.import_module(f"{obj.__name__}.{name}")
            except ImportError:
                return False
        else:
            return i == len(names) - 1 and name in getattr(obj, "__dataclass_fields__", {})
    return True


def resolve(parts: list[str]) -> bool | None:
    """True/False: the dotted name resolves or not; None: it does not start with a name of ours."""
    first, rest = parts[0], parts[1:]
    roots = [importlib.import_module(m) for m in modules().get(first, [])]
    roots += [getattr(importlib.import_module(m), first) for m in defined().get(first, [])]
    if not roots:
        return None
    return any(walk(obj, rest) for obj in roots)


def resolve_in_file(file: str, name: str) -> bool:
    """`engine/loop.py::step`, `loop.py::step`: the module the path names has ``name``."""
    stem = file.removesuffix(".py").removeprefix("specbench/")
    mods = [f"specbench.{stem.replace('/', '.')}"] if "/" in stem else modules().get(stem, [])
    return any(walk(importlib.import_module(mod), name.split(".")) for mod in mods)


def config_key_known(key: str) -> bool:
    """A config key (`tree.budget`) is a word that conf/ or the package spells somewhere."""
    word = re.compile(rf"\b{re.escape(key)}\b")
    return any(word.search(p.read_text()) for p in [*ROOT.glob("conf/**/*.yaml"), *PKG.rglob("*.py")])


def bad_names(text: str) -> list[str]:
    bad = []
    for span in SPAN.findall(prose(text)):
        for name in CALL.findall(span):
            if name in PLACEHOLDERS or hasattr(builtins, name):
                continue
            if "." not in name:
                if name not in defined():
                    bad.append(f"{name}()")
                continue
            if resolve(name.split(".")) is False:
                bad.append(f"{name}()")
        m = DOTTED.match(span.strip())
        if not m:
            continue
        if m.group(2):  # loop.py::step, core/kv.py::SlotKV.forward
            if resolve_in_file(m.group(1), m.group(2)) is False:
                bad.append(span)
            continue
        parts = m.group(3).split(".")
        if parts[-1] in {"py", "md", "csv", "yaml", "json", "jsonl", "png", "txt", "gz", "sh"}:
            continue
        ok = resolve(parts)
        if ok is None or ok:
            continue
        if parts[0] in CONFIG_GROUPS and config_key_known(parts[-1]):
            continue
        bad.append(span)
    return bad


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.name)
def test_every_path_named_exists(path):
    text = path.read_text()
    refs = {r for m in PATH.findall(text) for r in expand(m)}
    refs |= {f"specbench/{m}" for m in LAYER_PATH.findall(text)}
    missing = sorted(r for r in refs if not path_exists(r))
    assert missing == [], f"{path.name} names paths that do not exist: {missing}"


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.name)
def test_every_module_named_imports(path):
    missing = []
    for ref in {r for m in MODULE.findall(path.read_text()) for r in expand(m)}:
        parts = ref.split(".")
        for i in range(len(parts), 1, -1):  # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            if not all(has(obj, a) and (obj := getattr(obj, a, None)) is not None for a in parts[i:]):
                missing.append(ref)
            break
        else:
            missing.append(ref)
    assert missing == [], f"{path.name} names modules or attributes that do not exist: {sorted(missing)}"


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.name)
def test_every_backticked_function_and_attribute_exists(path):
    bad = bad_names(path.read_text())
    assert not bad, f"{path.name} names what does not exist: {bad}"


def test_every_docs_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    linked = {Path(t.split("#")[0]).as_posix() for t in re.findall(r"\]\(([^)\s]+)\)", readme)}
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")}
    assert pages and pages <= linked, sorted(pages - linked)


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.name)
def test_every_relative_link_resolves(path):
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (path.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert broken == [], f"{path.name}: {broken}"


def test_the_checker_catches_what_it_is_for():
    """A stale name of each kind is caught (so the tests above are not vacuous)."""
    assert not path_exists("specbench/engine/" + "nope.py") and not path_exists("results/nope.csv")
    assert path_exists("results/summary.csv") and path_exists("results/served.csv")
    assert bad_names("`loop.decode_prompts`, `nope_fn()`, `checks.validate`, `tree.budget`") == [
        "loop.decode_prompts",
        "nope_fn()",
    ]
    assert bad_names("`loop.py::step`, `loop.py::nope`") == ["loop.py::nope"]


def test_the_readme_stays_short_and_starts_with_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, len(lines)
    head = "\n".join(lines[:15])
    assert "bash run_all.sh" in head and "bash scripts/test.sh" in head


def test_the_architecture_page_lists_every_module():
    """docs/architecture.md names every module of each sub-package under its `sub/` heading."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    sections = dict(re.findall(r"^## `(\w+)/`\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M))
    sections[""] = text.split("## Top level", 1)[1].split("\n## ", 1)[0]
    missing = []
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG)
        sub, name = ("", rel.name) if len(rel.parts) == 1 else (rel.parts[0], "/".join(rel.parts[1:]))
        if name == "__init__.py" and sub:
            continue
        if f"`{name}`" not in sections.get(sub, ""):
            missing.append(str(rel))
    assert sorted(missing) == [], "docs/architecture.md does not list them"


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and "TYPE_CHECKING" in {getattr(test, "id", None), getattr(test, "attr", None)}


def imported_layers(sub: str) -> set[str]:
    """The sub-packages (or, for the top level, nothing) a sub-package's modules import; for a study
    package (``study/job``) also the study packages beside it that run (not an ``if TYPE_CHECKING:``)."""
    out = set()
    top = len(Path(sub).parts)  # 1: a layer, 2: a study package
    for p in (PKG / sub).rglob("*.py"):
        depth = len(p.relative_to(PKG / sub).parts)  # 1: sub/x.py, 2: sub/pkg/x.py
        tree = ast.parse(p.read_text())
        hidden = {id(n) for block in ast.walk(tree) if _type_checking(block) for n in ast.walk(block)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level == 0 and (node.module or "").startswith("specbench."):
                out.add(node.module.split(".")[1])
                if top == 2 and node.module.startswith("specbench.study.") and id(node) not in hidden:
                    out.add(node.module.split(".")[2])
            elif node.level == depth + top and node.module:
                out.add(node.module.split(".")[0])
            elif top == 2 and node.level == depth + 1 and node.module and id(node) not in hidden:
                out.add(node.module.split(".")[0])  # ..tools.plan: a study package beside this one
    if top == 1:
        return (out & set(LAYERS)) - {sub}
    return (out & {*LAYERS, *STUDY_PACKAGES}) - {"study", Path(sub).name}


STUDY_PACKAGES = ("job", "tools", "serving")  # study/'s packages, bottom to top


@pytest.mark.parametrize("sub", [*LAYERS, *(f"study/{s}" for s in STUDY_PACKAGES)])
def test_each_sub_package_docstring_names_what_it_imports(sub):
    """The ``Imports ...`` sentence of each sub-package's docstring names exactly the layers its
    modules import ("every layer below" for study; "nothing from specbench" for core); a study
    package's names the study packages it imports too."""
    doc = " ".join((ast.get_docstring(ast.parse((PKG / sub / "__init__.py").read_text())) or "").split())
    m = re.search(r"Imports ([^.]*(?:\.\w+[^.]*)*)\.(?:\s|$)", doc)
    assert m, f"specbench/{sub}/__init__.py: no 'Imports ...' sentence"
    claim = m.group(1)
    words = set(LAYERS) if sub in LAYERS else {*LAYERS, *STUDY_PACKAGES} - {"study"}
    named = {w for w in re.findall(r"\w+", claim) if w in words}
    if "every layer below" in claim:
        named |= {layer for layer in LAYERS[: LAYERS.index(sub)] if layer != "attention"}
    assert named == imported_layers(sub), (claim, sorted(imported_layers(sub)))
