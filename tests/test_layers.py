"""The package's shape: imports only go down the layers, and modules and functions stay small."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "specbench"
# bottom to top (docs/architecture.md); attention/ sits beside study/
LAYER = {
    "core": 0,
    "trees": 1,
    "verify": 2,
    "drafting": 3,
    "engine": 4,
    "inputs": 5,
    "study": 6,
    "attention": 6,
    "report": 7,
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
    for path in (PKG / "report").glob("*.py"):
        bad = {layer for layer, _ in _imported_layers(path)} - {"report", "study", "core"}
        assert not bad, (path.name, bad)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_over_400_lines_no_function_over_60(path):
    text = path.read_text()
    assert len(text.splitlines()) <= 400, path
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno - node.lineno + 1 <= 60, f"{path.name}:{node.name}"
