"""specbench's projection for llama.cpp's candidates, beside their measured speedup (#84 item 6; torch-free).

A llama.cpp candidate ``draft n_max=N p_min=P`` (``study.tools.speed_llamacpp``) drafts a chain of at most N
tokens, stopping before the first token whose share of the draft's top-10 softmax is below P.  specbench's
acceptance of that very rule is its replay on the same pair and dataset (results/acceptance_llamacpp.csv,
``engine=specbench``: ``replay.pmin_steps``; per prompt its tokens T, accepted A, drafting
steps S, drafted D and the draft's samples F, the last two known as a bracket: exact up to a chain's first
rejected token, at most N past it).  A step of llama.cpp's server (``tools/server/server-context.cpp`` and
``common/speculative.cpp`` of the vendored source) costs: the draft's drafting loop, one one-token forward per
token it samples (F: ``replay.draft_samples``); the target's forward of the d + 1 tokens; and the draft's forward
of that same batch (``common_speculative_process`` after every target batch: the server re-evaluates the
draft's tokens, "TAG_SPEC_AVOID_DRAFT_REEVAL").  A step without a draft costs a target and a draft forward of
one token.  Priced on **llama.cpp's** cost curve (costs.csv rows ``engine=llamacpp`` of the benchmark's
machine, read at the study's context by ``costcurve.AT_CONTEXT``'s rule for that engine), the prompt's forward
(its first token) left out of both sides:

    projected speedup = (T − n) t_t(1) / (F t_d(1) + S (t_d + t_t)(D/S + 1) + (T − A − S − n) (t_d + t_t)(1))

over the n prompts' sums, a step's forwards priced at the steps' mean drafted length (the curve is read
between its measured sizes).  ``projected_lo``/``projected_hi``: at the most and at the least the chains can
have drafted (equal at P = 0, where every chain is N long); ``ci_lo``/``ci_hi``: the 95% paired percentile
interval over prompts (``metrics.paired_bootstrap``, none under ``llamaaccept.MIN_PROMPTS``) of the two ends.
``projected``: their mean, what the pick ranks.  ``compare`` sets each beside the measured speedup of the same
candidate (``speedstats.answers`` of the llama.cpp rows), error = projected ÷ measured − 1, with the prompts and
tokens of both (the acceptance run's and the benchmark's: not the same prompts or length unless both ran them).  Left out: the
draft's forward of the prompt (a speculative server pays it, plain decoding does not).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from . import costcurve, llamaaccept
from . import speedstats as ss
from .columns import tree_params
from .metrics import paired_bootstrap

ENGINE, DTYPE = "llamacpp", "gguf"
ROLES = ("draft", "target")
RULE = replace(costcurve.AT_CONTEXT, name="llamacpp_at_context", dtype=DTYPE, engine=ENGINE)


def chain_row(summary: pd.DataFrame, pair: str, dataset: str, n_max: int) -> pd.Series | None:
    """specbench's summary row of the greedy static chain of ``n_max`` on the pair and dataset (the row of the
    longest decodes, then of the most prompts), or None where the study has none."""
    s = summary
    rows = s[(s.pair == pair) & (s.dataset == dataset) & (s.tree == "chain") & (s.budget.astype(int) == n_max)]
    rows = rows[(rows.verify == "greedy") & (rows.temperature.astype(float) == 0)]
    if rows.empty:
        return None
    return rows.sort_values(["max_new_tokens", "n_prompts"], ascending=False, kind="mergesort").iloc[0]


def replay_rows(accept: pd.DataFrame | None, pair: str, dataset: str, machine_id, n_max: int, p_min: float):
    """specbench's replay rows (one per prompt) of the setting in the newest acceptance run of the pair and
    dataset that holds it, the benchmark's machine's first; empty where none."""
    if accept is None or accept.empty:
        return pd.DataFrame()
    a = llamaaccept.settled(accept)  # draft-simple's rows only (an n-gram run of the pair has its own)
    a = a[(a.engine == llamaaccept.SPECBENCH) & (a.pair == pair) & (a.dataset == dataset)]
    a = a[(a.spec_type == llamaaccept.DRAFT_SIMPLE) & (a.drafter == llamaaccept.LLAMACPP)]
    a = a[(a.n_max.astype(float) == n_max) & np.isclose(a.p_min.astype(float), p_min)]
    if a.empty:
        return a
    a = a.assign(_here=a.machine_id.astype(str) == str(machine_id))
    run = a.sort_values(["_here", "run_id"], ascending=False, kind="mergesort").run_id.iloc[0]
    return a[a.run_id == run].drop(columns="_here")


def _speedup(draft: costcurve.Curve, target: costcurve.Curve):
    """The module docstring's projected speedup over prompts (arrays T, A, S, D, F on the last axis)."""
    td, tt = draft.seconds(1), target.seconds(1)

    def stat(tokens, accepted, steps, drafted, samples, axis=-1):
        t, a, s, d, f = (np.sum(x, axis=axis) for x in (tokens, accepted, steps, drafted, samples))
        n = np.shape(tokens)[axis]  # prompts: each one's first token is its prompt's forward's
        with np.errstate(invalid="ignore", divide="ignore"):
            k = np.where(s > 0, d / np.maximum(s, 1) + 1, 1)
            spec = f * td + s * (draft.at(k) + target.at(k)) + (t - a - s - n) * (td + tt)
            return (t - n) * tt / spec

    return stat


def projected(rows: pd.DataFrame, draft: costcurve.Curve, target: costcurve.Curve) -> dict:
    """``projected_lo``/``projected_hi`` (the drafted bracket's two ends), ``ci_lo``/``ci_hi``, ``projected``
    (module docstring); NaN where rows are empty."""
    if rows.empty:
        return dict.fromkeys(("projected", "projected_lo", "projected_hi", "ci_lo", "ci_hi"), float("nan"))
    arrays = [np.asarray(rows[c], float) for c in ("tokens", "accepted", "drafts")]
    stat = _speedup(draft, target)
    ends = [[np.asarray(rows[c + end], float) for c in ("drafted", "draft_samples")] for end in ("_max", "")]
    lo, hi = (float(stat(*arrays, *e)) for e in ends)
    ci = [float("nan")] * 2
    if len(rows) >= llamaaccept.MIN_PROMPTS:
        draws = [paired_bootstrap((*arrays, *e), stat, llamaaccept.N_BOOT).bootstrap_distribution for e in ends]
        ci = [float(np.percentile(draws[0], 2.5)), float(np.percentile(draws[1], 97.5))]
    return {"projected": (lo + hi) / 2, "projected_lo": lo, "projected_hi": hi, "ci_lo": ci[0], "ci_hi": ci[1]}


def compare(speed: pd.DataFrame, accept: pd.DataFrame | None, costs: pd.DataFrame) -> pd.DataFrame:
    """Per llama.cpp benchmark candidate (each key's newest run): measured speedup with its interval, specbench's
    projection (NaN where no curve or replay of the setting) and the error; empty without llama.cpp rows."""
    rows = ss.with_engine(speed) if speed is not None and len(speed) else pd.DataFrame()
    if rows.empty or not (rows.engine == ENGINE).any():
        return pd.DataFrame()
    measured = ss.answers(rows[rows.engine == ENGINE])
    mine_all = costcurve.of_engine(costs, ENGINE) if costs is not None else pd.DataFrame()
    out = []
    for r in measured.itertuples():
        params = tree_params(r.tree_params)
        n_max, p_min = int(params.get("n_max", 0)), float(params.get("p_min", 0.0))
        mine = mine_all[mine_all.machine_id.astype(str) == str(r.machine_id)] if len(mine_all) else mine_all
        draft, target = (costcurve.curve(mine, RULE, r.pair, role) if len(mine) else None for role in ROLES)
        replay = replay_rows(accept, r.pair, r.dataset, r.machine_id, n_max, p_min) if n_max else pd.DataFrame()
        priced = draft is not None and target is not None
        proj = projected(replay if priced else pd.DataFrame(), draft, target)  # type: ignore[arg-type]
        out.append({"pair": r.pair, "dataset": r.dataset, "machine": r.machine, "candidate": r.candidate,
                    "n_max": n_max, "p_min": p_min, "measured": r.speedup, "lo": r.lo, "hi": r.hi,
                    "prompts": int(r.n_prompts), "tokens": int(r.max_new_tokens), "replay_prompts": len(replay),
                    "replay_tokens": int(replay.tokens.max()) if len(replay) else 0,
                    **proj, "error": proj["projected"] / r.speedup - 1})  # fmt: skip
    return pd.DataFrame(out)
