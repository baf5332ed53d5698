"""REPORT.md and its pages from one template (templates/report.md.j2: the skeleton, the section
order and the fixed prose), filled by the sections' computed markdown (`RENDER`: name -> render(ctx)).

A section's render reads the tables (`tables.compute`), the phrases (`phrases`) and the made
figures by name; a section with nothing to show says why in one line.  Imports jinja2, the
section modules (tldr, fixed_page, figures_accept, lossless, attention_report, setup, ...) and
the markdown helpers.
"""

from __future__ import annotations

import jinja2
import pandas as pd

from . import (
    analysis,
    attention_report,
    compare,
    findings,
    fixed,
    fixed_page,
    lossless,
    mainpage,
    matrix,
    measured,
    optimum,
    phrases,
    setup,
    speedup,
    tables,
    tldr,
)
from .hardware import MARGINAL_AT
from .lossless import lossless_section, margin_note  # noqa: F401  (the losslessness API)
from .markdown import bullets, md_table, table
from .speedup import served_sentences


def figs(ctx, *names) -> list[str]:
    """The links to those of ``names`` that were made."""
    return [ctx["link"](n) for n in names if n in ctx["figs"]]


ANSWER_COLS = [
    ("shape", lambda r: r["shape"] + (f" (= {r['same_as']})" if isinstance(r.get("same_as"), str) else "")),
    ("best N (tried)", lambda r: analysis.built_label(r) or f"{int(r['budget'])} ({r['budgets']})"),
    ("bracketed", lambda r: r["bracket"]),
    ("speedup", phrases.speed),
    ("tokens/step [95% CI]", lambda r: phrases.metric(r, "tokens_per_step")),
    ("acceptance rate", lambda r: phrases.metric(r, "acceptance_rate", 3)),
    ("acceptance length", lambda r: phrases.metric(r, "acceptance_length")),
    ("prompts / tokens", lambda r: f"{analysis.fmt(r.get('n_prompts'))} / {analysis.fmt(r.get('new_tokens'))}"),
    ("cut by cap", lambda r: phrases.pct(r.get("cut"))),
    ("claim", phrases.claim_word),
]


def machine(env: dict | None) -> str:
    """'AMD EPYC, 2 cores, 2 torch threads, cpu' from results/environment.json."""
    if not env:
        return "machine not recorded"
    parts = [env.get("gpu") or env.get("cpu"), f"{env.get('cores')} cores", f"{env.get('torch_threads')} torch threads"]
    return ", ".join(str(p) for p in parts if p)


def answer(ctx) -> str:
    t, out = ctx["t"], []
    order = {p: i for i, p in enumerate(phrases.widest_first(t["answer"]))}  # the main pair's tables first
    for _key, g in sorted(analysis.groups(t["answer"]), key=lambda kg: (order[kg[1].pair.iloc[0]], -len(kg[1]), kg[0])):
        out.append(f"**{phrases.where(g.iloc[0].to_dict())}**\n\n" + table(g.to_dict("records"), ANSWER_COLS))
    return "\n\n".join(out + figs(ctx, "gain_vs_chain.png", "projected_speedup.png"))


def cross_table(g: pd.DataFrame) -> str:
    """(shape, N) x pairs: tokens/step · acceptance rate on the prompts all the row's pairs ran."""
    rows_ = sorted(
        {(r.cross_shape, int(r.budget), int(r.n_shared)) for r in g.itertuples()}, key=lambda c: (c[1], c[0])
    )
    cell = {
        (r.pair, r.cross_shape, int(r.budget)): f"{analysis.fmt(r.tps_shared, 2)} · {analysis.fmt(r.rate_shared, 2)}"
        + ("" if r.cross_shape.split("(")[0] == r.tree else f" ({r.tree})")
        for r in g.itertuples()
    }
    pairs = list(g.groupby("pair").tps_shared.max().sort_values(ascending=False, kind="mergesort").index)
    rows = [[f"{s} N={b}", str(n)] + [cell.get((p, s, b), "–") for p in pairs] for s, b, n in rows_]
    rows.append(["its own prompts", ""] + [analysis.fmt(g[g.pair == p].n_prompts.max()) for p in pairs])
    return md_table(rows, ["shape", "shared prompts"] + pairs)


def cross(ctx) -> str:
    c, out = ctx["t"]["cross"], []
    for (ds, dt, mnt, tgt), g in analysis.groups(c, ["dataset", "dtype", "max_new_tokens", "target"]):
        out.append(f"**{ds} ({dt}, {int(mnt)} new tokens), target {tgt}**\n\n" + cross_table(g))
    return "\n\n".join(out + matrix.render(c) + figs(ctx, "accept_length_hist.png"))


MODE_COLS = [
    ("rule", lambda r: r["mode"] + ("" if r["lossless_b"] else " (lossy)")),
    ("baseline", lambda r: r["baseline"]),
    ("shape", lambda r: r["shape"]),
    ("N", lambda r: int(r["budget"])),
    ("prompts", lambda r: int(r["n_shared"])),
    ("tokens/step", lambda r: analysis.fmt(r["paired"].a_value, 2)),
    ("baseline tokens/step", lambda r: analysis.fmt(r["paired"].b_value, 2)),
    ("Δ [95% paired CI]", phrases.gain),
    ("first_token_tv", lambda r: analysis.fmt(r.get("first_token_tv"))),
]


def modes(ctx) -> str:
    g, out = ctx["t"]["modes"], []
    for key, grp in analysis.groups(g, analysis.GROUP + ["temperature"]):
        grp = grp.sort_values(["lossless_b", "tree", "budget", "mode"], ascending=[False, True, True, True])
        out.append(
            f"**{phrases.where(grp.iloc[0].to_dict())}, T={key[-1]:g}**\n\n" + table(grp.to_dict("records"), MODE_COLS)
        )
    return "\n\n".join(out + figs(ctx, "mode_gains.png", "lossy_tradeoff.png"))


SCHEDULE_COLS = [
    ("batch B", lambda r: int(r["B"])),
    ("plain tokens/s", lambda r: analysis.fmt(r["plain"], 2)),
    ("measured speedup by N", lambda r: r["by_n"]),
    ("fastest", lambda r: r["best"]),
]


def batch(ctx) -> str:
    """The interleaved benchmark's batch-size schedule (``measured.schedule_section``), the single runs'
    (results.schedule.schedule, labelled), then the batched continuations' divergence."""
    sched, out = ctx["t"]["schedule"], measured.schedule_section(ctx["t"])
    if not out:
        out.append(
            "_The interleaved benchmark has no schedule yet (`python -m specbench.study.speed "
            "+speed_candidates=schedule batch_size=B` at two or more B)._"
        )
    if sched.empty:
        out.append("_No live setting ran at two or more batch sizes, so there is no batch-size schedule._")
    for k, g in analysis.groups(sched, ["pair", "dataset", "dtype", "max_new_tokens", "n_prompts"]):
        rows = []
        for b, gb in g.groupby("batch_size", sort=True):
            top = gb.sort_values(["measured", "budget"], ascending=[False, True]).iloc[0]
            rows.append(
                dict(
                    B=b,
                    plain=top["baseline_tokens_per_s"],
                    by_n=", ".join(f"{r['shape']} {int(r['budget'])}: {r['measured']:.2f}×" for _, r in gb.iterrows()),
                    best=f"{top['shape']} N={int(top['budget'])} ({top['measured']:.2f}×)"
                    if top["measured"] > 1
                    else f"plain decoding (best speculative {top['measured']:.2f}×)",
                )
            )
        out.append(
            f"**{k[0]} on {k[1]} ({k[2]}, {int(k[4])} prompts × {int(k[3])} new tokens, live, single runs)**: "
            "measured speedup over plain decoding at the same B on the same prompts, one run per cell at its own "
            "time, without an interval: where speculation stops paying is not read from it.\n\n"
            + table(rows, SCHEDULE_COLS)
        )
    out += figs(ctx, "batch_schedule.png")
    out.append(
        "**Batched target continuations** (replay's input). " + setup.divergence_sentence(ctx["data"].get("divergence"))
    )
    out.append(setup.bf16_replay_sentence(ctx["data"].get("bf16_replay")))
    return "\n\n".join(out)


def hardware(ctx) -> str:
    found = [bullets(findings.sentences(ctx["t"]["findings"], s), "") for s in ("machines", "phase")]
    return "\n\n".join(found + figs(ctx, "phase_diagram.png"))


def _pair_s(measured, model) -> str:
    """'measured / model' seconds per step."""
    return f"{analysis.fmt(measured, 3)} / {analysis.fmt(model, 3)}"


LIVE_COLS = [
    ("pair", lambda r: r["pair"]),
    ("dataset", lambda r: r["dataset"]),
    ("rule", lambda r: r["mode"]),
    ("shape", lambda r: r["shape"]),
    ("N", lambda r: int(r["budget"])),
    ("batch B", lambda r: analysis.fmt(r.get("batch_size"))),  # the baseline ran at the same B (speedup.BASELINE_MATCH)
    ("prompts × tokens", lambda r: f"{int(r['n_prompts'])} × {int(r['max_new_tokens'])}"),
    ("tokens/step", lambda r: analysis.fmt(r["tokens_per_step"], 2)),
    ("measured ×", lambda r: analysis.fmt(r["measured"], 2)),
    (
        "projected × [95% CI]",
        lambda r: (
            f"{analysis.fmt(r['projected'], 2)} "
            f"[{analysis.fmt(r['projected_lo'], 2)}, {analysis.fmt(r['projected_hi'], 2)}]"
        ),
    ),
    ("error", lambda r: "–" if r["error"] != r["error"] else f"{r['error']:+.0%}"),
    ("draft s/step measured / model", lambda r: _pair_s(r["draft_s_step"], r["draft_s_step_model"])),
    ("verify s/step measured / model", lambda r: _pair_s(r["verify_s_step"], r["verify_s_step_model"])),
]


def speed(ctx) -> str:
    live = ctx["t"]["live"]
    lines = served_sentences(ctx["data"].get("served"), ctx["t"]["rows"])
    served = [bullets(lines, "")] if lines else []
    if live.empty:
        return "\n\n".join(served)
    found = bullets(
        findings.sentences(ctx["t"]["findings"], "speed") + measured.bench_detail(ctx["t"], ctx["data"].get("costs")), ""
    )
    checked = live[live.projected.notna()] if "projected" in live else live  # batch B > 1: under Batch size
    note = f"The {len(live) - len(checked)} live runs without a projection (batch B > 1) are under *Batch size*."
    if checked.empty:
        return "\n\n".join(["_No live run has a projection (results/steps.csv.gz or costs missing)._", *served])
    runs = measured.section(ctx["t"], every=True)
    bench = ["Every run of the interleaved benchmark at batch 1, each on the machine named:", *runs] if runs else []
    return "\n\n".join(
        [*bench, table(checked.to_dict("records"), LIVE_COLS), *[note][: len(checked) < len(live)], found, *served]
        + figs(ctx, "speed_measured_vs_projected.png")
    )


def acceptance(ctx) -> str:
    return "\n\n".join(figs(ctx, "alpha_by_depth.png", "acceptance_vector.png"))


def gap(ctx) -> str:
    rows = ctx["t"]["gap"]
    if rows.empty:
        return "_No results/gap_to_optimum.csv rows (greedy static shapes with a calibrated acceptance vector)._"
    return "\n\n".join(
        [
            bullets(findings.sentences(ctx["t"]["findings"], "gap"), ""),
            "Each cell: measured tokens_per_step (share of the DP "
            "prediction for the best tree; DP prediction for the shape itself).",
            md_table(*optimum.pivot(rows)),
        ]
        + figs(ctx, "gap_to_optimum.png")
    )


def losslessness(ctx) -> str:
    t, d = ctx["t"], ctx["data"]
    return lossless.lossless_section(
        t["lossless"],
        d["lossless_check"],
        bool(d["outputs"]),
        not analysis.baselines(d["summary"]).empty,
        d["margins"],
        d["lossless_control"],
        set(d["summary"].pair_id.astype(str)) if "pair_id" in d["summary"] else None,
    )


def attention(ctx) -> str:
    return attention_report.section(
        ctx["data"]["attention"],
        ctx["data"].get("attention_recheck"),
        {n: ctx["link"](n) for n in attention_report.FIGURES if n in ctx["figs"]},
    )


def limitations(ctx) -> str:
    """The limits of the evidence (the bookkeeping is on the setup page)."""
    return bullets(mainpage.limits(ctx["t"], ctx["data"], setup.limitations(ctx["t"], ctx["data"])), "none recorded")


RENDER = {  # a section's computed markdown, by the name the template (templates/report.md.j2) gives it
    "tldr": tldr.section,
    "answer": answer,
    "findings": mainpage.section,
    "pairs": cross,
    "verification": modes,
    "comparisons": fixed_page.section,
    "speed": speed,
    "batch": batch,
    "hardware": hardware,
    "acceptance": acceptance,
    "gap": gap,
    "losslessness": losslessness,
    "attention": attention,
    "setup": lambda c: setup.setup(c["t"], c["data"]),
    "limitations": limitations,
    "bookkeeping": lambda c: bullets(setup.bookkeeping(c["t"], c["data"]), "none recorded"),
    "appendix": lambda c: setup.appendix(c["t"], c["data"]),
}
TEMPLATE = jinja2.Environment(
    loader=jinja2.PackageLoader("specbench.report"),
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
).get_template("report.md.j2")


def render(ctx, link_for, tables_rel: str) -> tuple[str, dict[str, str]]:
    """(REPORT.md, {page: its markdown}) from the template: ``link_for(page)`` links a figure from
    where the text lands (``page`` None: REPORT.md); ``tables_rel`` is the tables folder seen from
    REPORT.md."""

    def body(name: str, page: str | None = None) -> str:
        return RENDER[name]({**ctx, "link": link_for(page)})

    t = ctx["t"]

    def claims(section: str, empty: str) -> str:
        return bullets(findings.sentences(t["findings"], section), empty)

    module = TEMPLATE.make_module(
        dict(
            body=body,
            claims=claims,
            t=t,
            no_steps=ctx["data"]["steps"] is None,
            machine=machine(ctx["data"].get("env")),
            marginal_at=MARGINAL_AT,
            roles=analysis.role_names(t["df"]),
            n_paired=compare.N_PAIRED,
            alpha=fixed.ALPHA,
            tables_rel=tables_rel,
            index=mainpage.index(tables_rel),
            draft_cost_rule=" ".join(
                x for x in (speedup.DRAFT_COST_RULE, speedup.one_token(ctx["data"]["costs"], t.get("speed"))) if x
            ),
            min_ranked=tables.MIN_RANKED,
            min_ci=tables.MIN_CI,
            max_cut=f"{tables.MAX_CUT:.0%}",
        )
    )
    return str(module), {p: str(getattr(module, p)()) for p in vars(module)["pages"]}
