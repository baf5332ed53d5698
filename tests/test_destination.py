"""Issue 85: nothing a user already has is lost by running a command.  collect reads its ``--out`` as
strictly as the report reads results/ (``results.files``) before it merges into it; a destination that
fails is refused in one line, exit 2, with every file as it was."""

import gzip
import json
import os

import pandas as pd
import pytest

from specbench.results.files import OUTPUTS_FILE, STEPS_FILE, read_csv
from specbench.study.job.collect import main as collect_main
from test_collect import fake_job


def snapshot(folder) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def collected(tmp_path):
    """--out holding one collected configuration (3 steps), and a second job folder to collect into it."""
    fake_job(tmp_path / "a", "j", h="aaaaaaaaaaaa")
    out = tmp_path / "results"
    collect_main([str(tmp_path / "a"), "--out", str(out)])
    fake_job(tmp_path / "b", "j", h="bbbbbbbbbbbb", run_id="20260102T000000-bbbb")
    return out


def refused(capsys, out, *argv) -> str:
    before = snapshot(out)
    with pytest.raises(SystemExit) as e:
        collect_main([*argv, "--out", str(out)])
    said = capsys.readouterr().err.strip()
    assert e.value.code == 2 and said.startswith("specbench: error:") and "\n" not in said
    assert snapshot(out) == before  # nothing written, nothing removed
    return said


def test_a_duplicated_row_in_the_destination_is_refused_before_anything_is_written(tmp_path, capsys):
    out = collected(tmp_path)
    lines = (out / "summary.csv").read_text().splitlines(keepends=True)
    (out / "summary.csv").write_text("".join([*lines, lines[1]]))
    said = refused(capsys, out, str(tmp_path / "b"))
    assert "summary.csv lists configuration aaaaaaaaaaaa twice" in said


@pytest.mark.parametrize("name", [STEPS_FILE, OUTPUTS_FILE])
def test_a_destination_missing_a_companion_file_is_refused(tmp_path, capsys, name):
    out = collected(tmp_path)
    (out / name).unlink()
    said = refused(capsys, out, str(tmp_path / "b"))
    assert f"{out / name} is missing" in said


def test_a_destination_missing_one_configurations_outputs_is_refused(tmp_path, capsys):
    out = collected(tmp_path)
    line = {"config_hash": "zzzzzzzzzzzz", "prompt_id": "a", "token_ids": [1]}
    (out / OUTPUTS_FILE).write_bytes(gzip.compress((json.dumps(line) + "\n").encode()))
    assert "has no outputs of configuration aaaaaaaaaaaa" in refused(capsys, out, str(tmp_path / "b"))


def test_a_destination_whose_steps_disagree_with_its_summary_is_refused(tmp_path, capsys):
    out = collected(tmp_path)
    steps = read_csv(out / STEPS_FILE)
    (out / STEPS_FILE).write_bytes(gzip.compress(steps.iloc[:-1].to_csv(index=False).encode()))
    assert "holds 2 steps of configuration aaaaaaaaaaaa, summary.csv says 3" in refused(
        capsys, out, str(tmp_path / "b")
    )


def test_an_older_summary_without_step_counts_keeps_them(tmp_path):
    out = collected(tmp_path)
    read_csv(out / "summary.csv").drop(columns=["n_steps", "new_tokens"]).to_csv(out / "summary.csv", index=False)
    collect_main([str(tmp_path / "b"), "--out", str(out)])
    rows = read_csv(out / "summary.csv").set_index("config_hash")
    assert rows.n_steps.to_dict() == {"aaaaaaaaaaaa": 3, "bbbbbbbbbbbb": 3}
    assert rows.new_tokens.to_dict() == {"aaaaaaaaaaaa": 6, "bbbbbbbbbbbb": 6}
    steps = read_csv(out / STEPS_FILE)
    assert steps.groupby("config_hash").size().to_dict() == {"aaaaaaaaaaaa": 3, "bbbbbbbbbbbb": 3}
    outputs = [json.loads(x) for x in gzip.open(out / OUTPUTS_FILE, "rt")]
    assert sorted(o["config_hash"] for o in outputs) == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]


def test_an_older_summary_without_step_counts_or_steps_is_refused(tmp_path, capsys):
    out = collected(tmp_path)
    summary = read_csv(out / "summary.csv").drop(columns=["n_steps", "new_tokens"])
    pd.concat([summary, summary.assign(config_hash="cccccccccccc")]).to_csv(out / "summary.csv", index=False)
    said = refused(capsys, out, str(tmp_path / "b"))
    assert "configuration cccccccccccc has no n_steps and no steps to count it from" in said


# --------------------------------------------------------------------------
# study.tools.costs +costs_merge=P replaces exactly the points P holds
# --------------------------------------------------------------------------
def cost_table(device: str, seconds: float, roles=("draft", "target"), kvs=(128, 512), widths=(1, 2, 3, 4)):
    return pd.DataFrame(
        [
            {"role": r, "pair": "p", "dtype": "bfloat16", "device": device, "kv_len": kv, "n_tokens": n}
            | {"seconds": seconds, "samples": f"{seconds} {seconds}", "machine_id": f"m-{device}"}
            for r in roles
            for kv in kvs
            for n in widths
        ]
    )


def test_a_partial_costs_merge_replaces_only_the_rows_it_holds(tmp_path):
    from specbench.study.tools.costs import merge_file

    res, src = tmp_path / "results", tmp_path / "gpu" / "costs.csv"
    res.mkdir(), src.parent.mkdir()
    pd.concat([cost_table("cpu", 0.2), cost_table("cuda", 0.02)]).to_csv(res / "costs.csv", index=False)
    cost_table("cuda", 0.5, roles=("draft",), kvs=(128,)).to_csv(src, index=False)  # one curve's KV length
    merge_file(str(res), str(src))
    rows = pd.read_csv(res / "costs.csv")
    assert len(rows) == 32  # every committed point kept, 4 of them replaced
    cuda = rows[rows.device == "cuda"].set_index(["role", "kv_len", "n_tokens"]).seconds
    assert (cuda.loc["draft", 128] == 0.5).all() and (cuda.loc["draft", 512] == 0.02).all()
    assert (cuda.loc["target"] == 0.02).all() and (rows[rows.device == "cpu"].seconds == 0.2).all()


@pytest.mark.parametrize("damage", ["a point twice", "a curve cut mid-way"])
def test_an_inconsistent_costs_merge_file_is_refused(tmp_path, damage):
    from specbench.study.job.errors import ConfigError
    from specbench.study.tools.costs import merge_file

    res, src = tmp_path / "results", tmp_path / "gpu" / "costs.csv"
    res.mkdir(), src.parent.mkdir()
    cost_table("cpu", 0.2).to_csv(res / "costs.csv", index=False)
    before = (res / "costs.csv").read_bytes()
    new = cost_table("cuda", 0.5)
    (pd.concat([new, new.iloc[[3]]]) if damage == "a point twice" else new.iloc[:-1]).to_csv(src, index=False)
    with pytest.raises(ConfigError) as e:
        merge_file(str(res), str(src))
    said = str(e.value)
    assert said.startswith(f"costs_merge={src}:") and "\n" not in said
    assert ("repeats line 5" if damage == "a point twice" else "3 at kv_len 512 widths") in said, said
    assert (res / "costs.csv").read_bytes() == before


# --------------------------------------------------------------------------
# mixed state: an export killed at its rename leaves its staged file, which the next export removes
# --------------------------------------------------------------------------
EXPORT = "from specbench.study.serving.export import main; main(sys.argv[1:])"


def test_a_killed_exports_staged_file_is_cleaned_by_the_next_export(tmp_path):
    from test_reliability import killed_at

    out = tmp_path / "serve" / "tree.json"
    args = ["pair=qwen_coder", "tree=binary", "tree.budget=16", "format=paths", f"out={out}"]
    assert killed_at(1, EXPORT, *args) == 137  # killed at its one rename
    assert [n for n in os.listdir(out.parent) if n.startswith(".tmp-")] and not out.exists()
    assert killed_at(0, EXPORT, *args) == 0
    assert not [n for n in os.listdir(out.parent) if n.startswith(".tmp-")] and json.loads(out.read_text())


# --------------------------------------------------------------------------
# garbage in: a job file collect cannot trust is refused in one line, nothing written
# --------------------------------------------------------------------------
def _summary_cell(col, value):
    def damage(d):
        s = read_csv(d / "summary.csv").assign(**{col: value})
        s.to_csv(d / "summary.csv", index=False)

    return damage


def _text(name, edit):
    def damage(d):
        (d / name).write_text(edit((d / name).read_text()))

    return damage


GARBAGE = {
    "acceptance_rate nan": (_summary_cell("acceptance_rate", "nan"), "acceptance_rate='nan'"),
    "acceptance_rate inf": (_summary_cell("acceptance_rate", "inf"), "acceptance_rate="),
    "acceptance_rate 7.5": (_summary_cell("acceptance_rate", 7.5), "acceptance_rate='7.5'"),
    "acceptance_length -1": (_summary_cell("acceptance_length", -1.0), "acceptance_length='-1.0'"),
    "a renamed steps column": (
        _text("steps.csv", lambda t: t.replace("accepted", "acc", 1)),
        "lacks the column(s) accepted",
    ),
    "a duplicated steps header": (_text("steps.csv", lambda t: t + t.splitlines(keepends=True)[0]), "steps.csv"),
    "a duplicated summary header": (_text("summary.csv", lambda t: t + t.splitlines(keepends=True)[0]), "summary.csv"),
    "a duplicated output line": (_text("outputs.jsonl", lambda t: t + t), "repeats line 1"),
    "a token id 1.5": (_text("outputs.jsonl", lambda t: t.replace("[1, ", "[1.5, ", 1)), "token_ids="),
    "a token id text": (_text("outputs.jsonl", lambda t: t.replace("[1, ", '["1", ', 1)), "token_ids="),
    "a negative token id": (_text("outputs.jsonl", lambda t: t.replace("[1, ", "[-1, ", 1)), "token_ids="),
    "an output without prompt_id": (
        _text("outputs.jsonl", lambda t: t.replace('"prompt_id"', '"prompt"')),
        "has no prompt_id",
    ),
    # the helper's probe (#85 item 4): a job whose files disagree on its prompts or steps, or has no run id
    "outputs of blank lines only": (_text("outputs.jsonl", lambda t: "\n\n"), "prompt a has steps and no output"),
    "an output of a prompt without steps": (
        _text("outputs.jsonl", lambda t: t.replace('"prompt_id": "a"', '"prompt_id": "zz"')),
        "prompt",
    ),
    "a step of a prompt twice": (
        _text("steps.csv", lambda t: t.replace(",1,", ",0,", 1)),
        "repeats step 0 of prompt a",
    ),
    "an empty run_id": (_summary_cell("run_id", ""), "run_id is empty"),
}


@pytest.mark.parametrize("case", sorted(GARBAGE))
def test_a_garbled_job_file_is_refused_in_one_line(tmp_path, capsys, case):
    damage, needle = GARBAGE[case]
    out = collected(tmp_path)
    damage(tmp_path / "b" / "j")
    said = refused(capsys, out, str(tmp_path / "b"))
    assert needle in said, said


# --------------------------------------------------------------------------
# a refused optional file names the command that writes it
# --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, command",
    [
        ("speed.csv", "python -m specbench.study.tools.speed"),
        ("costs.csv", "python -m specbench.study.tools.costs"),
        ("served.csv", "python -m specbench.import_metrics"),
        ("acceptance_check.csv", "python -m specbench.study.tools.recheck"),
        ("acceptance_vector_chat.csv", "python -m specbench.study.tools.calibrate"),
        ("summary.csv", "python -m specbench.collect"),
    ],
)
def test_a_cut_results_file_names_the_command_that_writes_it(tmp_path, name, command):
    from specbench.report import load

    (tmp_path / name).write_text("a,b\n1,2\n3")
    with pytest.raises(load.InputError) as e:
        load.read_checked(str(tmp_path / name))
    assert f"`{command}" in str(e.value) and "\n" not in str(e.value)


# --------------------------------------------------------------------------
# import_metrics: one model's counters per row, a response's steps within its tokens, names not paths
# --------------------------------------------------------------------------
TWO_MODELS = "".join(
    f'vllm:spec_decode_num_{k}_total{{model_name="{m}"}} {v}\n'
    for m in ("a", "b")
    for k, v in (("drafts", 10), ("draft_tokens", 40), ("accepted_tokens", 20))
)
SGLANG = '{"meta_info": {"spec_verify_ct": 8, "completion_tokens": 4}}\n'


@pytest.mark.parametrize(
    "case, text, argv, needle",
    [
        ("two models", TWO_MODELS, ["--engine", "vllm"], "counters of 2 models (a, b)"),
        (
            "steps past tokens",
            SGLANG,
            ["--engine", "sglang", "--budget", "4"],
            "spec_verify_ct 8 > completion_tokens 4",
        ),
        ("a path as pair", TWO_MODELS, ["--engine", "vllm", "--pair", "../../etc"], "--pair='../../etc'"),
    ],
)
def test_import_metrics_refuses_what_it_cannot_key_in_one_line(tmp_path, capsys, case, text, argv, needle):
    from specbench.import_metrics import main

    dump = tmp_path / ("r.jsonl" if "sglang" in argv else "metrics.txt")
    dump.write_text(text)
    pair = [] if "--pair" in argv else ["--pair", "p"]
    with pytest.raises(SystemExit) as e:
        main([str(dump), *argv, *pair, "--dataset", "d", "--out", str(tmp_path / "out" / "served.csv")])
    said = capsys.readouterr().err.strip()
    assert e.value.code == 2 and needle in said and "\n" not in said, said
    assert not (tmp_path / "out").exists()
