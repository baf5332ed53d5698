"""Issue 85: the lock of a results folder is a file in that folder (``core.atomic.lock``), so two writers
under different ``TMPDIR``s (two SLURM jobs, two nodes) and through two spellings of one folder (a
bind mount) take the same lock, and two collects racing into one ``--out`` keep both sides' rows."""

import os
import subprocess
import sys
import tempfile

import pytest

from specbench.core.atomic import lock
from specbench.results.files import read_csv
from test_collect import fake_job

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAIT = "from specbench.core.atomic import lock; import sys; print('ready', flush=True)\nwith lock(sys.argv[1]): print('got', flush=True)"
COLLECT = "from specbench.study.job.collect import main; import sys; main(sys.argv[1:])"


def child(code: str, *args, tmpdir) -> subprocess.Popen:
    os.makedirs(tmpdir, exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmpdir), PYTHONPATH=os.path.join(ROOT, "tests") + os.pathsep + ROOT)
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def held_off(mine, theirs, tmp_path, monkeypatch) -> None:
    """While this process holds the lock of ``mine`` (its TMPDIR one folder), a child under another
    TMPDIR that locks ``theirs`` waits, and gets it once this one lets go."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp-a"))
    os.makedirs(tempfile.tempdir, exist_ok=True)
    with lock(mine):
        p = child(WAIT, str(theirs), tmpdir=tmp_path / "tmp-b")
        assert p.stdout.readline().strip() == "ready"
        with pytest.raises(subprocess.TimeoutExpired):
            p.wait(timeout=1.5)  # blocked on this process's lock
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and out.strip() == "got", err


def race(out_a, out_b, tmp_path, trials: int = 3) -> None:
    """Two collects of different configurations, started together under two TMPDIRs into one folder
    (``out_a`` and ``out_b``: two spellings of it): both rows stay, every trial."""
    fake_job(tmp_path / "A", "j", h="aaaaaaaaaaaa")
    fake_job(tmp_path / "B", "j", h="bbbbbbbbbbbb")
    for t in range(trials):
        for f in os.listdir(out_a):
            if not f.startswith("."):
                os.remove(os.path.join(out_a, f))
        ps = [
            child(COLLECT, str(tmp_path / job), "--out", str(out), tmpdir=tmp_path / f"tmp-{job}")
            for job, out in (("A", out_a), ("B", out_b))
        ]
        for p in ps:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        assert sorted(read_csv(os.path.join(out_a, "summary.csv")).config_hash) == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"], t


def test_the_lock_lives_in_the_folder_it_guards(tmp_path):
    out = tmp_path / "results"
    with lock(out):
        assert (out / ".specbench.lock").is_file()
    assert not out.exists()  # made for the lock, left empty: removed again
    out.mkdir()
    with lock(out):
        assert os.listdir(out) == [".specbench.lock"]
    assert os.listdir(out) == []  # removed on release: a refused command leaves the folder as it was


def test_writers_under_different_tmpdirs_take_one_lock(tmp_path, monkeypatch):
    out = tmp_path / "results"
    out.mkdir()
    held_off(out, out, tmp_path, monkeypatch)
    race(out, out, tmp_path)


@pytest.fixture
def bound(tmp_path, request):
    """(folder, the same folder through a bind mount elsewhere); skipped where mounting is not allowed."""
    src, dst = tmp_path / "data" / "results", tmp_path / "mnt"
    src.mkdir(parents=True)
    dst.mkdir()
    r = subprocess.run(["mount", "--bind", str(tmp_path / "data"), str(dst)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot bind-mount here ({(r.stderr.strip() or 'mount failed').splitlines()[0]})")
    request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(dst)], capture_output=True))
    return src, dst / "results"


def test_two_spellings_of_one_folder_take_one_lock(bound, tmp_path, monkeypatch):
    src, other = bound
    assert os.path.realpath(src) != os.path.realpath(other)  # not one path, however resolved
    held_off(src, other, tmp_path, monkeypatch)
    race(src, other, tmp_path)
