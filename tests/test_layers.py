"""The package's shape: imports only go down the layers, and modules and functions stay small."""

import ast
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
FILES = sorted(PKG.rglob("*.py"))


def _imported_layers(path: Path):
    """The sub-packages a module imports (relative or absolute), with the line of each import."""
    me = path.relative_to(PKG).parts
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 0 and (node.module or "").startswith("specbench."):
            yield node.module.split(".")[1], node.lineno
        elif node.level == 2 and len(me) > 1:
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
    assert "specbench.results.columns" in _imports(PKG / "study" / "jobfiles.py")


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


def test_report_imports_no_model_code():
    """The report imports core, study and, of attention/, only the torch-free heatmap (which imports
    nothing from specbench): the benchmark and the report draw it with one function."""
    for path in (PKG / "report").glob("*.py"):
        bad = {layer for layer, _ in _imported_layers(path)} - {"report", "study", "results", "core", "attention"}
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


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_over_400_lines_no_function_over_60(path):
    text = path.read_text()
    assert len(text.splitlines()) <= 400, path
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno - node.lineno + 1 <= 60, f"{path.name}:{node.name}"
