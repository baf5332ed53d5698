"""llama.cpp as the second engine (#84), without the real models: the build's flag sets and its
one-line failures, the tiny GGUF, and the real ``llama-server`` (built by ``scripts/setup.sh``)
serving it: start and stop, a speculative request with a tiny draft, a server killed mid-run.  The server tests skip, with the build's own line, only where no build is possible."""

from __future__ import annotations

import json
import os
import signal

import gguf
import pytest

from specbench.inputs import llamacpp, tinygguf
from specbench.study.tools.llamaserver import LlamaServer, ServerDied, decode

AVX512 = {"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512_vnni", "amx_tile", "amx_int8"}


def test_flag_sets_try_this_cpu_then_avx2_then_none_and_never_amx():
    names = [(n, opts) for n, opts in llamacpp.variants(AVX512)]
    assert [n for n, _ in names] == ["cpu", "avx2", "portable"]
    cpu = dict(o[2:].split("=") for o in names[0][1])
    assert cpu["GGML_AVX512"] == "ON" and cpu["GGML_AVX512_VNNI"] == "ON" and cpu["GGML_AVX512_BF16"] == "OFF"
    assert not any("AMX" in o for _, opts in names for o in opts)  # a native build died of SIGILL in AMX kernels
    assert all(o.endswith("=OFF") for o in names[2][1])
    assert [n for n, _ in llamacpp.variants({"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"})] == ["cpu", "portable"]
    assert llamacpp.variants({"neon", "asimd"}) == [("portable", [])]  # not x86: ggml's defaults
    assert "-DGGML_NATIVE=OFF" in llamacpp.COMMON and "-DLLAMA_CURL=OFF" in llamacpp.COMMON


def test_the_cache_is_keyed_by_version_and_cpu_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    a, b = llamacpp.home(AVX512), llamacpp.home(AVX512 - {"avx512f"})
    assert a != b and a.parent == b.parent == tmp_path / "llama.cpp" and a.name.startswith(llamacpp.VERSION + "-")
    assert llamacpp.home(AVX512 | {"sse3"}) == a  # a flag ggml has no option for does not rebuild


def test_missing_compiler_is_one_line_recorded_and_every_step_skips_with_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    monkeypatch.delenv("SPECBENCH_SKIP_LLAMACPP", raising=False)
    monkeypatch.setattr(llamacpp.shutil, "which", lambda name: None)
    assert llamacpp.main(["build"]) == 0  # set-up goes on
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "no cmake, no C compiler, no C++ compiler" in out[0] and "apt-get install" in out[0]
    why = llamacpp.unavailable()
    assert why and "\n" not in why and "install cmake" in why
    with pytest.raises(llamacpp.Unavailable, match="install cmake"):
        LlamaServer(tmp_path / "m.gguf").argv()
    assert llamacpp.main(["status"]) == 1
    monkeypatch.setattr(llamacpp.shutil, "which", lambda name: f"/usr/bin/{name}")  # installed since
    monkeypatch.setattr(llamacpp, "_build", lambda where, say: {"error": "built again"})
    assert llamacpp.build()["error"] == "built again"  # the next set-up tries, without --force


def test_a_build_failing_its_smoke_run_falls_back_to_the_next_flag_set(tmp_path, monkeypatch):
    """The first flag set's binary dies of SIGILL in the smoke run; the AVX2 one passes and is kept."""
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(llamacpp, "cpu_flags", lambda: set(AVX512))
    monkeypatch.setattr(llamacpp, "sources", lambda work: tmp_path)
    built = []

    def fake_compile(src, work, name, options, log):
        bindir = work / f"build-{name}" / "bin"
        bindir.mkdir(parents=True)
        for t in llamacpp.TARGETS:
            (bindir / t).write_text(f"#!/bin/sh\necho 'version: 1 ({name})'\n")
            (bindir / t).chmod(0o755)
        built.append(name)
        return bindir

    monkeypatch.setattr(llamacpp, "compile_variant", fake_compile)
    monkeypatch.setattr(
        llamacpp, "smoke", lambda bindir, work: "llama-bench signal 4" if "cpu" in str(bindir) else None
    )
    rec = llamacpp.build(say=lambda line: None)
    assert built == ["cpu", "avx2"] and rec["variant"] == "avx2" and rec["smoke"] and "error" not in rec
    assert llamacpp.unavailable() is None and rec["version"] == "1 (avx2)"
    assert llamacpp.build(say=lambda line: None)["build_s"] == rec["build_s"]  # cached: not built again
    assert built == ["cpu", "avx2"]


def test_the_tiny_gguf_reads_back(tmp_path):
    p = tinygguf.write(tmp_path / "t.gguf")
    r = gguf.GGUFReader(p)
    names = {t.name for t in r.tensors}
    assert {
        "token_embd.weight",
        "output.weight",
        "blk.1.ffn_down.weight",
    } <= names and "blk.2.attn_q.weight" not in names
    tokens = r.fields["tokenizer.ggml.tokens"]
    assert len(tokens.data) == len(tinygguf.vocab()[0]) < 400
    assert tinygguf.write(tmp_path / "u.gguf").read_bytes() == p.read_bytes()  # one seed, one model


# --- the real llama-server on the tiny model --------------------------------------------------


@pytest.fixture(scope="module")
def built():
    why = llamacpp.unavailable()
    if why:
        pytest.skip(why)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, built):
    d = tmp_path_factory.mktemp("tiny")
    return {"target": tinygguf.write(d / "target.gguf"), "same": tinygguf.write(d / "draft.gguf"), "dir": d}


PROMPT = "def add(a, b):\n    return a + b\n"
N = 25  # the first token, then 6 steps of 3 accepted drafts + 1: no draft cut short by the tokens left


def test_server_starts_answers_greedily_and_stops(tiny):
    with LlamaServer(tiny["target"], ctx=256) as srv:
        proc = srv.proc
        r = srv.complete(PROMPT, N)
        assert r["timings"]["predicted_n"] == N and len(r["tokens"]) == N
        assert srv.complete(PROMPT, N)["tokens"] == r["tokens"]  # greedy, fixed seed
        assert "draft_n" not in r["timings"]  # plain decoding
    assert proc.poll() is not None and srv.proc is None  # stopped


def test_a_failure_inside_the_block_stops_the_server(tiny):
    with pytest.raises(KeyboardInterrupt):
        with LlamaServer(tiny["target"], ctx=256) as srv:
            proc = srv.proc
            raise KeyboardInterrupt  # Ctrl-C
    assert proc.poll() is not None


def test_speculative_request_with_a_tiny_draft_is_identical_to_plain(tiny):
    with LlamaServer(tiny["target"], ctx=256) as srv:
        plain = srv.complete(PROMPT, N)["tokens"]
    spec = ["--spec-type", "draft-simple", "--spec-draft-model", str(tiny["same"]), "--spec-draft-n-max", "3"]
    with LlamaServer(tiny["target"], spec, ctx=256) as srv:
        r = srv.complete(PROMPT, N)
    t = r["timings"]
    assert r["tokens"] == plain  # lossless at T=0
    assert t["draft_n"] > 0 and t["draft_n_accepted"] == t["draft_n"]  # the draft is the target: all accepted


def test_a_server_killed_mid_run_is_one_line_naming_its_log_and_finished_rows_stay(tiny, tmp_path):
    rows = tmp_path / "rows.jsonl"
    log = tmp_path / "server.log"
    with pytest.raises(ServerDied) as e:
        with LlamaServer(tiny["target"], ctx=256, log=log) as srv:

            def prompts():
                yield "p0", PROMPT
                os.kill(srv.proc.pid, signal.SIGKILL)  # dies before the second request
                yield "p1", PROMPT

            decode(srv, prompts(), N, rows)
    line = str(e.value)
    assert "\n" not in line and str(log) in line and "signal 9" in line
    assert [json.loads(ln)["prompt_id"] for ln in rows.read_text().splitlines()] == ["p0"]
    assert log.read_text().startswith("$ ")


def test_a_server_that_cannot_load_its_model_is_one_line(tiny, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(ServerDied, match="while starting; its log: "):
        with LlamaServer(bad, timeout_s=30):
            pass
