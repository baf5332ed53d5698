"""Small tmpfs mounts for disk-full and read-only tests (root only).

Import the fixtures into a test module (``from mounts import tiny_tmpfs, ro_mount``).
Where mounting is not permitted the test is skipped with a one-line reason; every
mount is unmounted in a finalizer.
"""

from __future__ import annotations

import subprocess

import pytest


def mount_tmpfs(path, options: str, request) -> None:
    """Mount a tmpfs at path with ``options``, unmounted when the test ends."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot mount a tmpfs here ({e})")
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({(r.stderr.strip() or 'mount failed').splitlines()[0]})")
    request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(path)], capture_output=True))


def fill(path, leave_pages: int = 0) -> None:
    """Fill the filesystem of ``path`` but ``leave_pages`` 4 kB pages."""
    keep = path / ".keep"
    keep.write_bytes(b"\0" * 4096 * leave_pages)
    with open(path / ".fill", "wb", buffering=0) as fh:
        try:
            while fh.write(b"\0" * 4096):
                pass
        except OSError:
            pass
    keep.unlink()


@pytest.fixture
def tiny_tmpfs(tmp_path, request):
    """A 200 kB tmpfs: a disk that fills up."""
    path = tmp_path / "tmpfs"
    mount_tmpfs(path, "size=200k", request)
    return path


@pytest.fixture
def ro_mount(tmp_path, request):
    """An empty read-only tmpfs."""
    path = tmp_path / "ro"
    mount_tmpfs(path, "size=100k,ro", request)
    return path
