"""llama.cpp in the report (#84 item 9): with hand-made llama.cpp benchmark rows (speed.csv ``engine=llamacpp``)
the TL;DR's llama.cpp table shows the measured fastest with its interval (or plain decoding where nothing pays),
both engines' plain tokens/s and their ratio, specbench's projected pick and its error, the controls; speed.md's
section every candidate's acceptance beside specbench's chain and the token-identical share; the figure reads at
1000 px.  Without llama.cpp rows nothing is added."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from specbench.report import figures, llamacpp, machines, mainpage
from specbench.report.context import Ctx, Inputs, Tables
from specbench.results import llamaproject
from specbench.results import speedstats as ss

MACHINE = "AMD EPYC (AVX512), 2 cores, 2 threads, torch 2.13.0+cpu"
BASE = dict(machine=MACHINE, machine_id="m1", pair="qwen_coder", device="cpu", batch_size=1, verify="greedy",
            temperature=0, seed=0, roster="answer", weights="pretrained")  # fmt: skip


def rows(cands: dict, dataset="humaneval", tokens=128, run="20261207T0700-ll", engine="llamacpp", units=12, rounds=2):
    """A run where candidate name -> (n_max, p_min, speedup over plain, accepted per step); ABBA-free random orders,
    3% noise, plain decoding at 13 tok/s; every 5th speculative decode differs from plain decoding's tokens."""
    rng, out = np.random.default_rng(len(dataset) + tokens), []
    for rd in range(rounds):
        for u in range(units):
            length = rng.uniform(0.8, 1.2)
            for i, (name, (n_max, p_min, speed, acc)) in enumerate(cands.items()):
                plain = name.startswith("plain")
                accepted = 0 if plain else int(tokens * acc / (1 + acc))
                out.append(dict(BASE, run_id=run, dataset=dataset, max_new_tokens=tokens, round=rd, unit=u, order=i,
                                candidate=name, dtype="gguf" if engine else "bfloat16",
                                tree="none" if plain else "draft-simple", budget=n_max, config_hash=name.removesuffix(" (twin)"),
                                tree_params="{}" if plain else json.dumps({"n_max": n_max, "n_min": 0, "p_min": p_min}),
                                prompt_ids=f"HumanEval/{u}", wall_s=tokens / 13 * length / speed * (1 + 0.03 * rng.standard_normal()),
                                tokens=tokens, steps=tokens - accepted, accepted=accepted, drafted=2 * accepted, tree_depth=n_max,
                                same_tokens=plain or u % 5 != 0, engine=engine))  # fmt: skip
    df = pd.DataFrame(out)
    return df if engine else df.drop(columns="engine")  # specbench's rows lack the column


PLAIN = {"plain": (0, 0, 1.0, 0), "plain (A/A)": (0, 0, 1.0, 0)}
PAYS = {**PLAIN, "draft n_max=2 p_min=0.75": (2, 0.75, 1.05, 1.2), "draft n_max=4 p_min=0": (4, 0.0, 1.4, 2.0),
        "draft n_max=2 p_min=0.75 (twin)": (2, 0.75, 1.05, 1.2)}  # fmt: skip
LOSES = {**PLAIN, "draft n_max=2 p_min=0.75": (2, 0.75, 0.8, 1.2), "draft n_max=4 p_min=0": (4, 0.0, 0.87, 2.0)}


def summary() -> pd.DataFrame:
    """specbench's greedy chain replays of qwen_coder on humaneval at N = 2 and 4."""
    return pd.DataFrame([dict(pair="qwen_coder", dataset="humaneval", tree="chain", budget=n, verify="greedy",
                              temperature=0, max_new_tokens=128, n_prompts=32, tokens_per_step=1 + a,
                              acceptance_length=a, acceptance_length_lo=a - 0.1, acceptance_length_hi=a + 0.1)
                         for n, a in ((2, 1.3), (4, 2.1))])  # fmt: skip


def costs() -> pd.DataFrame:
    """llama.cpp's cost curve on machine m1: a draft forward half the target's, a k-token forward 1 + 0.3(k-1)."""
    return pd.DataFrame([dict(role=role, pair="qwen_coder", dtype="gguf", device="cpu", repeats=5, kv_len=kv, n_tokens=k,
                              seconds=t1 * (1 + 0.3 * (k - 1)), machine=MACHINE, machine_id="m1", engine="llamacpp",
                              model=role, weights="pretrained")
                         for role, t1 in (("target", 0.08), ("draft", 0.04)) for kv in (128, 512) for k in range(1, 10)])  # fmt: skip


def replay() -> pd.DataFrame:
    """specbench's replay of n_max 4 at p_min 0 (llama.cpp's rule) on 12 prompts: per prompt 128 tokens, 80 accepted
    in 30 drafting steps of 4 tokens each (the draft sampling 4 per step)."""
    return pd.DataFrame([dict(run_id="20261207T0900-acc", machine=MACHINE, machine_id="m1", max_new_tokens=64,
                              pair="qwen_coder", dataset="humaneval",
                              engine="specbench", n_max=4, p_min=0.0, n_min=0, prompt_id=f"HumanEval/{i}", tokens=128,
                              accepted=80, drafts=30, drafted=120, drafted_max=120,
                              draft_samples=120, draft_samples_max=120) for i in range(12)])  # fmt: skip


def ctx(bench: pd.DataFrame) -> Ctx:
    data = Inputs(bench=bench, summary=summary(), costs_llamacpp=costs(), accept_llamacpp=replay())
    return Ctx(t=Tables(measured=ss.answers(bench)), data=data, link=lambda n: n)


def both(humaneval=PAYS, specbench_plain=True) -> pd.DataFrame:
    """llama.cpp's benchmark on humaneval (128 tokens) and its plain decoding at 64 tokens, with specbench's plain
    decoding of the same prompts at 64 tokens 4× slower (its ratio 4)."""
    parts = [rows(humaneval), rows(PLAIN, tokens=64, run="20261207T0800-llp", rounds=1)]
    if specbench_plain:
        slow = rows({**PLAIN, "chain N=2": (2, 0, 1.2, 1.0)}, tokens=64, run="20261128T0400-sb", engine="", rounds=1)
        parts.append(slow.assign(wall_s=np.where(slow.candidate.str.startswith("plain"), 4, 1) * slow.wall_s))
    return pd.concat(parts, ignore_index=True)


def test_the_tldr_table_shows_the_fastest_with_its_interval_the_plain_ratio_and_the_projections_error():
    c = ctx(both())
    text = llamacpp.brief(c)
    best = c.t.measured
    best = best[(best.engine == "llamacpp") & (best.candidate == "draft n_max=4 p_min=0")].iloc[0]
    assert (
        best.pays and f"| qwen_coder/humaneval | 4/0 +0: {best.speedup:.2f}× [{best.lo:.2f}, {best.hi:.2f}] |" in text
    )
    lead = "**llama.cpp** (GGUF) on AMD EPYC (AVX512), batch 1, 12 prompts × 128 tokens"
    assert text.startswith(lead + "; plain at 64 tokens (speed.md):")
    ratio = re.search(r"\| [\d.]+ / [\d.]+ = (\d\.\d\d)× \|", text)
    assert ratio and float(ratio[1]) == pytest.approx(4.0, rel=0.05)
    proj = llamaproject.compare(c.data.bench, replay(), costs())
    four = proj[proj.candidate == "draft n_max=4 p_min=0"].iloc[0]
    # per prompt: 127 plain forwards against 120 draft samples, 30 target and draft forwards of 5, 17 of 1 each
    spec = 120 * 0.04 + 30 * (0.08 + 0.04) * 2.2 + 17 * (0.08 + 0.04)
    assert four.projected == pytest.approx(127 * 0.08 / spec)
    assert f"| 4/0 {four.projected:.2f}× ({four.error:+.0%}) | not run | hold |" in text  # no acceptance run
    assert len(text.splitlines()) == 4 + 1 and mainpage.words(text) < 90  # one row per machine, pair, dataset


def test_plain_decoding_where_no_candidate_pays_and_no_ratio_without_specbenchs_plain_run():
    text = llamacpp.brief(ctx(both(LOSES, specbench_plain=False)))
    assert "| plain decoding (best 4/0 +" in text and "no specbench plain run at 128 tokens" in text
    keys = llamacpp.keys(ctx(both(LOSES)).t)
    assert len(keys) == 1 and not keys.pays.iloc[0] and keys.candidate.iloc[0] == "draft n_max=4 p_min=0"


def test_speed_md_lists_every_candidate_with_acceptance_beside_specbenchs_chain_and_the_identical_share():
    c = ctx(both())
    text = llamacpp.section(c)
    assert text.count("| AMD EPYC (AVX512) · qwen_coder/humaneval |") == 2  # the twin is a control, not a candidate
    four = [line for line in text.splitlines() if "| 4/0 |" in line][0]
    assert "| 1.98 |" in four and "| 2.10 [2.00, 2.20] |" in four  # llama.cpp's 85 ÷ 43 per step; specbench's chain
    assert "| 18 of 24 |" in four  # units 0, 5, 10 of 12 in 2 rounds: 6 of 24 decodes differ
    line = re.search(r"error ([+-]\d+)% to ([+-]\d+)% \(median [+-]\d+%\) over 1 candidates; its pick is the "
                     r"measured fastest or ties it in 1 of 1 pair/datasets\.", text)  # fmt: skip
    assert line and line[1] == line[2]  # one candidate projected: 4/0, the fastest
    assert "Projected from the acceptance run's 12 prompts × 128 tokens, measured on 12 × 128." in text
    assert "| none (no curve or replay) |" in text and "on the same 12 prompts (specbench bfloat16)" in text


def test_the_figure_reads_at_1000_px(tmp_path):
    from matplotlib.text import Text
    from PIL import Image

    c = ctx(both())
    f = llamacpp.fig_acceptance(c.t, c.data)
    assert f is not None and f.name == llamacpp.FIG
    f.fig.savefig(tmp_path / f.name, format="png", bbox_inches="tight")
    assert Image.open(tmp_path / f.name).size[0] <= 1000
    assert min(t.get_fontsize() for t in f.fig.findobj(Text) if t.get_text().strip()) >= figures.MIN_PT
    ax = f.fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert "specbench chain N = n_max (replay)" in labels
    assert {"llama.cpp, p_min 0", "llama.cpp, p_min 0.75"} <= set(labels)


def test_without_llamacpp_rows_nothing_is_added():
    specbench_only = rows({**PLAIN, "chain N=2": (2, 0, 1.2, 1.0)}, engine="")
    c = ctx(specbench_only)
    assert llamacpp.brief(c) == "" and llamacpp.section(c) == ""
    assert llamacpp.fig_acceptance(c.t, c.data) is None and llamacpp.keys(Tables()).empty
    assert machines.section(c.t).count("llamacpp") == 0
