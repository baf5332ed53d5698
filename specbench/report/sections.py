"""REPORT.md as a declarative list of sections (`SECTIONS`): (heading, render(ctx) -> markdown).

A section's render reads the tables (`tables.compute`), the phrases (`phrases`) and the made
figures by name; a section with nothing to show says why in one line.  The order (docs/report.md):
TL;DR and the answer tables, acceptance against the budget, analysis, method, setup, limitations,
references, appendix.
"""

from __future__ import annotations

import pandas as pd

from . import (
    analysis,
    attention_report,
    figures_accept,
    fixed,
    fixed_page,
    lossless,
    matrix,
    optimum,
    phrases,
    setup,
    tables,
    text,
    tldr,
)
from .lossless import lossless_section, margin_note  # noqa: F401  (the losslessness API)
from .markdown import bullets, md_table, table
from .sections_common import figs, groups, no_steps
from .speedup import served_sentences

pct = lambda x: "n/a" if x != x or x is None else f"{x:.0%}"  # noqa: E731


ANSWER_COLS = [
    ("shape", lambda r: r["shape"] + (f" (= {r['same_as']})" if isinstance(r.get("same_as"), str) else "")),
    ("best N (tried)", lambda r: f"{int(r['budget'])} ({r['budgets']})"),
    ("bracketed", lambda r: r["bracket"]),
    ("speedup", phrases.speed),
    ("tokens/step [95% CI]", lambda r: phrases.metric(r, "tokens_per_step")),
    ("acceptance rate", lambda r: phrases.metric(r, "acceptance_rate", 3)),
    ("acceptance length", lambda r: phrases.metric(r, "acceptance_length")),
    ("prompts / tokens", lambda r: f"{analysis.fmt(r.get('n_prompts'))} / {analysis.fmt(r.get('new_tokens'))}"),
    ("cut by cap", lambda r: pct(r.get("cut"))),
    ("claim", phrases.claim_word),
]


def machine(env: dict | None) -> str:
    """'AMD EPYC, 2 cores, 2 torch threads, cpu' from results/environment.json."""
    if not env:
        return "machine not recorded"
    parts = [env.get("gpu") or env.get("cpu"), f"{env.get('cores')} cores", f"{env.get('torch_threads')} torch threads"]
    return ", ".join(str(p) for p in parts if p)


def answer(ctx) -> str:
    t = ctx["t"]
    if t["answer"].empty:
        return "_No greedy (T=0) configuration ran, so there is no answer table._"
    out = [
        f"Per pair × dataset (the pair with the most answer rows first, its largest tables first; greedy, T=0; one table per dtype and engine), "
        f"per shape: the budget with the highest "
        f"speedup over plain decoding — measured where a live run has a live baseline, else projected from measured "
        f"forward costs (marked) — among the budgets where at most {tables.MAX_CUT:.0%} of steps were cut by "
        f"max_new_tokens. A row is *ranked* only with ≥ {tables.MIN_RANKED} prompts; no interval is printed from fewer "
        f"than {tables.MIN_CI}. `(= chain N=8)`: identical step records (see *Identities*). `bracketed`: where the "
        "best budget sits among those tried (an edge is no optimum). Projections are for this machine's cost "
        f"curve ({machine(ctx['data'].get('env'))}); another machine's answer: re-measure costs.csv, or read the "
        "phase diagram under *Which tree on which hardware*."
    ]
    order = {p: i for i, p in enumerate(phrases.widest_first(t["answer"]))}  # the main pair's tables first
    for _key, g in sorted(groups(t["answer"]), key=lambda kg: (order[kg[1].pair.iloc[0]], -len(kg[1]), kg[0])):
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
    c = ctx["t"]["cross"]
    if msg := no_steps(ctx, "no cross-pair table on shared prompts is shown"):
        return msg
    if c.empty:
        return (
            "_No shape and budget was run by two pairs on shared prompts (greedy, same dtype), so no cross-pair table._"
        )
    out = [
        "Every pair that ran the same shape and budget (greedy): tokens/step · acceptance rate, each row on "
        "the prompts all its pairs ran (ratio of sums from steps.csv; –: not run); a drafter that fills a shape (merged) is "
        "compared at that shape."
    ]
    for (ds, dt, mnt, tgt), g in groups(c, ["dataset", "dtype", "max_new_tokens", "target"]):
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
    g = ctx["t"]["modes"]
    if msg := no_steps(ctx, "no paired mode comparison is shown"):
        return msg
    if g.empty:
        return (
            "_No configuration ran at T>0 beside its token-level rule on shared prompts, so there is no mode "
            "comparison._"
        )
    out = [
        "Each rule at T>0 against its strongest token-level baseline on the same shape, budget and temperature "
        "(speculative sampling on chains; multi-step speculative sampling, mss, on trees drawn with replacement; "
        "on the same drafted trees, the token-level rule their decode verified: sequoia on trees drawn without "
        "replacement, naive on the top-k trees the lossy rules share), on the prompts both ran. *same trees*: the rule re-verified the baseline's own drafted trees "
        "(`verify.paired_with`), so Δ is the gain per drafted tree; *own trees*: each drafted its own. These "
        "intervals are not adjusted for the number of comparisons: *Comparisons fixed in advance* adjusts them (Holm)."
    ]
    for key, grp in groups(g, analysis.GROUP + ["temperature"]):
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
    """The batch-size schedule (study.schedule.schedule), then the batched continuations' divergence."""
    sched, out = ctx["t"]["schedule"], []
    if sched.empty:
        out.append("_No live setting ran at two or more batch sizes, so there is no batch-size schedule._")
    for k, g in groups(sched, ["pair", "dataset", "dtype", "max_new_tokens", "n_prompts"]):
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
            f"**{k[0]} on {k[1]} ({k[2]}, {int(k[4])} prompts × {int(k[3])} new tokens, live)**: measured "
            "speedup over plain decoding at the same B on the same prompts.\n\n" + table(rows, SCHEDULE_COLS)
        )
    out += figs(ctx, "batch_schedule.png")
    out.append(
        "**Batched target continuations** (replay's input). " + setup.divergence_sentence(ctx["data"].get("divergence"))
    )
    out.append(setup.bf16_replay_sentence(ctx["data"].get("bf16_replay")))
    return "\n\n".join(out)


def hardware(ctx) -> str:
    t = ctx["t"]
    if t["phase"].empty:
        return "_No replayed greedy configuration with measured costs: no phase diagram._"
    from .hardware import MARGINAL_AT, machine_sentences, phase_sentences

    note = (
        "Acceptance is measured once; the best tree depends on the cost curve. The diagram charges each "
        "configuration's own steps on a modelled curve (a k-token forward costs 1 + m(k − 1) one-token target "
        "forwards, r times that on the draft) and marks each measured machine at r = t_draft(1)/t_target(1), "
        f"m = the secant of its target curve at {MARGINAL_AT} tokens. The modelled curve is linear; the answer "
        "tables use the measured one."
    )
    machines = bullets(machine_sentences(t["points"], ctx["data"].get("envs") or {}), "")
    return "\n\n".join(
        [note, machines, bullets(phase_sentences(t["phase"], t["points"]), "")] + figs(ctx, "phase_diagram.png")
    )


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
    served = bullets(lines, "") if lines else ""
    if live.empty:
        return (
            "_No live run has a matching live plain-decoding baseline (tree none), so no speedup is measured; "
            "the answer tables use projections._"
        ) + (f"\n\n{served}" if served else "")
    note = (
        "`measured ×`: tokens/s over the plain-decoding run's on the same prompts at the same batch B. "
        "`projected ×`: the same run's own steps costed by the model under Method (results/costs.csv, which "
        "times one sequence's forwards, so only B = 1 rows have one), with its 95% bootstrap interval over "
        "prompts and cost repeats; `error` = projected ÷ measured − 1. The last two columns put the step's "
        "measured draft and verify seconds beside the model's: what the model leaves out shows there. "
        "Every row: results/speedup.csv."
    )
    return "\n\n".join(
        [note, table(live.to_dict("records"), LIVE_COLS), bullets(phrases.speed_sentences(live), "")]
        + ([served] if served else [])
        + figs(ctx, "speed_measured_vs_projected.png")
    )


def analysis_section(ctx) -> str:
    t = ctx["t"]
    lines = (
        phrases.answer_sentences(t["answer"]) + phrases.cap_sentences(t["rows"]) + phrases.cross_sentences(t["cross"])
    )
    lines += [phrases.calibration_sentence(t["calib"])]
    return bullets(lines, "no greedy configuration ran")


def identities(ctx) -> str:
    return (
        "Configurations whose step records are identical on every prompt, stated once (the answer tables mark "
        "them `(= …)`); they are identities of the methods, not findings:\n\n"
        + bullets(phrases.identity_sentences(ctx["t"]["idents"]), "no two configurations have identical step records")
    )


def acceptance(ctx) -> str:
    got = figs(ctx, "alpha_by_depth.png", "acceptance_vector.png")
    return (
        "\n\n".join(got)
        if got
        else (
            no_steps(ctx, "no per-position acceptance is shown")
            or "_No greedy sweep at N=16 and no acceptance vector: nothing to show._"
        )
    )


def gap(ctx) -> str:
    rows = ctx["t"]["gap"]
    if rows.empty:
        return "_No results/gap_to_optimum.csv rows (greedy static shapes with a calibrated acceptance vector)._"
    return "\n\n".join(
        [
            text.GAP,
            bullets(optimum.sentences(rows), ""),
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


def method(ctx) -> str:
    from . import speedup

    return "\n\n".join(
        [
            text.METHOD,
            text.SPEED.format(rule=speedup.DRAFT_COST_RULE),
            "**Metric definitions.** " + text.METRICS,
            text.EVIDENCE.format(ranked=tables.MIN_RANKED, ci=tables.MIN_CI, cut=f"{tables.MAX_CUT:.0%}"),
        ]
    )


def limitations(ctx) -> str:
    return bullets(setup.limitations(ctx["t"], ctx["data"]), "none recorded")


# (heading, render, page): a section with a page is written to results/tables/<page>.md (its
# figures with it) and REPORT.md keeps its heading and a link, so the body stays what a reader reads
SECTIONS = [
    ("## TL;DR", tldr.section, None),
    ("## Answer: the fastest budget per shape", answer, "answer"),
    ("## Acceptance against the budget", figures_accept.section, None),
    ("## Across pairs at fixed budgets", cross, "pairs"),
    ("## Verification rules against their token-level baselines", modes, "verification"),
    ("## Comparisons fixed in advance", fixed_page.section, "comparisons"),
    ("## Measured and projected speed", speed, None),
    ("## Batch size", batch, None),
    ("## Which tree on which hardware", hardware, None),
    ("## Analysis", analysis_section, "analysis"),
    ("### Identities", identities, "analysis"),
    ("### Acceptance by position and rank", acceptance, "analysis"),
    ("### Gap to the Sequoia DP's prediction", gap, "analysis"),
    ("### Losslessness on the real pairs", losslessness, "analysis"),
    ("### Tree attention", attention, "analysis"),
    ("## Method", method, None),
    ("## Setup", lambda c: setup.setup(c["t"], c["data"]), "setup"),
    ("## Limitations", limitations, None),
    ("## References", lambda c: text.REFERENCES, None),
    ("## Appendix: inputs and every configuration", lambda c: setup.appendix(c["t"], c["data"]), "appendix"),
]
PAGE_NOTE = "The full section, with its tables and figures: [{page}.md]({rel}/{page}.md)."
LEADS = {  # kept in REPORT.md above the link
    "comparisons": lambda c: fixed.sentence(
        c["t"].get("comparisons"), analysis.role_names(c["t"].get("df", pd.DataFrame()))
    )
}


def render(ctx, link_for, tables_rel: str) -> tuple[str, dict[str, str]]:
    """(REPORT.md, {page: its markdown}): ``link_for(page)`` links a figure from where the text
    lands (``page`` None: REPORT.md); ``tables_rel`` is the tables folder seen from REPORT.md."""
    head = [
        "# specbench report",
        "",
        "_Generated by `python -m specbench.report` from results/*.csv; do not edit._",
        "",
    ]
    pages: dict[str, list[str]] = {}
    for h, fn, page in SECTIONS:
        block = f"{h}\n\n{fn({**ctx, 'link': link_for(page), 'page': page})}\n"
        if page is None:
            head.append(block)
            continue
        if page not in pages:
            lead = LEADS[page](ctx) if page in LEADS else None
            head.append(f"{h}\n\n{lead + ' ' if lead else ''}{PAGE_NOTE.format(page=page, rel=tables_rel)}\n")
            pages[page] = ["_Generated by `python -m specbench.report` from results/*.csv; do not edit._\n"]
        pages[page].append(block.removeprefix("#") if h.startswith("## ") else block)
    return "\n".join(head), {p: "\n".join(t) for p, t in pages.items()}
