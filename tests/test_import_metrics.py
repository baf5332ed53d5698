"""`python -m specbench.import_metrics` (#38): a vLLM /metrics dump and SGLang responses,
written as the engines' sources define them, read into rows; per-position figures by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from test_hydra import specbench

# vllm/v1/spec_decode/metrics.py: Counters labelled model_name and engine (+ position), exposed by
# prometheus_client with a _total suffix and a _created gauge; label order is not fixed
VLLM_DUMP = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 100.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 1.7e+09
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 300.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 180.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct",position="0"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct",position="1",engine="0"} 60.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct",position="2"} 40.0
"""


def run(tmp_path, file, *args):
    out = tmp_path / "served.csv"
    r = specbench("specbench.import_metrics", str(file), "--pair", "qwen_coder", "--dataset", "humaneval",
                  "--out", str(out), *args)  # fmt: skip
    return r, out


def test_a_vllm_metrics_dump(tmp_path):
    f = tmp_path / "metrics.txt"
    f.write_text(VLLM_DUMP)
    r, out = run(tmp_path, f, "--engine", "vllm")
    assert r.returncode == 0, r.stderr[-2000:]
    row = pd.read_csv(out).iloc[0]
    assert (row.engine, row.budget, row.n_steps, row.tree) == ("vllm", 3, 100, "chain")  # K counted from positions
    assert pd.isna(row.config_hash) or row.config_hash == ""
    assert row.acceptance_rate == pytest.approx(180 / 300) and row.acceptance_length == pytest.approx(1.8)
    assert row.tokens_per_step == pytest.approx(2.8)  # vLLM's mean acceptance length: 1 + accepted / drafts
    marginal = json.loads(row.marginal_acceptance)
    assert marginal == pytest.approx([0.8, 0.6, 0.4])  # per_pos[i] / drafts, by hand
    assert 1 + sum(marginal) == pytest.approx(row.tokens_per_step)  # AL = 1 + sum of marginals
    r, out = run(tmp_path, f, "--engine", "vllm")  # the same deployment again: replaced, not doubled
    assert len(pd.read_csv(out)) == 1


def test_sglang_responses(tmp_path):
    """meta_info as tokenizer_manager.py writes it (0.5.23 names; one request with 0.5.10's)."""
    reqs = [
        {"text": "...", "meta_info": {"completion_tokens": 30, "spec_verify_ct": 10, "spec_accept_length": 3.0,
                                      "spec_num_proposed_drafts": 30, "spec_num_correct_drafts": 20}},
        {"text": "...", "meta_info": {"completion_tokens": 12, "spec_verify_ct": 6, "spec_draft_token_num": 18,
                                      "spec_accept_token_num": 6}},
    ]  # fmt: skip
    f = tmp_path / "responses.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in reqs))
    r, out = run(tmp_path, f, "--engine", "sglang", "--budget", "3")
    assert r.returncode == 0, r.stderr[-2000:]
    row = pd.read_csv(out).iloc[0]
    assert (row.n_requests, row.n_steps) == (2, 16)
    assert row.tokens_per_step == pytest.approx(42 / 16)  # token-weighted
    assert row.tokens_per_step_per_request == pytest.approx((3.0 + 2.0) / 2)  # per request
    assert row.acceptance_rate == pytest.approx(26 / 48)


@pytest.mark.parametrize(
    "content,engine,line",
    [
        ("not metrics\n", "vllm", "no vLLM spec-decode counters"),
        ('{"meta_info": {"completion_tokens": 3}}\n', "sglang", "spec_verify_ct"),
        ("{bad\n", "sglang", "not valid JSON"),
        ("[1, 2]\n", "sglang", "expected a JSON object"),
    ],
)
def test_a_file_that_is_not_such_a_dump_is_one_line(tmp_path, content, engine, line):
    f = tmp_path / "x"
    f.write_text(content)
    r, out = run(tmp_path, f, "--engine", engine, "--budget", "2")
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and line in lines[0] and not out.exists(), r.stderr
