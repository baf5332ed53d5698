"""The full study's plan printed before it starts (specbench/study/tools/eta.py): each step's jobs, counted
from the sweeps' overrides as Hydra's basic sweeper makes them, and its expected time from the recorded
run times (the longest run of each step, matched by preset and overrides or by message), scaled to the
jobs a resumed run has left; torch-free; its fixed steps are scripts/full_study.sh's.  The sweep bar
follows the job folders (study.job.progress)."""

from __future__ import annotations

import csv
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.results import plan
from specbench.study.job import jobfiles, sweepjobs
from specbench.study.tools import eta

ROOT = Path(__file__).resolve().parents[1]
SETUP = eta.STEPS[0].message  # type: ignore[union-attr]
COSTS = eta.STEPS[1].message  # type: ignore[union-attr]


def write_times(path, rows) -> str:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["run", "step", "seconds", "ratio"])
        w.writerows(rows)
    return str(path)


@pytest.fixture
def times(tmp_path):
    ref = plan.runs("hour")[0][1]  # part 1: sweep=reference, no overrides of its own
    xpairs = next(s for _, s in plan.runs("hour") if s.preset == "reference_xpairs")
    rows = [
        ["1795628679", "study: sweep=reference ", "100", ""],  # an older message of the same sweep
        ["1795700000", "study: part 1: sweep=reference ", "300", "0.5"],  # the longest: taken
        ["1795800000", "study: part 1: sweep=reference ", "5", ""],  # a resumed run: what it had left
        ["1795628679", SETUP, "60", ""],
        ["1795628679", COSTS, "0", ""],  # skipped by its marker: no measurement
        ["1795628679", f"study: part 2b: sweep=reference_xpairs {' '.join(reversed(xpairs.args))}", "7200", ""],
        ["1795628679", "study: live check of the projection at batch 1 (sweep=reference_validate: 8 x 64)", "9", ""],
    ]
    return ref, xpairs, eta.recorded(write_times(tmp_path / "run_times.csv", rows))


def test_each_step_gets_its_longest_recorded_run_matched_by_preset_and_overrides(times):
    ref, xpairs, recorded = times
    rows = {r.name: r for r in eta.lines(["hour"], recorded)}
    r = rows["sweep=reference"]
    assert (r.seconds, r.run, r.jobs, r.part) == (300.0, "1795700000", len(eta.plan_jobs(ref)), "1")
    x = rows[" ".join(("sweep=reference_xpairs", *xpairs.args))]
    assert x.seconds == 7200.0  # its overrides recorded in another order
    assert rows["set-up"].seconds == 60.0 and rows["set-up"].jobs is None
    assert rows["costs"].seconds is None  # a 0 s record is a marker's skip
    assert rows["live check"].seconds is None  # "(sweep=reference_validate" is no sweep step of the plan
    assert "lossless" not in rows and "calibrate n-gram" not in rows  # extended steps: not in phase hour
    text = eta.render(list(rows.values()), ["hour"], "run_times.csv")
    unknown = sum(r.seconds is None for r in rows.values())
    assert f"2 h 06 min + {unknown} steps with no recorded time" in text.splitlines()[-1]  # 300 + 7200 + 60 s
    assert f"5 min 00 s (recorded {eta.when('1795700000')})" in text and "no recorded time" in text
    jobs = sum(r.jobs or 0 for r in rows.values())
    assert f"{jobs:,}" in text.splitlines()[-1]


def test_each_recorded_time_names_the_machine_that_ran_it_where_its_rows_name_one(tmp_path):
    """Parts of the full study are recorded on machines of different speed: each step's time says which."""
    path = tmp_path / "t.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["run", "step", "seconds", "machine"])
        w.writerow(["1795700000", SETUP, "60", "AMD EPYC (AVX2), 2 cores, 2 threads, torch 2.13.0+cpu"])
        w.writerow(["1795628679", COSTS, "41", ""])  # recorded before rows named their machine
    on = eta.machines(str(path))
    assert on == {"1795700000": "AMD EPYC (AVX2)"}
    text = eta.render(eta.lines(["hour"], eta.recorded(str(path))), ["hour"], "t", on=on)
    assert f"1 min 00 s (recorded {eta.when('1795700000')} on AMD EPYC (AVX2))" in text
    assert f"41 s (recorded {eta.when('1795628679')})" in text


def test_a_resumed_runs_finished_jobs_are_counted_and_its_time_scaled(times, tmp_path):
    ref, _, recorded = times
    names = sweepjobs.job_dirs(eta.plan_jobs(ref))
    for name in names[:78]:
        os.makedirs(tmp_path / "out" / ref.folder / name)
        (tmp_path / "out" / ref.folder / name / "summary.csv").write_text("x\n")
    os.makedirs(tmp_path / "out" / ref.folder / names[78])  # started, unfinished
    (tmp_path / "out" / ref.folder / names[79]).mkdir()
    (tmp_path / "out" / ref.folder / names[79] / jobfiles.RESUMED_FILE).write_text("elsewhere\n")
    r = next(r for r in eta.lines(["hour"], recorded, str(tmp_path / "out")) if r.name == "sweep=reference")
    assert r.done == 79
    assert math.isclose(r.seconds, 300.0 * (len(names) - 79) / len(names))
    assert f"{len(names):,} (79 done)" in eta.render([r], ["hour"], "t.csv")


def test_extended_and_power90_add_their_steps_in_full_study_order():
    names = [r.name for r in eta.lines(["hour", "extended", "power90"], {})]
    hour = [r.name for r in eta.lines(["hour"], {})]
    assert names[: len(hour) - 2] == hour[:-2] and names[-2:] == ["attention", "collect"]
    assert names.index("calibrate n-gram") < names.index("lossless") < names.index("lossless 90%")
    assert len(names) == len(hour) + len(plan.runs("extended")) + 3


def test_the_fixed_steps_are_full_study_shs_own():
    text = (ROOT / "scripts" / "full_study.sh").read_text()
    literals = [m.replace("\\$", "$") for m in re.findall(r'^\s*step "([^"]*)"', text, re.M)]
    fixed = [m for m in literals if "$" not in m.replace("$OUT", "")]  # not a sweep's or the final line
    assert fixed == [s.message for s in eta.STEPS if isinstance(s, eta.Step)]
    assert [s for s in eta.STEPS if isinstance(s, str)] == ["hour", "extended"]
    assert 'step "${TAG:-}study: part $part: sweep=$preset ${r[*]:3}"' in (ROOT / "scripts" / "sweeps.sh").read_text()


def test_preset_params_are_hydras_composition_of_every_plan_preset():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from specbench.study.job.plugins import import_registries

    import_registries()
    presets = sorted({s.preset for ph in plan.PHASES for _, s in plan.runs(ph)})
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        for preset in presets:
            cfg = compose("config", overrides=[f"sweep={preset}"], return_hydra_config=True)
            given = cfg.hydra.sweeper.params
            params = {} if given is None else OmegaConf.to_container(given)
            assert {k: str(v) for k, v in params.items()} == {
                k: str(v) for k, v in sweepjobs.preset_params(preset).items()
            }, preset


def test_jobs_are_the_product_with_command_line_axes_replacing_the_presets():
    jobs = sweepjobs.expand({"dataset": "a,b,c", "tree": "x,y", "tree.budget": "1,2"}, ["sweep=p", "tree=z", "k=v"])
    assert len(jobs) == 3 * 1 * 2
    assert jobs[0] == ["dataset=a", "tree=z", "tree.budget=1", "sweep=p", "k=v"]
    assert sweepjobs.task(["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "+hydra.x=1", "a=1"]) == ["a=1"]
    assert sweepjobs.DONE_FILES == ("summary.csv", jobfiles.RESUMED_FILE)


def test_the_printer_is_torch_free_and_refuses_bad_input_in_one_line(tmp_path):
    code = (
        "import sys; from specbench.study.tools import eta; eta.main(['--phases', 'hour,extended']); "
        "assert 'torch' not in sys.modules and 'pandas' not in sys.modules, 'imported'"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("The study's plan (phases: hour, extended;") and "total" in r.stdout
    bad = tmp_path / "bad.csv"
    bad.write_text("run,when,seconds\n1,x,3\n")
    for args, key in ((["--phases", "hour,weekend"], "--phases"), (["--times", str(bad)], "--times")):
        r = subprocess.run(
            [sys.executable, "-m", "specbench.study.tools.eta", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 2 and r.stdout == "", r
        assert len(r.stderr.strip().splitlines()) == 1 and key in r.stderr


def test_the_sweep_bar_follows_the_job_folders_and_survives_pickling(tmp_path, capsys):
    import pickle

    from omegaconf import OmegaConf

    from specbench.study.job import progress

    config = OmegaConf.create(
        {
            "hydra": {
                "sweeper": {
                    "_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper",
                    "params": {"x": "1,2"},
                },
                "overrides": {"task": ["sweep=p", "y=a,b,c", "out_root=o"]},
                "job": {"config": {"override_dirname": {"exclude_keys": ["out_root", "sweep"]}}},
                "sweep": {"dir": str(tmp_path / "sw")},
            }
        }
    )
    names = sweepjobs.job_dirs(
        sweepjobs.expand({"x": "1,2"}, ["sweep=p", "y=a,b,c", "out_root=o"]), ["out_root", "sweep"]
    )
    assert len(names) == 6 and names[0] == "x=1,y=a"
    (tmp_path / "sw" / names[0]).mkdir(parents=True)
    (tmp_path / "sw" / names[0] / "summary.csv").write_text("x\n")  # finished before this run: starts the bar
    bar = progress.SweepBar(bar=True, interval=60)
    bar.on_multirun_start(config)
    assert bar.tqdm is not None and (bar.tqdm.n, bar.tqdm.total) == (1, 6)
    clone = pickle.loads(pickle.dumps(bar))  # a launcher ships the callbacks to its workers
    assert clone.on and clone.tqdm is None
    for name, file in ((names[1], jobfiles.RESUMED_FILE), (names[2], "error.txt")):
        (tmp_path / "sw" / name).mkdir()
        (tmp_path / "sw" / name / file).write_text("x\n")
    bar.refresh()
    assert bar.tqdm.n == 3 and bar.count() == (3, 1)
    bar.on_multirun_end(config)
    err = capsys.readouterr().err
    assert "3/6" in err and "failed=1" in err
    off = progress.SweepBar()
    off.on_multirun_start(config)
    assert off.tqdm is None


def test_the_batch_schedule_step_counts_its_benchmarks_by_their_markers(tmp_path):
    """One job per pair and batch size (study.tools.plan.schedule_jobs, which full_study.sh reads); a resumed
    run's finished benchmarks (their once-markers) are counted."""
    jobs = plan.schedule_jobs()
    (tmp_path / f"{plan.schedule_marker(jobs[0][0], jobs[0][2])}.done").write_text("")
    row = next(r for r in eta.lines(["hour"], {}, str(tmp_path)) if r.name == "batch schedule")
    assert (row.jobs, row.done) == (len(jobs), 1)
    assert "specbench.study.tools.plan schedule" in (ROOT / "scripts" / "full_study.sh").read_text()
    out = subprocess.run(
        [sys.executable, "-m", "specbench.study.tools.plan", "schedule"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert [line.split("\t")[0] for line in out] == [plan.schedule_marker(p, b) for p, _d, b, _n, _t in jobs]


def test_the_batch_schedule_never_recorded_as_a_step_takes_its_speed_runs_timed_decodes(tmp_path):
    """Each schedule job's longest run in speed.csv (its decodes' wall_s summed); a job whose marker is in
    --out is done; a job without a run leaves the step unrecorded."""
    jobs = plan.schedule_jobs()
    rows = [["pair", "dataset", "batch_size", "max_new_tokens", "run_id", "wall_s", "roster"]]
    for i, (p, d, b, _n, t) in enumerate(jobs):
        rows += [[p, d, b, t, "20261129T000000-a", 10.0 * (i + 1), "schedule"]] * 2  # two decodes: 20 (i + 1) s
        rows += [[p, d, b, t, "20261130T000000-b", 1.0, "schedule"], [p, d, b, t, "20261201T000000-c", 99.0, "answer"]]
    path = tmp_path / "speed.csv"
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    times = eta.speed_recorded(str(path))
    line = next(r for r in eta.lines(["hour"], times) if r.name == "batch schedule")
    total = sum(20.0 * (i + 1) for i in range(len(jobs)))
    assert (line.seconds, line.source, eta.when(line.run)) == (total, "speed.csv's timed decodes", "2026-11-29")
    out = tmp_path / "out"
    out.mkdir()
    (out / (plan.schedule_marker(jobs[0][0], jobs[0][2]) + ".done")).touch()
    line = next(r for r in eta.lines(["hour"], times, str(out)) if r.name == "batch schedule")
    assert line.seconds == total - 20.0 and line.done == 1
    del times[eta.speed_key(*jobs[-1][:3], jobs[-1][4])]
    assert next(r for r in eta.lines(["hour"], times) if r.name == "batch schedule").seconds is None
    assert "speed.csv's timed decodes" in eta.render(eta.lines(["hour"], eta.speed_recorded(str(path))), ["hour"], "t")


def test_a_recorded_machine_is_named_with_its_prefill_rate_and_a_speed_run_by_its_own_rows(tmp_path):
    """Parts recorded on different machines each carry that machine's prefill rate (the study target's fastest
    measured forward in costs.csv); the batch schedule's speed runs name theirs from speed.csv."""
    times, costs, speed = tmp_path / "t.csv", tmp_path / "costs.csv", tmp_path / "speed.csv"
    with open(times, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["run", "step", "seconds", "machine", "machine_id"])
        w.writerow(["1795700000", SETUP, "60", "AMD EPYC (AVX2), 2 cores, 2 threads, torch 2.13.0+cpu", "avx2"])
    with open(costs, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["role", "model", "dtype", "n_tokens", "seconds", "machine_id"])
        w.writerow(["target", eta.STUDY_TARGET, "float32", "1", "0.5", "avx2"])
        w.writerow(["target", eta.STUDY_TARGET, "float32", "16", "2.0", "avx2"])  # 8 tok/s: its fastest
        w.writerow(["draft", "qwen2.5-coder-0.5b-instruct", "float32", "16", "0.5", "avx2"])  # not the target
        w.writerow(["target", eta.STUDY_TARGET, "bfloat16", "128", "1.0", "avx512"])
    with open(speed, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["run_id", "machine", "machine_id"])
        w.writerow(["20261203T190542-6852d076", "AMD EPYC (AVX512), 2 cores", "avx512"])
    rates = eta.prefill_rates(str(costs))
    assert eta.machines(str(times), rates) == {
        "1795700000": "AMD EPYC (AVX2), 1.5B target 8.0 tok/s (float32, 16-token forward)"
    }
    assert eta.machines(str(speed), rates, "run_id") == {
        "20261203T190542-6852d076": "AMD EPYC (AVX512), 1.5B target 128.0 tok/s (bfloat16, 128-token forward)"
    }
    assert eta.machines(str(times)) == {"1795700000": "AMD EPYC (AVX2)"}  # no costs: the machine alone
    assert eta.prefill_rates(str(tmp_path / "absent.csv")) == {}
    (tmp_path / "bad.csv").write_bytes(b"\xff\xfe\x00 not text")
    for key in ("costs", "speed", "times"):
        with pytest.raises(SystemExit) as e:
            eta.main([f"--{key}={tmp_path / 'bad.csv'}"])
        assert e.value.code == 2
