"""Issue 55: a report killed at any rename, then a collect into the same results folder (the default
layout: REPORT.md at the root, figures, pages and speedup.csv in results/) leaves the report old or
new, never mixed; journals lie beside what they publish (a read-only parent is never written);
a command's cleanup removes only the files it staged itself."""

from __future__ import annotations

import os
import shutil

from mounts import ro_mount  # noqa: F401  (fixture)
from test_reliability import COLLECT, REPORT, killed_at, snapshot

REPORT_FILES = ("speedup.csv", "comparisons.csv")


def report_state(root) -> dict[str, bytes]:
    """What a report writes: REPORT.md, results/figures/, results/tables/, speedup.csv, comparisons.csv."""
    res = root / "results"
    got = {"REPORT.md": (root / "REPORT.md").read_bytes()}
    for sub in ("figures", "tables"):
        got.update({f"{sub}/{k}": v for k, v in snapshot(res / sub).items()})
    got.update({n: (res / n).read_bytes() for n in REPORT_FILES})
    return got


def staged(folder) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith((".tmp-", ".publish")))


def test_report_killed_at_every_rename_then_collect_leaves_it_old_or_new(two_sweeps, tmp_path):
    a, b, none = str(two_sweeps / "a"), str(two_sweeps / "b"), tmp_path / "none"
    none.mkdir()
    base = tmp_path / "base"
    killed_at(0, COLLECT, a, "--out", str(base / "results"))
    args = lambda root: ["--results", str(root / "results"), "--out", str(root / "REPORT.md")]  # noqa: E731
    assert killed_at(0, REPORT, *args(base)) == 0
    old = report_state(base)
    killed_at(0, COLLECT, b, "--out", str(base / "results"))  # new rows: the next report differs
    ref = tmp_path / "ref"
    shutil.copytree(base, ref)
    assert killed_at(0, REPORT, *args(ref)) == 0
    new = report_state(ref)
    assert old != new
    seen, k = set(), 1
    while True:
        root = tmp_path / f"k{k}"
        shutil.copytree(base, root)
        code = killed_at(k, REPORT, *args(root))
        assert killed_at(0, COLLECT, str(none), "--out", str(root / "results")) == 0
        got = report_state(root)
        assert got in (old, new), k
        seen.add("new" if got == new else "old")
        assert killed_at(0, REPORT, *args(root)) == 0  # the next report: the new one, nothing staged left
        assert report_state(root) == new and not staged(root) and not staged(root / "results"), k
        shutil.rmtree(root)
        if code == 0:
            break
        k += 1
    assert k >= 6 and seen == {"old", "new"}  # each journal and each rename were a kill point


def test_a_report_into_two_folders_under_a_read_only_parent_writes_no_journal_there(two_sweeps, tmp_path, ro_mount):
    """--out and --figures in two writable folders whose shared parent is read-only: the journals
    go beside what they publish, so the report is written."""
    import subprocess

    res = tmp_path / "results"
    killed_at(0, COLLECT, str(two_sweeps / "a"), "--out", str(res))
    subprocess.run(["mount", "-o", "remount,rw", str(ro_mount)], check=True)
    for d in ("doc", "pics"):
        (ro_mount / d).mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(ro_mount)], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(ro_mount / "doc")], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(ro_mount / "pics")], check=True)
    try:
        code = killed_at(
            0, REPORT, "--results", str(res), "--out", str(ro_mount / "doc" / "R.md"),
            "--figures", str(ro_mount / "pics" / "figures"),
        )  # fmt: skip
        assert code == 0 and (ro_mount / "doc" / "R.md").exists() and (ro_mount / "pics" / "figures").is_dir()
        assert not staged(ro_mount / "doc") and not staged(ro_mount / "pics")
    finally:
        for d in ("doc", "pics"):
            subprocess.run(["umount", "-l", str(ro_mount / d)], capture_output=True)


CLEAN = """
from specbench.core import atomic
atomic.command(sys.argv[1])
with atomic.lock(sys.argv[2]):
    pass
"""


def test_a_commands_cleanup_removes_only_what_it_staged(tmp_path):
    """A killed report's staged files survive a collect (they may be its journal's), and go with the
    next report; a collect's go with the next collect."""
    d = tmp_path / "results"
    d.mkdir()
    for name in (".tmp-report-new-abc", ".tmp-collect-x1summary.csv", ".tmp-bench-y2attention.csv"):
        (d / name).write_text("staged")
    killed_at(0, CLEAN, "collect", str(d))
    assert staged(d) == [".tmp-bench-y2attention.csv", ".tmp-report-new-abc"]
    killed_at(0, CLEAN, "report", str(d))
    assert staged(d) == [".tmp-bench-y2attention.csv"]


PUBLISH2 = """
from specbench.core import atomic
atomic.command("report")
atomic.atomic_write_many({p: (lambda t, p=p: atomic.write_file(t, "new")) for p in sys.argv[1:]})
"""


def test_a_publish_killed_while_its_journals_are_written_is_rolled_back(tmp_path):
    """Two folders: a kill after the first journal and before the second leaves both files old,
    whichever folder is recovered first; a kill after both is rolled forward from either."""
    from specbench.core.atomic import command, lock

    outcomes = set()
    k = 1
    while True:
        x, y = tmp_path / f"k{k}" / "x", tmp_path / f"k{k}" / "y"
        for f in (x, y):
            f.mkdir(parents=True)
            (f / "t.csv").write_text("old")
        code = killed_at(k, PUBLISH2, str(x / "t.csv"), str(y / "t.csv"))
        command("collect")  # another command recovers y alone first: it rolls forward or leaves both old
        with lock(y):
            pass
        first = {(x / "t.csv").read_text(), (y / "t.csv").read_text()}
        command("report")
        with lock(x, y):
            pass
        assert first in ({"old"}, {"new"}) and {(x / "t.csv").read_text(), (y / "t.csv").read_text()} == first, k
        assert not staged(x) and not staged(y), k
        outcomes |= first
        if code == 0:
            break
        k += 1
    command("specbench")
    assert outcomes == {"old", "new"} and k >= 4
