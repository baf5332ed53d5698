"""A managed ``llama-server`` (``inputs.llamacpp``'s proven build): started on a free localhost port,
health-checked, always stopped.

``with LlamaServer(model, spec=[...]) as srv:`` starts the server with one slot, the machine's
threads, a fixed seed, its ``/metrics`` on and its log in a file (``log``, default a temp file), and
waits for ``/health`` (``timeout_s``).  It is stopped (SIGTERM, then SIGKILL) when the block ends,
however it ends: an exception, a failed request, Ctrl-C; on Linux the kernel also stops it if this
process dies first.  ``srv.complete(prompt, n)`` decodes greedily (temperature 0, top_k 1, the fixed
seed, ``cache_prompt`` off unless the server was started with it on, EOS ignored so ``n`` tokens
come) and returns the response with its ``timings``.  A server that exits before it is healthy or
while a request runs is one line naming its exit and its log (``ServerDied``); a request it refuses
is one line with its message (``ServerError``).  ``decode`` appends one row per finished request to
a JSON-lines file, so the rows finished before a failure are kept.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from ...inputs import llamacpp

SEED = 42
HOST = "127.0.0.1"


class ServerError(RuntimeError):
    """A request the server refused, or a server that did not come up: one line."""


class ServerDied(ServerError):
    """The server process exited while it was needed: one line naming its exit and its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: SIGTERM to the server when the process that started it dies (PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _temp_log() -> Path:
    with tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False) as f:
        return Path(f.name)


class LlamaServer:
    """One ``llama-server`` process for the lifetime of a ``with`` block (see the module's docstring).

    ``spec``: the speculative flags (``--spec-type draft-simple --spec-draft-model D ...``; empty:
    plain decoding); ``extra``: any further server flags."""

    def __init__(self, model: str | Path, spec: Iterable[str] = (), *, ctx: int = 2048, threads: int | None = None,
                 seed: int = SEED, cache_prompt: bool = False, log: str | Path | None = None,
                 timeout_s: float = 120.0, extra: Iterable[str] = ()) -> None:  # fmt: skip
        self.model, self.spec, self.extra = Path(model), list(spec), list(extra)
        self.ctx, self.threads, self.seed = ctx, threads or os.cpu_count() or 1, seed
        self.cache_prompt, self.timeout_s = cache_prompt, timeout_s
        self.log = Path(log) if log else _temp_log()
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def argv(self) -> list[str]:
        t = str(self.threads)
        return [
            str(llamacpp.binary("llama-server")), "-m", str(self.model), "--host", HOST, "--port", str(self.port),
            "-np", "1", "-c", str(self.ctx), "-t", t, "-tb", t, "--seed", str(self.seed), "--metrics",
            "--no-warmup", *self.spec, *self.extra,
        ]  # fmt: skip

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.port = free_port()
        cmd = self.argv()
        with open(self.log, "w") as fh:
            fh.write("$ " + " ".join(cmd) + "\n")
            fh.flush()
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
            )
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            self._check_alive("while starting")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.05)
        raise ServerError(f"llama-server not healthy after {self.timeout_s:g}s; its log: {self.log}")

    def _check_alive(self, when: str) -> None:
        rc = self.proc.poll() if self.proc else -1
        if rc is not None:
            how = f"signal {-rc}" if rc < 0 else f"exit {rc}"
            raise ServerDied(f"llama-server died ({how}) {when}; its log: {self.log}")

    def stop(self) -> None:
        """Stop the process (SIGTERM, 10 s, then SIGKILL); safe to call twice."""
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def _request(self, path: str, body: dict | None = None, timeout: float = 600.0) -> bytes:
        self._check_alive("before a request")
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            msg = e.read().decode(errors="replace")
            try:
                msg = json.loads(msg)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                pass
            raise ServerError(f"llama-server refused {path} (HTTP {e.code}): {str(msg)[:200]}") from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            time.sleep(0.2)  # let a dying process be reaped, so the line says how it died
            self._check_alive(f"during a request to {path}")
            raise ServerError(f"llama-server did not answer {path} ({e}); its log: {self.log}") from None

    def complete(self, prompt: str | list[int], n_predict: int, **extra) -> dict:
        """One greedy completion (the server's JSON: ``content``, ``tokens``, ``timings``, ...)."""
        body = {"prompt": prompt, "n_predict": n_predict, "temperature": 0.0, "top_k": 1, "seed": self.seed,
                "cache_prompt": self.cache_prompt, "ignore_eos": True, "return_tokens": True, **extra}  # fmt: skip
        return json.loads(self._request("/completion", body))

    def metrics(self) -> str:
        """The server's ``/metrics`` text (Prometheus)."""
        return self._request("/metrics").decode()


def decode(server: LlamaServer, prompts: Iterable[tuple[str, str]], n_predict: int, out: str | Path) -> int:
    """Decode each (prompt id, text) and append its row (id, tokens, text, timings) to ``out`` (JSON
    lines, flushed per row) as it finishes; the rows written before a failure stay.  Returns the
    number of rows written."""
    n = 0
    with open(out, "a") as fh:
        for pid, text in prompts:
            r = server.complete(text, n_predict)
            row = {"prompt_id": pid, "tokens": r.get("tokens", []), "text": r.get("content", ""),
                   "timings": r.get("timings", {})}  # fmt: skip
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            n += 1
    return n
