"""The setup page (results/tables/setup.md): per pair and dtype the models, engines, weight quantisation
and prompts; the machine and libraries; the run settings; the shapes' labels; the run times
(`runtimes`); the commands.  Its *Study bookkeeping* is `bookkeeping`."""

from __future__ import annotations

import json

from ..results import costcurve
from . import defaultrun
from .context import Ctx
from .markdown import md_table, table
from .runtimes import run_times

DEFAULT_COMMANDS = [
    "bash run_all.sh",
    "python -m specbench.run -m sweep=reference",
    "python -m specbench.attention_bench",
    "python -m specbench.collect",
    "python -m specbench.report",
]
ENV_PER_PAIR = ("commands", "draft", "target", "dtype")  # per pair in the pairs table, not one value for all


PAIR_COLS = [
    ("pair", lambda r: r["pair"]),
    ("draft", lambda r: r["draft"]),
    ("target", lambda r: r["target"]),
    ("dtype", lambda r: r["dtype"]),
    ("engine", lambda r: r["engines"]),
    ("weight quantisation (GGUF source)", lambda r: r["quant"]),
    ("prompts per dataset", lambda r: r["prompts"]),
    ("configurations", lambda r: r["configs"]),
]


def section(ctx: Ctx) -> str:
    t, data = ctx.t, ctx.data
    out = [
        "**Pairs.** One row per pair and dtype (a pair run in two dtypes is two model conversions):\n\n"
        + table(t.setup.to_dict("records"), PAIR_COLS)
    ]
    if (t.setup.quant == "not recorded").any():
        out.append(
            "_The GGUF weight quantisation of the embedded models is not recorded in results/ (summary.csv "
            "has no `draft_quant` / `target_quant` columns), so it is not stated here._"
        )
    env = data.env
    if env:
        items = [(k, v) for k, v in sorted(env.items()) if k not in ENV_PER_PAIR]
        study = costcurve.study_name(data.costs)
        whose = f"; the projections read the cost curves of {study}" if study else ""
        out.append(
            "**Machine and libraries** (results/environment.json: the machine of the last forward-cost run, which "
            f"a default run on another machine rewrites{whose}).\n\n"
            + md_table(
                [[k, v if isinstance(v, str) else json.dumps(v, sort_keys=True)] for k, v in items], ["item", "value"]
            )
        )
    else:
        out.append("_results/environment.json is absent: hardware and library versions were not recorded._")
    s = data.summary
    common = [c for c in ("max_new_tokens", "device", "seed") if c in s]
    if common:
        out.append(
            "**Run settings.**\n\n"
            + md_table(
                [[c, ", ".join(map(str, sorted(s[c].astype(str).unique())))] for c in common], ["setting", "values"]
            )
        )
    shapes = t.df.drop_duplicates("shape").sort_values("shape")[["shape", "tree", "tree_params"]]
    if len(shapes):
        out.append(
            "**Shapes.**\n\n"
            + md_table(
                [[r.shape, r.tree, _short(r.tree_params)] for r in shapes.itertuples()],
                ["label", "tree", "tree_params"],
            )
        )
    out.append(run_times(data.run_times, data.costs))
    out.append(defaultrun.sentence(data.default_run, data.acceptance_check))
    cmds = (env or {}).get("commands") or DEFAULT_COMMANDS
    out.append("**Commands.**\n\n```\n" + "\n".join(cmds) + "\n```")
    return "\n\n".join(out)


def _short(text, n: int = 90) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"
