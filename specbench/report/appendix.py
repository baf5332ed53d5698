"""The appendix page (results/tables/appendix.md): the input files this report reads, linked, and
every configuration with its hash, grouped by pair · dataset · rule, then the plain-decoding baselines."""

from __future__ import annotations

import os

from . import analysis, phrases
from .context import Ctx
from .markdown import table

CSVS = (  # one string, split on spaces
    "summary.csv steps.csv.gz outputs.jsonl.gz acceptance_vector.csv acceptance_matrix.csv"
    " gap_to_optimum.csv costs.csv lossless_check.csv continuation_divergence.csv divergence_margins.csv"
    " bf16_replay_divergence.csv attention.csv attention_threads1.csv environment.json run_times.csv"
).split()


APPENDIX_COLS = [
    ("config_hash", lambda r: r["config_hash"]),
    ("shape", lambda r: r["shape"]),
    ("N", lambda r: int(r["budget"])),
    ("dtype", lambda r: r["dtype"]),
    ("max_new_tokens", lambda r: analysis.fmt(r.get("max_new_tokens"))),
    ("engine", lambda r: r.get("engine", "")),
    ("role", lambda r: r.get("pair_role", "")),
    ("prompts", lambda r: analysis.fmt(r.get("n_prompts"))),
    ("steps", lambda r: analysis.fmt(r.get("n_steps"))),
    ("acceptance_rate", lambda r: phrases.metric(r, "acceptance_rate", 3)),
    ("acceptance_length", lambda r: phrases.metric(r, "acceptance_length")),
    ("tokens_per_step", lambda r: phrases.metric(r, "tokens_per_step")),
    ("cut", lambda r: phrases.pct(r.get("cut"))),
    ("speedup", phrases.speed),
]


def section(ctx: Ctx) -> str:
    t, data = ctx.t, ctx.data
    res = data.results
    have = [f for f in CSVS if os.path.isfile(os.path.join(res, f))]
    out = [
        "**Inputs.** " + ", ".join(f"[{f}](../{f})" for f in have) + ".",  # from results/tables/appendix.md
        f"**Every configuration** ({len(data.summary)} rows of summary.csv), grouped by pair · dataset · rule.",
    ]
    for (pair, ds, mode), g in t.rows.groupby(["pair", "dataset", "mode"], sort=True):
        out.append(f"### {pair} · {ds} · {mode}\n\n" + table(g.to_dict("records"), APPENDIX_COLS))
    base = analysis.baselines(data.summary)
    if not base.empty:
        cols = [
            ("config_hash", lambda r: r["config_hash"]),
            ("pair", lambda r: r["pair"]),
            ("dataset", lambda r: r["dataset"]),
            ("dtype", lambda r: r["dtype"]),
            ("max_new_tokens", lambda r: analysis.fmt(r.get("max_new_tokens"))),
            ("engine", lambda r: r.get("engine", "")),
            ("prompts", lambda r: analysis.fmt(r.get("n_prompts"))),
            ("tokens_per_s", lambda r: analysis.fmt(r.get("tokens_per_s"), 2)),
        ]
        out.append("### Baseline (plain target decoding, tree none)\n\n" + table(base.to_dict("records"), cols))
    return "\n\n".join(out)
