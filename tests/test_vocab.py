"""Draft and target sharing a tokenizer but not an output-layer size (320 vs 384 rows, as
Qwen2.5 0.5B vs 7B): the draft is seen through the target's vocabulary, live and replay
agree, and a tokenizer larger than a model's output layer is a one-line error."""

import copy
import glob

import pandas as pd
import pytest
import torch

from conftest import build_model
from specbench.inputs.models import TargetVocab, fit_draft_vocab
from specbench.results.files import read_csv
from test_bad_input import one_line_error, written
from test_hydra import job_args, specbench

TIMING = [
    "draft_s",
    "verify_s",
    "run_id",
    "config_hash",
    "pair_key",
    "engine",
]  # differ by engine (pair_key: the job hash)


def resized(model, rows: int):
    out = copy.deepcopy(model)
    out.resize_token_embeddings(rows, mean_resizing=False)
    with torch.no_grad():  # padding rows: small random weights
        torch.manual_seed(7)
        out.get_output_embeddings().weight[model.config.vocab_size :].normal_(0, 0.02)
        out.get_input_embeddings().weight[model.config.vocab_size :].normal_(0, 0.02)
    return out.eval()


@pytest.fixture(scope="module")
def vocab_dirs(tmp_path_factory, tiny_tokenizer, tiny_draft, tiny_target):
    """{name: folder}: the tiny models with 320 and 384 output rows, and one with 300."""
    root = tmp_path_factory.mktemp("vocab")
    models = {
        "draft320": tiny_draft,
        "target320": tiny_target,
        "draft384": resized(tiny_draft, 384),
        "target384": resized(tiny_target, 384),
        "draft300": build_model(300, seed=3),
    }
    for name, model in models.items():
        model.save_pretrained(root / name)
        tiny_tokenizer.save_pretrained(root / name)
    return {name: str(root / name) for name in models}


def steps(out) -> pd.DataFrame:
    frames = [
        read_csv(p).assign(engine=read_csv(p.replace("steps.csv", "summary.csv")).engine.iloc[0])
        for p in glob.glob(str(out / "**" / "steps.csv"), recursive=True)
    ]
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize("draft,target", [("draft320", "target384"), ("draft384", "target320")])
def test_different_output_rows_run_live_and_replay_with_equal_records(vocab_dirs, tmp_path, draft, target):
    out = tmp_path / "outputs"
    dirs = (vocab_dirs[draft], vocab_dirs[target])
    r = specbench(*job_args(dirs, out, "-m", "engine=live,replay", "tree=binary", "tree.budget=4"))
    assert r.returncode == 0, r.stderr[-3000:]
    rows = steps(out)
    live, replay = (
        rows[rows.engine == e].drop(columns=TIMING).sort_values(["prompt_id", "step"]).reset_index(drop=True)
        for e in ("live", "replay")
    )
    assert len(live) > 0
    pd.testing.assert_frame_equal(live, replay)


def test_a_sampling_mode_runs_live_with_different_output_rows(vocab_dirs, tmp_path):
    out = tmp_path / "outputs"
    r = specbench(
        *job_args((vocab_dirs["draft320"], vocab_dirs["target384"]), out, "verify=mss", "tree=binary", "tree.budget=4")
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(steps(out)) > 0


def test_target_vocab_pads_with_probability_zero_and_maps_unknown_inputs(tiny_draft, tiny_target, tiny_tokenizer):
    wide = fit_draft_vocab(tiny_draft, resized(tiny_target, 384), tiny_tokenizer, "d", "t")
    assert isinstance(wide, TargetVocab)
    ids = torch.tensor([[5, 17, 350]])  # 350: a target padding id the draft lacks
    logits = wide(input_ids=ids).logits
    assert logits.shape == (1, 3, 384)
    assert torch.softmax(logits.float(), -1)[..., 320:].max() == 0
    same = wide(input_ids=torch.tensor([[5, 17, wide.unknown_id]])).logits
    assert torch.equal(logits, same)
    narrow = fit_draft_vocab(resized(tiny_draft, 384), tiny_target, tiny_tokenizer, "d", "t")
    assert narrow(input_ids=ids[:, :2]).logits.shape[-1] == 320
    assert fit_draft_vocab(tiny_draft, tiny_target, tiny_tokenizer, "d", "t") is tiny_draft


def test_a_tokenizer_larger_than_the_drafts_output_layer_is_one_line(vocab_dirs, tmp_path):
    out = tmp_path / "outputs"
    r = specbench(*job_args((vocab_dirs["draft300"], vocab_dirs["target320"]), out))
    line = one_line_error(r)
    assert "pair.draft" in line and "300 output rows" in line and "320 tokens" in line, line
    assert not written(out)
