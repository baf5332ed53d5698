"""A failed rerun never erases finished results; collect, report and the lossless check publish
their outputs as one unit that a kill at any rename leaves old or new (after the ``recover``
every reader runs); two collects into one --out never lose rows (#39).

Kills are injected, not timed: a subprocess whose ``os.replace`` / ``os.rename`` ends the
process (``os._exit``, as SIGKILL would: no cleanup runs) at its k-th call, for every k
(tests/killing.py).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys

import pytest

import forkserver
from mounts import ro_mount  # noqa: F401  (fixture)
from specbench.core.atomic import recover
from test_hydra import ROOT, job_args, specbench

KILLING = ("-m", "killing")  # tests/killing.py: python -m killing K CODE ARGS
KILLED_ENV = {"PYTHONPATH": os.path.join(ROOT, "tests") + os.pathsep + ROOT}
PRELOAD = ("specbench.report.build", "specbench.study.job.collect")  # what the codes below import


def killed_at(k: int, code: str, *args) -> int:
    """Run ``code`` with its k-th rename killing the process (k = 0: never); its exit status.  Forked
    from a server that has imported PRELOAD (forkserver.py): a report's imports are most of its time."""
    env = dict(os.environ, **KILLED_ENV)
    r = forkserver.run(["killing", k, code, *args], cwd=os.getcwd(), env=env, timeout=600, preload=PRELOAD)
    assert r.returncode in (0, 137), r.stderr[-2000:]
    return r.returncode


def snapshot(folder) -> dict[str, bytes]:
    """Every file under ``folder``: relative path -> bytes."""
    out = {}
    for d, _, files in os.walk(folder):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, folder)] = open(p, "rb").read()
    return out


# --------------------------------------------------------------------------
# a failed rerun keeps the finished job
# --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad,line",
    [
        ("tree.budget=-1", "tree.budget"),  # refused by the config checks
        ("max_new_tokens=100000", "max_new_tokens"),  # refused by the context check (prompts loaded)
    ],
)
def test_a_failed_rerun_into_a_finished_folder_keeps_the_finished_job(tiny_pair_dirs, tmp_path, bad, line):
    d, out, res = tmp_path / "job", tmp_path / "outputs", tmp_path / "results"
    good = job_args(tiny_pair_dirs, out, "tree=chain", "tree.budget=2", f"hydra.run.dir={d}")
    r = specbench(*good)
    assert r.returncode == 0, r.stderr[-2000:]
    before = snapshot(d)
    r = specbench(*[a for a in good if not a.startswith(bad.split("=")[0] + "=")], bad)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("specbench: error")]
    assert r.returncode == 2 and len(lines) == 1 and line in lines[0], r.stderr[-2000:]
    after = snapshot(d)
    assert {k: v for k, v in after.items() if k not in ("rerun-error.txt", "run.log")} == {
        k: v for k, v in before.items() if k != "run.log"
    }
    assert not (d / "error.txt").exists() and line in (d / "rerun-error.txt").read_text().splitlines()[0]
    r = specbench("specbench.collect", str(d), "--out", str(res))
    assert r.returncode == 0 and "collected 1 configurations" in r.stdout, r.stdout + r.stderr
    r = specbench(*good)  # a new finished run replaces the old one and its rerun error
    assert r.returncode == 0 and not (d / "rerun-error.txt").exists()


def test_a_failing_sweep_rerun_keeps_every_finished_job(tiny_pair_dirs, tmp_path):
    """The issue's case: a prompt longer than the model's positions appended to the data, the
    same sweep rerun into the same folder: it fails, and every finished job stays."""
    sweep, out, data = tmp_path / "sweep", tmp_path / "outputs", tmp_path / "prompts.jsonl"
    data.write_text('{"id": "p0", "text": "def add(a, b):"}\n')
    grid = ("-m", "tree=chain,binary", "tree.budget=2", f"hydra.sweep.dir={sweep}", "dataset=jsonl",
            f"dataset.path={data}")  # fmt: skip
    args = [a for a in job_args(tiny_pair_dirs, out, *grid) if a not in ("dataset=smoke", "dataset.limit=2")]
    r = specbench(*args)
    assert r.returncode == 0, r.stderr[-2000:]
    before = {k: v for k, v in snapshot(sweep).items() if not k.endswith("run.log")}
    with open(data, "a") as fh:
        fh.write(json.dumps({"id": "long", "text": "word " * 3000}) + "\n")
    r = specbench(*args)
    assert r.returncode != 0 and "2 of 2 jobs failed" in r.stderr, r.stderr[-2000:]
    assert "could not write error.txt" not in r.stderr  # #55: each wrote rerun-error.txt; the disk is fine
    after = {k: v for k, v in snapshot(sweep).items() if not k.endswith(("run.log", "rerun-error.txt"))}
    assert after == before and len([k for k in after if k.endswith("summary.csv")]) == 2


# --------------------------------------------------------------------------
# publishing as one unit, killed at every rename
# --------------------------------------------------------------------------
COLLECT = "from specbench.study.job import collect; collect.main(sys.argv[1:])"


def collected(out) -> dict[str, bytes]:
    return {k: v for k, v in snapshot(out).items() if not k.startswith(".")}


def test_collect_killed_at_every_rename_leaves_old_or_new(two_sweeps, tmp_path):
    a, b = str(two_sweeps / "a"), str(two_sweeps / "b")
    base = tmp_path / "base"
    killed_at(0, COLLECT, a, "--out", str(base))
    old = collected(base)
    new_dir = tmp_path / "new"
    shutil.copytree(base, new_dir)
    killed_at(0, COLLECT, b, "--out", str(new_dir))
    new = collected(new_dir)
    assert old != new
    seen, k = set(), 1
    while True:
        out = tmp_path / f"k{k}"
        shutil.copytree(base, out)
        code = killed_at(k, COLLECT, b, "--out", str(out))
        recover(out, clean=False)  # what a reader does first (report.load, a collect's lock)
        got = collected(out)
        assert got in (old, new), k
        seen.add("new" if got == new else "old")
        (tmp_path / "none").mkdir(exist_ok=True)
        killed_at(0, COLLECT, str(tmp_path / "none"), "--out", str(out))  # a clean collect tidies what the kill left
        assert collected(out) == got and not [f for f in os.listdir(out) if f.startswith((".tmp-", ".publish"))]
        if code == 0:
            break
        k += 1
    assert k >= 4 and seen == {"old", "new"}  # the journal and each file's rename were each a kill point


PUBLISH = """
from specbench.core.atomic import replace_together
def fill(d):
    open(os.path.join(d, "fig.png"), "w").write("new figure")
replace_together(sys.argv[1], fill, sys.argv[2], "new report")
"""


def test_report_publish_killed_at_every_rename_leaves_old_or_new(tmp_path):
    """The figures folder and REPORT.md are swapped as one unit (``replace_together``)."""
    k = 1
    while True:
        root = tmp_path / f"k{k}"
        (root / "results" / "figures").mkdir(parents=True)
        (root / "results" / "figures" / "fig.png").write_text("old figure")
        (root / "REPORT.md").write_text("old report")
        code = killed_at(k, PUBLISH, str(root / "results" / "figures"), str(root / "REPORT.md"))
        for d in (root, root / "results"):
            recover(d)
        got = (collected(root / "results"), (root / "REPORT.md").read_text())
        assert got in (
            ({"figures/fig.png": b"old figure"}, "old report"),
            ({"figures/fig.png": b"new figure"}, "new report"),
        ), (k, got)
        assert sorted(os.listdir(root / "results")) == ["figures"]
        if code == 0:
            break
        k += 1
    assert k >= 3


MANY = """
from specbench.core.atomic import atomic_write_many, write_file
atomic_write_many({p: (lambda t, p=p: write_file(t, "new " + os.path.basename(p))) for p in sys.argv[1:]})
"""


def test_two_tables_written_together_survive_a_kill_at_every_rename(tmp_path):
    """lossless_check.csv and lossless_control.csv (and every multi-file write) as one unit."""
    names = ("lossless_check.csv", "lossless_control.csv")
    k = 1
    while True:
        d = tmp_path / f"k{k}"
        d.mkdir()
        for n in names:
            (d / n).write_text("old " + n)
        code = killed_at(k, MANY, *(str(d / n) for n in names))
        recover(d)
        got = {n: (d / n).read_text().split()[0] for n in names}
        assert set(got.values()) in ({"old"}, {"new"}) and sorted(os.listdir(d)) == sorted(names), (k, got)
        if code == 0:
            break
        k += 1
    assert k >= 3


# --------------------------------------------------------------------------
# two collects at once
# --------------------------------------------------------------------------
def test_concurrent_collects_with_random_kills_lose_no_rows(two_sweeps, tmp_path):
    """Two collects started together into one --out (each maybe killed at a random rename),
    then a clean collect: every configuration exactly once, as one clean collect gives."""
    a, b = str(two_sweeps / "a"), str(two_sweeps / "b")
    ref = tmp_path / "ref"
    killed_at(0, COLLECT, a, b, "--out", str(ref))
    want = collected(ref)
    env = dict(os.environ, **KILLED_ENV)
    rng = random.Random(0)
    for trial in range(3):
        out = tmp_path / f"t{trial}"
        procs = [
            subprocess.Popen(
                [sys.executable, *KILLING, str(rng.choice([0, 0, 2, 3, 4])), COLLECT, *dirs, "--out", str(out)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )  # fmt: skip
            for dirs in ((a,), (a, b))
        ]
        for p in procs:
            assert p.wait(timeout=300) in (0, 137), p.stderr.read()[-2000:] if p.stderr else ""
        killed_at(0, COLLECT, a, b, "--out", str(out))
        assert collected(out) == want, trial
        rows = json.loads(json.dumps(sorted(collected(out))))
        assert "summary.csv" in rows


# --------------------------------------------------------------------------
# every command checks its keys like run, before any model load
# --------------------------------------------------------------------------
COMMANDS = {  # command -> (its arguments pointing every output into {out}, its own unknown key)
    "specbench.run": (["out_root={out}", "hydra.run.dir={out}/job"], None),
    "specbench.study.tools.calibrate": (["--out", "{out}/vector.csv"], None),
    "specbench.study.tools.lossless": (["--out", "{out}/check.csv"], None),
    "specbench.study.tools.costs": (["+results_dir={out}", "hydra.run.dir={out}/job"], "+costs_foo=1"),
    "specbench.attention_bench": (["out_csv={out}/a.csv", "fig_dir={out}/f", "hydra.run.dir={out}/job"], None),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("key", ["foo=1", "+foo=1", "own"])
def test_every_command_refuses_an_unknown_key_in_one_line_before_any_work(command, key, tmp_path):
    args, own = COMMANDS[command]
    if key == "own":
        if own is None:
            pytest.skip("no keys of its own")
        key = own
    out = tmp_path / "out"
    r = specbench(command, *[a.format(out=out) for a in args], key)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    name = key.lstrip("+").partition("=")[0]
    assert r.returncode == 2 and len(lines) == 1 and name in lines[0], r.stderr[-2000:]
    assert "Loading weights" not in r.stderr and not out.exists()


@pytest.mark.parametrize(
    "command,args,flag",
    [
        ("specbench.collect", ["--nope"], "--nope"),
        ("specbench.report", ["--nope"], "--nope"),
        ("specbench.import_metrics", ["x", "--engine", "vllm", "--pair", "p", "--dataset", "d", "--nope"], "--nope"),
        ("specbench.study.tools.lossless", ["--batch", "0"], "--batch"),
        ("specbench.study.tools.lossless", ["--temperature", "-1"], "--temperature"),
        ("specbench.study.tools.lossless", ["--top-p", "0"], "--top-p"),
        ("specbench.study.tools.lossless", ["--tree-budget", "0"], "--tree-budget"),
    ],
)
def test_bad_flags_are_one_line_before_any_model(command, args, flag, tmp_path):
    r = specbench(command, *args, *(["--out", str(tmp_path / "x.csv")] if "lossless" in command else []))
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and flag in lines[0], r.stderr[-2000:]
    assert "Loading weights" not in r.stderr and not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize(
    "command", ["specbench.study.tools.calibrate", "specbench.study.tools.lossless", "specbench.study.tools.costs"]
)
def test_a_read_only_output_folder_is_found_before_the_work(command, ro_mount):
    out = ro_mount / "sub" / "x.csv"
    args = [f"+results_dir={out.parent}"] if command.endswith("costs") else ["--out", str(out)]
    r = specbench(command, *args)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "writable" in lines[0], r.stderr[-2000:]
    assert "Loading weights" not in r.stderr


@pytest.mark.parametrize("tree,verify", [("eagle2", "mss"), ("eagle2", "sequoia")])
def test_the_modes_a_refusal_suggests_are_each_accepted(tree, verify):
    """'modes that fit' names only modes the same checks then accept (eagle2 once named
    chain-only ones); no model loads."""
    from specbench.study.job import checks, jobspec
    from specbench.study.job.launch import compose

    def job(mode):
        return jobspec.from_config(compose([f"tree={tree}", f"verify={mode}"]))

    with pytest.raises(ValueError) as e:
        checks.validate(job(verify))
    if "modes that fit: " not in str(e.value):
        pytest.skip(f"refused for another reason: {e.value}")
    fit = str(e.value).split("modes that fit: ")[1].split(", ")
    assert fit
    for mode in fit:
        checks.validate(job(mode))


def test_an_acceptance_vector_that_is_not_a_probability_is_refused():
    """Rank k's acceptance probabilities exclude each other: a vector summing past 1 is refused."""
    from specbench.trees.policies import make_policy

    with pytest.raises(ValueError, match=r"^tree.vector=\[0.8, 0.5\] sums to 1.3 > 1"):
        make_policy("sequoia", 4, {"vector": [0.8, 0.5]}).paths()
    assert make_policy("sequoia", 4, {"vector": [0.7, 0.3]}).paths()  # sums to 1: a valid vector


REPORT = "from specbench.report.build import main; sys.exit(main(sys.argv[1:]))"


def test_concurrent_reports_with_random_kills_end_as_one_clean_report(two_sweeps, tmp_path):
    """Two reports started together on one results folder (each maybe killed at a random
    rename), then a clean report: REPORT.md, its pages and figures equal one clean run's."""
    res = tmp_path / "results"
    killed_at(0, COLLECT, str(two_sweeps / "a"), str(two_sweeps / "b"), "--out", str(res))
    ref = tmp_path / "ref"
    shutil.copytree(res, ref / "results")
    args = lambda d: ["--results", str(d / "results"), "--out", str(d / "REPORT.md")]  # noqa: E731
    killed_at(0, REPORT, *args(ref))
    want = snapshot(ref)
    env = dict(os.environ, **KILLED_ENV)
    run = tmp_path / "run"
    shutil.copytree(res, run / "results")
    procs = [
        subprocess.Popen(
            [sys.executable, *KILLING, str(k), REPORT, *args(run)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        for k in (0, random.Random(1).choice([2, 3, 4]))
    ]
    for p in procs:
        assert p.wait(timeout=600) in (0, 137), p.stderr.read()[-2000:] if p.stderr else ""
    killed_at(0, REPORT, *args(run))
    assert snapshot(run) == want
