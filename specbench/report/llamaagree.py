"""llama.cpp's acceptance beside specbench's replay of the same drafting rule (#84 item 4), from
results/acceptance_llamacpp.csv (``results.llamaaccept.agreement``): speed.md's subsection (``section``), its
figure (``fig_agreement``) and the TL;DR's cell (``cell``, draft-simple settings only); nothing where the file has
no rows.  llama.cpp's n-gram settings (``ngram-simple``) get a table of their own, with specbench's own ngram chain
of the same draft length beside the replay."""

from __future__ import annotations

import pandas as pd

from ..results import llamaaccept
from . import figures, machines, palette
from .context import Ctx, Inputs, once
from .markdown import fig_links, span, table

FIG = "llamacpp_agreement.png"
COMMAND = "python -m specbench.study.tools.accept_llamacpp"
NGRAM = "ngram-simple"
NGRAM_LOOKS = (  # ngram-simple's lookup lengths N, in sorted order: none of them p_min's look nor the chain's
    (palette.INDIGO, "*"),
    (palette.WINE, "h"),
    (palette.TEAL, "p"),
    (palette.OLIVE, "<"),
    (palette.YELLOW, ">"),
)
RUN = ["machine", "pair", "dataset", "max_new_tokens"]
LLAMA_LOOKS = (  # llama.cpp's p_min settings, in sorted order: none of them chain's look (palette.SHAPES)
    (palette.VERMILLION, "s"),
    (palette.GREEN, "^"),
    (palette.PURPLE, "D"),
    (palette.ORANGE, "v"),
    (palette.SKY, "P"),
    (palette.BLACK, "X"),
)


def setting(r) -> str:
    """'4/0.75': a candidate's n_max/p_min; 'N 2, M 8' for an ngram-simple setting."""
    if r.get("spec_type", llamaaccept.DRAFT_SIMPLE) == NGRAM:
        return f"N {int(r['size_n'])}, M {int(r['n_max'])}"
    return f"{int(r['n_max'])}/{float(r['p_min']):g}"


agreement = once(llamaaccept.agreement)  # bootstrapped once: the TL;DR, the section and its figure read it


def frame(data: Inputs, spec_type: str = llamaaccept.DRAFT_SIMPLE) -> pd.DataFrame:
    """The agreement table's settings of one llama.cpp type (empty where none)."""
    a = agreement(data.accept_llamacpp)
    return a if a.empty else a[a.spec_type == spec_type].reset_index(drop=True)


def of(a: pd.DataFrame, r: dict) -> pd.DataFrame:
    """The settings compared for r's pair, dataset and machine."""
    if a.empty:
        return a
    return a[(a.pair == r["pair"]) & (a.dataset == r["dataset"]) & (a.machine_id.astype(str) == str(r["machine_id"]))]


def cell(data: Inputs, r: dict) -> str:
    """The TL;DR's *replay agrees* cell, '31 of 32': settings whose paired interval of the difference holds 0, or
    'not run'."""
    g = of(frame(data), r)
    return "not run" if g.empty else f"{int(g.agree.sum())} of {len(g)}"


def diff_cell(r) -> str:
    ci = f" [{r['lo']:+.2f}, {r['hi']:+.2f}]" if r["lo"] == r["lo"] else f" (under {llamaaccept.MIN_PROMPTS} prompts)"
    return f"{r['diff']:+.2f}{ci}"


def key_line(g: pd.DataFrame) -> str:
    """One run key's sentence: how many settings agree, the largest difference, the token-identical share."""
    r = g.iloc[int(g["diff"].abs().argmax())]
    cls = machines.machine_class(r["machine"])
    return (
        f"{r['pair']}/{r['dataset']} on {cls}, {int(r['prompts'])} prompts × {int(r['max_new_tokens'])} tokens: "
        f"{int(g.agree.sum())} of {len(g)} settings agree (paired 95% interval of the difference holds 0, not "
        f"adjusted for the {len(g)} settings); llama.cpp accepts less than the replay in {int((g['diff'] < 0).sum())}"
        f" of {len(g)}, the largest difference {setting(r)} {diff_cell(r)}; llama.cpp's outputs token-identical to its own plain "
        f"decoding: {int(g.same.sum())} of {int(g.decodes.sum())} ({span(g.same / g.decodes, '.0%')} per setting)."
    )


def section(ctx: Ctx) -> str:
    """speed.md's *Acceptance against specbench's replay* subsection, or '' without rows."""
    a, ng = frame(ctx.data), frame(ctx.data, NGRAM)
    if a.empty and ng.empty:
        return ""
    lead = (
        f"### Acceptance against specbench's replay of its rule\n\nllama.cpp's acceptance (`{COMMAND}`): for each "
        "n_max and p_min a server of its own, every prompt greedy, EOS ignored; specbench replays the same rule "
        "(`tree=pmin_chain`: the draft's best token until n_max, stopping before one whose share of the draft's "
        "top-10 softmax is below p_min; a test keeps the replay equal to the live loop) over its target's own greedy "
        "continuation of the same prompts. *Accepted per draft*: accepted draft tokens ÷ the steps that drafted "
        "(llama.cpp: `draft_n_accepted` ÷ `spec_decode_num_drafts_total`); the difference llama.cpp − specbench "
        "with its paired 95% interval over prompts; *token-identical*: llama.cpp's decodes equal to its plain "
        "decoding of the same prompt."
    )
    cols = [
        ("machine · pair/dataset", lambda r: f"{machines.machine_class(r['machine'])} · {r['pair']}/{r['dataset']}"),
        ("n_max/p_min", setting),
        ("llama.cpp, accepted per draft", lambda r: f"{r['llamacpp']:.2f}"),
        ("specbench replay", lambda r: f"{r['specbench']:.2f}"),
        ("difference [95% CI]", diff_cell),
        ("drafts, llama.cpp / specbench", lambda r: f"{r['drafts_llamacpp']} / {r['drafts_specbench']}"),
        ("token-identical to plain", lambda r: f"{r['same']} of {r['decodes']}"),
    ]
    body = [lead] if a.empty else [lead, lines(a), table(a.to_dict("records"), cols)]
    return "\n\n".join([*body, *ngram_part(ng, cols), *fig_links(ctx, FIG)])


def lines(a: pd.DataFrame) -> str:
    return "\n".join(f"- {key_line(g)}" for _, g in a.groupby(RUN, sort=True))


def ngram_part(ng: pd.DataFrame, cols: list) -> list[str]:
    """The n-gram settings' paragraph, sentences and table (nothing without them)."""
    if ng.empty:
        return []
    text = (
        "llama.cpp's n-gram speculation (`--spec-type ngram-simple`, `+llamacpp_ngram=[N/M,...]`, no draft model): "
        "the history's last N tokens looked up in the history (most recent earlier occurrence, not the one just "
        "before), the M tokens that followed it drafted (none where fewer than N follow: M < N never drafts). The "
        "replay is the same rule over specbench's greedy continuation (`engine.ngramwalk.simple_draft`; exact, an "
        "n-gram draft depends only on the history; a test holds it to the real server's counts); beside it, "
        "specbench's own `ngram` drafter as `tree=chain` of budget M (n = 4..1, longest first), replayed the same "
        "way, outside the comparison."
    )
    own = [
        ("specbench ngram chain (budget M)", lambda r: f"{r['chain']:.2f}" if r["chain"] == r["chain"] else "–"),
        ("drafts, chain", lambda r: str(r["drafts_chain"])),
    ]
    ng_cols = [(("N/M lookup/draft" if h == "n_max/p_min" else h), f) for h, f in cols]
    return [text, lines(ng), table(ng.to_dict("records"), ng_cols[:6] + own + ng_cols[6:])]


def fig_agreement(data: Inputs) -> figures.Fig | None:
    """Accepted draft tokens per draft against n_max (ngram-simple: its M), one series per p_min (ngram-simple: per
    N): llama.cpp (solid) and specbench's replay (dashed, hollow), specbench's own ngram chain dotted; one panel per
    machine, pair, dataset and llama.cpp type; None without rows."""
    a = pd.concat([frame(data), frame(data, NGRAM)], ignore_index=True)
    if a.empty:
        return None
    kind = {llamaaccept.DRAFT_SIMPLE: "", NGRAM: " · ngram-simple"}
    a = a.assign(
        panel=[
            f"{machines.machine_class(m).split(' (')[0]} · {p} · {d}{kind[t]}"
            for m, p, d, t in zip(a.machine, a.pair, a.dataset, a.spec_type)
        ],
        series=[f"N {n}" if t == NGRAM else f"p_min {p:g}" for t, n, p in zip(a.spec_type, a.size_n, a.p_min)],
    )
    groups = list(a.groupby("panel", sort=True))[: figures.MAX_PANELS]
    looks = {}
    for series, table_ in (("p_min", LLAMA_LOOKS), ("N", NGRAM_LOOKS)):
        names = sorted((x for x in set(a.series) if x.split()[0] == series), key=lambda x: float(x.split()[-1]))
        looks.update({x: table_[i % len(table_)] for i, x in enumerate(names)})

    def draw(ax, g):
        for name, s in g.groupby("series", sort=True):
            col, mk = looks[name]
            s = s.sort_values("n_max")
            ax.plot(s.n_max, s.llamacpp, color=col, marker=mk, ms=7, lw=1, label=f"llama.cpp, {name}")
            ax.plot(s.n_max, s.specbench, color=col, marker=mk, ms=11, mfc="none", lw=1, ls="--",
                    label=f"specbench replay, {name}")  # fmt: skip
        own = g.dropna(subset=["chain"]).drop_duplicates("n_max").sort_values("n_max")
        if not own.empty:
            ax.plot(own.n_max, own.chain, color=palette.BLUE, marker="o", ms=6, lw=1, ls=":",
                    label="specbench's ngram chain (budget M)")  # fmt: skip
        figures.budget_axis(ax, sorted(set(g.n_max)))
        ax.set(xlabel="n_max, or ngram-simple's M (draft tokens)", ylabel="accepted per draft")

    return figures.page_panels(
        groups,
        FIG,
        draw,
        "Accepted draft tokens per draft (bonus not counted) against the draft length n_max (ngram-simple: M), one "
        "colour per p_min (ngram-simple: per lookup length N): llama.cpp's server (solid, filled) and specbench's "
        "replay of the same rule on the same prompts (dashed, hollow, larger); specbench's own ngram chain of the "
        "same budget dotted. One panel per machine, pair, dataset and llama.cpp type.",
        cols=min(2, len(groups)),
        h=3.2,
        ncol=2,
    )
