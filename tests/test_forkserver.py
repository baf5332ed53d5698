"""The command-line tests' fork server (forkserver.py) gives what a fresh interpreter gives: the
same argv, folder, import path, environment, output, exit status, threads and atexit order; a
timeout kills the command and the server goes on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import forkserver
from test_hydra import JOB_MODULES, job_args

PROBE = textwrap.dedent(
    """
    import atexit, json, os, sys, threading, time
    atexit.register(lambda: print("atexit", flush=True))
    def late():
        time.sleep(0.2)
        print("thread", flush=True)
    threading.Thread(target=late).start()
    print(json.dumps({
        "name": __name__, "argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0],
        "env": {k: os.environ.get(k) for k in ("PROBE", "PYTEST_CURRENT_TEST")},
        "stdin": sys.stdin.read(),
    }))
    sys.stdout.write("a\\r\\nb\\rc\\n")
    print("to stderr", file=sys.stderr)
    if sys.argv[1:] == ["raise"]:
        raise ValueError("boom")
    code = sys.argv[1] if sys.argv[1:] else "3"
    sys.exit(int(code) if code.isdigit() else code)
    """
)


def both(args, cwd, env, preload=("json",)):
    fresh = subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    forked = forkserver.run(args, cwd=cwd, env=env, timeout=120, preload=preload)
    return fresh, forked


@pytest.mark.parametrize("argv", [[], ["7"], ["a message"], ["raise"]])
def test_a_forked_command_is_what_a_fresh_interpreter_gives(tmp_path, argv):
    (tmp_path / "probe.py").write_text(PROBE)
    env = dict(os.environ, PROBE="yes")
    fresh, forked = both(["probe", *argv], tmp_path, env)
    assert forked.args == fresh.args
    assert (forked.returncode, forked.stdout) == (fresh.returncode, fresh.stdout)
    assert forked.stderr == fresh.stderr  # a traceback included (same lines, same file)
    assert '"PROBE": "yes"' in fresh.stdout and "atexit" in fresh.stdout and "a\nb\nc\n" in fresh.stdout
    assert fresh.stdout.index("thread") < fresh.stdout.index("atexit")


def test_a_refused_job_is_the_same_line_forked_or_fresh(tiny_pair_dirs, tmp_path):
    env = dict(os.environ, HYDRA_FULL_ERROR="0", TOKENIZERS_PARALLELISM="false")
    args = job_args(tiny_pair_dirs, tmp_path / "out", "tree.widht=3")
    fresh, forked = both(args, tmp_path, env, preload=JOB_MODULES)
    assert fresh.returncode == forked.returncode == 2
    assert forked.stderr == fresh.stderr and "tree.widht" in fresh.stderr
    assert not (tmp_path / "out").exists()


def test_a_timeout_kills_the_command_and_the_server_goes_on(tmp_path):
    (tmp_path / "sleeper.py").write_text("import time\nprint('start', flush=True)\ntime.sleep(60)\n")
    (tmp_path / "probe.py").write_text(PROBE)
    with pytest.raises(subprocess.TimeoutExpired) as info:
        forkserver.run(["sleeper"], cwd=tmp_path, env=dict(os.environ), timeout=2, preload=("json",))
    assert info.value.output == "start\n"
    after = forkserver.run(["probe", "5"], cwd=tmp_path, env=dict(os.environ), timeout=60, preload=("json",))
    assert after.returncode == 5
