"""Every atomic write in specbench goes through core/atomic.py, and what it writes gets the
process umask's mode (not mkstemp's private 0600); a failed write leaves nothing."""

import os
import re
from pathlib import Path

import pytest

from specbench.core.atomic import atomic_folder, atomic_write, umask
from specbench.core.diskcache import DiskCache

ROOT = Path(__file__).resolve().parents[1]
FILE_MODE, DIR_MODE = 0o666 & ~umask(), 0o777 & ~umask()


def test_no_hand_rolled_atomic_write_outside_core_atomic():
    pattern = re.compile(r"os\.replace\(|os\.rename\(|mkstemp\(|mkdtemp\(|\.with_name\(.*\.tmp")
    offenders = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in sorted((ROOT / "specbench").rglob("*.py"))
        if p.name != "atomic.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


def test_atomic_write_and_folder_use_the_umask_and_leave_nothing_on_failure(tmp_path):
    atomic_write(tmp_path / "a.txt", lambda tmp: Path(tmp).write_text("x"))
    assert os.stat(tmp_path / "a.txt").st_mode & 0o777 == FILE_MODE

    def half(tmp):
        Path(tmp).write_text("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "a.txt", half)
    assert (tmp_path / "a.txt").read_text() == "x"
    with atomic_folder(tmp_path / "d") as tmp:
        (tmp / "f").write_text("1")
    assert os.stat(tmp_path / "d").st_mode & 0o777 == DIR_MODE and (tmp_path / "d" / "f").read_text() == "1"
    with pytest.raises(RuntimeError), atomic_folder(tmp_path / "d") as tmp:
        (tmp / "g").write_text("2")
        raise RuntimeError("killed")
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "d"] and os.listdir(tmp_path / "d") == ["f"]


def test_disk_cache_records_use_the_umask(tmp_path):
    path = DiskCache(tmp_path).put("continuation", {"a": 1}, [1, 2])
    assert os.stat(path).st_mode & 0o777 == FILE_MODE
    assert DiskCache(tmp_path).get("continuation", {"a": 1}) == [1, 2]
    assert not [p for p in tmp_path.rglob(".tmp-*")]


@pytest.mark.parametrize("fails", ["fill", "the last rename", "the text file"])
def test_replace_together_changes_neither_on_a_failure(tmp_path, monkeypatch, fails):
    """Figures and REPORT.md: on a failure at any step the old pair stays, and no temp is left."""
    import errno

    from specbench.core import atomic

    folder, path = tmp_path / "figures", tmp_path / "REPORT.md"
    folder.mkdir()
    (folder / "old.png").write_bytes(b"old")
    path.write_text("old\n")
    disk_full = OSError(errno.ENOSPC, "No space left on device")

    def fill(d):
        (Path(d) / "new.png").write_bytes(b"new")
        if fails == "fill":
            raise OSError(errno.ENOSPC, "No space left on device", os.path.join(d, "new.png"))

    if fails == "the last rename":
        monkeypatch.setattr(atomic.os, "replace", lambda a, b: (_ for _ in ()).throw(disk_full))
    elif fails == "the text file":
        monkeypatch.setattr(atomic, "write_file", lambda p, t: (_ for _ in ()).throw(disk_full))
    with pytest.raises(OSError) as info:
        atomic.replace_together(folder, fill, path, "new\n")
    assert info.value.filename in (str(folder), str(path)), info.value.filename
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["REPORT.md", "figures", "old.png"]
    assert (folder / "old.png").read_bytes() == b"old" and path.read_text() == "old\n"
    monkeypatch.undo()
    atomic.replace_together(folder, fill if fails != "fill" else lambda d: None, path, "new\n")
    assert path.read_text() == "new\n" and not (folder / "old.png").exists()
