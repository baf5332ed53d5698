"""llama.cpp's acceptance beside specbench's replay of the same rule (#84 item 4): the tool's settings are
checked in one line, its llama.cpp side counts drafts from the real server's counters (tiny GGUF), the
comparison pairs prompts within a run with an interval from 10 prompts, and the report shows it only with rows."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from conftest import tiny_pair_overrides
from specbench.inputs import machine
from specbench.report import llamaagree
from specbench.report.context import Ctx, Inputs
from specbench.results.llamaaccept import agreement
from specbench.study.job.jobspec import ConfigError
from specbench.study.tools import accept_llamacpp


def test_the_grid_is_every_n_max_by_every_p_min_and_bad_values_are_one_line():
    cands = accept_llamacpp.grid({"llamacpp_n_max": [2, 4], "llamacpp_p_min": [0, 0.75]})
    assert [(c.n_max, c.p_min, c.n_min) for c in cands] == [(2, 0, 0), (2, 0.75, 0), (4, 0, 0), (4, 0.75, 0)]
    assert len(accept_llamacpp.grid({})) == 32  # the 8 x 4
    for extra, key in [
        ({"llamacpp_n_min": 2}, "llamacpp_n_min=2"),  # the replay knows the chain only along c
        ({"llamacpp_p_min": [1.5]}, "llamacpp_p_min=1.5"),
        ({"llamacpp_n_max": [0]}, "llamacpp_n_max=0"),
        ({"llamacpp_n_max": [4, 4]}, "llamacpp_n_max="),
        ({"llamacpp_n_max": ["a"]}, "llamacpp_n_max='a'"),
    ]:
        with pytest.raises(ConfigError, match=key) as e:
            accept_llamacpp.grid(extra)
        assert "\n" not in str(e.value)


def rows(run: str, n: int, shift: int = 0, seed: int = 0) -> pd.DataFrame:
    """One run of one setting: n prompts, specbench's counts and llama.cpp's (accepted + ``shift``)."""
    rng = np.random.default_rng(seed)
    drafts = rng.integers(5, 20, n)
    acc = (drafts * rng.uniform(0.5, 2.5, n)).astype(int)
    base = {"run_id": run, "machine": "M (AVX512)", "machine_id": "m", "pair": "p", "dataset": "d",
            "max_new_tokens": 64, "n_max": 4, "p_min": 0.75, "n_min": 0, "tokens": 64}  # fmt: skip
    lc = [{**base, "engine": "llamacpp", "prompt_id": f"d/{i}", "drafts": drafts[i], "accepted": acc[i] + shift,
           "same_tokens": i % 2 == 0} for i in range(n)]  # fmt: skip
    sb = [{**base, "engine": "specbench", "prompt_id": f"d/{i}", "drafts": drafts[i], "accepted": acc[i],
           "same_tokens": ""} for i in range(n)]  # fmt: skip
    return pd.DataFrame(lc + sb)


def test_equal_counts_agree_and_a_shift_does_not():
    same = agreement(rows("r1", 12)).iloc[0]
    assert same["diff"] == 0 and same.lo == same.hi == 0 and same.agree and same.prompts == 12
    assert (same.same, same.decodes) == (6, 12)
    shifted = agreement(rows("r1", 12, shift=3)).iloc[0]
    assert shifted["diff"] > 0 and shifted.lo > 0 and not shifted.agree


def test_fewer_than_ten_prompts_give_no_interval_and_the_newest_run_is_read():
    few = agreement(rows("r1", 4, shift=1)).iloc[0]
    assert few.lo != few.lo and not few.agree  # NaN: no interval; a difference: no agreement claimed
    both = agreement(pd.concat([rows("20260101T000000-a", 12, shift=3), rows("20260102T000000-b", 12)]))
    assert len(both) == 1 and both.iloc[0]["diff"] == 0  # the newer run only, never pooled across runs


def test_the_report_shows_the_comparison_only_with_rows():
    assert llamaagree.section(Ctx()) == ""
    assert llamaagree.fig_agreement(Inputs()) is None
    data = Inputs(accept_llamacpp=rows("r1", 12))
    text = llamaagree.section(Ctx(data=data))
    assert "1 of 1 settings agree" in text and "| 4/0.75 |" in text
    assert llamaagree.cell(data, {"pair": "p", "dataset": "d", "machine_id": "m"}) == "1 of 1"
    assert llamaagree.cell(data, {"pair": "p", "dataset": "other", "machine_id": "m"}) == "not run"


def test_llamacpp_side_counts_each_prompts_drafts_from_the_servers_counter(tiny_gguf):
    """The tiny GGUF drafts for itself: every draft token accepted, outputs equal to plain decoding's."""
    cands = accept_llamacpp.grid({"llamacpp_n_max": [3], "llamacpp_p_min": [0]})
    prompts = [("smoke/0", [1, 5, 9, 12]), ("smoke/1", [1, 7, 3])]
    out = accept_llamacpp.llamacpp_rows(tiny_gguf, cands, prompts, 8, 256)
    assert [r["prompt_id"] for r in out] == ["smoke/0", "smoke/1"]
    for r in out:
        assert r["drafts"] > 0 and r["accepted"] == r["drafted"] <= 3 * r["drafts"] and r["same_tokens"]
        assert (r["n_max"], r["p_min"]) == (3, 0) and "tokens_out" not in r


def replay_only(tmp_path, dirs, *extra) -> subprocess.CompletedProcess:
    args = [*tiny_pair_overrides(dirs), "dataset=smoke", "dataset.limit=2", "max_new_tokens=8",
            "+llamacpp_replay_only=true", f"+results_dir={tmp_path}", f"hydra.run.dir={tmp_path}/h", *extra]  # fmt: skip
    cmd = [sys.executable, "-m", "specbench.study.tools.accept_llamacpp", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_replay_only_derives_specbenchs_side_of_a_run_again_and_keeps_llamacpps(tmp_path, tiny_pair_dirs):
    """A change to the replay needs no server: specbench's rows of the newest run on this machine are derived
    again (its drafted bracket), its llama.cpp rows and run id kept; no such run is one line, nothing written."""
    none = replay_only(tmp_path, tiny_pair_dirs)
    assert none.returncode == 2 and len(none.stderr.strip().splitlines()) == 1
    assert "llamacpp_replay_only=true" in none.stderr and not (tmp_path / accept_llamacpp.FILE).exists()
    me = machine.identity("cpu")["machine_id"]
    old = rows("20260101T000000-a", 2).assign(machine_id=me, dataset="smoke", max_new_tokens=8)
    old = old.assign(pair="local:{}->{}".format(*tiny_pair_dirs))
    old = old.assign(prompt_id=[f"smoke/{i % 2}" for i in range(len(old))], n_max=3, p_min=0.0, drafted=old.drafts)
    old.to_csv(tmp_path / accept_llamacpp.FILE, index=False)
    done = replay_only(tmp_path, tiny_pair_dirs)
    assert done.returncode == 0, done.stderr
    new = pd.read_csv(tmp_path / accept_llamacpp.FILE)
    assert len(new) == 4 and set(new.run_id) == {"20260101T000000-a"}
    lc, sb = (new[new.engine == e].reset_index(drop=True) for e in ("llamacpp", "specbench"))
    pd.testing.assert_frame_equal(
        lc[old.columns], old[old.engine == "llamacpp"].reset_index(drop=True), check_dtype=False
    )
    assert (lc.drafted_max == lc.drafted).all()  # exact for llama.cpp, filled where a run lacked the column
    assert (sb.tokens == 8).all() and (sb.drafted == sb.drafted_max).all()  # p_min 0: every chain n_max, exact
    assert (sb.drafts > 0).all() and (sb.drafted <= 3 * sb.drafts).all() and (sb.accepted <= sb.drafted).all()
