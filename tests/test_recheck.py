"""The acceptance-sample check (study.tools.recheck): a fixed stratified sample of the committed greedy
rows (the cheapest row of each stratum), re-derived at the committed batch on the prompts of its run
and compared step by step; on hand-made rows and end to end on the tiny pair at batch 2."""

from __future__ import annotations

import itertools
import os
import shlex
import subprocess

import pandas as pd
import pytest

import forkserver
from conftest import ROOT, tiny_pair_overrides
from specbench.study.tools import recheck
from test_hydra import JOB_MODULES

PAIRS = {  # pair: (target, frontier rule)
    "qwen_coder": ("qwen2.5-coder-1.5b-instruct", "topk"),
    "smollm_qwen": ("qwen2.5-coder-1.5b-instruct", "topk"),
    "ngram_qwen": ("qwen2.5-coder-1.5b-instruct", "fixed"),
    "smollm_qwen05": ("qwen2.5-coder-0.5b-instruct", "topk"),
}


def summary_rows() -> pd.DataFrame:
    rows = []
    for (pair, (target, rule)), tree, ds, budget in itertools.product(
        PAIRS.items(), ["chain", "binary", "specinfer"], ["he", "mt", "code"], [1, 4, 16]
    ):
        if pair == "smollm_qwen05" and ds == "code":
            continue
        batch = 64 if pair == "qwen_coder" else 32
        rows.append(
            dict(
                config_hash=f"{pair}-{tree}-{ds}-{budget}",
                pair=pair,
                target=target,
                frontier_rule=rule,
                tree=tree,
                tree_params="{}",
                dataset=ds,
                budget=budget,
                engine="replay",
                verify="greedy",
                temperature=0.0,
                seed=0,
                max_new_tokens=128,
                dtype="bfloat16",
                batch_size=batch,
                n_prompts=batch,
            )
        )
    live = dict(rows[0], config_hash="live", engine="live", tree="none", budget=0, batch_size=1, n_prompts=8)
    return pd.DataFrame([*rows, live])


def _sample(tmp_path, s: pd.DataFrame) -> pd.DataFrame:
    path = tmp_path / "summary.csv"
    s.to_csv(path, index=False)
    return recheck.sample(str(path))


def test_the_sample_represents_every_pair_shape_rule_and_dataset_and_is_fixed(tmp_path):
    s = summary_rows()
    picked = _sample(tmp_path, s)
    for col in recheck.STRATA:
        assert set(picked[col]) == set(s[col]), col
    # a live row only where no replayed one covers a value (plain decoding), on its first prompt
    assert list(picked[picked.engine == "live"].config_hash) == ["live"]
    assert (picked[picked.engine == "replay"].budget == recheck.BUDGET).all()  # where a budget 4 row exists
    assert len(picked) <= 7
    assert list(_sample(tmp_path, s.sample(frac=1, random_state=1)).config_hash) == list(picked.config_hash)


def test_each_stratum_takes_its_cheapest_row(tmp_path):
    s = summary_rows()
    dear = s[s.engine == "replay"].assign(max_new_tokens=256, config_hash=lambda d: d.config_hash + "-long")
    wide = s[s.engine == "replay"].assign(batch_size=128, n_prompts=128, config_hash=lambda d: d.config_hash + "-b128")
    split = s[s.engine == "replay"].assign(n_prompts=64, config_hash=lambda d: d.config_hash + "-split")
    live = s[s.engine == "replay"].assign(
        engine="live", batch_size=1, n_prompts=8, config_hash=lambda d: d.config_hash + "-live"
    )
    picked = _sample(tmp_path, pd.concat([dear, wide, split, live, s]).reset_index(drop=True))
    for col in recheck.STRATA:
        assert set(picked[col]) == set(s[col]), col
    replayed = picked[picked.engine == "replay"]
    assert not replayed.config_hash.str.contains("-long|-b128|-split").any(), list(picked.config_hash)
    assert (replayed.max_new_tokens == 128).all() and set(replayed.batch_size) <= {32, 64}
    # the 0.5B target's rows before the 1.5B's: the first pick, and its pair's one pick
    assert picked.pair.iloc[0] == "smollm_qwen05" and (picked.pair == "smollm_qwen05").sum() == 1
    assert list(picked[picked.engine == "live"].tree) == ["none"]


def test_the_job_line_re_derives_the_committed_run():
    row = summary_rows().iloc[0]
    line = recheck.job_line(row, cache="/c")
    for part in ("pair=qwen_coder", "dataset.limit=64", "batch_size=64", "engine=replay", "dtype=bfloat16"):
        assert part in line.split(), part
    # a batched run of more prompts than its batch: all of them (a finished row's slot took the next)
    split = recheck.job_line(dict(row, batch_size=32, n_prompts=64))
    assert {"dataset.limit=64", "batch_size=32"} <= set(split.split())
    assert "+replay_cache=/c" in line.split() and "verify.temperature=0.0" in line and "max_new_tokens=128" in line
    live = recheck.job_line(summary_rows().iloc[-1], cache="/c")
    assert "engine=live" in live and "dataset.limit=1" in live and "batch_size=1" in live and "replay_cache" not in live


def test_a_replayed_record_is_keyed_by_the_batch_that_computed_it():
    """A bf16 padded batch can resolve a near-tie other than a batch of one, and a finished row's slot is
    refilled by the next prompt: a continuation computed in a batched run is cached under that run (its
    batch size and all its prompts), and a miss computes the whole run."""
    from specbench.engine import replay

    prompts = [[1, 2], [3], [4, 5, 6], [7], [8]]
    one = replay.batch_keys({"k": 0}, prompts, 1)
    assert one[0] == replay.prompt_key({"k": 0}, prompts[0]) and "batch" not in one[0]
    two = replay.batch_keys({"k": 0}, prompts, 2)
    assert [k["batch"] for k in two] == [2] * 5 and len({k["batch_of"] for k in two}) == 1
    assert two[0] != replay.batch_keys({"k": 0}, prompts[:2], 2)[0]  # another run (fewer prompts), another key
    assert two[0] != replay.batch_keys({"k": 0}, prompts, 4)[0]  # another batch size, another key
    asked = []
    compute = replay.whole_batches(lambda todo: asked.append(todo) or [f"c{i}" for i in todo], len(prompts), 2)
    assert compute([3, 4]) == ["c3", "c4"] and asked == [[0, 1, 2, 3, 4]]  # the whole run
    single = replay.whole_batches(lambda todo: asked.append(todo) or [f"c{i}" for i in todo], len(prompts), 1)
    assert single([4, 1]) == ["c4", "c1"] and asked[-1] == [1, 4]  # batch 1: only what is missing


def test_one_cache_serves_every_job():
    lines = recheck.jobs(summary_rows().iloc[:2], cache="/c")
    assert all("+replay_cache=/c" in line.split() for line in lines)


def _steps(chash: str, accepted: list[int], prompt: str = "p0") -> pd.DataFrame:
    row = summary_rows().set_index("config_hash").loc[chash]
    base = {k: row[k] for k in recheck.KEY if k != "budget"} | {"budget": int(row["budget"])}
    return pd.DataFrame(
        [
            dict(base, config_hash=chash, prompt_id=prompt, step=i, tree_size=4, tree_depth=4, accepted=a)
            | dict(emitted=a + 1, accept_path=float("nan") if a == 0 else 0.0)
            for i, a in enumerate(accepted)
        ]
    )


def test_compare_passes_identical_steps_and_names_what_differs(tmp_path, capsys):
    summary = summary_rows()
    committed = pd.concat([_steps("ngram_qwen-chain-he-4", [1, 0, 2]), _steps("ngram_qwen-chain-he-4", [3, 3], "p1")])
    job = tmp_path / "runs" / "1"
    job.mkdir(parents=True)
    _steps("ngram_qwen-chain-he-4", [1, 0, 2]).assign(config_hash="other-hash").to_csv(job / "steps.csv", index=False)
    check = recheck.compare(summary, committed, str(tmp_path / "runs"))
    assert len(check) == 1 and check.identical.all() and check.config_hash.iloc[0] == "ngram_qwen-chain-he-4"
    assert recheck.verdict(check).startswith("acceptance-sample check: PASS: 1 configuration, 1 prompt")
    assert "at batch 32)" in recheck.verdict(check)
    _steps("ngram_qwen-chain-he-4", [1, 1, 2]).to_csv(job / "steps.csv", index=False)
    check = recheck.compare(summary, committed, str(tmp_path / "runs"))
    line = recheck.verdict(check)
    assert not check.identical.any() and line.startswith("acceptance-sample check: FAIL: 1 of 1 prompts differ")
    assert "accepted" in line and "emitted" in line and "tree_size" not in line.split("columns")[1]
    # where they part: the first step agrees, the second differs; the batches each side ran in
    assert check.same_prefix_steps.iloc[0] == 1 and check.committed_batch.iloc[0] == 32
    assert "agree on their first 1-1 steps (median 33% of their steps)" in line
    assert "(committed at batch 32, re-derived at batch 32)" in line
    # whether the acceptance moved with the tokens: tokens per step, committed and here, paired over the prompts
    assert (
        "moved (or one prompt: untested) in 1 of 1: ngram_qwen chain/4 he 2.000 committed, 2.333 here (+0.333, one prompt)"
        in line
    )
    (job / "two").mkdir()
    pd.concat([_steps("ngram_qwen-chain-he-4", [1, 1, 2]), _steps("ngram_qwen-chain-he-4", [3, 2], "p1")]).to_csv(
        job / "two" / "steps.csv", index=False
    )
    (job / "steps.csv").unlink()
    both = recheck.compare(summary, committed, str(tmp_path / "runs"))
    two = recheck.verdict(both)
    assert recheck.verdict(both, brief=True) == (  # the main page's: the counts and whether the acceptance moved
        "acceptance-sample check: FAIL: 2 of 2 prompts differ, in 1 of 1 configurations; tokens per step moved in "
        "none of the 1 (paired 95% intervals)"
    )
    assert (
        "moved in none of the 1 (each paired 95% interval over its prompts includes 0; the largest difference: " in two
    )
    assert "he 2.800 committed, 2.800 here (-0.083 [-5.3" in two  # (+1/3 - 1/2) / 2
    assert len(line.splitlines()) == 1
    assert recheck.verdict(check.iloc[:0]).startswith("acceptance-sample check: FAIL: nothing")
    # a steps.csv that no specbench.run job wrote in --runs: one line naming it and the key, nothing compared
    (job / "other").mkdir()
    pd.DataFrame({"prompt_id": ["p0"], "step": [0]}).to_csv(job / "other" / "steps.csv", index=False)
    with pytest.raises(SystemExit) as e:
        recheck.compare(summary, committed, str(tmp_path / "runs"))
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and "--runs: " in err and "no column accept_path" in err


def test_compare_refuses_a_runs_folder_that_is_not_one(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        recheck.main(
            ["compare", "--results", "results", "--runs", str(tmp_path / "none"), "--out", str(tmp_path / "c.csv")]
        )
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and "--runs=" in err and "not a folder" in err
    assert not (tmp_path / "c.csv").exists()


def _cmd(args: list[str]) -> subprocess.CompletedProcess:
    """``python -m ARGS``, forked from an interpreter that has imported a job's modules (forkserver.py)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    return forkserver.run(args, cwd=ROOT, env=env, timeout=600, preload=JOB_MODULES)


def _run(args: list[str]) -> subprocess.CompletedProcess:
    r = _cmd(args)
    assert r.returncode == 0, (r.stdout[-1500:], r.stderr[-3000:])
    return r


def test_the_tiny_pair_is_re_derived_identically_at_batch_2_and_a_changed_committed_row_fails(tiny_pair_dirs, tmp_path):
    pair = tiny_pair_overrides(tiny_pair_dirs)
    ref, res = tmp_path / "ref", tmp_path / "results"
    common = ["dataset=smoke", "dataset.limit=2", "batch_size=2", "max_new_tokens=8", "engine=replay", "verify=greedy"]
    _run(["specbench.run", *pair, *common, "tree=binary", "tree.budget=2", f"out_root={ref}"])
    _run(["specbench.collect", str(ref), "--out", str(res)])
    args = ["specbench.study.tools.recheck", "jobs", "--results", str(res), "--pair-overrides", " ".join(pair[:3])]
    (line,) = _run([*args, "--cache", str(tmp_path / "cache")]).stdout.splitlines()
    for part in (
        "dataset.limit=2",
        "batch_size=2",
        "dtype=float32",
        "engine=replay",
        f"+replay_cache={tmp_path}/cache",
    ):
        assert part in line.split(), part
    runs = tmp_path / "runs"
    _run(["specbench.run", *shlex.split(line), "device=cpu", f"out_root={runs}"])
    out = tmp_path / "check.csv"
    cmp = ["specbench.study.tools.recheck", "compare", "--results", str(res), "--runs", str(runs), "--out", str(out)]
    assert _run(cmp).stdout.startswith("acceptance-sample check: PASS: 1 configuration, 2 prompts")
    check = pd.read_csv(out)
    assert check.identical.all() and set(check.batch) == {2} and set(check.committed_batch) == {2}
    steps = pd.read_csv(res / "steps.csv.gz")
    steps.loc[0, "tree_depth"] = 99  # a committed step of the first prompt that the machine does not reproduce
    steps.to_csv(res / "steps.csv.gz", index=False)
    line = _run(cmp).stdout.strip()
    assert line.startswith("acceptance-sample check: FAIL: 1 of 2 prompts differ") and "tree_depth" in line
    # the plan's --only: a hash outside the sample is refused in one line, exit 2
    r = _cmd([*args, "--only", "nope"])
    assert r.returncode == 2 and "--only" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_check_on_one_machine_keeps_another_machines_and_the_report_reads_the_runs_own(tmp_path):
    """acceptance_check.csv keeps each machine's last check: a new check replaces its own machine's rows only
    (and rows that name none), and the report states the default run's machine's check, the other apart."""
    from specbench.report import defaultrun

    def check(mid, identical, n=2):
        rows = pd.DataFrame(dict(config_hash="h", pair="p", tree="chain", budget=4, dataset="d", prompt_id=range(n)))
        rows = rows.assign(found=True, steps=4, committed_steps=4, emitted=4, committed_emitted=4)
        return rows.assign(identical=identical, batch=1, machine_id=mid, machine=f"CPU {mid}, 2 cores")

    legacy = check("x", True).drop(columns=["machine_id", "machine"])
    assert recheck.kept_beside(legacy, check("a", True)).machine_id.tolist() == ["a", "a"]
    both = recheck.kept_beside(check("a", True), check("b", False, 3))
    assert both.machine_id.tolist() == ["b"] * 3 + ["a"] * 2
    again = recheck.kept_beside(both, check("a", True, 1))  # a's new check replaces a's old one, b's stays
    assert again.machine_id.tolist() == ["a", "b", "b", "b"]
    rec = dict(profile="real", machine="CPU a, 2 cores", machine_id="a", dtype="float32", minutes=45, planned_s=60,
               covered="x", rates_gflops={})  # fmt: skip
    full = defaultrun.sentence(rec, again)
    assert "recheck` writes): acceptance-sample check: PASS: 1 configuration, 1 prompt" in full
    assert full.endswith(
        "Kept beside it, the last check on CPU b, 2 cores: acceptance-sample check: FAIL: 3 of 3 prompts differ, in 1 of 1 configurations; tokens per step moved in none of the 1 (paired 95% intervals)."
    )
    brief = defaultrun.sentence(rec, again, brief=True)
    assert "PASS: 1 configuration, 1 prompt" in brief and "CPU b" not in brief
    assert "no acceptance-sample check" in defaultrun.sentence({**rec, "machine_id": "c"}, again, brief=True)
