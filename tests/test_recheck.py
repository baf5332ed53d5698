"""The acceptance-sample check (study.recheck): a fixed stratified sample of the committed replayed
rows, re-derived and compared step by step; on hand-made rows and end to end on the tiny pair."""

from __future__ import annotations

import itertools
import os
import shlex
import subprocess
import sys

import pandas as pd

from conftest import ROOT, tiny_pair_overrides
from specbench.study import recheck


def summary_rows() -> pd.DataFrame:
    rows = []
    pairs = {"a": ("T1", "topk"), "b": ("T1", "topk"), "ng": ("T1", "fixed"), "small": ("T2", "topk")}
    for (pair, (target, rule)), tree, ds, budget in itertools.product(
        pairs.items(), ["chain", "binary", "specinfer"], ["he", "mt", "code"], [1, 4, 16]
    ):
        if pair == "small" and ds == "code":
            continue
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
                batch_size=32,
            )
        )
    live = dict(rows[0], config_hash="live", engine="live", tree="eagle2")  # not replayed: never sampled
    return pd.DataFrame([*rows, live])


def test_the_sample_represents_every_pair_shape_rule_and_dataset_and_is_fixed(tmp_path):
    s = summary_rows()
    path = tmp_path / "summary.csv"
    s.to_csv(path, index=False)
    picked = recheck.sample(str(path))
    replayed = s[s.engine == "replay"]
    for col in recheck.STRATA:
        assert set(picked[col]) == set(replayed[col]), col
    assert "eagle2" not in set(picked.tree)
    assert (picked.budget == recheck.BUDGET).all()  # where a budget 4 row exists, it is the one
    assert len(picked) <= 6 and picked.groupby(["target", "dataset"]).ngroups <= 4
    shuffled = s.sample(frac=1, random_state=1)
    shuffled.to_csv(path, index=False)
    assert list(recheck.sample(str(path)).config_hash) == list(picked.config_hash)


def _steps(chash: str, accepted: list[int], prompt: str = "p0") -> pd.DataFrame:
    row = summary_rows().set_index("config_hash").loc[chash]
    base = {k: row[k] for k in recheck.SAME if k != "budget"} | {"budget": int(row["budget"])}
    return pd.DataFrame(
        [
            dict(base, config_hash=chash, prompt_id=prompt, step=i, tree_size=4, tree_depth=4, accepted=a)
            | dict(emitted=a + 1, accept_path=float("nan") if a == 0 else 0.0)
            for i, a in enumerate(accepted)
        ]
    )


def test_compare_passes_identical_steps_and_names_what_differs(tmp_path):
    summary = summary_rows()
    committed = pd.concat([_steps("a-chain-he-4", [1, 0, 2]), _steps("a-chain-he-4", [3, 3], "p1")])
    job = tmp_path / "runs" / "1"
    job.mkdir(parents=True)
    _steps("a-chain-he-4", [1, 0, 2]).assign(config_hash="other-hash").to_csv(job / "steps.csv", index=False)
    check = recheck.compare(summary, committed, str(tmp_path / "runs"))
    assert len(check) == 1 and check.identical.all() and check.config_hash.iloc[0] == "a-chain-he-4"
    assert recheck.verdict(check).startswith("acceptance-sample check: PASS: 1 configurations x 1 prompts")
    _steps("a-chain-he-4", [1, 1, 2]).to_csv(job / "steps.csv", index=False)
    check = recheck.compare(summary, committed, str(tmp_path / "runs"))
    line = recheck.verdict(check)
    assert not check.identical.any() and line.startswith("acceptance-sample check: FAIL: 1 of 1 prompts differ")
    assert "accepted" in line and "emitted" in line and "tree_size" not in line.split("columns")[1]
    # where they part: the first step agrees, the second differs; the batches each side ran in
    assert check.same_prefix_steps.iloc[0] == 1 and check.committed_batch.iloc[0] == 32
    assert "agree on their first 1-1 steps (median 33% of their steps)" in line
    assert "(committed at batch 32, re-derived at batch 1)" in line
    assert len(line.splitlines()) == 1
    assert recheck.verdict(check.iloc[:0]).startswith("acceptance-sample check: FAIL: nothing")


def _run(args: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    r = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout[-1500:], r.stderr[-3000:])
    return r


def test_the_tiny_pair_is_re_derived_identically_and_a_changed_committed_row_fails(tiny_pair_dirs, tmp_path):
    pair = tiny_pair_overrides(tiny_pair_dirs)
    ref, res = tmp_path / "ref", tmp_path / "results"
    common = ["dataset=smoke", "dataset.limit=2", "max_new_tokens=8", "engine=replay", "verify=greedy"]
    _run(["specbench.run", *pair, *common, "tree=binary", "tree.budget=2", f"out_root={ref}"])
    _run(["specbench.collect", str(ref), "--out", str(res)])
    jobs = _run(
        [
            "specbench.study.recheck",
            "jobs",
            "--results",
            str(res),
            "--prompts",
            "1",
            "--pair-overrides",
            " ".join(pair[:3]),
        ]
    )
    (line,) = jobs.stdout.splitlines()
    assert "dataset.limit=1" in line and "dtype=float32" in line and "engine=replay" in line
    runs = tmp_path / "runs"
    _run(["specbench.run", *shlex.split(line), "device=cpu", f"out_root={runs}", f"+replay_cache={tmp_path / 'cache'}"])
    out = tmp_path / "check.csv"
    cmp = ["specbench.study.recheck", "compare", "--results", str(res), "--runs", str(runs), "--out", str(out)]
    assert _run(cmp).stdout.startswith("acceptance-sample check: PASS: 1 configurations x 1 prompts")
    assert pd.read_csv(out).identical.all()
    steps = pd.read_csv(res / "steps.csv.gz")
    steps.loc[0, "tree_depth"] = 99  # a committed step of the first prompt that the machine does not reproduce
    steps.to_csv(res / "steps.csv.gz", index=False)
    line = _run(cmp).stdout.strip()
    assert line.startswith("acceptance-sample check: FAIL: 1 of 1 prompts differ") and "tree_depth" in line
