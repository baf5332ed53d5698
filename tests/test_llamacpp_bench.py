"""llama.cpp's benchmark and cost curve (#84 items 3, 5, 7) on the tiny GGUF with the real built
``llama-server`` and ``llama-bench``: an interleaved run with plain decoding, a candidate and both
controls writes ``engine=llamacpp`` rows into speed.csv; llama-bench's points go into costs.csv as
llama.cpp's curve beside specbench's; the report's keys keep the two engines apart; the plain ratio.
The llama.cpp tests skip with the build's one line where it is not built."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from specbench.results import costcurve, engines
from specbench.results import speedstats as ss
from specbench.study.job.jobspec import ConfigError
from specbench.study.tools import costs_llamacpp, speed_llamacpp

BASE = {"run_id": "20261207-000000-llama", "machine": "test CPU", "machine_id": "m0", "pair": "tiny", "dataset": "smoke",
        "dtype": "gguf", "device": "cpu", "batch_size": 1, "max_new_tokens": 8, "seed": 0, "roster": "answer",
        "weights": "pretrained", "engine": "llamacpp", "pair_id": "p0"}  # fmt: skip
PROMPTS = [("smoke/0", "def add(a, b):\n    return a + b\n"), ("smoke/1", "hello world, the quick brown fox")]


def test_roster_and_bad_candidates_are_one_line():
    names = [c.name for c in speed_llamacpp.roster({"llamacpp_candidates": ["4/0.75", "2/0"]})]
    assert names == [
        "plain",
        "plain (A/A)",
        "draft n_max=4 p_min=0.75",
        "draft n_max=2 p_min=0",
        "draft n_max=4 p_min=0.75 (twin)",
    ]
    spec = speed_llamacpp.parse("4/0.75", 1).spec("d.gguf")
    assert spec[spec.index("--spec-draft-n-max") + 1] == "4" and spec[spec.index("--spec-draft-p-min") + 1] == "0.75"
    assert spec[spec.index("--spec-draft-n-min") + 1] == "1" and speed_llamacpp.Candidate("plain").spec("d") == []
    assert [c.name for c in speed_llamacpp.roster({"llamacpp_candidates": []})] == ["plain", "plain (A/A)"]
    for bad, says in (
        (["4"], "N_MAX/P_MIN"),
        (["0/0.5"], "N_MAX/P_MIN"),
        (["4/2"], "P_MIN"),
        (["2/0", "2/0"], "twice"),
    ):
        with pytest.raises(ConfigError, match=says):
            speed_llamacpp.roster({"llamacpp_candidates": bad})


def test_interleaved_run_on_the_tiny_gguf_writes_llamacpp_rows(tiny_gguf, tmp_path):
    """2 prompts x 8 tokens, one round: plain, its A/A copy, n_max 3 p_min 0 and its twin, each its own server."""
    cands = speed_llamacpp.roster({"llamacpp_candidates": ["3/0"]})
    job = SimpleNamespace(extra={"speed_rounds": 1}, seed=0, progress=False, max_new_tokens=8)
    rows = speed_llamacpp.bench(job, PROMPTS, cands, tiny_gguf, BASE, ctx=256)
    speed_llamacpp.write(str(tmp_path), rows)
    df = pd.read_csv(tmp_path / "speed.csv")
    assert len(df) == 2 * 4 and set(df.engine) == {"llamacpp"} and set(df.tokens) == {8}
    assert df.same_tokens.all() and (df.wall_s > 0).all() and (df.client_s >= df.wall_s * 0.5).all()
    spec = df[df.tree == "draft-simple"]
    assert (spec.drafted > 0).all() and (spec.accepted == spec.drafted).all()  # the draft is the target: all kept
    assert (spec.steps < spec.tokens).all() and set(spec.budget) == {3}
    plain = df[df.tree == "none"]
    assert (plain.drafted == 0).all() and (plain.steps == plain.tokens).all()
    assert sorted(df.groupby("unit").order.apply(list).iloc[0]) == [0, 1, 2, 3]
    twin = df[df.candidate.str.endswith(ss.TWIN_SUFFIX)]
    assert set(twin.config_hash) == set(df[df.candidate == "draft n_max=3 p_min=0"].config_hash)
    assert json.loads(spec.tree_params.iloc[0]) == {"n_max": 3, "n_min": 0, "p_min": 0.0}


def _rows(engine: str, wall: float, run: str, units: int = 6) -> pd.DataFrame:
    rows = []
    for u in range(units):
        for c, w in ((ss.PLAIN, wall), (ss.PLAIN_AA, wall), ("X", wall / 2)):
            rows.append({**BASE, "run_id": run, "engine": engine, "dtype": "bfloat16", "round": 0, "unit": u,
                         "prompt_ids": f"smoke/{u}", "candidate": c, "tokens": 8, "wall_s": w * (1 + 0.01 * u), "tree": "t", "tree_params": "{}", "budget": 1,
                         "config_hash": c, "accepted": 1, "drafted": 1, "steps": 4, "tree_depth": 1})  # fmt: skip
    out = pd.DataFrame(rows)
    return out.drop(columns="engine") if engine == ss.SPECBENCH else out  # specbench's rows lack the column


def test_the_report_key_keeps_engines_apart_and_the_plain_ratio():
    speed = pd.concat([_rows(ss.SPECBENCH, 2.0, "r1"), _rows("llamacpp", 0.5, "r2")], ignore_index=True)
    pooled = ss.latest_runs(speed)
    assert set(pooled.pooled_runs) == {1} and pooled.groupby("run_id").engine.nunique().eq(1).all()
    a = ss.answers(speed)
    assert sorted(a.engine.unique()) == ["llamacpp", "specbench"] and a.groupby("engine").run_id.nunique().eq(1).all()
    assert ss.answer_first(a).engine.nunique() == 2  # neither engine's answer hides the other's
    r = engines.plain_ratio(speed)
    assert len(r) == 1 and r.prompts.iloc[0] == 6 and r.ratio.iloc[0] == pytest.approx(4.0)
    assert r.lo.iloc[0] <= 4.0 <= r.hi.iloc[0] and r.llamacpp_tok_s.iloc[0] == pytest.approx(
        4 * r.specbench_tok_s.iloc[0]
    )
    assert engines.plain_ratio(speed[speed.get("engine").isna()]).empty  # one engine: no ratio


def test_llama_bench_cost_curve_goes_into_costs_csv_as_llamacpps(tiny_gguf, tmp_path):
    committed = pd.read_csv(ROOT / "results" / "costs.csv")  # specbench's rows (the committed llama.cpp curve left out)
    committed[committed.engine.fillna("specbench") != "llamacpp"].to_csv(tmp_path / "costs.csv", index=False)
    before = pd.read_csv(tmp_path / "costs.csv")
    rows = costs_llamacpp.cost_rows("qwen_coder", tiny_gguf, [1, 2], [8], 2)
    costs_llamacpp.write(str(tmp_path), rows)
    costs_llamacpp.write(str(tmp_path), rows)  # a second run replaces its own curve, nothing else
    after = pd.read_csv(tmp_path / "costs.csv")
    mine = after[after.engine == "llamacpp"]
    assert len(mine) == 4 and set(mine.role) == {"draft", "target"} and set(mine.n_tokens) == {1, 2}
    assert set(mine.dtype) == {"gguf"} and (mine.repeats == 2).all() and (mine.seconds > 0).all()
    assert len(after) - len(mine) == len(before)  # specbench's rows kept
    rule = costcurve.Rule("llamacpp", per="pair", kv=costcurve.KV, linear_beyond=False, dtype="gguf", engine="llamacpp")
    cv = costcurve.curve(after, rule, "qwen_coder", "target")
    assert cv is not None and list(cv.sizes) == [1.0, 2.0] and np.all(cv.values() > 0)
    assert (
        costcurve.curve(after, costcurve.AT_CONTEXT, "qwen_coder", "target", dtype="gguf") is None
    )  # specbench's never read it


def test_costs_cli_refuses_in_one_line(tmp_path, capsys):
    assert costs_llamacpp.main(["--target", str(tmp_path / "none.gguf"), "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("specbench.study.tools.costs_llamacpp: ")
    assert not (tmp_path / "costs.csv").exists()


def accept_rows(n_max: int, p_min: float, drafted: int, most: int, prompts: int = 12) -> pd.DataFrame:
    """specbench's replay of one setting: per prompt 9 tokens, 4 accepted in 2 drafting steps, the draft sampling
    4 tokens at either end of its drafted bracket."""
    return pd.DataFrame([{"run_id": "r1", "machine_id": "m0", "pair": "tiny", "dataset": "smoke", "engine": "specbench",
                          "n_max": n_max, "p_min": p_min, "n_min": 0, "prompt_id": f"smoke/{i}", "tokens": 9,
                          "accepted": 4, "drafts": 2, "drafted": drafted, "drafted_max": most, "draft_samples": 4,
                          "draft_samples_max": 4} for i in range(prompts)])  # fmt: skip


def test_projection_for_llamacpp_candidates_beside_their_measured_speedup():
    """Per prompt 8 tokens after the prompt's: plain 8 x t_target(1) = 0.8 s; n_max 2 at p_min 0 drafts 4 tokens in
    2 steps (4 draft samples of 0.01 s; per step the target's and the draft's forward of 3 tokens, 0.12 + 0.012 s)
    and takes 2 steps without a draft (0.1 + 0.01 s each): 0.524 s, 1.53x.  p_min 0.75's replay drafted 3 to 4 (a
    chain past a rejected token unseen): at 3, forwards of 2.5 tokens (0.115 + 0.0115 s), 0.513 s: 1.53x .. 1.56x."""
    from specbench.results import llamaproject

    walls = {ss.PLAIN: 1.0, ss.PLAIN_AA: 1.0, "draft n_max=2 p_min=0": 0.8, "draft n_max=2 p_min=0.75": 0.9}
    params = {
        "draft n_max=2 p_min=0": {"n_max": 2, "p_min": 0.0},
        "draft n_max=2 p_min=0.75": {"n_max": 2, "p_min": 0.75},
    }
    speed = pd.DataFrame([{**BASE, "round": 0, "unit": u, "prompt_ids": f"smoke/{u}", "candidate": c, "tokens": 8,
                           "wall_s": w * (1 + 0.01 * u), "tree": "draft-simple", "tree_params": json.dumps(params.get(c, {})),
                           "budget": params.get(c, {}).get("n_max", 0), "config_hash": c, "accepted": 1, "drafted": 1,
                           "steps": 4, "tree_depth": 1} for u in range(6) for c, w in walls.items()])  # fmt: skip
    accept = pd.concat([accept_rows(2, 0.0, 4, 4), accept_rows(2, 0.75, 3, 4)])
    secs = {
        ("draft", 1): 0.01,
        ("target", 1): 0.1,
        ("target", 2): 0.11,
        ("target", 3): 0.12,
        ("draft", 2): 0.011,
        ("draft", 3): 0.012,
    }
    costs = pd.DataFrame([{"role": r, "pair": "tiny", "dtype": "gguf", "device": "cpu", "kv_len": kv, "n_tokens": n,
                           "seconds": s, "samples": f"{s} {s}", "machine_id": "m0", "engine": "llamacpp"}
                          for (r, n), s in secs.items() for kv in (128, 512)])  # fmt: skip
    out = llamaproject.compare(speed, accept, costs).set_index("candidate")
    zero, sure = out.loc["draft n_max=2 p_min=0"], out.loc["draft n_max=2 p_min=0.75"]
    assert zero.projected_lo == zero.projected_hi == zero.projected == pytest.approx(0.8 / 0.524)
    assert zero.ci_lo == pytest.approx(0.8 / 0.524) and zero.measured == pytest.approx(1 / 0.8)  # prompts alike
    assert zero.error == pytest.approx(0.8 / 0.524 / 1.25 - 1) and zero.replay_prompts == 12
    assert (sure.projected_lo, sure.projected_hi) == (pytest.approx(0.8 / 0.524), pytest.approx(0.8 / 0.513))
    ngram = accept_rows(2, 0.75, 0, 0).assign(spec_type="ngram-simple", size_n=2, drafter="ngram")
    other = llamaproject.compare(speed, pd.concat([accept_rows(2, 0.0, 4, 4), ngram]), costs).set_index("candidate")
    assert np.isnan(other.loc["draft n_max=2 p_min=0.75"].projected)  # an n-gram run's rows are not draft-simple's
    few = llamaproject.compare(speed, accept_rows(2, 0.0, 4, 4, prompts=4), costs).set_index("candidate")
    assert few.loc["draft n_max=2 p_min=0"].projected > 1 and np.isnan(few.loc["draft n_max=2 p_min=0"].ci_lo)
    assert np.isnan(few.loc["draft n_max=2 p_min=0.75"].projected)  # no replay of that setting: not projected
    assert llamaproject.compare(speed.assign(engine="specbench"), accept, costs).empty  # not llama.cpp's rows


def test_a_server_dying_mid_run_keeps_the_finished_units(monkeypatch):
    """A stand-in server that dies on its third request: the first unit's rows come back with the one line."""
    from specbench.study.tools.llamaserver import ServerDied

    calls = []

    class Fake:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def complete(self, text, n):
            calls.append(n)
            if len(calls) == 2 + 2 + 2:  # warm-ups and the first unit done; the second unit's second request dies
                raise ServerDied("llama-server died (signal 9) during a request to /completion; its log: x.log")
            return {"tokens": [1] * n, "timings": {"predicted_n": n, "prompt_ms": 1.0, "predicted_ms": 9.0}}

    monkeypatch.setattr(speed_llamacpp, "LlamaServer", Fake)
    job = SimpleNamespace(extra={"speed_rounds": 1}, seed=0, progress=False, max_new_tokens=4)
    cands = speed_llamacpp.roster({"llamacpp_candidates": []})
    with pytest.raises(speed_llamacpp.Stopped, match="died") as e:
        speed_llamacpp.bench(job, PROMPTS, cands, {"target": "t", "draft": "d"}, BASE)
    assert (
        len(e.value.rows) == 2
        and {r["unit"] for r in e.value.rows} == {0}
        and all(r["same_tokens"] for r in e.value.rows)
    )


def test_one_engines_reruns_never_set_anothers_run_effect():
    from specbench.results import harness

    mine = pd.concat([_rows(ss.SPECBENCH, 2.0, "r1"), _rows(ss.SPECBENCH, 2.2, "r2")], ignore_index=True)
    theirs = pd.concat([_rows("llamacpp", 0.5, "r3"), _rows("llamacpp", 0.7, "r4")], ignore_index=True)
    theirs.loc[theirs.candidate == "X", "wall_s"] *= np.where(theirs.run_id == "r4", 1.5, 1.0)[theirs.candidate == "X"]
    both, alone = ss.spreads(pd.concat([mine, theirs], ignore_index=True)), ss.spreads(mine)
    assert {k: v for k, v in both.items() if "|" not in k} == alone  # specbench's run effect as without llama.cpp's
    assert {"m0|llamacpp", "*|llamacpp"} <= set(both) and both["m0|llamacpp"].tau > 0
    assert ss.judged_by(both, theirs) == both["m0|llamacpp"] and ss.judged_by(both, mine) == alone["m0"]
    assert ss.judged_by({harness.POOLED: both["m0|llamacpp"]}, theirs) == harness.NONE  # never specbench's pooled


def test_a_destination_speed_csv_that_is_not_one_is_refused_before_any_server_starts(tmp_path):
    """speed_llamacpp reads its destination as strictly as its append will, first: exit 2, one line, kept."""
    import subprocess
    import sys

    (tmp_path / "speed.csv").write_text("run_id,speedup\nr1,1.5\n")
    before = (tmp_path / "speed.csv").read_bytes()
    cmd = [sys.executable, "-m", "specbench.study.tools.speed_llamacpp", f"+results_dir={tmp_path}"]
    p = subprocess.run([*cmd, f"hydra.run.dir={tmp_path}/h"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("specbench.study.tools.speed_llamacpp: results_dir=") and "speed.csv" in line, line
    assert (tmp_path / "speed.csv").read_bytes() == before
