"""Issue 85 item 1: the acceptance check (study.tools.recheck compare --out) and the ceiling
(study.tools.ceiling --out) read their destination as strictly as collect reads its --out: a row written
twice, a garbled or binary file, a column this version would drop (another version's file) is refused in
one line naming the file, exit 2, before anything is written (and, for the check, before its comparison)."""

from __future__ import annotations

import os
import shutil

import pandas as pd
import pytest

from conftest import ROOT
from specbench.study.tools import ceiling, recheck
from test_ceiling import _files


def _twice(p):
    lines = p.read_text().splitlines(keepends=True)
    p.write_text("".join([*lines, lines[1]]))


def _renamed(p):  # another version's file: a column this one does not write would be dropped by the merge
    df = pd.read_csv(p, dtype=str, keep_default_na=False)
    df.rename(columns={df.columns[-1]: "renamed_column"}).to_csv(p, index=False)


DAMAGE = {
    "a row written twice": (_twice, "repeats the row of"),
    "a garbled line": (lambda p: p.write_text(p.read_text() + "x,y\n"), "fields"),
    "another version's column": (_renamed, "renamed_column would be dropped"),
    "a binary file": (lambda p: p.write_bytes(b"\x00\x01\xff" * 8), "not UTF-8"),
}


def _refused(capsys, out, run) -> str:
    before = out.read_bytes()
    with pytest.raises(SystemExit) as e:
        run()
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert e.value.code == 2 and len(lines) == 1, lines
    assert out.read_bytes() == before and sorted(os.listdir(out.parent)) == [out.name]  # nothing written
    return lines[0]


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_the_acceptance_checks_destination_is_read_strictly(tmp_path, capsys, case):
    damage, needle = DAMAGE[case]
    out = tmp_path / "res" / "acceptance_check.csv"
    out.parent.mkdir()
    shutil.copy(os.path.join(ROOT, "results", "acceptance_check.csv"), out)
    damage(out)
    (tmp_path / "runs").mkdir()
    argv = ["compare", "--results", os.path.join(ROOT, "results"), "--runs", str(tmp_path / "runs"), "--out", str(out)]
    line = _refused(capsys, out, lambda: recheck.main(argv))
    assert f"--out={out}" in line and needle in line, line


def test_the_committed_acceptance_check_and_run_times_read_as_written():
    assert len(recheck.read_out(os.path.join(ROOT, "results", "acceptance_check.csv")))
    assert len(ceiling.read_out(os.path.join(ROOT, "results", "run_times.csv")))


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_the_ceilings_destination_is_read_strictly(tmp_path, capsys, case):
    damage, needle = DAMAGE[case]
    paths = _files(tmp_path)
    out = tmp_path / "res" / "run_times.csv"
    out.parent.mkdir()
    args = ["--times", str(paths["times"]), "--forwards", str(paths["fwd"]), "--costs", str(paths["costs"])]
    ceiling.main([*args, "--out", str(out)])
    pd.read_csv(out).assign(run=7).to_csv(out, index=False)  # another run's rows, kept by the next merge
    damage(out)
    line = _refused(capsys, out, lambda: ceiling.main([*args, "--out", str(out)]))
    assert f"--out={out}" in line and needle in line, line


def _added(p):  # another version's file with a column this one does not write (a renamed one: reported missing)
    pd.read_csv(p, dtype=str, keep_default_na=False).assign(added_column="x").to_csv(p, index=False)


LOSSLESS_DAMAGE = {**DAMAGE, "another version's column": (_added, "added_column would be dropped")}


@pytest.mark.parametrize("name", ["lossless_check.csv", "lossless_control.csv"])
@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_the_lossless_checks_destinations_are_read_strictly_before_any_model_loads(tmp_path, capsys, case, name):
    """Issue 86: lossless_check.csv and lossless_control.csv are read by their definitions (results.schemas'
    LOSSLESS_CHECK / LOSSLESS_CONTROL) before the models load (a target path that is no model: never read)."""
    from specbench.study.tools import lossless

    damage, needle = LOSSLESS_DAMAGE[case]
    res = tmp_path / "res"
    res.mkdir()
    for f in ("lossless_check.csv", "lossless_control.csv"):
        shutil.copy(os.path.join(ROOT, "results", f), res / f)
    damage(res / name)
    before = {f: (res / f).read_bytes() for f in os.listdir(res)}
    argv = [f"--out={res / 'lossless_check.csv'}", "pair=local", f"pair.draft.path={tmp_path}"]
    with pytest.raises(SystemExit) as e:
        lossless.main([*argv, f"pair.target.path={tmp_path}", "dataset=smoke", "device=cpu", "dtype=float32"])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert e.value.code == 2 and len(lines) == 1 and f"{res / name}" in lines[0] and needle in lines[0], lines
    assert {f: (res / f).read_bytes() for f in os.listdir(res)} == before  # nothing written


def test_the_committed_lossless_files_read_as_written():
    from specbench.results import files, schemas

    assert len(files.read_lossless(os.path.join(ROOT, "results", "lossless_check.csv")))
    assert len(files.read_lossless(os.path.join(ROOT, "results", "lossless_control.csv"), schemas.LOSSLESS_CONTROL))


# Issue 85 item 3: an OSError's line names the file, the actual problem and the fix that works: an input that
# cannot be read is not told to free space or move the output (core.atomic.os_line)
OS_CASES = {  # (errno, the path, its line's problem and fix)
    "an unreadable input": (13, "/data/in.csv", "/data/in.csv: Permission denied; make it readable"),
    "an unwritable output": (13, "/out/r.csv", "/out/r.csv: Permission denied; point --out at a folder you may write"),
    "an input not found": (2, "/data/in.csv", "/data/in.csv: No such file or directory; check the path"),
    "an input that is a folder": (21, "/data/in", "/data/in: Is a directory; a file is expected there"),
    "a full disk": (
        28,
        "/out/.tmp-collect-x",
        "No space left on device; free space or point --out at a writable folder",
    ),
    "a parent that is a file": (
        20,
        "/out/r.csv",
        "Not a directory; point --out at a folder: a part of the path is a file",
    ),
}


@pytest.mark.parametrize("case", sorted(OS_CASES))
def test_an_os_error_names_the_file_the_problem_and_the_fix_that_works(case):
    from specbench.core.atomic import os_line

    code, path, want = OS_CASES[case]
    line = os_line(OSError(code, os.strerror(code), path), "/out/r.csv", "--out")
    assert want in line and line.startswith(path) and "\n" not in line, line
    if path.startswith("/data"):
        assert "--out" not in line and "free space" not in line, line
