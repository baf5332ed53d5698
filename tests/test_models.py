"""Model loading (tiny local models) and the embedded-model install/cache checks."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json

import pytest
import torch

from specbench.core.registry import Registry
from specbench.core.tree import tree_attention_mask, tree_position_ids
from specbench.inputs import embedded, models


@pytest.fixture(autouse=True)
def _fresh_cache():
    models.clear_cache()
    yield
    models.clear_cache()


def local(path):
    return {"source": "local", "path": path}


def pair_cfg(draft, target, drafter="model"):
    return {"name": "tiny", "draft": local(draft), "target": local(target), "drafter": drafter, "chat_template": False}


# --------------------------------------------------------------------------
# loading
# --------------------------------------------------------------------------
def test_local_load_is_cached_eval_sdpa(tiny_pair_dirs):
    a = models.load_model(local(tiny_pair_dirs[1]), "float32", "cpu")
    b = models.load_model(local(tiny_pair_dirs[1]), "float32", "cpu")
    assert a is b
    assert not a.training
    assert a.dtype == torch.float32
    assert a.config._attn_implementation == "sdpa"
    c = models.load_model(local(tiny_pair_dirs[1]), "bfloat16", "cpu")
    assert c is not a and c.dtype == torch.bfloat16
    assert models.load_tokenizer(local(tiny_pair_dirs[1])) is models.load_tokenizer(local(tiny_pair_dirs[1]))


def test_load_pair_and_ngram(tiny_pair_dirs):
    p = models.load_pair(pair_cfg(*tiny_pair_dirs), "float32", "auto")
    assert p.draft is not None and p.target is not None and p.draft is not p.target
    assert p.name == "tiny" and p.chat_template is False
    assert p.target_name == tiny_pair_dirs[1]
    n = models.load_pair(pair_cfg(*tiny_pair_dirs, drafter="ngram"), "float32", "cpu")
    assert n.draft is None and n.draft_name == "ngram"
    assert n.target is p.target  # reused from the process cache


def test_tokenizer_mismatch_is_one_line(tiny_pair_dirs, tiny_other_tokenizer_dir):
    with pytest.raises(ValueError, match="pick a pair that shares a tokenizer") as e:
        models.load_pair(pair_cfg(tiny_other_tokenizer_dir, tiny_pair_dirs[1]), "float32", "cpu")
    assert "\n" not in str(e.value) and "differ" in str(e.value)


@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"dtype": "fp8"}, "dtype 'fp8' is not one of"),
        ({"device": "tpu"}, "device 'tpu' is not one of"),
    ],
)
def test_bad_dtype_device(tiny_pair_dirs, kw, msg):
    args = {"dtype": "float32", "device": "cpu", **kw}
    with pytest.raises(ValueError, match=msg):
        models.load_model(local(tiny_pair_dirs[1]), **args)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_cuda_requested_without_cuda():
    with pytest.raises(ValueError, match="torch.cuda.is_available"):
        models.resolve_device("cuda")
    assert models.resolve_device("auto").type == "cpu"


def test_bad_specs(tmp_path):
    with pytest.raises(ValueError, match="source"):
        models.load_model({"source": "s3", "id": "x"})
    with pytest.raises(ValueError, match="needs 'path'"):
        models.load_model({"source": "local"})
    with pytest.raises(ValueError, match="no config.json"):
        models.load_model(local(str(tmp_path)))
    with pytest.raises(ValueError, match="drafter"):
        models.load_pair({"target": local(str(tmp_path)), "drafter": "oracle"})


def test_sdpa_honours_4d_tree_mask(tiny_pair_dirs):
    """Tree nodes scored in one forward over a prefix cache == plain forward of each path."""
    from transformers import DynamicCache

    m = models.load_model(local(tiny_pair_dirs[1]), "float32", "cpu")
    prefix = torch.tensor([[5, 17, 42, 9]])
    parents, tokens = [-1, 0, 0, 1, 2, 3], [7, 11, 12, 13, 14, 15]
    with torch.no_grad():
        cache = DynamicCache()
        m(prefix, past_key_values=cache, use_cache=True)
        P = prefix.shape[1]
        out = m(
            torch.tensor([tokens]),
            past_key_values=cache,
            use_cache=True,
            attention_mask=tree_attention_mask(parents, P, dtype=torch.float32),
            position_ids=tree_position_ids(parents, P),
        ).logits[0]
        for i in range(len(parents)):
            path, j = [], i
            while j >= 0:
                path.insert(0, tokens[j])
                j = parents[j]
            ref = m(torch.cat([prefix, torch.tensor([path])], 1)).logits[0, -1]
            torch.testing.assert_close(out[i], ref, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------
# embedded models: cache checks, assembly, sha256
# --------------------------------------------------------------------------
def test_embedded_not_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="is not installed: run bash scripts/setup.sh"):
        models.load_model({"source": "embedded", "id": "qwen2.5-coder-0.5b-instruct"})
    with pytest.raises(KeyError, match="Valid: .*qwen2.5-coder"):
        models.load_model({"source": "embedded", "id": "qwen-nope"})
    assert not embedded.installed()


def test_embedded_corrupt_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    m = embedded.EMBEDDED.get("qwen2.5-coder-1.5b-instruct")
    d = tmp_path / m.key
    (d / "hf").mkdir(parents=True)
    (d / "hf" / "config.json").write_text("{}")
    marker = {"sha256": m.sha256, "hf_files": {"config.json": 2, "model.safetensors": 10}}
    (d / "done").write_text(json.dumps(marker))
    with pytest.raises(ValueError, match="model.safetensors is missing or truncated"):
        models.load_model({"source": "embedded", "id": m.key})
    (d / "done").write_text("{not json")
    with pytest.raises(ValueError, match="marker .* is corrupt"):
        embedded.hf_path(m.key)


def _fake_parts(root, package, n, monkeypatch):
    """Installable-looking part modules `<package>_partI` whose data is b'I,'."""
    pkg = package.replace("-", "_")
    for i in range(1, n + 1):
        mod = root / "site" / f"{pkg}_part{i}"
        (mod / "data").mkdir(parents=True)
        (mod / "data" / f"part{i:02d}.bin").write_bytes(b"%d," % i)
        (mod / "__init__.py").write_text(
            "import os\ndef get_part_path():\n"
            f"    return os.path.join(os.path.dirname(__file__), 'data', 'part{i:02d}.bin')\n"
        )
    monkeypatch.syspath_prepend(str(root / "site"))
    data = b"".join(b"%d," % i for i in range(1, n + 1))
    return data, root / "site"


def _fake_model(data, package="fake-model", n=12, sha=None):
    return embedded.EmbeddedModel("fake", "none", package, "1.0", n, len(data), sha or hashlib.sha256(data).hexdigest())


def test_assemble_numeric_order_and_sha(tmp_path, monkeypatch):
    data, _ = _fake_parts(tmp_path, "fake-model-a", 12, monkeypatch)
    m = _fake_model(data, "fake-model-a")
    dest = tmp_path / "cache" / "model.gguf"
    assert embedded.assemble(m, embedded.part_paths(m), dest) == m.sha256
    assert dest.read_bytes() == data  # 1,2,...,10,11,12 — numeric, not lexical


def test_assemble_bad_sha_leaves_no_file(tmp_path, monkeypatch):
    data, _ = _fake_parts(tmp_path, "fake-model-b", 12, monkeypatch)
    m = _fake_model(data, "fake-model-b", sha="0" * 64)
    out = tmp_path / "cache"
    with pytest.raises(ValueError, match="sha256 mismatch .*a part is corrupt") as e:
        embedded.assemble(m, embedded.part_paths(m), out / "model.gguf")
    assert "\n" not in str(e.value)
    assert list(out.iterdir()) == []


def test_missing_part_names_the_fix(tmp_path, monkeypatch):
    data, site = _fake_parts(tmp_path, "fake-model-c", 12, monkeypatch)
    (site / "fake_model_c_part7" / "data" / "part07.bin").unlink()
    m = _fake_model(data, "fake-model-c")
    with pytest.raises(ValueError, match=r"part 7 of fake-model-c missing .*run bash scripts/setup.sh"):
        embedded.part_paths(m)


def test_install_corrupt_part_writes_nothing(tmp_path, monkeypatch):
    """A full install with a corrupt part: one-line sha256 error, no gguf/hf/done left."""
    data, site = _fake_parts(tmp_path, "fake-model-d", 12, monkeypatch)
    m = _fake_model(data, "fake-model-d")
    (site / "fake_model_d_part3" / "data" / "part03.bin").write_bytes(b"X,")  # corrupt
    reg = Registry("embedded model")
    reg.register(m.key)(m)
    monkeypatch.setattr(embedded, "EMBEDDED", reg)
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="sha256 mismatch"):
        embedded.install_one("fake", pip=False)
    left = sorted(p.name for p in (tmp_path / "cache" / "fake").iterdir())
    assert left == [".install.lock"]
    assert embedded.main(["status"]) == 1


def test_install_converts_in_parallel_while_the_next_models_packages_download(monkeypatch):
    """jobs > 1: pip runs one model at a time in this process, each model's conversion goes to the pool as soon as
    its packages are in, an installed model is not pip-installed again, and a failed conversion is raised here."""
    events = []

    class Pool:  # the process pool, run in line (a spawned process would not see this test's patches)
        def __init__(self, jobs, mp_context=None, initializer=None):
            events.append(("pool", jobs))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def submit(self, fn, *args):
            events.append(("convert", args[0]))
            f = concurrent.futures.Future()
            try:
                f.set_result(fn(*args))
            except Exception as e:  # noqa: BLE001  (a future carries it)
                f.set_exception(e)
            return f

    def one(key, force, keep_gguf, pip):
        assert pip is False  # the pip step is this process's
        if key == "bad":
            raise ValueError("bad: sha256 mismatch")

    monkeypatch.setattr(embedded, "ProcessPoolExecutor", Pool)
    monkeypatch.setattr(embedded, "install_one", one)
    monkeypatch.setattr(embedded, "is_installed", lambda key: key == "done")
    monkeypatch.setattr(embedded.EMBEDDED, "get", lambda key: key)
    monkeypatch.setattr(embedded, "pip_install_parts", lambda m, force=False: events.append(("pip", m)))
    embedded.install(["a", "done", "b"], jobs=2)
    assert events == [("pool", 2), ("pip", "a"), ("convert", "a"), ("convert", "done"), ("pip", "b"), ("convert", "b")]
    with pytest.raises(ValueError, match="bad: sha256"):
        embedded.install(["bad", "a"], jobs=2)
    assert embedded.main(["install", "--jobs", "0"]) == 2


def test_embedded_cache_dtype_variant(tmp_path, monkeypatch):
    """bf16 loads use the cached bf16 copy when intact, else fall back to the fp32 folder."""
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    m = embedded.EMBEDDED.get("qwen2.5-coder-0.5b-instruct")
    d = tmp_path / m.key
    for sub in ("hf", "hf-bfloat16"):
        (d / sub).mkdir(parents=True)
        (d / sub / "config.json").write_text("{}")
    marker = {"sha256": m.sha256, "hf_files": {"config.json": 2}, "variants": {"bfloat16": {"config.json": 2}}}
    (d / "done").write_text(json.dumps(marker))
    assert embedded.installed([m.key])
    assert embedded.hf_path(m.key, "bfloat16") == d / "hf-bfloat16"
    assert embedded.hf_path(m.key, "float32") == d / "hf"
    assert embedded.hf_path(m.key, "float16") == d / "hf"
    (d / "hf-bfloat16" / "config.json").write_text("{ }")  # truncated/changed copy
    assert embedded.hf_path(m.key, "bfloat16") == d / "hf"


def test_random_weights_build_the_architecture_from_its_config_alone(tiny_pair_dirs, tmp_path):
    """``weights: random`` needs only config.json: same layers and shapes as the folder's
    model, seeded weights (the same twice), never the folder's own; a bad value is one line."""
    import shutil

    from specbench.study.job.jobspec import ConfigError, PairSpec, _model

    arch = tmp_path / "arch"
    arch.mkdir()
    shutil.copy(f"{tiny_pair_dirs[0]}/config.json", arch)  # the draft: a noisy copy, not seed 0
    real = models.load_model(local(tiny_pair_dirs[0]), "float32")
    spec = {**local(str(arch)), "weights": "random"}
    rand = models.load_model(spec, "float32")
    models.clear_cache()
    again = models.load_model(spec, "float32")
    shapes = {k: v.shape for k, v in real.state_dict().items()}
    assert {k: v.shape for k, v in rand.state_dict().items()} == shapes
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in rand.state_dict().items())
    assert not torch.equal(rand.lm_head.weight, real.lm_head.weight)
    job_model = _model(spec, "pair.target")
    assert job_model.as_dict() == spec and _model(local("d"), "pair.draft").as_dict() == local("d")
    with pytest.raises(ConfigError, match=r"^pair.target.weights='zeros': must be one of pretrained, random$"):
        _model({**spec, "weights": "zeros"}, "pair.target")

    assert PairSpec("p", None, job_model).weights == "random"  # what costs and speed rows record
    assert PairSpec("p", None, _model(local("d"), "pair.target")).weights == "pretrained"
