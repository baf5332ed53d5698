"""llama.cpp as the second engine (#84), without the real models: the build's flag sets and its
one-line failures, the tiny GGUF, and the real ``llama-server`` (built by ``scripts/setup.sh``)
serving it: start and stop, a speculative request with a tiny draft, the export's flags accepted
and drafting as exported, the import of its /metrics beside its own per-response counts, a server
killed mid-run.  The server tests skip, with the build's own line, only where no build is possible."""

from __future__ import annotations

import json
import os
import signal

import gguf
import pandas as pd
import pytest

from specbench.inputs import llamacpp, tinygguf
from specbench.study.serving import import_metrics
from specbench.study.serving.export import export
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


def test_skip_llamacpp_skips_the_build_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("SPECBENCH_SKIP_LLAMACPP", "1")
    monkeypatch.setattr(llamacpp, "build", lambda *a, **k: pytest.fail("built"))
    assert llamacpp.main(["build"]) == 0
    assert "SPECBENCH_SKIP_LLAMACPP=1" in capsys.readouterr().out and not (tmp_path / "llama.cpp").exists()


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
    q = gguf.GGUFReader(tinygguf.write(tmp_path / "q.gguf", quantized=True))  # the smoke run's: quantized kernels
    assert {t.tensor_type.name for t in q.tensors} == {"F32", "Q8_0", "Q5_0"}


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


def _exported(argv: list[str], draft) -> list[str]:
    obj, _ = export(["format=llamacpp", *argv])
    flags = list(obj["argv"])
    if "--spec-draft-model" in flags:
        flags[flags.index("--spec-draft-model") + 1] = str(draft)  # the tiny draft for the pair's GGUF
    return flags


def test_the_export_is_accepted_by_the_server_and_drafts_as_exported(tiny, tmp_path, capsys):
    """chain/3 of qwen_coder: n_max 3, p_min 0: every step drafts 3 tokens; the /metrics import agrees
    with the server's own per-response counts."""
    flags = _exported(["pair=qwen_coder", "tree=chain", "tree.budget=3"], tiny["same"])
    assert flags[:2] == ["--spec-type", "draft-simple"] and flags[flags.index("--spec-draft-n-max") + 1] == "3"
    with LlamaServer(tiny["target"], flags, ctx=256) as srv:
        rows = tmp_path / "rows.jsonl"
        decode(srv, [("a", PROMPT), ("b", "x = 1\n")], N, rows)
        metrics = srv.metrics()
    (tmp_path / "metrics.txt").write_text(metrics)
    timings = [json.loads(ln)["timings"] for ln in rows.read_text().splitlines()]
    drafted = sum(t["draft_n"] for t in timings)
    steps = sum(
        int(float(ln.split()[-1]))
        for ln in metrics.splitlines()
        if ln.startswith("llamacpp:spec_decode_num_drafts_total")
    )
    assert drafted == 3 * steps  # n_max 3 each step, none cut (p_min 0, n_min 0)
    served = tmp_path / "served.csv"
    for f in ("metrics.txt", "rows.jsonl"):
        import_metrics.main([str(tmp_path / f), "--engine", "llamacpp", "--pair", "qwen_coder", "--dataset", "d",
                             "--budget", "3", "--out", str(served)])  # fmt: skip
        row = pd.read_csv(served).iloc[-1]
        assert row.engine == "llamacpp" and row.budget == 3 and row.acceptance_rate == pytest.approx(1.0)
    assert "llamacpp acceptance rate 1.000 (2 responses, no step count)" in capsys.readouterr().out
    row = pd.read_csv(served).iloc[0]  # the /metrics one was replaced by the responses' (same key): read again
    import_metrics.main([str(tmp_path / "metrics.txt"), "--engine", "llamacpp", "--pair", "qwen_coder",
                         "--dataset", "d", "--out", str(served)])  # fmt: skip
    row = pd.read_csv(served).iloc[-1]
    assert row.n_steps == steps and row.tokens_per_step == pytest.approx(4.0)  # budget counted from positions
    assert json.loads(row.marginal_acceptance) == pytest.approx([1.0, 1.0, 1.0])


def test_the_ngram_export_is_accepted_by_the_server(tiny):
    flags = _exported(["pair=ngram_qwen", "tree=chain", "tree.budget=4"], None)
    assert flags[:2] == ["--spec-type", "ngram-simple"]
    with LlamaServer(tiny["target"], flags, ctx=256) as srv:
        r = srv.complete("a b a b a b a b a b a b", N)
    assert r["timings"]["predicted_n"] == N


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


def test_the_smoke_run_passes_the_built_binaries_and_fails_a_broken_one(built, tmp_path):
    assert llamacpp.smoke(llamacpp.binary("llama-bench").parent, tmp_path) is None
    broken = tmp_path / "bin"
    broken.mkdir()
    for t in llamacpp.TARGETS:
        (broken / t).write_text("#!/bin/sh\nkill -ILL $$\n")  # dies as the AMX build did
        (broken / t).chmod(0o755)
    assert llamacpp.smoke(broken, tmp_path).startswith("llama-bench signal 4")


def test_a_server_that_cannot_load_its_model_is_one_line(tiny, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(ServerDied, match="while starting; its log: "):
        with LlamaServer(bad, timeout_s=30):
            pass


def test_import_refuses_nonsense_from_a_llama_server_in_one_line(tmp_path, capsys):
    """No server needed: llama.cpp's counter names (tools/server/server-task.cpp) with bad numbers."""
    ok = {"drafts": "10", "draft_tokens": "30", "accepted_tokens": "12"}

    def dump(per_pos=("7", "4", "1"), **kw):
        vals = ok | kw
        text = "".join(f"llamacpp:spec_decode_num_{k}_total {v}\n" for k, v in vals.items())
        return text + "".join(
            f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}\n'
            for i, v in enumerate(per_pos)
        )

    cases = [
        (dump(drafts="-1"), "must be finite and >= 0"),
        (dump(accepted_tokens="40"), "accepted tokens 40 > draft tokens 30"),
        (dump(per_pos=("11", "1", "0")), "a position's accepted count 11 > drafts 10"),
        (dump(accepted_tokens="12.5"), "not an integer"),
        (json.dumps({"timings": {"predicted_n": 9, "draft_n": 4, "draft_n_accepted": 5}}) + "\n", "5 > draft_n 4"),
        (json.dumps({"timings": {"predicted_n": 9, "draft_n": 4.5}}) + "\n", "draft_n = 4.5 is not a count"),
        (json.dumps({"timings": {"predicted_n": 9, "draft_n": -2}}) + "\n", "draft_n = -2 is not a count"),
        ('{"content": "x"}\n', "no timings.predicted_n"),
    ]
    for text, words in cases:
        f = tmp_path / "m.txt"
        f.write_text(text)
        out = tmp_path / "served.csv"
        with pytest.raises(SystemExit) as e:
            import_metrics.main([str(f), "--engine", "llamacpp", "--pair", "p", "--dataset", "d", "--budget", "3",
                                 "--out", str(out)])  # fmt: skip
        lines = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(lines) == 1 and words in lines[0] and "m.txt" in lines[0], (words, lines)
        assert not out.exists()


def test_trees_and_rules_llama_server_cannot_run_are_refused_with_the_nearest():
    from specbench.study.serving.engines import Choice, Refusal, settings
    from specbench.study.serving.export import paths

    tree = Choice("qwen_coder", "model", "org/draft", "binary", 8, {}, "greedy", 0.0)
    with pytest.raises(Refusal) as e:
        settings("llamacpp", tree, paths)
    line = str(e.value)
    assert (
        line.startswith("format=llamacpp (llama.cpp): tree=binary is a tree")
        and "nearest exportable: tree=chain" in line
    )
    spec = Choice("qwen_coder", "model", "org/draft", "chain", 4, {}, "speculative", 0.8, 0.8)
    with pytest.raises(Refusal, match="no min"):
        settings("llamacpp", spec, paths)
    out = settings("llamacpp", spec, paths, nearest=True)  # verify=naive: drafts one-hot, as llama-server
    assert out["nearest"]["changed"] == ["verify=naive"] and out["server_args"]["--spec-draft-n-max"] == 4
    assert out["server_args"]["--spec-draft-model"].endswith("qwen2.5-coder-0.5b-instruct/model.gguf")


def test_bench_llamacpp_script_runs_on_the_tiny_gguf(tiny, tmp_path, capsys):
    """scripts/bench_llamacpp.py end to end: a committed plain row (made up here) beside llama-server's
    plain decoding of the same prompt, then llama-bench's cost points."""
    import importlib.util

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location("bench_llamacpp", ROOT / "scripts" / "bench_llamacpp.py")
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    row = {"machine_id": "m0", "pair": "qwen_coder", "dataset": "smoke", "candidate": "plain", "batch_size": 1,
           "max_new_tokens": 4, "prompt_ids": "smoke/0", "tokens": 4, "wall_s": 2.0, "dtype": "float32", "run_id": "r"}  # fmt: skip
    pd.DataFrame([row]).to_csv(tmp_path / "speed.csv", index=False)
    args = ["--dataset", "smoke", "--results", str(tmp_path / "speed.csv"), "--machine-id", "m0", "--prompts", "1",
            "--rounds", "1", "--target", str(tiny["target"]), "--draft", str(tiny["same"]), "--costs",
            "--tokens", "1,2", "--kv", "8", "--repeats", "2"]  # fmt: skip
    script.main(args)
    out = capsys.readouterr().out
    assert "specbench plain (float32, committed, 1 decodes of 1 prompts x 4 tokens, 1 runs): 2.00 tok/s" in out
    assert "RATIO llama.cpp / specbench plain tok/s: " in out and out.count("kv=   8: median") == 4, out
