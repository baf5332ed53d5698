"""REPORT.md's Limitations: the limits of the evidence, each computed from the tables: sample
sizes, the length cap, the Sequoia calibration, the machine, what the last default run covered
(`defaultrun`), the verification rules' scope and the speed benchmark's coverage."""

from __future__ import annotations

import pandas as pd

from ..results import speedstats
from . import defaultrun, findings, machines, phrases, tables
from .context import Ctx, Inputs, Tables
from .markdown import bullets, span


def sizes(t: Tables, data: Inputs) -> list[str]:
    """The limits of the sample: sizes, the length cap, calibration, the machine, the default run."""
    rows = t.rows
    out = []
    counted = len(rows) and rows.n_prompts.notna().any()  # NaN: not recorded (results.optional)
    if counted:
        small = rows[rows.n_prompts < tables.MIN_RANKED]
        out.append(
            f"{len(small)} of {len(rows)} configurations ran fewer than {tables.MIN_RANKED} prompts (smallest "
            f"{int(rows.n_prompts.min())}); their orderings are exploratory."
        )
    if len(ans := t.answer) and counted:
        out.append(
            f"{int(ans.claim.map(tables.is_ranked).sum())} of {len(ans)} answer rows (per pair, dataset and shape, "
            f"the fastest budget) carry a ranked claim (≥ {tables.MIN_RANKED} prompts, ≤ {tables.MAX_CUT:.0%} of steps "
            f"cut by max_new_tokens); the largest prompt set is {int(rows.n_prompts.max())}."
        )
    if len(rows):
        caps = ", ".join(str(int(x)) for x in sorted(rows.max_new_tokens.unique()))
        out.append(
            f"Generations stop at max_new_tokens = {caps}; a large tree can finish a prompt in a few steps, "
            f"and {int((rows.cut > tables.MAX_CUT).sum())} configurations lose more than {tables.MAX_CUT:.0%} of their "
            "steps to that cap."
        )
    out.append(findings.calibration_claim(t.calib)["sentence"])
    out += [timing_machines(t, data)]
    out.append(defaultrun.sentence(data.default_run, data.acceptance_check, brief=True))
    if t.live.empty or t.live.measured.isna().all():
        out.append("No live configuration has a matching baseline: every speedup is projected.")
    return out


def timing_machines(t: Tables, data: Inputs) -> str:
    """Which machines the timings come from, computed from the rows: the benchmark's per machine class (its
    pair × dataset keys), and the cost curves' machine; never 'every' or 'only' unless the rows say so."""
    m = t.measured
    parts = []
    if len(m):
        m = m.assign(cls=m.machine.map(machines.machine_class))
        for cls, g in m.groupby("cls", sort=True):
            random = " (random weights)" if speedstats.random_weights(g).all() else ""
            parts.append(f"{cls}{random}: {g.run_id.nunique()} keys")
    where = (
        f"The speed benchmark timed {len(parts)} machine{'s' * (len(parts) != 1)} ({'; '.join(parts)})"
        if parts
        else ("No speed benchmark has run")
    )
    costs = phrases.cost_machine(data.env, data.costs, short=True)
    return (
        f"{where}; the projections read the cost curves of {costs or 'no machine'}, and transfer to other hardware "
        "only through re-measured forward costs."
    )


def outputs_sentence(bench: pd.DataFrame | None, margins: pd.DataFrame | None) -> str:
    """Per dtype, the share of the benchmark's speculative decodes whose tokens equal plain decoding's of the
    same unit and round (speed.csv's ``same_tokens``), and, where recorded (divergence_margins.csv), the
    earliest divergence and the largest top-2 logit margin at one; float32 must be 100% or this says where not."""
    if bench is None or bench.empty or bench.same_tokens.isna().all():  # NaN: not recorded (results.optional)
        return ""
    spec = bench[(bench.budget.astype(int) > 0) & bench.same_tokens.notna()]
    parts = []
    for dtype, g in spec.groupby("dtype", sort=True):
        same = g.same_tokens.astype(str).str.lower().eq("true")
        text = f"{dtype} {int(same.sum())} of {len(g)} ({same.mean():.1%})"
        m = margins[margins.dtype == dtype] if margins is not None else None
        if m is not None and len(m):
            text += f"; earliest divergence at token {int(m.position.min())}, largest top-2 margin {m.top2_margin.max():.3f}"
        if dtype == "float32" and not same.all():
            text += f" (not 100%: {', '.join(sorted(set(g[~same].pair.astype(str))))})"
        parts.append(text)
    return (
        "Outputs of the speed benchmark's speculative decodes token-identical to plain decoding of the same prompt: "
        + "; ".join(parts)
        + " (bf16 and quantized kernels round differently per batch shape; lossless is exact in float32)."
    )


def limits(t: Tables, data: Inputs) -> list[str]:
    """The limits of the evidence: the sample's (``sizes``), then which pairs, trees and temperatures
    the rules' conclusions and the live checks cover."""
    out = sizes(t, data)
    out += [s for s in [outputs_sentence(data.bench, data.margins)] if s]
    comp = t.comparisons
    if comp is not None and len(comp):
        out.append("The verification rules' conclusions are narrow: their finding above ends with what they rest on.")
    bench = speedstats.answer_first(t.measured)
    live, what = (bench, "The interleaved benchmark timed") if len(bench) else (t.live, "Live speed was measured for")
    if len(live):
        b1 = live[live.batch_size.astype(float) == 1]
        pairs = sorted(set(b1.pair.astype(str)))
        cells = len(b1[["pair", "dataset"]].drop_duplicates())
        out.append(
            f"{what} {len(pairs)} of {t.rows.pair.nunique()} pairs at batch 1 ({cells} pair × dataset, on "
            f"{', '.join(sorted(set(b1.dataset.astype(str))))}), with {span(b1.n_prompts, '.0f')} prompts of "
            f"{span(b1.max_new_tokens, '.0f')} new tokens per run, on "
            f"{'; '.join(sorted(set(b1.machine.map(machines.machine_class) if 'machine' in b1 else b1.device)))}; "
            "every other speedup is projected."
        )
    return out


def section(ctx: Ctx) -> str:
    """The limits of the evidence (the bookkeeping is on the setup page)."""
    return bullets(limits(ctx.t, ctx.data), "none recorded")
