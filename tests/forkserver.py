"""`python -m MODULE ARGS` for the tests, forked from a server that has already imported it.

Most command-line tests run a specbench command in a fresh interpreter, and about 3 s of each is
its imports (torch, transformers, scipy, pandas, Hydra), not the command.  ``run`` sends the
command to a server, one per (environment, preloaded modules), started once per test worker: the
server imports the preloaded modules, then forks a child per command.  The child is what
``python -m MODULE ARGS`` would be: its own process, working folder, ``sys.argv`` and
``sys.path[0]``, stdin from /dev/null, stdout and stderr captured, the module run as
``__main__``, exit status as Python sets it (``SystemExit``, a traceback gives 1), threads joined
and atexit handlers run.  The server's environment is the command's, so what a module reads
from the environment at import is what a fresh interpreter would read.

What a fork shares that fresh interpreters would not: the server's string-hash seed and numpy's
global random state (every specbench generator is seeded; set order is never an output), and
the time its imports took (a test that times a run to place kills in a fresh one times a fresh
one: ``test_resume``).  ``SPECBENCH_TEST_FORK=0`` runs every command in a fresh interpreter instead
(``tests/test_forkserver.py`` checks that both give the same output).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile

SERVERS: dict = {}  # (environment, preload) -> the server's Popen
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUFFERS: dict = {}  # a server's pid -> the bytes it wrote that no reply has taken yet
MAX_SERVERS = 3  # the least recently used one is stopped beyond this
PER_COMMAND = ("PYTEST_CURRENT_TEST",)  # set per test by pytest, read by no module at import: the child's own


def enabled() -> bool:
    return os.environ.get("SPECBENCH_TEST_FORK", "1") != "0"


def run(args, *, cwd, env: dict, timeout: float, preload: tuple[str, ...]) -> subprocess.CompletedProcess:
    """``subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True,
    text=True, timeout=timeout)``, in a child forked from a server that imported ``preload``."""
    cmd = [sys.executable, "-m", *map(str, args)]
    if not enabled():
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    shared = {k: v for k, v in env.items() if k not in PER_COMMAND}
    srv = server(shared, preload)
    own = {k: env.get(k) for k in PER_COMMAND}
    with tempfile.TemporaryDirectory() as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        request = {"args": cmd[2:], "cwd": str(cwd), "out": out, "err": err, "env": own}
        try:
            srv.stdin.write((json.dumps(request) + "\n").encode())
            srv.stdin.flush()
            pid = int(reply(srv, None))
            try:
                code = int(reply(srv, timeout))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):  # it may have ended just now
                    os.kill(pid, signal.SIGKILL)
                reply(srv, None)
                raise subprocess.TimeoutExpired(cmd, timeout, read(out), read(err)) from None
        except subprocess.TimeoutExpired:
            raise
        except BaseException:  # replies left unread would answer the next command: a new server then
            discard(shared, preload)
            raise
        return subprocess.CompletedProcess(cmd, code, read(out), read(err))


def read(path: str) -> str:
    """A captured stream as ``text=True`` gives it (universal newlines); "" if never opened."""
    if not os.path.exists(path):
        return ""
    with open(path, encoding=None, newline=None) as fh:
        return fh.read()


def reply(srv: subprocess.Popen, timeout: float | None) -> str:
    """The server's next line, within ``timeout`` seconds (read unbuffered, so that ``select``
    sees every byte not yet taken)."""
    buf = BUFFERS.setdefault(srv.pid, bytearray())
    while b"\n" not in buf:
        ready, _, _ = select.select([srv.stdout], [], [], timeout)
        if not ready:
            raise subprocess.TimeoutExpired("forkserver", timeout)
        chunk = os.read(srv.stdout.fileno(), 4096)
        if not chunk:
            raise RuntimeError(f"the test fork server stopped (exit {srv.wait()})")
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line.decode().strip()


def key(env: dict, preload: tuple[str, ...]) -> tuple:
    return frozenset(env.items()), preload


def server(env: dict, preload: tuple[str, ...]) -> subprocess.Popen:
    srv = SERVERS.pop(key(env, preload), None)
    if srv is None or srv.poll() is not None:
        srv = subprocess.Popen(  # imports from the repository, whatever folder a test is in
            [sys.executable, __file__, *preload], env=env, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        if reply(srv, 600) != "ready":
            raise RuntimeError("the test fork server did not start")
    SERVERS[key(env, preload)] = srv  # the most recently used last
    while len(SERVERS) > MAX_SERVERS:
        stop(SERVERS.pop(next(iter(SERVERS))))
    return srv


def discard(env: dict, preload: tuple[str, ...]) -> None:
    """Kill the server of (env, preload) and forget it."""
    srv = SERVERS.pop(key(env, preload), None)
    if srv is not None:
        srv.kill()
        stop(srv)


def stop(srv: subprocess.Popen) -> None:
    srv.stdin.close()  # the server ends at the end of its input
    srv.wait(timeout=60)
    BUFFERS.pop(srv.pid, None)


atexit.register(lambda: [stop(srv) for srv in SERVERS.values()])


# ---------------------------------------------------------------- the server (python forkserver.py MODULE...)
def exit_code(exc: SystemExit) -> int:
    """The status ``sys.exit(x)`` gives a process: None 0, an int itself, anything else printed and 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def child(req: dict, channel: int) -> None:
    """Become ``python -m ARGS`` in req's folder, writing to its files; never returns."""
    import runpy
    import threading

    os.close(channel)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
    os.dup2(os.open(req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    for k, v in req["env"].items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    os.chdir(req["cwd"])
    sys.path[0] = req["cwd"]
    sys.argv = ["-m", *req["args"][1:]]
    code = 0
    try:
        runpy._run_module_as_main(req["args"][0], alter_argv=True)  # what ``python -m`` calls
    except SystemExit as exc:
        code = exit_code(exc)
    except BaseException as exc:  # printed as the interpreter prints it, from runpy's frame on
        exc.__traceback__ = exc.__traceback__.tb_next
        sys.excepthook(type(exc), exc, exc.__traceback__)
        code = 1
    try:
        threading._shutdown()  # as the interpreter does at exit: non-daemon threads first
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve(preload: list[str]) -> None:
    import importlib

    for name in preload:
        importlib.import_module(name)
    channel = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # what the modules print never reaches the channel
    answer = os.fdopen(channel, "w", buffering=1)
    answer.write("ready\n")
    for line in sys.stdin:
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            child(req, channel)
        answer.write(f"{pid}\n")
        _, status = os.waitpid(pid, 0)
        answer.write(f"{os.waitstatus_to_exitcode(status)}\n")


if __name__ == "__main__":
    sys.path[0] = os.getcwd()  # as ``python -m`` has it (not this file's folder)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the test's ^C reaches the children, not the server
    serve(sys.argv[1:])
