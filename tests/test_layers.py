"""The package's shape: imports only go down the layers, every report module is named for the REPORT.md
section it serves or the job it does (the cohesion rule), and modules and functions stay within a
generous size bound."""

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "specbench"
# bottom to top (docs/architecture.md); attention/ sits beside study/
LAYER = {
    "core": 0,
    "results": 1,
    "trees": 2,
    "verify": 3,
    "drafting": 4,
    "engine": 5,
    "inputs": 6,
    "study": 7,
    "attention": 7,
    "report": 8,
}
# study/'s packages, bottom to top: the tools and the serving bridge import the job, never the reverse
STUDY = {"job": 0, "tools": 1, "serving": 2}
FILES = sorted(PKG.rglob("*.py"))


def _imported_layers(path: Path):
    """The sub-packages a module imports (relative or absolute), with the line of each import."""
    me = path.relative_to(PKG).parts
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 0 and (node.module or "").startswith("specbench."):
            yield node.module.split(".")[1], node.lineno
        elif node.level == len(me) > 1:  # up to specbench/: `..x` from a layer, `...x` from a package in it
            yield (node.module or "").split(".")[0], node.lineno


def _module(path: Path) -> str:
    """``specbench.results.files`` for specbench/results/files.py (a package: its __init__'s name)."""
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in FILES}


def _type_checking(node: ast.stmt) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and "TYPE_CHECKING" in {getattr(test, "id", None), getattr(test, "attr", None)}


def _imports(path: Path) -> set[str]:
    """The specbench modules ``path`` imports anywhere, at module level or inside a function (an
    ``if TYPE_CHECKING:`` block runs never: left out); ``from . import x`` of a module is that module."""
    me = _module(path)
    here = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out, todo = set(), list(ast.parse(path.read_text()).body)
    while todo:
        node = todo.pop()
        if _type_checking(node):
            todo.extend(node.orelse)
            continue
        todo.extend(n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt))
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            out.update(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names)
    return {m for m in out if m in MODULES and m != me}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    """No two specbench modules import each other, directly or through others, counting imports
    inside functions too (an import moved into a function to cut a circle still is one)."""
    assert not _circles({m: _imports(p) for m, p in MODULES.items()})


def test_the_circle_check_finds_one():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert "specbench.results.columns" in _imports(PKG / "study" / "job" / "jobfiles.py")


def test_every_sub_package_is_a_known_layer_with_a_docstring():
    subs = {p.parent.name for p in FILES if p.parent != PKG and p.parent.parent == PKG}
    assert subs == set(LAYER), subs ^ set(LAYER)
    for name in LAYER:
        assert ast.get_docstring(ast.parse((PKG / name / "__init__.py").read_text())), name


@pytest.mark.parametrize("path", [p for p in FILES if p.parent != PKG], ids=lambda p: str(p.relative_to(PKG)))
def test_imports_only_go_down(path):
    me = LAYER[path.relative_to(PKG).parts[0]]
    up = [(layer, line) for layer, line in _imported_layers(path) if layer in LAYER and LAYER[layer] > me]
    assert not up, f"{path.relative_to(PKG)} imports a higher layer: {up}"


def test_the_study_packages_import_only_down():
    """Inside study/: the job imports neither its tools nor the serving bridge, the tools import no
    serving module (an ``if TYPE_CHECKING:`` annotation import runs never: left out, ``_imports``)."""
    assert {p.parent.name for p in (PKG / "study").rglob("*.py") if p.parent != PKG / "study"} == set(STUDY)
    for path in (PKG / "study").rglob("*.py"):
        if path.parent == PKG / "study":
            continue
        me = STUDY[path.parent.name]
        up = sorted(m for m in _imports(path) if m.startswith("specbench.study.") and STUDY[m.split(".")[2]] > me)
        assert not up, f"{path.relative_to(PKG)} imports a higher study package: {up}"


def test_report_imports_no_model_code():
    """The report imports core, results and, of attention/, only the torch-free heatmap (which imports
    nothing from specbench): the benchmark and the report draw it with one function; no study code
    (tests/test_architecture.py: importing it imports no torch and registers no resolver)."""
    for path in (PKG / "report").rglob("*.py"):
        bad = {layer for layer, _ in _imported_layers(path)} - {"report", "results", "core", "attention"}
        assert not bad, (path.name, bad)
        attention = {m for m in _imports(path) if m.startswith("specbench.attention")}
        assert attention <= {"specbench.attention.heatmap"}, (path.name, attention)
    assert not _imports(PKG / "attention" / "heatmap.py")


def _function_imports(path: Path) -> list[int]:
    """The lines of the imports inside a function of ``path``."""
    return [
        node.lineno
        for fn in ast.walk(ast.parse(path.read_text()))
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(fn)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    ]


# Why an import may wait inside a function: a heavy dependency a torch-free or fast path avoids, a
# command's start-up time, an optional package, pyplot after its backend is chosen, an import circle.
REASONS = ("heavy:", "start-up:", "optional:", "backend:", "circle:")


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_every_import_inside_a_function_says_why(path):
    """An import inside a function carries its reason on its line (``# heavy: ...``, one of
    ``REASONS``; after a ``# noqa: ...`` too); any other import sits at the module's top."""
    lines = path.read_text().splitlines()
    bare = []
    for line in sorted(set(_function_imports(path))):
        comment = lines[line - 1].partition("  #")[2]
        if not any(kind in comment for kind in REASONS):
            bare.append(f"{path.relative_to(PKG)}:{line}: {lines[line - 1].strip()}")
    assert not bare, "move it to the top, or give its reason (" + ", ".join(REASONS) + "):\n" + "\n".join(bare)


def test_the_results_layer_imports_no_torch_and_nothing_late():
    """results/ (below study and report) imports core only, at module level: its users (the report
    and trees.sequoia) get no torch through it, and no import waits inside a function."""
    for path in (PKG / "results").glob("*.py"):
        assert {layer for layer, _ in _imported_layers(path)} <= {"core"}, path.name
        assert not _function_imports(path), (path.name, _function_imports(path))
        tree = ast.parse(path.read_text())
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {
            (n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level
        }
        assert not names & {"torch", "transformers", "specbench"}, (path.name, names)


# The cohesion rule: a report module's name says the REPORT.md section it serves (the template's
# ``body("name")``, which renders ``sections.RENDER[name]``) or the job it does for every section.
# A new module goes here, under the section or the job it is named for; docs/architecture.md lists both.
SECTION = "section"
REPORT_MODULES = {
    # sections, on REPORT.md and its pages
    "tldr.py": (SECTION, "tldr"),
    "machines.py": (SECTION, "tldr"),  # the TL;DR's first table: the answer per machine class and engine
    "llamacpp.py": (SECTION, "llamacpp"),  # speed.md's llama.cpp section, its TL;DR table and figure (#84)
    "llamaagree.py": (
        SECTION,
        "llamacpp_acceptance",
    ),  # speed.md's llama.cpp acceptance against the replay (#84 item 4)
    "measured.py": (SECTION, "tldr"),  # the TL;DR's measured table (the speed page lists every run)
    "controls.py": (SECTION, "speed"),  # the speed benchmark's controls in words, each run's and pooled
    "mainpage.py": (SECTION, "findings"),
    "limitations.py": (SECTION, "limitations"),
    "defaultrun.py": (SECTION, "limitations"),
    "answer.py": (SECTION, "answer"),
    "pairs.py": (SECTION, "pairs"),
    "matrix.py": (SECTION, "pairs"),
    "verification.py": (SECTION, "verification"),
    "fixed.py": (SECTION, "comparisons"),
    "fixed_page.py": (SECTION, "comparisons"),
    "speed.py": (SECTION, "speed"),
    "benchcheck.py": (SECTION, "speed"),
    "batch.py": (SECTION, "batch"),
    "hardware.py": (SECTION, "hardware"),
    "hardware_page.py": (SECTION, "hardware"),
    "acceptance.py": (SECTION, "acceptance"),
    "gap.py": (SECTION, "gap"),
    "lossless.py": (SECTION, "losslessness"),
    "tree_attention/__init__.py": (SECTION, "attention"),
    "tree_attention/section.py": (SECTION, "attention"),
    "tree_attention/stats.py": (SECTION, "attention"),
    "tree_attention/text.py": (SECTION, "attention"),
    "tree_attention/figures.py": (SECTION, "attention"),
    "setup_page.py": (SECTION, "setup"),
    "runtimes.py": (SECTION, "setup"),
    "bookkeeping.py": (SECTION, "bookkeeping"),
    "floors.py": (SECTION, "bookkeeping"),
    "onerun.py": (SECTION, "bookkeeping"),
    "appendix.py": (SECTION, "appendix"),
    # jobs every section shares
    "__init__.py": ("job", "the layer's docstring"),
    "__main__.py": ("job", "the command"),
    "build.py": ("job", "the pipeline and the journalled write"),
    "load.py": ("job", "reading results/"),
    "context.py": ("job", "the typed context: inputs, tables, a section's ctx"),
    "tables.py": ("job", "the tables and the evidence rules"),
    "across.py": ("job", "the tables across pairs and across rules"),
    "analysis.py": ("job", "labels, groups and formats"),
    "compare.py": ("job", "paired comparisons"),
    "costmodel.py": ("job", "the per-step cost model"),
    "speedup.py": ("job", "projected and measured speedup"),
    "findings.py": ("job", "the findings table"),
    "phrases.py": ("job", "the wording"),
    "markdown.py": ("job", "markdown helpers"),
    "figures.py": ("job", "the figure kit"),
    "palette.py": ("job", "the palette"),
    "sections.py": ("job", "the template's render"),
}
TEMPLATE = PKG / "report" / "templates" / "report.md.j2"
MAX_LINES, MAX_FUNCTION = 600, 80


def test_every_report_module_is_named_for_its_section_or_job():
    """Every report module is declared under the section it serves or its job; every declared section
    is one the template renders and every rendered section has its module; a section module named
    for a section serves that one (``findings.py``, the findings table, is a job the main page's
    Findings and the pages' claims share)."""
    have = {str(p.relative_to(PKG / "report")) for p in (PKG / "report").rglob("*.py")}
    assert have == set(REPORT_MODULES), f"declare or drop: {sorted(have ^ set(REPORT_MODULES))}"
    rendered = set(re.findall(r'body\("(\w+)"', TEMPLATE.read_text()))
    served = {name for kind, name in REPORT_MODULES.values() if kind == SECTION}
    assert served == rendered, f"sections without a module or modules without a section: {sorted(served ^ rendered)}"
    for path, (kind, name) in REPORT_MODULES.items():
        stem = Path(path).stem
        assert kind != SECTION or stem not in rendered or name == stem, f"{path} is named for section {stem}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_modules_and_functions_stay_within_the_size_bound(path):
    """A generous bound (the cohesion rule above decides what a module holds, not a line count)."""
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_LINES, path
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno - node.lineno + 1 <= MAX_FUNCTION, f"{path.name}:{node.name}"
