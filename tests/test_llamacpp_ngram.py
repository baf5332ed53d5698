"""llama.cpp's n-gram speculation beside specbench's replay (#84 item 4): ``engine.ngramwalk``'s ngram-simple
rule against a brute-force reading of llama.cpp's source and against the real server's counts (tiny GGUF),
specbench's own ngram chain, the settings refused in one line, and the comparison and report with n-gram rows."""

from __future__ import annotations

import random
from functools import partial

import numpy as np
import pandas as pd
import pytest

from specbench.drafting.ngram import continuations
from specbench.engine import ngramwalk
from specbench.report import llamaagree
from specbench.report.context import Ctx, Inputs
from specbench.results.llamaaccept import agreement
from specbench.study.job.jobspec import ConfigError
from specbench.study.tools import accept_llamacpp, accept_ngram


def brute(history: list[int], n: int, m: int) -> list[int]:
    """common_ngram_simple_draft read directly: T = history less its last token, the pattern history's last n,
    occurrences of it in T starting at 1 .. len(T) - n - 1, the latest taken, the T-tokens after it."""
    t, pattern = history[:-1], history[-n:]
    if len(t) <= n + m + 1:
        return []
    starts = [j for j in range(1, len(t) - n) if t[j : j + n] == pattern]
    if not starts:
        return []
    after = t[starts[-1] + n :][:m]
    return after if len(after) >= n else []


def test_ngram_simple_equals_a_brute_force_reading_of_llamacpps_source():
    rng = random.Random(0)
    for _ in range(3000):
        h = [rng.randrange(3) for _ in range(rng.randrange(1, 30))]
        n, m = rng.randrange(1, 4), rng.randrange(1, 6)
        assert ngramwalk.simple_draft(h, n, m) == brute(h, n, m), (h, n, m)


def test_ngram_simple_rules_details():
    h = [7, 1, 2, 3, 4, 5, 6, 8, 9, 1, 2]  # '1 2' at 1: followed by 3 4 5 ...
    assert ngramwalk.simple_draft(h, 2, 4) == [3, 4, 5, 6]
    assert ngramwalk.simple_draft(h, 2, 1) == []  # M < N never drafts
    assert ngramwalk.simple_draft([1, 2, 3, 4, 5, 6, 9, 1, 2], 2, 2) == []  # an occurrence at 0 is never matched
    assert ngramwalk.simple_draft([0, 5, 5, 5, 5, 5, 5], 1, 1) == [5]  # the latest earlier one, not the one before
    assert ngramwalk.simple_draft([0, 1, 2, 1, 2], 2, 4) == []  # too short: L <= N + M + 1


def test_walk_counts_drafts_and_stops_a_token_before_the_end():
    prompt, cont = [9, 1, 2, 3, 4, 0], [1, 2, 3, 4, 7]
    steps = ngramwalk.walk(prompt, cont, lambda h: ngramwalk.simple_draft(h, 1, 3))
    # t=0: no draft (the prompt's forward); t=1 (history ends 1): drafts 2 3 4 (room 3), all accepted, emits 4
    assert steps == [(0, 0), (3, 3)]
    assert ngramwalk.totals(steps) == {"drafts": 1, "drafted": 3, "accepted": 3}
    no_bounds = ngramwalk.walk(prompt, cont, lambda h: ngramwalk.simple_draft(h, 1, 3), start=0, reserve=0)
    assert no_bounds[0] == (0, 0)  # '0' never occurred before: nothing to draft


def test_chain_draft_is_the_ngram_drafters_best_match_chain():
    h = [5, 1, 2, 3, 9, 9, 1, 2, 3, 4, 6, 1, 2, 3]
    best = continuations(h, 3)[0]  # longest n-gram, most recent occurrence first
    assert ngramwalk.chain_draft(h, 3) == best == [4, 6, 1]
    assert ngramwalk.chain_draft([1, 2, 3], 4) == []


def test_ngram_settings_parse_and_bad_values_are_one_line():
    got = accept_ngram.grid({"llamacpp_ngram": ["2/4", "4/8"]})
    assert [(s.size_n, s.size_m, s.n_max) for s in got] == [(2, 4, 4), (4, 8, 8)]
    assert got[0].spec()[:2] == ["--spec-type", "ngram-simple"] and got[0].params["spec_type"] == "ngram-simple"
    assert len(accept_ngram.grid({})) == len(accept_ngram.NGRAM)
    for extra, key in [
        ({"llamacpp_ngram": ["8/4"]}, "never drafts"),
        ({"llamacpp_ngram": ["0/4"]}, "'0/4'"),
        ({"llamacpp_ngram": ["a"]}, "'a'"),
        ({"llamacpp_ngram": ["2/2000"]}, "1024"),
        ({"llamacpp_ngram": ["2/4", "2/4"]}, "distinct"),
        ({"llamacpp_ngram": ["2/4"], "llamacpp_n_max": [4]}, "llamacpp_n_max"),
    ]:
        with pytest.raises(ConfigError, match=key) as e:
            accept_ngram.grid(extra)
        assert "\n" not in str(e.value)


def test_replay_equals_the_real_servers_counts_along_its_own_tokens(tiny_gguf):
    """ngram-simple on the real llama-server (tiny GGUF): its drafts, drafted and accepted tokens per request are
    the replay's along the very tokens it produced (equal to its plain decoding's)."""
    s = accept_ngram.parse("1/4")
    prompts = [("p/0", [1, 19, 35, 34, 28, 53, 56]), ("p/1", [1, 5, 9, 12, 5, 9, 12, 5, 9])]
    rule = partial(ngramwalk.simple_draft, size_n=s.size_n, size_m=s.size_m)
    seen = {"drafts": 0, "accepted": 0}
    # spinning threads (no POLL): the tiny model's operations take microseconds
    for (_, ids), r in zip(prompts, accept_llamacpp.served({"target": tiny_gguf["target"]}, s, prompts, 160, 512, ())):
        got = ngramwalk.totals(ngramwalk.walk(ids, r["tokens_out"], rule))
        assert got == {k: r[k] for k in got}, ids
        seen = {k: seen[k] + got[k] for k in seen}
    assert seen["drafts"] > 0 and seen["accepted"] > 0  # the check saw drafts and acceptances


def test_rows_compare_llamacpps_rule_and_show_specbenchs_own_chain_beside_it():
    rng = np.random.default_rng(1)
    prompts = [(f"d/{i}", [int(x) for x in rng.integers(0, 4, 40)]) for i in range(12)]
    conts = [[int(x) for x in rng.integers(0, 4, 24)] for _ in prompts]
    settings = accept_ngram.grid({"llamacpp_ngram": ["2/4"]})
    sb = accept_ngram.walk_rows(settings, prompts, conts)
    assert {r["drafter"] for r in sb} == {"llamacpp", "ngram"} and all(r["drafted"] == r["drafted_max"] for r in sb)
    lc = [{**r, "engine": "llamacpp", "same_tokens": True} for r in sb if r["drafter"] == "llamacpp"]
    base = {"run_id": "r1", "machine": "M (AVX512)", "machine_id": "m", "pair": "p", "dataset": "d",
            "max_new_tokens": 24}  # fmt: skip
    old = {**base, "n_max": 4, "p_min": 0.5, "n_min": 0, "prompt_id": "d/0", "tokens": 24, "drafts": 3, "accepted": 2}
    olds = [{**old, "engine": "llamacpp", "same_tokens": True}, {**old, "engine": "specbench", "same_tokens": ""}]
    # draft-simple rows written before spec_type, size_n and drafter existed
    rows = pd.DataFrame([{**base, **r} for r in lc] + [{**base, "engine": "specbench", **r} for r in sb] + olds)
    a = agreement(rows)
    ng = a[a.spec_type == "ngram-simple"].iloc[0]
    assert ng["diff"] == 0 and ng.agree and ng.prompts == 12 and ng.chain == ng.chain and ng.drafts_chain > 0
    assert set(a.spec_type) == {"ngram-simple", "draft-simple"}  # the old row read as draft-simple's
    text = llamaagree.section(Ctx(data=Inputs(accept_llamacpp=rows)))
    assert "| N 2, M 4 |" in text and "specbench ngram chain" in text
    assert llamaagree.cell(Inputs(accept_llamacpp=rows), {"pair": "p", "dataset": "d", "machine_id": "m"}) == "1 of 1"
    assert llamaagree.fig_agreement(Inputs(accept_llamacpp=rows)) is not None
