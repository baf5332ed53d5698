"""The committed replayed rows that replay another run's continuation (study.tools.stale): found from
the committed tokens against a re-derived job of each batched run, on hand-made rows."""

from __future__ import annotations

import json

import pandas as pd

from specbench.study.tools import stale


def row(chash: str, tree: str, n: int, budget: int = 4, **kw) -> dict:
    base = dict(
        config_hash=chash, pair="ngram_qwen", target="t15", tree=tree, tree_params="{}", budget=budget,
        dataset="he", engine="replay", verify="greedy", temperature=0.0, seed=0, max_new_tokens=8,
        dtype="bfloat16", batch_size=2, n_prompts=n, frontier_rule="fixed",
    )  # fmt: skip
    return {**base, **kw}


SUMMARY = pd.DataFrame(
    [
        row("a", "chain", 4, budget=1),  # the 4-prompt run (its reference re-derives one of its rows)
        row("b", "binary", 4),
        row("c", "chain", 2, budget=1),  # a 2-prompt run: no reference re-derived below
        row("d", "chain", 4, batch_size=1, engine="live"),  # live and batch 1: not a batched replay
    ]
)


def test_each_batched_run_has_one_reference_job_its_cheapest_row():
    lines = stale.references(SUMMARY, cache="/c")
    assert len(lines) == 2 and all("+replay_cache=/c" in ln.split() for ln in lines)
    # one per run (4 prompts, 2 prompts), each its whole run at its batch; the live batch-1 row has none
    assert sorted(next(w for w in ln.split() if w.startswith("dataset.limit=")) for ln in lines) == [
        "dataset.limit=2",
        "dataset.limit=4",
    ]
    assert all("batch_size=2" in ln.split() and "engine=replay" in ln.split() for ln in lines)


def test_a_row_whose_tokens_differ_from_its_runs_continuation_is_stale(tmp_path):
    job = tmp_path / "runs" / "1"
    job.mkdir(parents=True)
    pd.DataFrame([row("a", "chain", 4, budget=1)]).to_csv(job / "summary.csv", index=False)
    cont = {f"p{i}": [i, i + 1] for i in range(4)}
    (job / "outputs.jsonl").write_text(
        "".join(json.dumps({"prompt_id": p, "token_ids": t}) + "\n" for p, t in cont.items())
    )
    committed = {("a", p): t for p, t in cont.items()} | {("b", p): t for p, t in cont.items()}
    committed[("b", "p3")] = [9, 9]  # b replayed another run's continuation of p3
    committed |= {("c", "p0"): [7]}  # c's run was not re-derived: not judged
    copy = tmp_path / "runs" / "results"  # a summary without a job's outputs beside it: no reference
    copy.mkdir()
    pd.DataFrame([row("b", "binary", 4)]).to_csv(copy / "summary.csv", index=False)
    refs = stale.continuations(str(tmp_path / "runs"))
    assert list(refs) == [stale.run_of(SUMMARY.iloc[0])]
    bad = stale.stale(SUMMARY, committed, refs)
    assert list(bad.config_hash) == ["b"] and list(bad.differ) == [1]


def test_a_row_whose_tree_file_now_builds_another_tree_no_longer_has_its_hash(tiny_pair_dirs, tmp_path):
    """A Sequoia row's job keeps its hash while its vector builds the same tree; once the vector is
    recalibrated the job is a new row (``stale`` lists it apart: running it cannot replace the row)."""
    from test_bad_files import VEC
    from test_hydra import job_args, specbench

    vec = tmp_path / "acceptance_vector.csv"
    vec.write_text(VEC)
    calib = ["tree.calib_pair_id=abc", "tree.calib_dataset=d", "tree.calib_verify=greedy"]
    args = job_args(tiny_pair_dirs, tmp_path / "out", "tree=sequoia", "tree.budget=4", f"tree.vector={vec}", *calib)
    assert specbench(*args).returncode == 0
    chash = str(pd.read_csv(next((tmp_path / "out").rglob("summary.csv"))).config_hash.iloc[0])
    line = " ".join(a for a in args[1:] if not a.startswith("out_root="))
    assert stale.keeps_hash(line, chash)
    vec.write_text(VEC.replace(",0.6,", ",0.99,"))  # rank 0 almost sure: a chain of 4, where 0.6 built a wider tree
    assert not stale.keeps_hash(line, chash)
