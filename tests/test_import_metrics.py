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


def _dump(drafts=100, drafted=300, accepted=180, per_pos=("80", "60", "40"), extra=""):
    lines = [f"vllm:spec_decode_num_drafts_total {drafts}", f"vllm:spec_decode_num_draft_tokens_total {drafted}",
             f"vllm:spec_decode_num_accepted_tokens_total {accepted}"]  # fmt: skip
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}' for i, v in enumerate(per_pos)
    ]
    return "\n".join(lines) + "\n" + extra


def _row(tmp_path, text, engine="vllm", budget=None):
    from argparse import Namespace

    from specbench.study.serving.import_metrics import row

    f = tmp_path / "m.txt"
    f.write_text(text)
    args = Namespace(file=str(f), engine=engine, pair="p", dataset="d", tree="chain", budget=budget)
    return row(args)


def _sg(**meta):
    return json.dumps({"meta_info": {"completion_tokens": 30, "spec_verify_ct": 10, **meta}}) + "\n"


@pytest.mark.parametrize(
    "text,engine,words",
    [
        (_dump(drafts=-1), "vllm", "must be finite and >= 0"),
        (_dump(accepted="NaN"), "vllm", "must be finite and >= 0"),
        (_dump(accepted="abc"), "vllm", "m.txt:3: vllm:spec_decode_num_accepted_tokens_total = 'abc' is not a number"),
        (_dump(per_pos=("120", "60", "0"), accepted=180), "vllm", "a position's accepted count 120 > drafts 100"),
        (_dump(accepted=400), "vllm", "accepted tokens 400 > draft tokens 300"),
        (
            _dump(per_pos=("80", "60", "40")).replace('position="1"', 'position="5"'),
            "vllm",
            "lacks position(s) 1, 3, 4 of 0..5",
        ),
        (_dump(per_pos=("60", "80", "40")), "vllm", "increase with position"),
        (_dump(accepted=150), "vllm", "sum to 180, not the accepted tokens 150"),
        (
            _dump(extra='vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0"} 3\n'),
            "vllm",
            "without a position",
        ),
        ('{"meta_info": {"spec_verify_ct": 3}}\n', "sglang", "m.txt:1: no meta_info.completion_tokens"),
        (_sg(completion_tokens=-4), "sglang", "completion_tokens = -4 is not a count"),
        (_sg(completion_tokens="x"), "sglang", "completion_tokens = 'x' is not a count"),
        (_sg(spec_num_proposed_drafts=5, spec_num_correct_drafts=9), "sglang", "9 accepted drafts > 5 proposed"),
        (_sg(spec_correct_drafts_histogram=[4, 4]), "sglang", "counts 8 steps, spec_verify_ct says 10"),
        (_sg(spec_num_correct_drafts=3, spec_correct_drafts_histogram=[5, 5]), "sglang", "holds 5 accepted drafts"),
        (_sg(spec_correct_drafts_histogram=[5, 0, 0, 0, 0, 5]), "sglang", "accepted 5 drafts, more than --budget 3"),
        ('{"meta_info": [1]}\n', "sglang", "meta_info is not an object"),
        ("sglang:spec_accept_length 0.5\n", "sglang", "(must be >= 1)"),
    ],
)
def test_import_refuses_nonsense_in_one_line_naming_the_file(tmp_path, text, engine, words):
    with pytest.raises(ValueError) as e:
        _row(tmp_path, text, engine, budget=3)
    assert "\n" not in str(e.value) and words in str(e.value) and "m.txt" in str(e.value), str(e.value)


def test_a_refused_import_exits_2_writes_nothing_and_prints_no_traceback(tmp_path):
    f = tmp_path / "metrics.txt"
    f.write_text(_dump(per_pos=("80", "40")).replace('position="1"', 'engine="0"'))  # a per-position sample unlabelled
    r, out = run(tmp_path, f, "--engine", "vllm")
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "without a position label" in lines[0] and not out.exists()
    assert "Traceback" not in r.stderr


def test_sglang_histogram_gives_the_marginals(tmp_path):
    """Two requests, steps by accepted drafts [2, 1, 1] and [1, 2, 3, 0] (10 steps): summed [3, 3, 4];
    P(>= 1) = 7/10, P(>= 2) = 4/10; 1 + their sum = 1 + 11 accepted / 10 steps."""
    text = _sg(
        spec_verify_ct=4, completion_tokens=8, spec_num_correct_drafts=3, spec_correct_drafts_histogram=[2, 1, 1]
    )
    text += _sg(
        spec_verify_ct=6, completion_tokens=16, spec_num_correct_drafts=8, spec_correct_drafts_histogram=[1, 2, 3, 0]
    )
    got = _row(tmp_path, text, "sglang", budget=2)
    marginal = json.loads(got["marginal_acceptance"])
    assert marginal == pytest.approx([7 / 10, 4 / 10])
    assert 1 + sum(marginal) == pytest.approx(1 + 11 / 10)
    assert got["n_steps"] == 10 and got["tokens_per_step"] == pytest.approx(24 / 10)


def test_sglang_prometheus_gauges(tmp_path):
    """sglang/srt/metrics/collector.py: mostrecent gauges per label set (two dp ranks here), averaged."""
    text = (
        "# HELP sglang:spec_accept_length Mean acceptance length of speculative decoding.\n"
        "# TYPE sglang:spec_accept_length gauge\n"
        'sglang:spec_accept_length{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct",dp_rank="0"} 2.5\n'
        'sglang:spec_accept_length{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct",dp_rank="1"} 3.5\n'
        'sglang:spec_accept_rate{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct",dp_rank="0"} 0.5\n'
        'sglang:spec_accept_rate{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct",dp_rank="1"} 0.7\n'
    )
    f = tmp_path / "sglang_metrics.txt"
    f.write_text(text)
    r, out = run(tmp_path, f, "--engine", "sglang", "--budget", "4")
    assert r.returncode == 0, r.stderr[-2000:]
    row = pd.read_csv(out).iloc[0]
    assert row.tokens_per_step == pytest.approx(3.0) and row.acceptance_length == pytest.approx(2.0)
    assert row.acceptance_rate == pytest.approx(0.6) and pd.isna(row.n_steps)
