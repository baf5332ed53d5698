"""collect keeps config hashes as text: '3726142e8142' is not a number."""
import pandas as pd

from specbench.study.collect import job_dirs, merge
from specbench.study.results import read_csv


def test_float_looking_hashes_survive_collect(tmp_path):
    for i, h in enumerate(("3726142e8142", "1e5", "0af82bef9817", "123456789012")):
        d = tmp_path / f"job{i}"
        d.mkdir()
        pd.DataFrame([{"config_hash": h, "pair": "p", "dataset": "d", "verify": "greedy",
                       "temperature": 0.0, "tree": "chain", "budget": i + 1, "engine": "live",
                       "n_steps": 1, "new_tokens": 1}]).to_csv(d / "summary.csv", index=False)
        pd.DataFrame([{"config_hash": h, "prompt_id": "0", "step": 0, "emitted": 1}]
                     ).to_csv(d / "steps.csv", index=False)
    summary, steps, _ = merge(job_dirs([str(tmp_path)])[0])
    assert sorted(summary.config_hash) == ["0af82bef9817", "123456789012", "1e5", "3726142e8142"]
    assert len(steps) == 4


def test_read_csv_keeps_all_digit_and_hex_hashes_sortable(tmp_path):
    """An all-digit hash next to a hex one must not give a mixed int/str column."""
    path = tmp_path / "summary.csv"
    pd.DataFrame({"config_hash": ["123456789012", "0af82bef9817"], "prompt_id": ["7", "x"]}).to_csv(path, index=False)
    df = read_csv(path).sort_values(["config_hash", "prompt_id"])
    assert list(df.config_hash) == ["0af82bef9817", "123456789012"]


# --------------------------------------------------------------------------
# a job's rows are one unit
# --------------------------------------------------------------------------
import json  # noqa: E402

import pytest  # noqa: E402

from specbench.study.collect import CollectError, main as collect_main  # noqa: E402


def fake_job(root, name, h="abc123abc123", run_id="20260101T000000-aaaa", n_steps=3, emitted=2):
    d = root / name
    d.mkdir(parents=True)
    pd.DataFrame([{"config_hash": h, "run_id": run_id, "pair": "p", "tree": "chain", "budget": 2,
                   "n_steps": n_steps, "new_tokens": n_steps * emitted}]).to_csv(d / "summary.csv", index=False)
    pd.DataFrame([{"config_hash": h, "run_id": run_id, "prompt_id": "a", "step": i, "emitted": emitted}
                  for i in range(n_steps)]).to_csv(d / "steps.csv", index=False)
    (d / "outputs.jsonl").write_text(json.dumps({"prompt_id": "a", "token_ids": [1] * n_steps * emitted,
                                                 "text": run_id}) + "\n")
    return d


def test_newest_run_of_a_config_replaces_all_its_rows(tmp_path):
    fake_job(tmp_path / "jobs", "old", run_id="20260101T000000-aaaa", n_steps=8, emitted=4)
    out = tmp_path / "results"
    collect_main([str(tmp_path / "jobs"), "--out", str(out)])
    fake_job(tmp_path / "jobs2", "new", run_id="20260102T000000-bbbb", n_steps=3, emitted=2)
    collect_main([str(tmp_path / "jobs2"), "--out", str(out)])
    summary, steps = read_csv(out / "summary.csv"), read_csv(out / "steps.csv")
    assert len(summary) == 1 and summary.n_steps.iloc[0] == len(steps) == 3
    assert steps.emitted.sum() == summary.new_tokens.iloc[0] and set(steps.run_id) == {"20260102T000000-bbbb"}
    outputs = [json.loads(x) for x in (out / "outputs.jsonl").read_text().splitlines()]
    assert [o["text"] for o in outputs] == ["20260102T000000-bbbb"] and outputs[0]["config_hash"] == "abc123abc123"


@pytest.mark.parametrize("damage", ["header-only summary", "truncated steps", "short steps", "no steps"])
def test_incomplete_job_files_are_refused_with_the_file_named(tmp_path, damage, capsys):
    d = fake_job(tmp_path / "jobs", "j")
    target = d / ("summary.csv" if damage.endswith("summary") else "steps.csv")
    text = target.read_text()
    if damage == "header-only summary":
        target.write_text(text.splitlines()[0] + "\n")
    elif damage == "truncated steps":
        target.write_text(text[:-4])
    elif damage == "short steps":
        target.write_text("".join(text.splitlines(keepends=True)[:-1]))
    else:
        target.unlink()
    out = tmp_path / "results"
    with pytest.raises(SystemExit) as e:
        collect_main([str(tmp_path / "jobs"), "--out", str(out)])
    assert str(target) in str(e.value) and str(e.value).startswith("specbench: error:")
    assert "\n" not in str(e.value) and not out.exists()


def test_failed_jobs_are_skipped_and_listed_and_orphan_steps_dropped(tmp_path, capsys):
    fake_job(tmp_path / "jobs", "ok")
    bad = tmp_path / "jobs" / "bad"
    bad.mkdir()
    (bad / "error.txt").write_text("tree.budget='abc': must be an integer\n\nTraceback ...\n")
    (bad / "steps.csv").write_text("config_hash,prompt_id,step,emitted\nfff,a,0,1\n")   # no summary
    out = tmp_path / "results"
    out.mkdir()
    (out / "steps.csv").write_text("config_hash,prompt_id,step,emitted\norphan,a,0,1\n")
    (out / "summary.csv").write_text("config_hash,n_steps,new_tokens\nother,0,0\n")
    collect_main([str(tmp_path / "jobs"), "--out", str(out)])
    said = capsys.readouterr().out
    assert f"skipped 1 failed job(s) (see error.txt): {bad}" in said and "dropped 1 step rows" in said
    steps = read_csv(out / "steps.csv")
    assert set(steps.config_hash) == {"abc123abc123"}
    with pytest.raises(CollectError):
        merge([str(bad)])
