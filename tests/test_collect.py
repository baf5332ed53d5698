"""collect keeps config hashes as text: '3726142e8142' is not a number."""

import gzip
import json

import pandas as pd
import pytest

from mounts import ro_mount, tiny_tmpfs  # noqa: F401  (fixtures)
from specbench.results.columns import DESCRIBED
from specbench.results.files import OUTPUTS_FILE, STEPS_FILE, read_csv
from specbench.study.job.collect import CollectError, frames, merge, newest, scan
from specbench.study.job.collect import main as collect_main


def test_float_looking_hashes_survive_collect(tmp_path):
    for i, h in enumerate(("3726142e8142", "1e5", "0af82bef9817", "123456789012")):
        d = tmp_path / f"job{i}"
        d.mkdir()
        pd.DataFrame(
            [
                {
                    "config_hash": h,
                    "pair": "p",
                    "dataset": "d",
                    "verify": "greedy",
                    "temperature": 0.0,
                    "tree": "chain",
                    "budget": i + 1,
                    "engine": "live",
                    "n_steps": 1,
                    "new_tokens": 1,
                }
            ]
        ).to_csv(d / "summary.csv", index=False)
        pd.DataFrame([{"config_hash": h, "prompt_id": "0", "step": 0, "emitted": 1, "accepted": 0}]).to_csv(
            d / "steps.csv", index=False
        )
    found = scan([str(tmp_path)])
    summary, steps, _ = frames(newest(found.jobs, found.skipped))
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


def fake_job(root, name, h="abc123abc123", run_id="20260101T000000-aaaa", n_steps=3, emitted=2):
    d = root / name
    d.mkdir(parents=True)
    pd.DataFrame(
        [
            {
                "config_hash": h,
                "run_id": run_id,
                "pair": "p",
                "tree": "chain",
                "budget": 2,
                "n_steps": n_steps,
                "new_tokens": n_steps * emitted,
            }
        ]
    ).to_csv(d / "summary.csv", index=False)
    pd.DataFrame(
        [
            {
                "config_hash": h,
                "run_id": run_id,
                "prompt_id": "a",
                "step": i,
                "emitted": emitted,
                "accepted": emitted - 1,
            }
            for i in range(n_steps)
        ]
    ).to_csv(d / "steps.csv", index=False)
    (d / "outputs.jsonl").write_text(
        json.dumps({"prompt_id": "a", "token_ids": [1] * n_steps * emitted, "text": run_id}) + "\n"
    )
    return d


def test_newest_run_of_a_config_replaces_all_its_rows(tmp_path):
    fake_job(tmp_path / "jobs", "old", run_id="20260101T000000-aaaa", n_steps=8, emitted=4)
    out = tmp_path / "results"
    collect_main([str(tmp_path / "jobs"), "--out", str(out)])
    fake_job(tmp_path / "jobs2", "new", run_id="20260102T000000-bbbb", n_steps=3, emitted=2)
    collect_main([str(tmp_path / "jobs2"), "--out", str(out)])
    summary, steps = read_csv(out / "summary.csv"), read_csv(out / STEPS_FILE)
    assert len(summary) == 1 and summary.n_steps.iloc[0] == len(steps) == 3
    assert steps.emitted.sum() == summary.new_tokens.iloc[0] and set(steps.run_id) == {"20260102T000000-bbbb"}
    outputs = [json.loads(x) for x in gzip.open(out / OUTPUTS_FILE, "rt").read().splitlines()]
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
    said = capsys.readouterr().err.strip()
    assert e.value.code == 2 and str(target) in said and said.startswith("specbench: error:")
    assert "\n" not in said and not out.exists()


def test_failed_jobs_are_skipped_and_listed_and_orphan_steps_dropped(tmp_path, capsys):
    fake_job(tmp_path / "jobs", "ok")
    bad = tmp_path / "jobs" / "bad"
    bad.mkdir()
    (bad / "error.txt").write_text("tree.budget='abc': must be an integer\n\nTraceback ...\n")
    (bad / "steps.csv").write_text("config_hash,prompt_id,step,emitted\nfff,a,0,1\n")  # no summary
    out = tmp_path / "results"
    out.mkdir()
    (out / "steps.csv").write_text("config_hash,prompt_id,step,emitted\norphan,a,0,1\n")
    (out / "summary.csv").write_text("config_hash,n_steps,new_tokens\nother,0,0\n")
    collect_main([str(tmp_path / "jobs"), "--out", str(out)])
    said = capsys.readouterr().out
    assert f"skipped 1 failed job(s) (see error.txt): {bad}" in said and "dropped 1 step rows" in said
    steps = read_csv(out / STEPS_FILE)
    assert set(steps.config_hash) == {"abc123abc123"}
    assert not (out / "steps.csv").exists()  # the uncompressed name from before the gzip is read, then gone
    with pytest.raises(CollectError):
        merge([str(bad)])


# --------------------------------------------------------------------------
# issue 24: newest run wins in any order; one run per folder; paired with primary;
# every skipped folder listed; all outputs replaced together or not at all
# --------------------------------------------------------------------------
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

OLD, NEW = "20260101T000000-aaaa", "20260102T000000-bbbb"


def out_files(out) -> dict:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


def test_an_older_folder_collected_later_never_replaces_newer_rows(tmp_path, capsys):
    fake_job(tmp_path / "new", "j", run_id=NEW, n_steps=3)
    fake_job(tmp_path / "old", "j", run_id=OLD, n_steps=8)
    out = tmp_path / "results"
    collect_main([str(tmp_path / "new"), "--out", str(out)])
    collect_main([str(tmp_path / "old"), "--out", str(out)])  # older run, collected later
    summary = read_csv(out / "summary.csv")
    assert list(summary.run_id) == [NEW] and summary.n_steps.iloc[0] == 3
    assert set(read_csv(out / STEPS_FILE).run_id) == {NEW}
    collect_main([str(tmp_path), "--out", str(tmp_path / "both"), "--fresh"])  # both in one collect
    assert list(read_csv(tmp_path / "both" / "summary.csv").run_id) == [NEW]
    said = capsys.readouterr().out
    assert f"skipped 1 older run(s) of configurations collected from a newer run: {tmp_path / 'old' / 'j'}" in said


def test_error_txt_or_two_run_ids_make_a_folder_failed_and_listed(tmp_path, capsys):
    fake_job(tmp_path / "jobs", "ok", h="aaaaaaaaaaaa")
    err = fake_job(tmp_path / "jobs", "err", h="bbbbbbbbbbbb", run_id=OLD)
    fake_job(tmp_path / "tmp", "x", h="bbbbbbbbbbbb", run_id=NEW)
    os.replace(tmp_path / "tmp" / "x" / "steps.csv", err / "steps.csv")  # a new run's steps ...
    (err / "error.txt").write_text("cannot write: disk full\n\nTraceback ...\n")  # ... that failed
    mixed = fake_job(tmp_path / "jobs", "mixed", h="cccccccccccc", run_id=OLD)
    fake_job(tmp_path / "tmp", "y", h="cccccccccccc", run_id=NEW)
    os.replace(tmp_path / "tmp" / "y" / "steps.csv", mixed / "steps.csv")  # no error.txt, two runs
    out = tmp_path / "results"
    collect_main([str(tmp_path / "jobs"), "--out", str(out)])
    said = capsys.readouterr().out
    assert f"skipped 1 failed job(s) (see error.txt): {err}" in said
    assert f"skipped 1 job folder(s) holding files of two runs: {mixed} (summary run {OLD}, others {NEW})" in said
    assert list(read_csv(out / "summary.csv").config_hash) == ["aaaaaaaaaaaa"]
    assert set(read_csv(out / STEPS_FILE).config_hash) == {"aaaaaaaaaaaa"}


def paired_job(root, name, run_id, primary_run=None):
    """A primary job folder with one paired/<mode>/ folder (its summary's pair_key = the primary)."""
    d = fake_job(root, name, h="p1p1p1p1p1p1", run_id=primary_run or run_id)
    p = d / "paired" / "block"
    p.mkdir(parents=True)
    pd.DataFrame(
        [
            {
                "config_hash": "q1q1q1q1q1q1",
                "run_id": run_id,
                "pair": "p",
                "tree": "chain",
                "budget": 2,
                "n_steps": 1,
                "new_tokens": 2,
                "pair_key": "p1p1p1p1p1p1",
                "pair_role": "paired",
            }
        ]
    ).to_csv(p / "summary.csv", index=False)
    pd.DataFrame(
        [{"config_hash": "q1q1q1q1q1q1", "run_id": run_id, "prompt_id": "a", "step": 0, "emitted": 2, "accepted": 1}]
    ).to_csv(p / "steps.csv", index=False)
    return d, p


def test_paired_rows_are_collected_only_with_their_primary(tmp_path, capsys):
    d, p = paired_job(tmp_path / "jobs", "good", NEW)
    out = tmp_path / "results"
    collect_main([str(tmp_path / "jobs"), "--out", str(out)])
    assert sorted(read_csv(out / "summary.csv").config_hash) == ["p1p1p1p1p1p1", "q1q1q1q1q1q1"]
    _, orphan = paired_job(tmp_path / "lone", "x", NEW)
    (orphan.parent.parent / "summary.csv").unlink()  # the primary never finished
    _, other = paired_job(tmp_path / "other", "y", NEW, primary_run=OLD)  # primary of another run
    with pytest.raises(SystemExit) as e:
        collect_main([str(tmp_path / "lone"), str(tmp_path / "other"), "--out", str(tmp_path / "r2")])
    both = capsys.readouterr()
    assert e.value.code == 2 and "no finished jobs" in both.err
    said = both.out
    assert f"skipped 1 paired folder(s) without their primary's run: {orphan}" in said
    assert f"{other.parent.parent} (summary run {OLD}, others {NEW})" in said
    assert not (tmp_path / "r2").exists()  # nothing to collect: error, no files


def test_unfinished_and_resumed_folders_are_listed(tmp_path, capsys):
    fake_job(tmp_path / "jobs", "ok")
    killed = tmp_path / "jobs" / "killed" / ".hydra"
    killed.mkdir(parents=True)
    (killed / "overrides.yaml").write_text("- tree=chain\n")
    resumed = tmp_path / "jobs" / "resumed"
    resumed.mkdir()
    (resumed / "resumed.txt").write_text(str(tmp_path / "jobs" / "ok") + "\n")
    collect_main([str(tmp_path / "jobs"), "--out", str(tmp_path / "results")])
    said = capsys.readouterr().out
    assert f"skipped 1 unfinished job folder(s) (no summary.csv: killed, or a full disk): {killed.parent}" in said
    assert "1 folder(s) of resumed jobs" in said


@pytest.mark.parametrize("damage", ["missing column", "not a number"])
def test_a_malformed_acceptance_vector_rewrites_nothing(tmp_path, damage, capsys):
    fake_job(tmp_path / "jobs", "a", h="aaaaaaaaaaaa")
    out = tmp_path / "results"
    collect_main([str(tmp_path / "jobs"), "--out", str(out)])
    before = out_files(out)
    vec = out / "acceptance_vector.csv"
    vec.write_text(
        "pair,dataset,verify,temperature,rank,p_accept\np,d,greedy,0,0,0.5\n"
        if damage == "missing column"
        else "pair,dataset,verify,temperature,rank,p_accept,n\np,d,greedy,0,zero,0.5,3\n"
    )
    fake_job(tmp_path / "jobs", "b", h="bbbbbbbbbbbb")
    with pytest.raises(SystemExit) as e:
        collect_main([str(tmp_path / "jobs"), "--out", str(out)])
    said = capsys.readouterr().err.strip()
    assert e.value.code == 2 and said.startswith(f"specbench: error: {vec}") and "\n" not in said
    assert {k: v for k, v in out_files(out).items() if k != vec.name} == before


def test_collect_onto_a_read_only_folder_is_one_line_and_leaves_it_as_it_was(tmp_path, ro_mount):
    fake_job(tmp_path / "jobs", "a")
    r = subprocess.run(
        [sys.executable, "-m", "specbench.collect", str(tmp_path / "jobs"), "--out", str(ro_mount / "results")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr  # refused before any job is read (#85)
    line = r.stderr.strip()
    assert (
        "\n" not in line
        and line.startswith(f"specbench: error: --out={ro_mount / 'results'}")
        and "not writable; point --out at a writable folder" in line
    ), line
    assert not any(ro_mount.iterdir())


def test_collect_onto_a_full_disk_replaces_none_of_its_outputs(tmp_path, tiny_tmpfs):
    """A first collect fits; a bigger second one does not: every old file stays, nothing half-written."""
    fake_job(tmp_path / "jobs", "a", h="aaaaaaaaaaaa")
    out = tiny_tmpfs / "results"
    collect_main([str(tmp_path / "jobs"), "--out", str(out)])
    before = out_files(out)
    for i in range(40):
        fake_job(tmp_path / "jobs", f"big{i}", h=f"{i:012d}", n_steps=4000)  # ~100x the disk, gzipped or not
    with pytest.raises(SystemExit) as e:
        collect_main([str(tmp_path / "jobs"), "--out", str(out)])
    msg = str(e.value)
    assert msg.startswith(f"specbench: error: {out}/") and "No space left on device" in msg and "\n" not in msg
    assert out_files(out) == before  # no temp file, no 0-byte file


def test_rows_from_before_the_described_columns_get_them_from_the_registries_by_name(tmp_path):
    """study.job.describe: a job folder's older summary (its drafter in config.yaml) and rows kept in --out
    (their pair's preset names the drafter) are described on collect; a name no registry knows is left
    empty, and the config hashes stay as they were."""
    d = fake_job(tmp_path / "jobs", "old")
    read_csv(d / "summary.csv").assign(tree="kary", tree_params="{}", verify="mss", child_rule="sample").to_csv(
        d / "summary.csv", index=False
    )
    (d / "config.yaml").write_text("pair:\n  drafter: ngram\n")
    out = tmp_path / "results"
    collect_main([str(tmp_path / "jobs"), "--out", str(out)])
    row = read_csv(out / "summary.csv").iloc[0]
    assert json.loads(row.tree_resolved) == {"width": 3} and row.frontier_rule == "fixed"
    assert (row.mode_family, row.baseline_of, row.token_level_on) == ("lossless", "tree", "chain,tree")
    kept = read_csv(out / "summary.csv").drop(columns=list(DESCRIBED))
    unknown = kept.assign(config_hash="0123456789ab", tree="zigzag", verify="strict_greedy", n_steps=0, new_tokens=0)
    pd.concat([kept.assign(pair="qwen_coder"), unknown]).to_csv(out / "summary.csv", index=False)
    collect_main([str(tmp_path / "no_jobs"), "--out", str(out)])
    rows = read_csv(out / "summary.csv").set_index("config_hash")
    assert list(rows.index) == ["0123456789ab", "abc123abc123"]
    assert rows.loc["abc123abc123", "frontier_rule"] == "sample"  # qwen_coder: the model drafter
    assert rows.loc["0123456789ab", list(DESCRIBED)].isna().all()  # not registered here: left empty


# --------------------------------------------------------------------------
# issue 55: one folder, one lock, however it is named
# --------------------------------------------------------------------------
def test_a_folder_and_a_symlink_to_it_share_one_lock(tmp_path):
    from specbench.core.atomic import lock_file

    (tmp_path / "S").mkdir()
    (tmp_path / "Sl").symlink_to(tmp_path / "S")
    names = [tmp_path / "S", tmp_path / "Sl", tmp_path / "Sl" / ".." / "S", tmp_path / "S" / "new"]
    assert len({lock_file(str(n)) for n in names[:3]}) == 1
    assert lock_file(str(names[3])) == lock_file(str(tmp_path / "Sl" / "new"))  # not there yet: parent resolved


def _collect_at(go, dirs: list[str]) -> None:
    go.wait()
    collect_main([*dirs])


def test_two_collects_into_one_folder_one_through_a_symlink_keep_both(tmp_path):
    """``collect A --out S & collect B --out Sl`` (Sl -> S), forked together, 6 trials: both rows stay."""
    import multiprocessing

    fake_job(tmp_path / "A", "j", h="aaaaaaaaaaaa")
    fake_job(tmp_path / "B", "j", h="bbbbbbbbbbbb")
    ctx = multiprocessing.get_context("fork")
    for trial in range(6):
        s = tmp_path / f"S{trial}"
        s.mkdir()
        (tmp_path / f"Sl{trial}").symlink_to(s)
        go = ctx.Event()
        procs = [
            ctx.Process(target=_collect_at, args=(go, [str(tmp_path / src), "--out", str(tmp_path / out)]))
            for src, out in (("A", f"S{trial}"), ("B", f"Sl{trial}"))
        ]
        for p in procs:
            p.start()
        go.set()
        for p in procs:
            p.join(timeout=120)
            assert p.exitcode == 0, trial
        assert sorted(read_csv(s / "summary.csv").config_hash) == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"], trial


def test_drop_removes_rows_a_new_hash_replaces_and_refuses_an_unknown_hash(tmp_path, capsys):
    """A committed row whose rerun has another hash (a recalibrated Sequoia tree) is dropped as the rerun is
    collected; a hash that names no row is one line and nothing is written."""
    fake_job(tmp_path / "jobs", "old", h="aaaaaaaaaaaa", run_id=OLD)
    fake_job(tmp_path / "jobs", "keep", h="bbbbbbbbbbbb", run_id=OLD)
    out = tmp_path / "results"
    collect_main([str(tmp_path / "jobs"), "--out", str(out)])
    before = out_files(out)
    with pytest.raises(SystemExit) as e:
        collect_main([str(tmp_path / "new"), "--out", str(out), "--drop", "cccccccccccc"])
    assert e.value.code == 2 and "--drop: cccccccccccc names no configuration" in capsys.readouterr().err
    assert out_files(out) == before
    fake_job(tmp_path / "new", "rerun", h="dddddddddddd", run_id=NEW)
    collect_main([str(tmp_path / "new"), "--out", str(out), "--drop", "aaaaaaaaaaaa"])
    assert sorted(read_csv(out / "summary.csv").config_hash) == ["bbbbbbbbbbbb", "dddddddddddd"]
    assert set(read_csv(out / STEPS_FILE).config_hash) == {"bbbbbbbbbbbb", "dddddddddddd"}
    assert "dropped 1 configurations of" in capsys.readouterr().out
