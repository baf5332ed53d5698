"""docs/architecture.md is the layers' contract, checked against the code: the table's layers are the
sub-packages there are, every import crosses only to a layer its row's "imports" column allows (and, where
the column names modules in parentheses, only to those modules), study/'s packages import only down in the
order the table gives, every module the page names exists, and the report, documented as torch-free,
imports no torch and no study code and registers none of the study's OmegaConf resolvers (a fresh process
importing every report module)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "specbench"
DOC = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| (\d+) \| (.+?) \| (.+?) \|$", re.M)
TICKED = re.compile(r"`([^`]+)`")


def _split(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == sep and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*out, cur.strip()] if cur.strip() else out


def _outside(text: str) -> str:
    """``text`` without its parenthesised parts."""
    return re.sub(r"\([^()]*\)", "", text)


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PKG.rglob("*.py")}


@dataclass
class Layer:
    """One sub-package of the table: its layer number, the layers it may import (None: any module of that
    layer; a set: only those modules, named in the column's parentheses), its own packages bottom to top
    (study's ``serving/ over tools/ over job/``) and the module names the row gives that do not exist."""

    name: str
    level: int
    allowed: dict[str, set[str] | None] = field(default_factory=dict)
    packages: tuple[str, ...] = ()
    unknown: list[str] = field(default_factory=list)


def _named_modules(layer: str, inner: str) -> tuple[set[str], list[str]]:
    """The modules of ``layer`` a parenthesis names (`tools/`: `plan` -> specbench.<layer>.tools.plan;
    `job/argv.py`; an upper-case name is an attribute, not a module), and the names that are no module."""
    found, unknown, prefix = set(), [], ""
    for tok in TICKED.findall(inner):
        if tok.endswith("/"):
            prefix = tok
            continue
        if not re.fullmatch(r"[a-z_][\w/]*(\.py)?", tok):
            continue
        name = f"specbench.{layer}." + (prefix + tok).removesuffix(".py").replace("/", ".")
        (found.add(name) if name in MODULES else unknown.append(name))
    return found, unknown


def table() -> dict[str, Layer]:
    """The layers of docs/architecture.md's table, by sub-package."""
    rows = ROW.findall(DOC.read_text())
    assert rows, "docs/architecture.md: no layer table"
    layers: dict[str, Layer] = {}
    raw: dict[str, str] = {}
    for level, subs, imports in rows:
        names = [t.rstrip("/") for t in TICKED.findall(_outside(subs))]
        inner = re.search(r"\(([^()]*)\)", subs)
        packages = tuple(t.rstrip("/") for t in TICKED.findall(inner.group(1)))[::-1] if inner else ()
        parts = dict(p.split(": ", 1) for p in _split(imports, ";")) if len(names) > 1 else {names[0]: imports}
        for name in names:
            layers[name] = Layer(name, int(level), packages=packages if names.index(name) == 0 else ())
            raw[name] = parts[name]
    for name, text in raw.items():
        me = layers[name]
        for item in _split(text, ","):
            head = _outside(item).strip()
            inner = "".join(re.findall(r"\(([^()]*)\)", item))
            if head == "every layer below":
                me.allowed.update({o: None for o, lay in layers.items() if lay.level < me.level})
            elif head == "nothing from specbench":
                me.unknown += _named_modules(name, inner)[1]  # its exception: a module of its own (`options`)
            else:
                assert head in layers, f"docs/architecture.md: {name}/ imports {head!r}, which is no layer"
                mods, unknown = _named_modules(head, inner)
                me.allowed[head] = mods or None
                me.unknown += unknown
    return layers


def _imports(path: Path) -> list[tuple[str, int]]:
    """The specbench modules ``path`` imports (anywhere, in a function too), each with its line; ``from x
    import y`` of a module is that module; the top-level package (``CONF_DIR``) is no layer: left out."""
    me = _module(path)
    here = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("specbench.")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if not base.startswith("specbench."):
                continue
            out += [(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base, node.lineno) for a in node.names]
    return out


def test_the_table_names_every_sub_package_once_and_each_module_it_names_exists():
    layers = table()
    subs = {p.parent.name for p in PKG.glob("*/__init__.py")}
    assert set(layers) == subs, f"docs/architecture.md's table lacks or has too many: {sorted(set(layers) ^ subs)}"
    unknown = [m for lay in layers.values() for m in lay.unknown]
    assert not unknown, f"docs/architecture.md's table names modules that do not exist: {unknown}"
    assert layers["study"].packages == ("job", "tools", "serving")


def test_the_page_names_no_module_that_is_missing():
    """Every ``x.py`` or ``pkg/x.py`` the page names is a module of ours (under specbench/, scripts/ or tests/)."""
    ours = {p.relative_to(ROOT).as_posix() for d in ("specbench", "scripts", "tests") for p in (ROOT / d).rglob("*.py")}
    named = {tok for tok in TICKED.findall(DOC.read_text()) if re.fullmatch(r"[\w/]+\.py", tok)}
    missing = sorted(tok for tok in named if not any(f"/{p}".endswith(f"/{tok}") for p in ours))
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


@pytest.mark.parametrize(
    "path", sorted(p for p in PKG.rglob("*.py") if p.parent != PKG), ids=lambda p: str(p.relative_to(PKG))
)
def test_every_import_crosses_only_where_the_table_allows(path):
    layers = table()
    me = layers[path.relative_to(PKG).parts[0]]
    bad = []
    for mod, line in _imports(path):
        other = mod.split(".")[1]
        if other == me.name or other not in layers:
            continue
        if other not in me.allowed:
            bad.append(f"line {line}: {mod} ({other}/ is not in {me.name}/'s imports)")
        elif (only := me.allowed[other]) is not None and not any(mod == m or mod.startswith(m + ".") for m in only):
            bad.append(f"line {line}: {mod} (of {other}/, {me.name}/ imports only {sorted(only)})")
    assert not bad, f"{path.relative_to(PKG)} crosses a layer docs/architecture.md does not allow: {bad}"


def test_the_study_packages_import_only_down_in_the_tables_order():
    order = table()["study"].packages
    bad = []
    for path in (PKG / "study").glob("*/*.py"):
        me = order.index(path.parent.name)
        for mod, line in _imports(path):
            if mod.startswith("specbench.study.") and mod.count(".") >= 3 and order.index(mod.split(".")[2]) > me:
                bad.append(f"{path.relative_to(PKG)}:{line}: {mod}")
    assert not bad, f"an import goes up study/'s packages ({' over '.join(order[::-1])}): {bad}"


def test_the_checker_reads_the_parenthesised_exceptions():
    layers = table()
    assert "specbench.study.job.argv" in layers["attention"].allowed["study"]  # `job/argv.py`
    assert "specbench.results.costcurve" in layers["trees"].allowed["results"]  # `costcurve`: ...
    assert layers["report"].allowed["attention"] == {"specbench.attention.heatmap"}
    assert layers["engine"].allowed == {"core": None, "trees": None, "verify": None, "drafting": None}
    assert layers["core"].allowed == {}
    assert set(layers["study"].allowed) == {"core", "results", "trees", "verify", "drafting", "engine", "inputs"}


def _resolver_names() -> list[str]:
    """The OmegaConf resolvers study/ registers on import (study/job/resolvers.py's register calls)."""
    tree = ast.parse((PKG / "study" / "job" / "resolvers.py").read_text())
    return [
        n.args[0].value
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "register_new_resolver"
    ]


PROBE = """
import importlib, json, pkgutil, sys
for name in sys.argv[2:]:
    mod = importlib.import_module(name)
    for info in pkgutil.walk_packages(getattr(mod, "__path__", []), name + "."):
        if not info.name.endswith(".__main__"):  # runs the report: build.main, imported by build itself
            importlib.import_module(info.name)
from omegaconf import OmegaConf
print(json.dumps({
    "torch": sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")),
    "study": sorted(m for m in sys.modules if m.startswith("specbench.study")),
    "resolvers": [r for r in json.loads(sys.argv[1]) if OmegaConf.has_resolver(r)],
}))
"""


def _probe(*modules: str) -> dict:
    """What importing ``modules`` (a package: every module in it) brings into a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(_resolver_names()), *modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def report_imports() -> dict:
    return _probe("specbench.report.build", "specbench.report")


def test_the_report_imports_no_torch(report_imports):
    assert report_imports["torch"] == []


def test_the_report_imports_no_study_code_and_registers_no_resolver(report_imports):
    """Importing study/ runs study/__init__.py, which registers OmegaConf resolvers: the report imports none of it."""
    assert report_imports["study"] == [] and report_imports["resolvers"] == []


def test_the_probe_sees_the_study_resolvers():
    names = _resolver_names()
    assert "specbench_jobdir" in names
    seen = _probe("specbench.study.job.resolvers")
    assert seen["resolvers"] == names and "specbench.study" in seen["study"]


REPORT = PKG / "report"
LISTS = {  # docs/architecture.md's report lists, by the sentence that opens each
    "composition": "The composition, the only modules that import section modules:",
    "shared": "Jobs every section shares",
    "sections": "The sections, in the template's order",
}


def report_lists() -> dict[str, set[str]]:
    """The report modules each of the page's lists declares (a bullet's ticked ``x.py`` / ``pkg/x.py`` names,
    first and in its parentheses' lead: ``measured.py``: ...)."""
    text = DOC.read_text().split("## `report/`", 1)[1].split("\n## ", 1)[0]
    out = {}
    for kind, opening in LISTS.items():
        block = text.split(opening, 1)[1].split("\n\n", 2)[1]  # the bullets after the opening line
        out[kind] = {tok for tok in TICKED.findall(block) if tok.endswith(".py") and (REPORT / tok).is_file()}
    return out


def _report_imports(path: Path) -> set[str]:
    """The report modules ``path`` imports, as paths under report/ (a package: its ``__init__.py``)."""
    out = set()
    for mod, _line in _imports(path):
        if mod.startswith("specbench.report."):
            rel = Path(*mod.split(".")[2:])
            out.add(str(rel / "__init__.py") if (REPORT / rel).is_dir() else f"{rel}.py")
    return out


def test_the_report_lists_cover_every_module_once():
    """Every report module is on one of the page's three lists: the composition, the shared jobs, the sections."""
    lists = report_lists()
    have = {str(p.relative_to(REPORT)) for p in REPORT.rglob("*.py") if p.name != "__init__.py" or p.parent != REPORT}
    named = [m for mods in lists.values() for m in mods]
    assert sorted(set(named)) == sorted(named), "a report module on two of docs/architecture.md's lists"
    assert set(named) == have, f"report modules on no list, or listed and missing: {sorted(set(named) ^ have)}"


def test_a_shared_report_module_imports_no_section_module():
    """A job every section shares imports shared jobs only (what a section module holds that a shared one
    needs moves down into a shared one); the composition (build, sections, __main__) alone imports sections."""
    lists = report_lists()
    bad = {
        m: sorted(got & lists["sections"])
        for m in sorted(lists["shared"])
        if (got := _report_imports(REPORT / m)) & lists["sections"]
    }
    assert not bad, f"shared report modules import section modules: {bad}"
    assert _report_imports(REPORT / "build.py") & lists["sections"]  # the check sees a section import
