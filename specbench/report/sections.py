"""REPORT.md and its pages from one template (templates/report.md.j2: the skeleton, the section
order and the fixed prose), filled by the sections' computed markdown (`RENDER`: name -> render(ctx)).

Each section's render is the ``section(ctx)`` of the module named for it (``answer``, ``speed``,
``batch``, ``hardware_page``, ``tree_attention.section``, ...: docs/architecture.md maps each
module to its section); it reads the tables (`tables.compute`), the phrases and the made figures by
name, and a section with nothing to show says why in one line.  Imports jinja2, those section
modules and the numbers the template states (evidence rules, the comparisons' draws, the draft cost
rule).
"""

from __future__ import annotations

from dataclasses import replace

import jinja2

from . import (
    acceptance,
    analysis,
    answer,
    appendix,
    batch,
    bookkeeping,
    compare,
    findings,
    fixed_page,
    gap,
    hardware_page,
    limitations,
    llamaagree,
    llamacpp,
    lossless,
    mainpage,
    pairs,
    phrases,
    setup_page,
    speed,
    speedup,
    tables,
    tldr,
    verification,
)
from .context import Ctx
from .hardware import MARGINAL_AT
from .markdown import bullets
from .tree_attention import section as attention

RENDER = {  # a section's computed markdown, by the name the template (templates/report.md.j2) gives it
    "tldr": tldr.section,
    "answer": answer.section,
    "findings": mainpage.section,
    "pairs": pairs.section,
    "verification": verification.section,
    "comparisons": fixed_page.section,
    "speed": speed.section,
    "llamacpp": llamacpp.section,
    "llamacpp_acceptance": llamaagree.section,
    "batch": batch.section,
    "hardware": hardware_page.section,
    "acceptance": acceptance.section,
    "gap": gap.section,
    "losslessness": lossless.section,
    "attention": attention.section,
    "setup": setup_page.section,
    "limitations": limitations.section,
    "bookkeeping": bookkeeping.section,
    "appendix": appendix.section,
}
TEMPLATE = jinja2.Environment(
    loader=jinja2.PackageLoader("specbench.report"),
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
).get_template("report.md.j2")


def render(ctx: Ctx, link_for, tables_rel: str) -> tuple[str, dict[str, str]]:
    """(REPORT.md, {page: its markdown}) from the template: ``link_for(page)`` links a figure from
    where the text lands (``page`` None: REPORT.md); ``tables_rel`` is the tables folder seen from
    REPORT.md."""

    def body(name: str, page: str | None = None) -> str:
        return RENDER[name](replace(ctx, link=link_for(page)))

    t = ctx.t

    def claims(section: str, empty: str) -> str:
        return bullets(findings.sentences(t.findings, section), empty)

    module = TEMPLATE.make_module(
        dict(
            body=body,
            claims=claims,
            t=t,
            no_steps=ctx.data.steps is None,
            machine=phrases.cost_machine(ctx.data.env, ctx.data.costs),
            marginal_at=MARGINAL_AT,
            roles=analysis.role_names(t.df),
            n_paired=compare.N_PAIRED,
            alpha=compare.ALPHA,
            tables_rel=tables_rel,
            index=mainpage.index(tables_rel),
            draft_cost_rule=" ".join(
                x for x in (speedup.DRAFT_COST_RULE, speedup.one_token(ctx.data.costs, t.speed)) if x
            ),
            min_ranked=tables.MIN_RANKED,
            min_ci=tables.MIN_CI,
            max_cut=f"{tables.MAX_CUT:.0%}",
        )
    )
    return str(module), {p: str(getattr(module, p)()) for p in vars(module)["pages"]}
