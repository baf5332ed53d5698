"""Issue 86 item 4: the study tools' own ``+`` keys are validated in one place, ``study/job/toolopts.py`` (a declared
table read with ``study/job/errors.py``'s typed reads): no other module reads such a key from a job's ``extra`` or
calls a typed read for it, every tool's keys are the table's, and each declared bound refuses in one line; a flag
command's range is its parser type's alone.

The counts these tests hold at zero, per module, at any checkout (the issue's before -> after)::

    .venv/bin/python tests/test_tool_options.py [REPO]
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from specbench.study.job import toolopts
from specbench.study.job.errors import ConfigError

PKG = pathlib.Path(__file__).resolve().parents[1] / "specbench"
READS = {"as_int", "as_float", "as_bool", "as_choice", "as_names"}
OWNERS = {"study/job/toolopts.py", "study/job/errors.py"}


def _modules(pkg: pathlib.Path = PKG):
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg).as_posix()
        if rel not in OWNERS:
            yield rel, ast.parse(path.read_text(encoding="utf-8"))


def _names_key(node: ast.AST) -> bool:
    """A constant (or an f-string's constant head) that is, or starts, a declared key."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in toolopts.OPTIONS
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        head = str(node.values[0].value)
        return any(k.startswith(head) for k in toolopts.OPTIONS if head)
    return False


def _is_extra(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "extra") or (
        isinstance(node, ast.Name) and node.id == "extra"
    )


def _extra_reads(tree: ast.AST) -> list[int]:
    """Lines reading a study tool's key from a job's ``extra`` (``.get``, ``[...]``) by name."""
    out = []
    for node in ast.walk(tree):
        get = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
        if get and _is_extra(node.func.value) and node.args and _names_key(node.args[0]):
            out.append(node.lineno)
        if isinstance(node, ast.Subscript) and _is_extra(node.value) and _names_key(node.slice):
            out.append(node.lineno)
    return out


def _typed_reads(tree: ast.AST) -> list[int]:
    """Lines calling one of ``study.job.errors``' typed reads."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in READS
    ]


def test_no_module_but_toolopts_reads_a_tool_key_from_extra():
    found = [f"{rel}:{n}" for rel, tree in _modules() for n in _extra_reads(tree)]
    assert not found, f"read a study tool's key through study.job.toolopts.value instead: {found}"


def test_the_tools_call_no_typed_read_of_their_own():
    found = [
        f"{rel}:{n}"
        for rel, tree in _modules()
        if rel.startswith(("study/tools/", "study/serving/"))
        for n in _typed_reads(tree)
    ]
    assert not found, f"declare the key in study.job.toolopts.OPTIONS instead: {found}"


def test_each_tools_keys_are_the_tables():
    from specbench.study.tools import accept_llamacpp, costs, speed, speed_llamacpp

    for tool, module in {"costs": costs, "speed": speed, "speed_llamacpp": speed_llamacpp}.items():
        assert module.KEYS == toolopts.keys(tool)
    assert accept_llamacpp.KEYS == toolopts.keys("accept_llamacpp")
    assert all(k in toolopts.OPTIONS for keys in toolopts.TOOLS.values() for k in keys)


@pytest.mark.parametrize("key", sorted(toolopts.OPTIONS))
def test_each_default_is_read_as_itself_and_each_bound_refuses_in_one_line(key):
    o = toolopts.OPTIONS[key]
    if o.default is not None and o.kind != "items":
        assert toolopts.value({key: o.default}, key) == o.default
    assert toolopts.value({}, key) == o.default
    if o.kind in ("int", "float") and o.hi is not None:
        bad = o.hi * 2 + 1
        with pytest.raises(ConfigError) as e:
            toolopts.value({key: [bad] if o.many else bad}, key)
        assert str(e.value).startswith(f"{key}=") and "\n" not in str(e.value)
    if o.kind in ("int", "float", "bool", "choice"):
        with pytest.raises(ConfigError, match=f"^{key}='nope'"):
            toolopts.value({key: "nope"}, key)


def test_an_integral_float_is_read_as_its_integer_as_the_study_reads_one():
    assert toolopts.value({"speed_rounds": 3.0}, "speed_rounds") == 3
    assert toolopts.value({"speed_rounds": "auto"}, "speed_rounds") == "auto"
    with pytest.raises(ConfigError, match="speed_until=0: must be a Unix time"):
        toolopts.value({"speed_until": 0}, "speed_until")


@pytest.mark.parametrize(
    "tool,extra,message",
    [
        ("speed", {"speed_candidates": ["chain/4", "chain/4"]}, "listed twice"),
        ("speed_llamacpp", {"llamacpp_candidates": ["4/0.5", "4/0.5"]}, "listed twice"),
        ("accept_llamacpp", {"llamacpp_n_max": [4, 4]}, "llamacpp_n_max"),
        ("accept_llamacpp", {"llamacpp_ngram": ["2/4", "2/4"]}, "distinct N/M"),
    ],
)
def test_check_runs_each_tools_rules_between_list_items(tool, extra, message):
    """``toolopts.check`` is each tool's whole check: the rules between a list's items too (the draft grid's
    included, which accept_llamacpp's check skipped until its main parsed the grid itself)."""
    with pytest.raises(ConfigError, match=message):
        toolopts.check(extra, tool)


def _range_checks(tree: ast.AST) -> list[int]:
    """Lines comparing a parsed flag (``args.X`` / ``a.X``) with a number: a second range check after parsing."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            flag = any(isinstance(s, ast.Attribute) and getattr(s.value, "id", "") in ("args", "a") for s in sides)
            num = any(isinstance(s, ast.Constant) and type(s.value) in (int, float) for s in sides)
            if flag and num:
                out.append(node.lineno)
    return out


def test_a_flags_range_is_its_parser_types_alone():
    """A flag command's range is ``core.args.number``'s, in its parser (one line naming the flag, exit 2): no
    module of the study compares a parsed flag with a number again."""
    found = [f"{rel}:{n}" for rel, tree in _modules() if rel.startswith("study/") for n in _range_checks(tree)]
    assert not found, f"give the flag's range to its parser type (core.args.number) instead: {found}"


def inventory(repo: pathlib.Path) -> dict[str, tuple[int, int, int]]:
    """Per module of ``repo``'s specbench/study (the owners included): (typed reads, reads of a tool key from
    ``extra``, a parsed flag compared with a number), where any is not zero."""
    out = {}
    for rel, tree in _modules(repo / "specbench" / "study"):
        got = (len(_typed_reads(tree)), len(_extra_reads(tree)), len(_range_checks(tree)))
        if any(got):
            out[rel] = got
    return out


if __name__ == "__main__":
    import sys

    OWNERS.clear()  # count the owners too
    found = inventory(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else PKG.parent))
    for rel, (typed, extra, flags) in found.items():
        print(f"{rel}: {typed} typed reads, {extra} reads of a tool key from extra, {flags} flag range re-checks")
    print("total:", *(sum(v[i] for v in found.values()) for i in range(3)), "in", len(found), "modules")
