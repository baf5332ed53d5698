"""A job's identity covers the content it reads: models swapped in place are a new job,
collect keeps exactly one run's rows per config, two local pairs stay apart in the report,
and every file is written with the process umask."""

import glob
import os
import shutil

from conftest import report_text
from specbench.core.atomic import umask
from specbench.results.files import OUTPUTS_FILE, STEPS_FILE, read_csv
from specbench.study.job import identity
from test_hydra import job_args, specbench


def test_fingerprints_are_cached_beside_the_files_and_follow_size_and_mtime(tiny_pair_dirs, tmp_path, monkeypatch):
    folder = tmp_path / "m"
    shutil.copytree(tiny_pair_dirs[1], folder)
    (folder / identity.CACHE_NAME).unlink(missing_ok=True)  # an earlier test may have hashed the fixture
    hashed = []
    real = identity.file_sha256
    monkeypatch.setattr(identity, "file_sha256", lambda p: hashed.append(p.name) or real(p))
    first = identity.folder_digests(folder, "pair.target.path")
    assert (folder / identity.CACHE_NAME).is_file() and "model.safetensors" in hashed
    hashed.clear()
    assert identity.folder_digests(folder, "pair.target.path") == first and hashed == []
    st = (folder / "config.json").stat()
    os.utime(folder / "config.json", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert identity.folder_digests(folder, "pair.target.path") == first and hashed == ["config.json"]


def summaries(out) -> list[str]:
    return sorted(glob.glob(os.path.join(str(out), "**", "summary.csv"), recursive=True))


def test_model_swapped_in_place_is_recomputed_and_collect_keeps_one_run_per_config(tiny_pair_dirs, tmp_path):
    draft, target = tmp_path / "draft", tmp_path / "target"
    shutil.copytree(tiny_pair_dirs[0], draft)
    shutil.copytree(tiny_pair_dirs[1], target)
    out = tmp_path / "outputs"
    args = [a for a in job_args((str(draft), str(target)), out) if "dataset.limit" not in a]
    assert specbench(*args, "dataset.limit=1").returncode == 0
    shutil.copy(draft / "model.safetensors", target / "model.safetensors")  # same size, new content
    r = specbench(*args, "dataset.limit=1")
    assert r.returncode == 0 and "skip" not in r.stdout, r.stderr[-2000:]
    r = specbench(*args, "dataset.limit=1", "resume=false")  # same config again
    assert r.returncode == 0
    hashes = [read_csv(s).config_hash.iloc[0] for s in summaries(out)]
    assert len(hashes) == 3 and len(set(hashes)) == 2
    res = tmp_path / "results"
    assert specbench("specbench.collect", str(out), "--out", str(res)).returncode == 0
    summary, steps = read_csv(res / "summary.csv"), read_csv(res / STEPS_FILE)
    assert sorted(summary.config_hash) == sorted(set(hashes))
    for row in summary.itertuples():
        mine = steps[steps.config_hash == row.config_hash]
        assert len(mine) == row.n_steps and mine.emitted.sum() == row.new_tokens
        assert set(mine.run_id) == {row.run_id}
    assert summary.pair_id.nunique() == 2  # same folders, different content
    mode = 0o666 & ~umask()
    for f in [*summaries(out), res / "summary.csv", res / STEPS_FILE, res / OUTPUTS_FILE]:
        assert os.stat(f).st_mode & 0o777 == mode, f


def test_two_local_pairs_stay_apart_in_collect_and_report(tiny_pair_dirs, tmp_path):
    other = tmp_path / "other_draft"
    shutil.copytree(tiny_pair_dirs[1], other)  # a second pair: the target drafts for itself
    out = tmp_path / "outputs"
    for d in (tiny_pair_dirs[0], str(other)):
        r = specbench(*job_args(tiny_pair_dirs, out, f"pair.draft.path={d}", "dataset.limit=1"))
        assert r.returncode == 0, r.stderr[-2000:]
    res = tmp_path / "results"
    assert specbench("specbench.collect", str(out), "--out", str(res)).returncode == 0
    summary = read_csv(res / "summary.csv")
    assert summary.pair.nunique() == 2 and summary.pair_id.nunique() == 2
    assert all(str(other) in p or tiny_pair_dirs[0] in p for p in summary.pair)
    report = tmp_path / "REPORT.md"
    r = specbench("specbench.report", "--results", str(res), "--out", str(report))
    assert r.returncode == 0, r.stderr[-2000:]
    text = report_text(report)
    assert all(p in text for p in summary.pair)


def test_an_edited_prompt_file_is_a_new_job(tmp_path):
    """The dataset's content is part of the identity: same path, other prompts, other hash."""
    from specbench.study.job.jobspec import from_config

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": "a", "text": "def f(x):"}\n')
    job = from_config(
        {
            "pair": {"name": "p", "draft": {"source": "hub", "id": "d"}, "target": {"source": "hub", "id": "t"}},
            "tree": {"name": "chain", "budget": 2},
            "verify": {"name": "greedy"},
            "dataset": {"name": "jsonl", "path": str(prompts)},
        }
    )
    first = identity.job_identity(job)
    assert identity.job_identity(job) == first
    prompts.write_text('{"id": "a", "text": "def g(x):"}\n')
    second = identity.job_identity(job)
    assert second.dataset != first.dataset and (second.draft, second.target) == (first.draft, first.target)
    assert identity.config_hash(job, second) != identity.config_hash(job, first)
    assert identity.pair_id(second, "model") == identity.pair_id(first, "model")


# --------------------------------------------------------------------------
# issue 24: the Sequoia vector's content and a dataset file's identity
# --------------------------------------------------------------------------
def sequoia_job(vector):
    from specbench.study.job.jobspec import from_config

    return from_config(
        {
            "pair": {"name": "p", "draft": {"source": "hub", "id": "d"}, "target": {"source": "hub", "id": "t"}},
            "tree": {
                "name": "sequoia",
                "budget": 6,
                "depth": None,
                "max_children": 4,
                "vector": str(vector),
                "calib_pair_id": "auto",
                "calib_dataset": "smoke",
                "calib_verify": "greedy",
                "calib_temperature": 0.0,
            },
            "verify": {"name": "greedy"},
            "dataset": {"name": "smoke"},
        }
    )


def write_vector(path, ident, probs, bump):
    pid = identity.pair_id(ident, "model")
    rows = ["pair,pair_id,dataset,verify,temperature,rank,p_accept,n"]
    rows += [f"p,{pid},smoke,greedy,0.0,{r},{p},64" for r, p in enumerate(probs)]
    rows += ["p,otherpair000,smoke,greedy,0.0,0,0.1,64"]  # another pair's row
    path.write_text("\n".join(rows) + "\n")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump * 10**9))  # the loader caches by mtime


def test_a_recalibrated_sequoia_vector_is_a_new_job_exactly_when_the_tree_changes(tmp_path):
    vector = tmp_path / "acceptance_vector.csv"
    job = sequoia_job(vector)
    ident = identity.job_identity(job)
    hashes, trees = [], []
    for bump, probs in enumerate([(0.9, 0.05, 0.03, 0.02), (0.9, 0.05, 0.03, 0.02), (0.3, 0.3, 0.3, 0.1)]):
        write_vector(vector, ident, probs, bump + 1)
        bound, full = identity.bind(job, ident)
        hashes.append(identity.config_hash(bound, full))
        trees.append(full.reads["tree_paths"])
    assert hashes[0] == hashes[1] and trees[0] == trees[1]  # same vector, same tree, same job
    assert trees[2] != trees[0] and hashes[2] != hashes[0]  # recalibrated: another tree, another hash
    from dataclasses import replace

    _, plain = identity.bind(replace(job, tree=replace(job.tree, name="chain", params={})), ident)
    assert plain.reads == {} and "reads" not in plain.as_dict()  # other trees: hashes as before


def test_a_merged_drafters_sequoia_shape_reads_its_model_parts_vector(tmp_path):
    """tree=merged tree.shape=sequoia: the model part grows the Sequoia tree, so calib_pair_id=auto
    names the pair with the model drafter (same draft and target), not the merged pair."""
    from dataclasses import replace

    job = sequoia_job(tmp_path / "acceptance_vector.csv")
    ident = identity.job_identity(job)
    params = {**job.tree.params, "shape": "sequoia"}
    merged = replace(
        job, tree=replace(job.tree, name="merged", params=params), pair=replace(job.pair, drafter="merged")
    )
    bound, _ = identity.bind(merged, ident)
    assert bound.tree.params["calib_pair_id"] == identity.pair_id(ident, "model")
    assert identity.pair_id(ident, "model") != identity.pair_id(ident, "merged")
    own, _ = identity.bind(replace(job, pair=replace(job.pair, drafter="ngram")), ident)
    assert own.tree.params["calib_pair_id"] == identity.pair_id(ident, "ngram")  # any other drafter: its own


def test_two_jsonl_files_are_two_datasets_in_the_rows(tmp_path):
    from specbench.study.job.jobfiles import row_keys
    from specbench.study.job.jobspec import from_config

    labels = []
    for name, text in (("a", "def f(x):"), ("b", "def g(y):")):
        (tmp_path / name).mkdir()
        f = tmp_path / name / "prompts.jsonl"  # same file name, other folder
        f.write_text(f'{{"id": "p0", "text": "{text}"}}\n')
        job = from_config(
            {
                "pair": {"name": "p", "draft": {"source": "hub", "id": "d"}, "target": {"source": "hub", "id": "t"}},
                "tree": {"name": "chain", "budget": 2},
                "verify": {"name": "greedy"},
                "dataset": {"name": "jsonl", "path": str(f)},
            }
        )
        ident = identity.job_identity(job)
        labels.append(row_keys(job, ident, ("d", "t"), True, "live", "r")["dataset"])
    assert labels[0] != labels[1] and all(x.startswith("jsonl:prompts.jsonl@") for x in labels)
