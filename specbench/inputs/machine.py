"""The machine that runs, measured first: its identity (every timed row and cost point carries it)
and the dtype it runs fastest (``dtype=auto``).

* ``identity(device)``: CPU or GPU model, the CPU's vector capability (torch's: AVX2, AVX512),
  cores, torch threads, torch version, a readable ``machine`` and a ``machine_id`` (a hash of the
  six): a speedup is never formed across two.
* ``host()``: which host, this boot of it (``/etc/machine-id`` and the kernel's boot id, hashed):
  hosts of one ``machine_id`` differ 10-25% in rate (two of this kind: 13.7 and 17.7 GFLOP/s at one row),
  so a cost curve is checked against live timing of its own host where both name one.  Not part of
  ``machine_id``: a VM restarted may run on another physical host, and rows of two boots still pool.
* ``rates(device)``: measured GFLOP/s of the models' widest projection (a 1536 × 8960 linear
  layer, the 1.5B target's MLP) in each dtype the device can use, at 1 row (a decode step), 4 and 16
  rows (a tree's narrow forward) and 64 rows (a wide tree or prefill), 30 interleaved repeats each
  (median); one row streams 256 MB of distinct layers per timing, as a decode step streams the model's
  weights.  CPUs of one kind differ 15× in bf16: with AVX-512 BF16 a bf16 matmul runs ~2× fp32, with
  AVX2 alone ~60× slower.  The narrow widths are what the plan's forward estimates read between 1 and 64
  rows (``study.tools.estimates.forward_s``): on the AVX2 EPYC in fp32 the layer ran 6.6, 6.4, 19.5 and
  40.1 GFLOP/s at 1, 4, 16 and 64 rows, and the 1.5B target's forward of 4 tokens took 3.5× one token's.
* ``pick(rates)``: the dtype with the larger geometric mean over 1 and 64 rows.
* ``auto_dtype(device)``: ``pick(rates(device))``, measured once per machine and kept in the cache
  folder (``<cache>/machine-<machine_id>.json``), so every job of a study resolves ``auto`` alike.
  ``python -m specbench.inputs.machine --out`` (the default run's first step) measures the rates again on
  every run, since the plan is sized by them, and keeps the cached dtype.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import statistics
import time

import torch

from ..core.args import Parser, check_out, refuse
from ..core.atomic import atomic_write, write_file
from ..core.diskcache import cache_root
from ..results.record import RecordError, read_machine

ROWS = (1, 4, 16, 64)
PICK_ROWS = (1, 64)  # the widths `pick` weighs: a decode step and a prefill
WIDTH, HIDDEN = 1536, 8960
STREAM_MB = 256  # the 1-row timing's distinct weights: more than a CPU's last-level cache
REPEATS = (
    30  # a 64-row product takes ~3 ms here: 5 repeats gave 181 or 313 GFLOP/s on one idle machine, 30 give 294-329
)


def cpu_model() -> str:
    """The processor's model name (/proc/cpuinfo on Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        if names:
            return names[0]
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host() -> str:
    """This boot of this host: 10 hex digits over ``/etc/machine-id`` and the kernel's boot id (Linux),
    else over the node name."""
    parts = []
    for path in ("/etc/machine-id", "/proc/sys/kernel/random/boot_id"):
        try:
            with open(path, encoding="utf-8") as f:
                parts.append(f.read().strip())
        except OSError:
            pass
    return hashlib.sha1("|".join(parts or [platform.node()]).encode()).hexdigest()[:10]


def identity(device: str | torch.device = "cpu") -> dict:
    """What times: CPU or GPU model, cores, threads, torch; ``machine`` in words, ``machine_id`` and
    ``host`` (``host()``)."""
    device = torch.device(device)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else ""
    what = {
        "cpu": cpu_model(),
        "capability": torch.backends.cpu.get_cpu_capability(),  # AVX2 vs AVX512: bf16 runs 60x apart
        "gpu": gpu,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    name = gpu or f"{what['cpu']} ({what['capability']}), {what['cores']} cores, {what['torch_threads']} threads"
    ident = hashlib.sha1(repr(sorted(what.items())).encode()).hexdigest()[:10]
    return {**what, "machine": f"{name}, torch {what['torch']}", "machine_id": ident, "host": host()}


def candidates(device: torch.device) -> tuple[str, ...]:
    return ("bfloat16", "float32") if device.type == "cpu" else ("bfloat16", "float16", "float32")


@torch.no_grad()
def rates(device: str | torch.device = "cpu") -> dict[str, dict[int, float]]:
    """{dtype: {rows: GFLOP/s}} of the layer, repeats interleaved across dtypes and widths.  One row
    goes through ``STREAM_MB`` of distinct layers per timing, as a decode step streams a model's
    weights from memory (one 27.5 MB bf16 layer stays in a large L3 cache and read 17 GFLOP/s where
    the 1.5B target's whole step ran at 13); 64 rows reuse one layer (compute-bound)."""
    device = torch.device(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    layers = {}
    for dt in candidates(device):
        size = WIDTH * HIDDEN * torch.finfo(getattr(torch, dt)).bits // 8
        k = max(1, math.ceil(STREAM_MB * 2**20 / size))
        layers[dt] = [torch.nn.Linear(WIDTH, HIDDEN, bias=False).to(device, getattr(torch, dt)) for _ in range(k)]
    xs = {(dt, n): torch.randn(n, WIDTH, device=device, dtype=getattr(torch, dt)) for dt in layers for n in ROWS}
    use = {(dt, n): layers[dt] if n == 1 else layers[dt][:1] for dt, n in xs}
    for key, x in xs.items():  # warm-up
        for layer in use[key]:
            layer(x)
    secs: dict[tuple, list[float]] = {k: [] for k in xs}
    for _ in range(REPEATS):
        for key, x in xs.items():
            sync()
            t0 = time.perf_counter()
            for layer in use[key]:
                layer(x)
            sync()
            secs[key].append(time.perf_counter() - t0)
    return {
        dt: {n: len(use[(dt, n)]) * 2 * n * WIDTH * HIDDEN / 1e9 / statistics.median(secs[(dt, n)]) for n in ROWS}
        for dt in layers
    }


def python_s(repeats: int = 5) -> float:
    """Seconds of the report's kind of work (a pandas group-by over 200k rows and a Python loop), median of
    ``repeats``: hosts that report one CPU differ 2.6x in it, and the default run's plan sizes its collect and
    report steps by it (study.tools.budget.fixed_steps).  Measured on each run, not cached."""
    import numpy as np  # start-up: only the plan's record needs them (auto_dtype does not)
    import pandas as pd  # start-up: as numpy above

    def once() -> float:
        t0 = time.perf_counter()
        rng = np.random.default_rng(0)
        df = pd.DataFrame({"k": rng.integers(0, 500, 200_000), "v": rng.random(200_000)})
        df.groupby("k").v.agg(["mean", "std", "count"])
        sum(i * i for i in range(1_000_000))
        return time.perf_counter() - t0

    return statistics.median(once() for _ in range(repeats))


def pick(measured: dict[str, dict[int, float]]) -> str:
    """The dtype with the larger geometric mean rate over 1 and 64 rows (``PICK_ROWS``; ties: the first given)."""
    picked = {dt: [r for n, r in by.items() if int(n) in PICK_ROWS] or list(by.values()) for dt, by in measured.items()}
    score = {dt: math.exp(sum(math.log(r) for r in rs) / len(rs)) for dt, rs in picked.items()}
    return max(score, key=lambda dt: score[dt])


def cached_path(machine_id: str, cache: str | None = None) -> str:
    """A machine's cached record (``auto_dtype``)."""
    return os.path.join(cache_root(cache), f"machine-{machine_id}.json")


def keyed(measured: dict) -> dict:
    """``rates``' {dtype: {rows: GFLOP/s}} as a record keeps it (rows as text: JSON keys)."""
    return {dt: {str(n): r for n, r in by.items()} for dt, by in measured.items()}


def _every_width(rec: dict) -> None:
    """A cached record's check: its dtype, and a rate at every width of ``ROWS`` in each dtype (a KeyError)."""
    str(rec["dtype"])
    if not all(str(n) in by for by in rec["rates_gflops"].values() for n in ROWS):
        raise KeyError("rates_gflops")


def auto_dtype(device: str = "cpu", cache: str | None = None, measured: dict | None = None) -> tuple[str, dict]:
    """(dtype, record) for ``dtype=auto``: measured once per machine (``measured``: rates just measured, else
    ``rates``), then read from the cache (measured again where the cached record lacks a width of ``ROWS``)."""
    me = identity(device)
    path = cached_path(me["machine_id"], cache)
    if os.path.isfile(path):
        try:
            rec = read_machine(path, _every_width)
            return str(rec["dtype"]), rec
        except RecordError:
            pass  # a cut or foreign file, or one of fewer widths (before 2026-12-05): measure again
    measured = measured or rates(device)
    rec = {
        **me,
        "dtype": pick(measured),
        "rates_gflops": keyed(measured),
    }
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, lambda tmp: write_file(tmp, json.dumps(rec, indent=1, sort_keys=True)))
    return rec["dtype"], rec


def resolve_device(device: str = "cpu") -> torch.device:
    device = str(device or "cpu")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device} but torch.cuda.is_available() is False "
                f"(torch {torch.__version__}): use device=cpu or device=auto"
            )
        d = torch.device(device)
        if d.index is not None and d.index >= torch.cuda.device_count():
            raise ValueError(f"device={device} but only {torch.cuda.device_count()} CUDA device(s) exist")
        return d
    raise ValueError(f"device '{device}' is not one of cpu, cuda, cuda:N, auto")


def resolve_dtype(value, device: str = "cpu", cache: str | None = None):
    """``value``, or for ``auto`` the faster dtype here (``auto_dtype``): resolved where the job spec
    is read, so every row and config hash names the dtype that ran."""
    return auto_dtype(device, cache)[0] if value == "auto" else value


def main(argv: list[str] | None = None) -> int:
    """`python -m specbench.inputs.machine [--out FILE]`: this machine measured (or read from the
    cache), printed in one line and written to ``--out`` (JSON) for the default run's plan."""
    ap = Parser(
        prog="python -m specbench.inputs.machine", description="this machine measured: dtype=auto and its rates"
    )
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    ap.add_argument("--out", default=None, help="where the record goes (JSON)")
    args = ap.parse_args(argv)
    try:  # the device and the record's path, before any measuring
        args.device = str(resolve_device(args.device))
    except ValueError as e:
        refuse(f"--device: {e}")
    if args.out:
        check_out(args.out, "--out")
    # this run's rates (one host's read 25 to 80 GFLOP/s at 64 rows between runs): the plan is sized by them; the
    # cached dtype stands, so every job of this machine resolves dtype=auto alike
    measured = rates(args.device)
    dtype, rec = auto_dtype(args.device, measured=measured)
    rec = {**rec, "rates_gflops": keyed(measured), "python_s": python_s()}  # this host, this run
    other = pick(measured)
    rates_txt = "; ".join(
        f"{dt} {' / '.join(f'{by[n]:.1f}' for n in widths)} GFLOP/s at {' / '.join(widths)} rows"
        for dt, by in rec["rates_gflops"].items()
        for widths in [sorted(by, key=int)]
    )
    print(
        f"machine: {rec['machine']} [{rec['machine_id']}]: {rates_txt}; Python work {rec['python_s']:.3f} s: "
        f"dtype=auto is {dtype}"
        + (
            f" (this run's rates favour {other}; the cached choice stands: remove {cached_path(rec['machine_id'])} to pick again)"
            if other != dtype
            else ""
        )
    )
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        atomic_write(args.out, lambda tmp: write_file(tmp, json.dumps(rec, indent=1, sort_keys=True) + "\n"))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
