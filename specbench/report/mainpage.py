"""REPORT.md's main page beyond the TL;DR: the findings (at most five, each a computed sentence with
its numbers and its figure), the index of the linked pages, and the word count the main page is
held to (`words`, `MAX_WORDS`); its Limitations are `limitations`.

Every sentence here is computed from the tables (`tables.compute`, the findings table); the
pages' long sections (speed table, batch size, hardware bullets, method) live on linked pages.
"""

from __future__ import annotations

import re

import pandas as pd

from . import findings, machines
from .acceptance import NAME, tradeoff_sentence
from .context import Ctx, Tables
from .markdown import bullets, fig_links

MAX_WORDS = 2500  # REPORT.md by `wc -w`, image-only and link-only lines excluded
MAX_TLDR = 600  # its TL;DR, counted the same way


def words(text: str) -> int:
    """Words of a markdown text as ``wc -w`` counts them (every whitespace-separated token, table pipes
    included), with image-only lines (``![...](...)``) and link-only lines left out."""
    link_only = re.compile(r"^\s*(?:[-*]\s*)?\[[^\]]*\]\([^)]*\)[.,;]?\s*$")
    return sum(
        len(line.split())
        for line in text.splitlines()
        if not line.lstrip().startswith("![") and not link_only.match(line)
    )


def _finding(title: str, lines: list[str], figs: list[str]) -> str:
    return "\n\n".join([f"### {title}", *[x for x in lines if x], *figs])


def acceptance(ctx: Ctx) -> str | None:
    t = ctx.t
    line = tradeoff_sentence(t.rows, t.sums, t.pair)
    return line and _finding("Acceptance falls with the budget; accepted length grows", [line],
                             fig_links(ctx, NAME))  # fmt: skip


def speed(ctx: Ctx) -> str | None:
    live = ctx.t.live
    both = live[live.projected.notna()] if len(live) else live.iloc[:0]
    if both.empty:
        return None
    err = both.error.abs()
    inside = int(((both.measured >= both.projected_lo) & (both.measured <= both.projected_hi)).sum())
    worst = both.loc[err.idxmax()]
    sizes = ", ".join(
        f"{int(n)} × {int(k)}: {g.error.abs().median():.0%} median, {g.error.abs().max():.0%} worst ({len(g)})"
        for (n, k), g in both.groupby(["n_prompts", "max_new_tokens"], sort=True)
    )
    line = (
        f"Over the {len(both)} live batch-1 configurations the cost model's projection is off by {err.median():.0%} "
        f"(median absolute) and {err.max():.0%} at worst ({worst['pair']} on {worst['dataset']}, {worst['shape']} "
        f"N={int(worst['budget'])}: projected {worst['projected']:.2f}× [{worst['projected_lo']:.2f}, "
        f"{worst['projected_hi']:.2f}], measured {worst['measured']:.2f}×); {inside} of {len(both)} measured "
        f"speedups fall inside the projection's 95% interval. Per run size (prompts × tokens): {sizes}. "
        "Each run, with its measured and modelled seconds per step: speed.md."
    )
    return _finding("The cost model against live timing", [line],
                    fig_links(ctx, "speed_measured_vs_projected.png", "projected_speedup.png"))  # fmt: skip


def hardware_line(t: Tables) -> str | None:
    """Per measured machine and dtype: at its own cost curve, every forward priced at its measured width
    (``hardware.per_width``), in how many pair × dataset the modelled best is a tree (above 1×) and its range,
    beside what the secant model (the phase diagram's) claims there; a win that the benchmark on the same
    machine refutes (``machines.classes``: no tree resolved faster) is not counted."""
    pw = t.per_width
    if pw is None or pw.empty:
        return None
    refuted = machines.refuted(t.measured)
    parts = []
    for (m, dtype), g in pw.assign(_m=pw.machine.map(machines.machine_class)).groupby(["_m", "dtype"], sort=True):
        won = g.best > 1
        no = won & pd.Series([(m, dtype, p, d) in refuted for p, d in zip(g.pair, g.dataset)], index=g.index)
        random = " (random weights)" if (g.weights == "random").all() else ""
        refute = f"; {int(no.sum())} modelled wins the benchmark there refutes not counted" if no.any() else ""
        parts.append(
            f"on {m} ({dtype}){random} a tree beats plain decoding in {int((won & ~no).sum())} of {len(g)} pair × "
            f"dataset (best {g.best.min():.2f}–{g.best.max():.2f}×; the secant model: {int((g.secant > 1).sum())} "
            f"of {len(g)}{refute})"
        )
    return (
        "Charging each replayed configuration's own steps at each machine's measured forward prices per width "
        "(interpolated between measured widths, never one slope), "
        + "; ".join(parts)
        + ". No interval: each machine is one measured cost curve. Every pair, dataset and machine: hardware.md."
    )


def hardware_finding(ctx: Ctx) -> str | None:
    line = hardware_line(ctx.t)
    return line and _finding("Which tree on which hardware (modelled)", [line], fig_links(ctx, "phase_diagram.png"))


def rules(ctx: Ctx) -> str | None:
    lines = findings.sentences(ctx.t.findings, "comparisons")
    if not lines:
        return None
    return _finding("Verification rules: what clears zero, and what does not", lines,
                              fig_links(ctx, "mode_gains.png"))  # fmt: skip


def section(ctx: Ctx) -> str:
    """The findings, numbered, each with its figure."""
    found = [f for f in (acceptance(ctx), speed(ctx), hardware_finding(ctx), rules(ctx)) if f]
    if not found:
        return "_No replayed, live or compared configuration: no finding._"
    return "\n\n".join(re.sub(r"^### ", f"### {i}. ", f) for i, f in enumerate(found, 1))


PAGES = {  # the linked pages, in the order the main page lists them, with what each holds
    "answer": "the fastest budget per shape, per pair × dataset, measured or projected",
    "speed": "every live run's measured speedup beside its projection, and the batch-size schedule",
    "hardware": "the modelled best tree per pair, dataset and measured machine (phase diagram)",
    "verification": "each verification rule against its token-level baseline, paired",
    "comparisons": "the comparisons fixed in advance, Holm-adjusted",
    "pairs": "the pairs side by side at fixed shapes and budgets",
    "analysis": "identities, per-position acceptance, the gap to the Sequoia DP, losslessness, tree attention",
    "method": "trees, drafters, verification, the speed model, metric definitions, evidence rules, references",
    "setup": "per pair: models, dtype, prompts; the study's size floors and run time",
    "appendix": "every configuration with its hash, and the input files",
}


def index(tables_rel: str) -> str:
    return bullets([f"[{p}.md]({tables_rel}/{p}.md): {what}." for p, what in PAGES.items()], "")
