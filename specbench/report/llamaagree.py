"""llama.cpp's acceptance beside specbench's replay of the same drafting rule (#84 item 4), from
results/acceptance_llamacpp.csv (``results.llamaaccept.agreement``): speed.md's subsection (``section``), its
figure (``fig_agreement``) and the TL;DR's cell (``cell``); nothing where the file has no rows."""

from __future__ import annotations

import pandas as pd

from ..results import llamaaccept
from . import figures, machines, palette
from .markdown import fig_links, span, table

FIG = "llamacpp_agreement.png"
COMMAND = "python -m specbench.study.tools.accept_llamacpp"
LLAMA_LOOKS = (  # llama.cpp's p_min settings, in sorted order: none of them chain's look (palette.SHAPES)
    (palette.VERMILLION, "s"),
    (palette.GREEN, "^"),
    (palette.PURPLE, "D"),
    (palette.ORANGE, "v"),
    (palette.SKY, "P"),
    (palette.BLACK, "X"),
)


def setting(r) -> str:
    """'4/0.75': a candidate's n_max/p_min."""
    return f"{int(r['n_max'])}/{float(r['p_min']):g}"


def frame(data: dict) -> pd.DataFrame:
    return llamaaccept.agreement(data.get("accept_llamacpp"))


def of(a: pd.DataFrame, r: dict) -> pd.DataFrame:
    """The settings compared for r's pair, dataset and machine."""
    if a.empty:
        return a
    return a[(a.pair == r["pair"]) & (a.dataset == r["dataset"]) & (a.machine_id.astype(str) == str(r["machine_id"]))]


def cell(data: dict, r: dict) -> str:
    """The TL;DR's *replay agrees* cell, '31 of 32': settings whose paired interval of the difference holds 0, or
    'not run'."""
    g = of(frame(data), r)
    return "not run" if g.empty else f"{int(g.agree.sum())} of {len(g)}"


def diff_cell(r) -> str:
    ci = f" [{r['lo']:+.2f}, {r['hi']:+.2f}]" if r["lo"] == r["lo"] else f" (under {llamaaccept.MIN_PROMPTS} prompts)"
    return f"{r['diff']:+.2f}{ci}"


def key_line(g: pd.DataFrame) -> str:
    """One run key's sentence: how many settings agree, the largest difference, the token-identical share."""
    r = g.iloc[g["diff"].abs().argmax()]
    cls = machines.machine_class(r["machine"])
    return (
        f"{r['pair']}/{r['dataset']} on {cls}, {int(r['prompts'])} prompts × {int(r['max_new_tokens'])} tokens: "
        f"{int(g.agree.sum())} of {len(g)} settings agree (paired 95% interval of the difference holds 0, not "
        f"adjusted for the {len(g)} settings); llama.cpp accepts less than the replay in {int((g['diff'] < 0).sum())}"
        f" of {len(g)}, the largest difference {setting(r)} {diff_cell(r)}; llama.cpp's outputs token-identical to its own plain "
        f"decoding: {int(g.same.sum())} of {int(g.decodes.sum())} ({span(g.same / g.decodes, '.0%')} per setting)."
    )


def section(ctx) -> str:
    """speed.md's *Acceptance against specbench's replay* subsection, or '' without rows."""
    a = frame(ctx["data"])
    if a.empty:
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
    lines = [f"- {key_line(g)}" for _, g in a.groupby(["machine", "pair", "dataset", "max_new_tokens"], sort=True)]
    cols = [
        ("machine · pair/dataset", lambda r: f"{machines.machine_class(r['machine'])} · {r['pair']}/{r['dataset']}"),
        ("n_max/p_min", setting),
        ("llama.cpp, accepted per draft", lambda r: f"{r['llamacpp']:.2f}"),
        ("specbench replay", lambda r: f"{r['specbench']:.2f}"),
        ("difference [95% CI]", diff_cell),
        ("drafts, llama.cpp / specbench", lambda r: f"{r['drafts_llamacpp']} / {r['drafts_specbench']}"),
        ("token-identical to plain", lambda r: f"{r['same']} of {r['decodes']}"),
    ]
    body = [lead, "\n".join(lines), table(a.to_dict("records"), cols), *fig_links(ctx, FIG)]
    return "\n\n".join(body)


def fig_agreement(data: dict) -> figures.Fig | None:
    """Accepted draft tokens per draft against n_max, one series per p_min: llama.cpp (solid) and specbench's
    replay (dashed, hollow), one panel per machine, pair and dataset; None without rows."""
    a = frame(data)
    if a.empty:
        return None
    a = a.assign(
        panel=[
            f"{machines.machine_class(m).split(' (')[0]} · {p} · {d}" for m, p, d in zip(a.machine, a.pair, a.dataset)
        ]
    )
    groups = list(a.groupby("panel", sort=True))[: figures.MAX_PANELS]
    p_mins = sorted(set(a.p_min))

    def draw(ax, g):
        for p, s in g.groupby("p_min", sort=True):
            col, mk = LLAMA_LOOKS[p_mins.index(p) % len(LLAMA_LOOKS)]
            s = s.sort_values("n_max")
            ax.plot(s.n_max, s.llamacpp, color=col, marker=mk, ms=7, lw=1, label=f"llama.cpp, p_min {p:g}")
            ax.plot(s.n_max, s.specbench, color=col, marker=mk, ms=11, mfc="none", lw=1, ls="--",
                    label=f"specbench replay, p_min {p:g}")  # fmt: skip
        figures.budget_axis(ax, sorted(set(g.n_max)))
        ax.set(xlabel="n_max (draft tokens)", ylabel="accepted per draft")

    return figures.page_panels(
        groups,
        FIG,
        draw,
        "Accepted draft tokens per draft (bonus not counted) against the draft length n_max, one colour per p_min: "
        "llama.cpp's server (solid, filled) and specbench's replay of the same rule on the same prompts (dashed, "
        "hollow, larger). One panel per machine, pair and dataset.",
        cols=min(2, len(groups)),
        h=3.2,
        ncol=2,
    )
