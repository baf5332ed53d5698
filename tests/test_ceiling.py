"""Each run_all.sh step beside its compute ceiling (#35): the forward counts (core.forwards), the
ceiling they give (study.tools.ceiling) and the report's run-time table that reads them."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest
import torch

from specbench.core import forwards
from specbench.drafting.layerskip import layer_view
from specbench.report.runtimes import run_times
from specbench.results.optional import filled
from specbench.study.tools.ceiling import ceilings, main
from test_hydra import ROOT, job_args


def _counts(name: str) -> tuple[int, int]:
    return forwards.FORWARDS[name], forwards.TOKENS[name]


def test_every_forward_counts_its_tokens_under_its_models_name(tiny_target):
    forwards.count(tiny_target.get_decoder(), "tiny-t")
    before = _counts("tiny-t")
    with torch.no_grad():
        tiny_target(input_ids=torch.zeros(2, 5, dtype=torch.long))  # batch 2 x 5 tokens
        tiny_target.get_decoder()(input_ids=torch.zeros(1, 3, dtype=torch.long))  # no LM head (a prefill)
    assert _counts("tiny-t") == (before[0] + 2, before[1] + 13)
    view = layer_view(tiny_target, [0])  # shares the target's hook, counts under its own name
    view_before = _counts("tiny-t@layers=0")
    with torch.no_grad():
        view(input_ids=torch.zeros(1, 4, dtype=torch.long))
    assert _counts("tiny-t@layers=0") == (view_before[0] + 1, view_before[1] + 4)
    assert _counts("tiny-t") == (before[0] + 2, before[1] + 13)


def test_a_job_appends_its_models_counts_under_the_step_it_ran_in(tiny_pair_dirs, tmp_path):
    csv = tmp_path / "forwards.csv"
    env = dict(os.environ, SPECBENCH_FORWARDS=str(csv), SPECBENCH_RUN="7", SPECBENCH_STEP="study: a step")
    args = job_args(tiny_pair_dirs, tmp_path / "out", "tree=chain", "tree.budget=2", "engine=live")
    r = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = pd.read_csv(csv)
    assert list(rows.columns) == forwards.COLUMNS
    assert set(rows.step) == {"study: a step"} and set(rows.run) == {7}
    assert set(rows.model) == set(tiny_pair_dirs)  # local models are named by their folder
    assert (rows.tokens >= rows.forwards).all() and (rows.forwards > 0).all()


def _costs(model: str, s128: float, s8: float) -> list[dict]:
    base = {"model": model, "device": "cpu", "dtype": "bfloat16"}
    return [
        {**base, "kv_len": 128, "n_tokens": 8, "seconds": s8},
        {**base, "kv_len": 128, "n_tokens": 128, "seconds": s128},
        {**base, "kv_len": 512, "n_tokens": 128, "seconds": 99.0},  # the longer context is not the rate
    ]


def test_a_steps_ceiling_is_its_tokens_at_each_models_wide_rate():
    costs = pd.DataFrame(_costs("big", 1.28, 0.8) + _costs("small", 0.128, 0.1))  # 100 and 1000 tok/s wide
    times = pd.DataFrame({"run": [1, 1, 1], "step": ["a", "b", "c"], "seconds": [20.0, 10.0, 5.0]})
    fwd = pd.DataFrame(
        [
            [1, "a", "big", 1000, 8000],  # 80 s of ceiling, 8 tokens per forward
            [1, "a", "small", 10, 1000],  # 1 s
            [2, "b", "big", 1, 100],  # another run's step b: not this one's
            [1, "c", "nowhere", 3, 30],  # a model without a cost curve
        ],
        columns=forwards.COLUMNS,
    )
    out = ceilings(times, fwd, costs).set_index("step")
    a = out.loc["a"]
    assert a.ceiling_s == pytest.approx(81.0) and a.ratio == pytest.approx(81.0 / 20.0)
    assert (a.busiest, a.forwards, a.tokens, a.tokens_per_forward) == ("big", 1010, 9000, 8.0)
    small_at_100 = 0.1 + (100 - 8) / (128 - 8) * (0.128 - 0.1)  # the small model's curve between 8 and 128
    assert a.forward_s == pytest.approx(1000 * 0.8 + 10 * small_at_100)  # each model's forwards at their width
    assert a.in_forwards == pytest.approx(a.forward_s / 20.0)
    assert pd.isna(out.loc["b"].ceiling_s) and out.loc["b"].forwards == 0
    assert pd.isna(out.loc["c"].ratio) and out.loc["c"].unrated == "nowhere"


def test_a_runs_ceiling_reads_its_own_machines_costs_in_its_dtype_and_the_report_tables_each_machine():
    """An AVX2 default run (float32) beside the committed AVX-512 one (bf16): its steps are rated on its own
    curve, each row names its machine, and the run-time table is one per machine, the latest run's first."""
    avx512 = [{**r, "machine_id": "m512"} for r in _costs("big", 1.28, 0.8)]
    avx2 = [{**r, "dtype": "float32", "machine_id": "m2"} for r in _costs("big", 12.8, 8.0)]  # 10 tok/s wide
    costs = pd.DataFrame(avx512 + avx2)
    times = pd.DataFrame({"run": [2], "step": ["a"], "seconds": [1000.0]})
    fwd = pd.DataFrame([[2, "a", "big", 1000, 8000]], columns=forwards.COLUMNS)
    me = {"machine": "EPYC (AVX2)", "machine_id": "m2", "run_dtype": "float32"}
    mine = ceilings(times, fwd, costs, me).iloc[0]
    assert mine.ceiling_s == pytest.approx(800.0) and (mine.machine, mine.machine_id) == ("EPYC (AVX2)", "m2")
    assert ceilings(times, fwd, costs).iloc[0].ceiling_s == pytest.approx(80.0)  # unnamed: bf16, as before
    old = pd.DataFrame({"run": [1, 1], "step": ["set-up", "a"], "seconds": [60.0, 30.0]})  # rows naming no machine
    text = run_times(pd.concat([old, ceilings(times, fwd, costs, me)], ignore_index=True), costs)
    assert text.count("**Run times.**") == 2 and text.index("on EPYC (AVX2)") < text.index("do not name")


def test_a_machines_table_is_its_latest_run_and_those_that_resumed_it_never_a_step_from_another_run():
    """A fresh run whose plan left the speed step out (0 s) is not filled from an earlier whole run of the same
    machine; a resumed run (one chain: one $OUT's step times) is; earlier chains are totalled apart."""
    costs = pd.DataFrame([{**r, "machine_id": "m"} for r in _costs("big", 1.28, 0.8)])
    me = {"machine": "EPYC (AVX2)", "machine_id": "m", "run_dtype": None}
    fwd = pd.DataFrame(columns=forwards.COLUMNS)

    def run(rows):  # one $OUT folder's step times: its runs form one chain
        return ceilings(pd.DataFrame(rows, columns=["run", "step", "seconds"]), fwd, costs, me)

    earlier = run([[1, "set-up", 60], [1, "costs", 300], [1, "speed", 1200]]).drop(columns="chain")  # before chains
    fresh = run([[5, "set-up", 700], [5, "costs", 900], [5, "speed", 0]])
    text = run_times(pd.concat([earlier, fresh], ignore_index=True), costs)
    assert "one run:" in text and "| speed | 0 | 0.0 |" in text and "| costs | 900 |" in text
    assert "Total without the set-up, up to the report: 900 s" in text
    assert "Earlier runs on this machine, kept in results/run_times.csv: 1 (without the set-up: 25.0 min)." in text
    resumed = run([[7, "set-up", 50], [7, "costs", 400], [7, "speed", 0], [9, "set-up", 5], [9, "costs", 0]])
    resumed = pd.concat([resumed, run([[9, "speed", 600]]).assign(chain="7")], ignore_index=True)
    text = run_times(pd.concat([earlier, fresh, resumed], ignore_index=True), costs)
    assert "2 runs (a later one resumed" in text and "| costs | 400 |" in text and "| speed | 600 |" in text
    assert "kept in results/run_times.csv: 2 (without the set-up: 25.0 min, 15.0 min)." in text


def test_the_cli_writes_run_times_and_the_report_names_each_step_below_its_ceiling(tmp_path):
    pd.DataFrame({"run": [1, 1, 1], "step": ["set-up", "wide", "narrow"], "seconds": [9, 100, 100]}).to_csv(
        tmp_path / "times.csv", index=False
    )
    fwd = [[1, "wide", "m", 100, 12800], [1, "narrow", "m", 1000, 1000]]
    pd.DataFrame(fwd, columns=forwards.COLUMNS).to_csv(tmp_path / "fwd.csv", index=False)
    pd.DataFrame(_costs("m", 1.28, 0.8) + [{**_costs("m", 1, 1)[0], "n_tokens": 1, "seconds": 0.05}]).to_csv(
        tmp_path / "costs.csv", index=False
    )
    out = tmp_path / "run_times.csv"
    main(
        ["--times", str(tmp_path / "times.csv"), "--forwards", str(tmp_path / "fwd.csv")]
        + ["--costs", str(tmp_path / "costs.csv"), "--out", str(out)]
    )
    text = run_times(pd.read_csv(out), pd.read_csv(tmp_path / "costs.csv"))
    assert "| wide | 100 | 1.7 | 128 | 1.28 |" in text  # 12,800 tokens at 100 tok/s
    assert "at each model's 128-token forward rate here" in text  # its CEILING curve's widest forward
    assert "1 of 2 steps with counted forwards run at 0.4 of their ceiling or more" in text
    # 1,000 one-token forwards: 10 s of ceiling in 100; at 0.05 s each they would take 50 s
    assert "narrow (0.10): narrow forwards: m's forwards average 1.0 tokens, and its forwards at their own" in text
    assert "would take 0.50 of its wall time" in text


def test_runs_from_before_the_counts_say_they_have_no_ceiling():
    times = pd.DataFrame({"run": [1], "step": ["study: sweep=reference"], "seconds": [60]})
    text = run_times(filled(times, "run_times.csv"))  # as the report reads it
    assert "No step has a ceiling: these runs predate the forward counts" in text
    assert "| step | seconds | minutes |" in text  # no empty ceiling columns


def test_a_view_made_before_its_target_is_counted_counts_once_and_apart():
    from conftest import build_model

    target = build_model(64, seed=3)
    view = layer_view(target, [1])  # the target is not counted yet: the view is named after no one
    with torch.no_grad():
        target(input_ids=torch.zeros(1, 2, dtype=torch.long))  # uncounted, and no error
    forwards.count(target.get_decoder(), "fresh")
    before, view_before = _counts("fresh"), _counts("target@layers=1")
    with torch.no_grad():
        target(input_ids=torch.zeros(1, 3, dtype=torch.long))
        view(input_ids=torch.zeros(1, 5, dtype=torch.long))
    assert _counts("fresh") == (before[0] + 1, before[1] + 3)  # one hook, however many copies share it
    assert _counts("target@layers=1") == (view_before[0] + 1, view_before[1] + 5)


def test_counted_steps_without_a_named_cost_curve_say_so():
    times = pd.DataFrame({"run": [1], "step": ["study: x"], "seconds": [60], "forwards": [12], "ratio": [float("nan")]})
    text = run_times(filled(times, "run_times.csv"))
    assert "No step has a ceiling: 1 step counted forwards, but results/costs.csv names none" in text


def test_one_runs_least_time_is_batch_one_wall_plus_the_other_live_decodes_at_their_widest_rate():
    from specbench.report import costmodel, onerun

    summary = pd.DataFrame(
        [  # hash, engine, role, batch, wall seconds
            ("b1", "live", "decode", 1, 120.0),  # timed at batch 1: its wall time
            ("wide", "live", "decode", 32, 999.0),  # batched: its tokens at the widest rate, not its wall
            ("paired", "live", "paired", 32, 999.0),  # verified on wide's decode: no forward of its own
            ("grid", "replay", "decode", 32, 5.0),  # replayed: not counted
        ],
        columns=["config_hash", "engine", "pair_role", "batch_size", "wall_s"],
    ).assign(pair="p", dtype="bfloat16")
    steps = pd.DataFrame(  # two steps of wide: trees of 3 and 1 draft tokens, draft forwards of 1+2 and 1 tokens
        [("wide", "a", 3, 2, "1.2", 4), ("wide", "b", 1, 1, "1", 2), ("paired", "a", 3, 2, "1.2", 4)],
        columns=["config_hash", "prompt_id", "tree_size", "tree_depth", "scored", "emitted"],
    ).pipe(filled, "steps.csv.gz")  # as the report reads it
    costs = pd.DataFrame(  # target: 0.01 s a token at its widest (128); draft: 0.001
        [
            (role, n, s, kv)
            for role, wide in (("target", 1.28), ("draft", 0.128))
            for n, s in ((1, wide / 10), (128, wide))
            for kv in (128, 512)
        ],
        columns=["role", "n_tokens", "seconds", "kv_len"],
    ).assign(pair="p", dtype="bfloat16", device="cpu", samples="")
    costs["model"] = costs.role.map({"target": "T", "draft": "D"})  # each rated on its model's CEILING curve
    b = onerun.least(summary, costmodel.StepCounts(steps), costs)
    assert b is not None
    assert (b["b1_n"], b["wide_n"], b["unrated"], b["replayed"]) == (1, 1, 0, 1)
    assert b["b1_min"] == pytest.approx(2.0)
    # target: (3+1) + (1+1) = 6 tokens x 0.01 s; draft: 3 + 1 = 4 tokens x 0.001 s
    assert b["wide_min"] * 60 == pytest.approx(6 * 0.01 + 4 * 0.001)
    text = onerun.sentence(b)
    assert "at least 2 min" in text and "the 1 live configurations timed at batch 1 took 2.0 min" in text
    assert "at each model's 128-token forward rate" in text
    gpu = costs.assign(device="cuda", seconds=costs.seconds / 50, model="/tmp/arch/" + costs.model)  # a GPU's rows,
    first = onerun.least(summary, costmodel.StepCounts(steps), pd.concat([gpu, costs]))  # named by path, listed first
    assert first == b  # this machine's bound reads this machine's curves, whatever comes first in costs.csv
    no_curve = onerun.least(summary, costmodel.StepCounts(steps), costs[costs.role == "draft"])
    assert no_curve is not None and (no_curve["wide_n"], no_curve["unrated"]) == (0, 1)
    assert onerun.least(summary.drop(columns="pair_role"), costmodel.StepCounts(steps), costs) is None


# --------------------------------------------------------------------------
# issue 55: a missing, cut, binary or garbled input is refused in one line, nothing written
# --------------------------------------------------------------------------
GOOD = {
    "times": "run,step,seconds\n1,wide,100\n",
    "fwd": "run,step,model,forwards,tokens\n1,wide,m,100,12800\n",
    "costs": "role,pair,dtype,device,model,kv_len,n_tokens,seconds,samples\n"
    "target,p,bfloat16,cpu,m,128,128,1.28,1.28 1.3\n",
}
BAD = {  # case -> (file, its text or None for missing, what the one line names)
    "times missing": ("times", None, "--times="),
    "forwards missing": ("fwd", None, "--forwards="),
    "costs missing": ("costs", None, "--costs="),
    "seconds abc": ("times", "run,step,seconds\n1,wide,abc\n", "line 2: seconds='abc'"),
    "seconds negative": ("times", "run,step,seconds\n1,wide,-3\n", "seconds='-3'"),
    "times cut mid-row": ("times", "run,step,seconds\n1,wide,100\n1,narr", "truncated"),
    "times header only": ("times", "run,step,seconds\n", "holds no rows"),
    "times wrong columns": ("times", "a,b,c\n1,2,3\n", "lacks the column(s) run, step, seconds"),
    "times binary": ("times", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\n", "not UTF-8 text"),
    "times not UTF-8": ("times", "run,step,seconds\n1,caf\u00e9,3\n".encode("latin-1"), "not UTF-8 text"),
    "forwards a row too long": ("fwd", "run,step,model,forwards,tokens\n1,wide,m,100,12800,7\n", "line 2 has 6"),
    "forwards tokens abc": ("fwd", "run,step,model,forwards,tokens\n1,wide,m,100,abc\n", "tokens='abc'"),
    "forwards fractional": ("fwd", "run,step,model,forwards,tokens\n1,wide,m,1.5,3\n", "is not an integer"),
    "costs seconds nan": ("costs", GOOD["costs"].replace(",1.28,", ",nan,"), "seconds='nan'"),
    "costs samples abc": ("costs", GOOD["costs"].replace("1.28 1.3", "1.28 abc"), "samples='1.28 abc'"),
    "costs a folder": ("costs", "dir", "not a file"),
}


def _files(tmp_path, which=None, text=None) -> dict:
    paths = {}
    for name, good in GOOD.items():
        p = paths[name] = tmp_path / f"{name}.csv"
        body = text if name == which else good
        if body == "dir":
            p.mkdir()
        elif isinstance(body, bytes):
            p.write_bytes(body)
        elif body is not None:
            p.write_text(body)
    return paths


def _ceiling(paths, out, capsys) -> tuple[int, list[str]]:
    args = ["--times", str(paths["times"]), "--forwards", str(paths["fwd"])]
    with pytest.raises(SystemExit) as e:
        main([*args, "--costs", str(paths["costs"]), "--out", str(out)])
    return int(e.value.code or 0), [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_input_is_one_line_and_run_times_is_kept(tmp_path, capsys, case):
    which, text, needle = BAD[case]
    paths = _files(tmp_path, which, text)
    out = tmp_path / "res" / "run_times.csv"
    out.parent.mkdir()
    out.write_text("run,step,seconds\n" + "".join(f"1,s{i},{i}\n" for i in range(73)))
    before = out.read_bytes()
    code, lines = _ceiling(paths, out, capsys)
    assert code == 2 and len(lines) == 1 and needle in lines[0] and str(paths[which]) in lines[0], lines
    assert lines[0].startswith("specbench: error:") and "; " in lines[0]  # the fix follows
    assert out.read_bytes() == before and os.listdir(out.parent) == ["run_times.csv"]


def test_the_good_inputs_write_run_times(tmp_path, capsys):
    paths = _files(tmp_path)
    main(["--times", str(paths["times"]), "--forwards", str(paths["fwd"]), "--costs", str(paths["costs"])]
         + ["--out", str(tmp_path / "run_times.csv")])  # fmt: skip
    assert pd.read_csv(tmp_path / "run_times.csv").ratio.iloc[0] == pytest.approx(
        1.28
    )  # 12,800 tokens at 100 tok/s in 100 s


@pytest.mark.parametrize("where", ["under a file", "read-only mount"])
def test_an_unwritable_out_is_one_line(tmp_path, capsys, request, where):
    paths = _files(tmp_path)
    if where == "under a file":
        out = tmp_path / "times.csv" / "run_times.csv"
    else:
        from mounts import mount_tmpfs

        mount_tmpfs(tmp_path / "ro", "size=100k,ro", request)
        out = tmp_path / "ro" / "run_times.csv"
    code, lines = _ceiling(paths, out, capsys)
    assert code == 2 and len(lines) == 1 and "--out" in lines[0] and str(out) in lines[0], lines
    assert not out.exists()


def test_a_run_replaces_its_own_rows_and_keeps_every_other_runs(tmp_path):
    """run_times.csv holds each run's steps: the default run beside the full study's parts (#52 item 8)."""
    out = tmp_path / "run_times.csv"
    pd.DataFrame({"run": [7, 7], "step": ["sweep a", "sweep b"], "seconds": [600, 700]}).to_csv(out, index=False)
    pd.DataFrame(_costs("m", 1.28, 0.8)).to_csv(tmp_path / "costs.csv", index=False)
    pd.DataFrame([[9, "wide", "m", 100, 12800]], columns=forwards.COLUMNS).to_csv(tmp_path / "fwd.csv", index=False)
    args = ["--forwards", str(tmp_path / "fwd.csv"), "--costs", str(tmp_path / "costs.csv"), "--out", str(out)]
    for seconds in (100, 90):  # the same run, written twice (a resumed run): its rows replaced, not doubled
        pd.DataFrame({"run": [9], "step": ["wide"], "seconds": [seconds]}).to_csv(tmp_path / "t.csv", index=False)
        main(["--times", str(tmp_path / "t.csv"), *args])
    got = pd.read_csv(out)
    assert list(zip(got.run, got.step, got.seconds)) == [(7, "sweep a", 600), (7, "sweep b", 700), (9, "wide", 90)]
    assert got.loc[got.run == 9, "ceiling_s"].iloc[0] == pytest.approx(128)
