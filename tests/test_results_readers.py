"""#86 item 1: a results file is read only inside ``specbench/results/`` (its table definition: ``files.read_*``,
``costtable.read_checked``, ``acceptcheck.read``): no module outside results/ and core/ calls ``pd.read_csv`` or
``core.readers``' ``read``, ``table`` or ``check`` itself, but for the inputs that are not results files; nor
does one use the shared parser ``results.files.read_csv`` (called or handed on as a reader) but for the files
listed in ``PARSER``, which have no definition of their own there: a results file is parsed by its definition's
read (``files.read_speed(path, strict=False)`` and the like: the planning tools' lenient mode)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READS = {("pd", "read_csv"), ("pandas", "read_csv"), ("readers", "read"), ("readers", "table"), ("readers", "check")}
NOT_RESULTS = {  # file -> the reads of inputs that are not results files, and why
    "specbench/study/job/jobfiles.py": 1,  # a job folder's own summary.csv (its config_hash column, find_finished)
    "specbench/study/tools/ceiling.py": 2,  # run_all.sh's step_times.csv and its forward counts (core.readers' kinds)
}

PARSER = {  # file -> its uses of results.files.read_csv (23 at 70ff94d, 8 now), and what it parses
    "scripts/bench_engine.py": 2,  # the jobs' own summary.csv and steps.csv it just ran (job folders)
    "scripts/bench_live.py": 1,  # the live jobs' summary.csv (job folders)
    "specbench/study/job/jobrows.py": 1,  # collect's reader of a job's CSVs and of --out's (its own checks)
    "specbench/study/tools/recheck.py": 1,  # a re-derived job's steps.csv (job folders)
    "specbench/study/tools/stale.py": 1,  # a reference job's summary.csv (job folders)
    "specbench/report/load.py": 2,  # read_checked's reader of the optional files without a read of their own
}


def direct_reads(path: Path) -> int:
    calls = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)]
    return sum(
        isinstance(c.func, ast.Attribute)
        and isinstance(c.func.value, ast.Name)
        and (c.func.value.id, c.func.attr) in READS
        for c in calls
    )


def parser_uses(path: Path) -> int:
    """``read_csv`` named (called, or handed to ``upsert`` as its reader) other than as pandas'."""
    return sum(
        (isinstance(n, ast.Name) and n.id == "read_csv")
        or (
            isinstance(n, ast.Attribute)
            and n.attr == "read_csv"
            and not (isinstance(n.value, ast.Name) and n.value.id in ("pd", "pandas"))
        )
        for n in ast.walk(ast.parse(path.read_text()))
    )


def outside(count) -> dict[str, int]:
    files = [*(ROOT / "specbench").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")]
    return {
        str(p.relative_to(ROOT)): n
        for p in files
        if not str(p.relative_to(ROOT)).startswith(("specbench/results/", "specbench/core/")) and (n := count(p))
    }


def test_results_files_are_read_only_inside_results():
    found = outside(direct_reads)
    assert found == NOT_RESULTS, "read a results file through its definition in specbench/results/ (files.read_*)"


def test_results_files_are_parsed_by_their_definition():
    found = outside(parser_uses)
    assert found == PARSER, "parse a results file by its definition's read (files.read_*(path, strict=False))"
