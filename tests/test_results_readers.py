"""#86 item 1: a results file is read only inside ``specbench/results/`` (its table definition: ``files.read_*``,
``costtable.read_checked``, ``acceptcheck.read``): no module outside results/ and core/ calls ``pd.read_csv`` or
``core.readers``' ``read``, ``table`` or ``check`` itself, but for the inputs that are not results files."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READS = {("pd", "read_csv"), ("pandas", "read_csv"), ("readers", "read"), ("readers", "table"), ("readers", "check")}
NOT_RESULTS = {  # file -> the reads of inputs that are not results files, and why
    "specbench/study/job/jobfiles.py": 1,  # a job folder's own summary.csv (its config_hash column, find_finished)
    "specbench/study/tools/ceiling.py": 2,  # run_all.sh's step_times.csv and its forward counts (core.readers' kinds)
}


def direct_reads(path: Path) -> int:
    calls = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)]
    return sum(
        isinstance(c.func, ast.Attribute)
        and isinstance(c.func.value, ast.Name)
        and (c.func.value.id, c.func.attr) in READS
        for c in calls
    )


def test_results_files_are_read_only_inside_results():
    files = [*(ROOT / "specbench").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")]
    found = {
        str(p.relative_to(ROOT)): n
        for p in files
        if not str(p.relative_to(ROOT)).startswith(("specbench/results/", "specbench/core/")) and (n := direct_reads(p))
    }
    assert found == NOT_RESULTS, "read a results file through its definition in specbench/results/ (files.read_*)"
