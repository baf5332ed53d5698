"""llama.cpp's acceptance beside specbench's replay of the same rule (#84 item 4): the tool's settings are
checked in one line, its llama.cpp side counts drafts from the real server's counters (tiny GGUF), the
comparison pairs prompts within a run with an interval from 10 prompts, and the report shows it only with rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specbench.report import llamaagree
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
    assert llamaagree.section({"data": {}, "figs": {}, "link": str}) == ""
    assert llamaagree.fig_agreement({}) is None
    data = {"accept_llamacpp": rows("r1", 12)}
    text = llamaagree.section({"data": data, "figs": {}, "link": str})
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
