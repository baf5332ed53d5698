"""Shared fixtures: tiny random Qwen2 models and a tiny tokenizer, built locally.

No test downloads anything.  The draft is the target with noise added to its
weights, so the two agree often enough for acceptance to be interesting.
"""

from __future__ import annotations

import copy
import os
import pathlib

# Tiny models run fastest single-threaded, and the 2-core CI box is shared by
# subprocess jobs: OpenMP spinning across oversubscribed threads costs ~30x.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "The quick brown fox jumps over the lazy dog.",
    "for i in range(10):\n    print(i)\n",
    "Write a short poem about the sea. Translate 'hello' into French.",
]


def build_tokenizer(vocab_size: int = 320, corpus=CORPUS):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")


def build_model(vocab_size: int, seed: int, layers: int = 2):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        initializer_range=0.3,
        tie_word_embeddings=False,
        eos_token_id=0,
        bos_token_id=0,
        pad_token_id=0,
    )
    cfg._attn_implementation = "sdpa"
    return Qwen2ForCausalLM(cfg).eval()


def noisy_copy(model, scale: float, seed: int):
    torch.manual_seed(seed)
    out = copy.deepcopy(model)
    with torch.no_grad():
        for p in out.parameters():
            p.add_(torch.randn_like(p) * scale * p.std())
    return out


@pytest.fixture(scope="session")
def tiny_tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="session")
def tiny_target(tiny_tokenizer):
    return build_model(len(tiny_tokenizer), seed=0)


@pytest.fixture(scope="session")
def tiny_draft(tiny_target):
    return noisy_copy(tiny_target, 0.3, seed=1)


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    """The tiny GGUF as target and as draft (files for llama.cpp's tests); skipped with the build's one line where
    llama.cpp is not built."""
    from specbench.inputs import llamacpp, tinygguf

    why = llamacpp.unavailable()
    if why:
        pytest.skip(why)
    d = tmp_path_factory.mktemp("tiny_gguf")
    return {role: str(tinygguf.write(d / role / "model.gguf")) for role in ("target", "draft")}


@pytest.fixture(scope="session")
def tiny_pair_dirs(tmp_path_factory, tiny_tokenizer, tiny_target, tiny_draft):
    """Local HF folders (model + tokenizer) for the draft and the target."""
    root = tmp_path_factory.mktemp("tiny_pair")
    dirs = []
    for name, model in (("draft", tiny_draft), ("target", tiny_target)):
        d = root / name
        model.save_pretrained(d)
        tiny_tokenizer.save_pretrained(d)
        dirs.append(str(d))
    return tuple(dirs)


@pytest.fixture(scope="session")
def two_sweeps(tiny_pair_dirs, tmp_path_factory):
    """Two finished sweeps (2 configurations each) of the tiny pair, read (never written) by the kill tests of
    test_reliability and test_publish_kill: one worker runs them all (SESSION_SHARED), so it is built once."""
    from test_hydra import job_args, specbench

    root = tmp_path_factory.mktemp("sweeps")
    for name, trees in (("a", "chain,binary"), ("b", "kary,topk_wide")):
        args = job_args(tiny_pair_dirs, root / "outputs", "-m", f"tree={trees}", "tree.budget=2")
        r = specbench(*args, f"hydra.sweep.dir={root / name}")
        assert r.returncode == 0, r.stderr[-2000:]
    return root


@pytest.fixture(scope="session")
def tiny_other_tokenizer_dir(tmp_path_factory):
    """A model folder whose tokenizer differs from the tiny pair's."""
    d = tmp_path_factory.mktemp("other_tok")
    tok = build_tokenizer(300, corpus=["completely different text", "zebra yak quokka"])
    build_model(len(tok), seed=5).save_pretrained(d)
    tok.save_pretrained(d)
    return str(d)


def tiny_pair_overrides(dirs) -> list[str]:
    """Hydra overrides that point pair=local at the tiny folders (fp32, cpu)."""
    return [
        "pair=local",
        f"pair.draft.path={dirs[0]}",
        f"pair.target.path={dirs[1]}",
        "dtype=float32",
        "device=cpu",
        "progress=false",
    ]


def greedy_reference(target, prompt_ids, n: int, eos: int = 0) -> list[int]:
    """The target's own plain greedy decode (HF generate), new tokens only."""
    ids = torch.tensor([list(prompt_ids)])
    out = target.generate(
        ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False, eos_token_id=eos, pad_token_id=eos
    )
    return out[0, ids.shape[1] :].tolist()


# The real tests' prompt: the smoke dataset's first, a 13-token code prompt.  The 1.5B target's fp32
# prefill is compute-bound on one thread (~5 s for the 118-token first HumanEval prompt, ~0.6 s here),
# and every decode and reference pays it; what the tests check does not depend on the prompt's length.
REAL_PROMPTS = {"name": "smoke", "limit": 1}
REAL_GREEDY_TOKENS = 16  # the longest target greedy reference a real test compares against
_REAL_GREEDY: dict = {}


def real_target_greedy(pair, prompt_ids, n: int) -> list[int]:
    """The real pair's target's own plain greedy continuation (HF generate, the pair's EOS ids),
    new tokens only, at most ``n`` <= ``REAL_GREEDY_TOKENS``.  The real tests compare several pairs and
    trees against the same 1.5B target on the same prompt (~0.6 s a token in fp32 on one CPU
    thread), so it is computed once per session, ``REAL_GREEDY_TOKENS`` long; a shorter one is its
    prefix (greedy decoding never looks ahead: the first n steps are the same computation)."""
    from specbench.api import eos_ids

    assert n <= REAL_GREEDY_TOKENS
    eos = sorted(eos_ids(pair))
    key = (pair.target_name, str(pair.target.dtype), str(pair.target.device), tuple(prompt_ids), tuple(eos))
    if key not in _REAL_GREEDY:
        ids = torch.tensor([list(prompt_ids)])
        with torch.no_grad():
            out = pair.target.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=REAL_GREEDY_TOKENS,
                do_sample=False,
                eos_token_id=eos,
                pad_token_id=pair.tokenizer.pad_token_id,
            )
        _REAL_GREEDY[key] = out[0, ids.shape[1] :].tolist()
    return _REAL_GREEDY[key][:n]


def real_models_installed() -> bool:
    try:
        from specbench.inputs.embedded import installed
    except ImportError:
        return False
    return installed()


def decode_one(
    drafter,
    target,
    prompt_ids,
    policy,
    n: int = 24,
    mode: str = "greedy",
    params=None,
    eos=(0,),
    seed: int = 0,
    verifier=None,
):
    """One prompt through the engine's one loop: (step records, new tokens)."""
    from specbench.engine.loop import Decoding, decode_prompt
    from specbench.engine.verifiers import LiveVerifier
    from specbench.verify.modes import get_mode

    spec = get_mode(mode)
    params = spec.params({"temperature": 0.0, **(params or {})})
    verifier = verifier or LiveVerifier(target, params["temperature"], params["top_p"])
    res = decode_prompt(
        "p0",
        prompt_ids,
        drafter,
        verifier,
        policy,
        Decoding(spec, params, n, frozenset(eos)),
        torch.Generator().manual_seed(seed),
    )
    return res.records, res.tokens


ROOT = pathlib.Path(__file__).resolve().parents[1]
# the documentation: README.md, then the reference pages under docs/ it links
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def docs_text() -> str:
    """README.md and every docs/*.md page, concatenated: what the documentation says."""
    return "\n".join(p.read_text() for p in DOC_FILES)


def report_text(path) -> str:
    """REPORT.md with the pages it links (results/tables/*.md): the whole report's text."""
    import re
    from pathlib import Path

    path = Path(path)
    text = path.read_text()
    pages = dict.fromkeys(re.findall(r"\]\(([^)\s]+\.md)\)", text))
    return text + "".join((path.parent / p).read_text() for p in pages if (path.parent / p).is_file())


def report_figures(path) -> list:
    """Every figure REPORT.md and its linked pages link, resolved from the file that links it."""
    import re
    from pathlib import Path

    path = Path(path)
    docs = [path, *(path.parent / p for p in re.findall(r"\]\(([^)\s]+\.md)\)", path.read_text()))]
    return [
        d.parent / link for d in docs if d.is_file() for link in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", d.read_text())
    ]


# module-scoped fixtures that take seconds to build (a sweep, a rendered report, a table of
# exact laws): the tests that use one share a worker, so it is built once, not once per worker
SHARED_FIXTURES = {"basic_rows", "table", "sweep", "built", "big", "rendered_once", "tiny_runs"}
SESSION_SHARED = {"two_sweeps"}  # session-scoped, used by several modules: all its tests share one worker


# the tests left out of the fast tier (`bash scripts/test.sh --fast`: `-m "not slow"`), by node id prefix: each
# starts processes (sweeps, kills, launchers, the default run, a server) or renders the whole report; every one
# still runs in the full suite (CI's)
SLOW = (
    "tests/test_run_all.py", "tests/test_publish_kill.py", "tests/test_slurm.py", "tests/test_resume.py",
    "tests/test_concurrent.py", "tests/test_plugins.py", "tests/test_recheck.py", "tests/test_plan_launchers.py",
    "tests/test_launchers.py", "tests/test_reliability.py", "tests/test_faults.py", "tests/test_lossless_check.py",
    "tests/test_pair_identity.py", "tests/test_scripts.py", "tests/test_committed_identity.py",
    "tests/test_llamacpp.py", "tests/test_forkserver.py", "tests/test_hydra.py", "tests/test_acceptance.py",
    "tests/test_report_claims.py::test_committed_report_regenerates_byte_identically",
    "tests/test_report.py::test_report_is_byte_deterministic", "tests/test_report.py::test_notebook_executes",
    "tests/test_speed_bench.py::test_the_benchmark_times_every_candidate",
    "tests/test_export.py::test_the_profile_of_a_committed",
    *(ln for ln in pathlib.Path(__file__).with_name("slow_tests.txt").read_text().split("\n") if ln[:1] not in ("", "#")),
)  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the group marks
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (scripts/test.sh runs ``-n auto --dist loadgroup``) the tests that load
    the installed models share one worker, so each real model is loaded and held once; so do the SLURM
    tests (two workers would start two local clusters on one port), a module's tests that use one of its
    ``SHARED_FIXTURES`` and all the tests that use one of the ``SESSION_SHARED`` fixtures."""
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("real"):
            item.add_marker(pytest.mark.xdist_group("real"))
        elif item.get_closest_marker("slurm"):  # one local cluster (scripts/slurm_local.sh: one port) at a time
            item.add_marker(pytest.mark.xdist_group("slurm"))
        elif SESSION_SHARED & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group(min(SESSION_SHARED & set(item.fixturenames))))
        elif SHARED_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


@pytest.fixture(autouse=True)
def _staging_command():
    """Each test starts as no command (``core.atomic.command``): a command's main run in-process by an
    earlier test must not decide which staged files this test's ``recover`` cleans."""
    from specbench.core import atomic

    atomic.command("specbench")
    yield
