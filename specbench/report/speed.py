"""The speed page's *Measured and projected speed*: the interleaved benchmark's runs (`measured`), every
live run's measured speedup beside its projection with the measured and modelled seconds per step,
the findings behind them, the served measurements and the figure measured against projected."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import analysis, controls, figures, findings, measured, palette
from .context import Ctx
from .markdown import bullets, fig_links, table
from .speedup import served_sentences


def fig_measured_vs_projected(live: pd.DataFrame) -> figures.Fig | None:
    """Every live batch-1 configuration with a projection in one panel: measured against projected,
    one look per pair · dataset · prompts × tokens (colour: the pair; marker: the setting)."""
    both = live[live.projected.notna()] if len(live) else live
    if both.empty:
        return None
    both = both.assign(
        setting=[f"{r.pair} · {r.dataset} · {int(r.n_prompts)}×{int(r.max_new_tokens)}" for r in both.itertuples()]
    )

    sizes = sorted(
        {figures.run_size(r) for r in both.to_dict("records")}, key=lambda x: tuple(int(v) for v in x.split(" × "))
    )
    datasets = sorted(set(both.dataset), key=lambda d: (d != "humaneval", d))

    def draw(ax, g):
        for name, s in g.groupby("setting", sort=True):
            c = figures.color(s.pair.iloc[0], "pair")
            xerr = figures.ci(s.projected, s.projected_lo, s.projected_hi)
            # filled: the main dataset and the larger target (the pair palette's circle); hollow: the others
            small = palette.PAIRS.get(str(s.pair.iloc[0]), ("", "o"))[1] != "o"
            first = datasets.index(s.dataset.iloc[0]) == 0 and not small
            ax.errorbar(s.projected, s.measured, xerr=xerr, ls="none", ms=7, capsize=2, elinewidth=0.6, color=c,
                        marker=figures.RUN_MARKERS[sizes.index(figures.run_size(s.iloc[0])) % 6], mec="k" if first else c, mew=0.8,
                        mfc=c if first else "white", alpha=0.9, label=name)  # fmt: skip
        vals = np.concatenate([g.projected_lo.fillna(g.projected), g.projected_hi.fillna(g.projected), g.measured])
        lim = [float(np.nanmin(vals)) * 0.95, float(np.nanmax(vals)) * 1.03]
        ax.plot(lim, lim, color="k", lw=0.6, ls="--")
        ax.fill_between(lim, [v * 0.9 for v in lim], [v * 1.1 for v in lim], color="k", alpha=0.06, lw=0)
        ax.set(xlim=lim, ylim=lim, aspect="equal", xlabel="projected speedup ×", ylabel="measured speedup ×")

    return figures.panels(
        [("live batch-1 runs: measured against projected", both)],
        "speed_measured_vs_projected.png",
        draw,
        "Measured speedup (live tokens/s ÷ the live plain-decoding baseline) against the projection from "
        "measured forward costs, one point per live batch-1 configuration (colour: the pair; marker: the run's "
        "prompts × new tokens; hollow: a second dataset or a pair whose target is the smaller one; bars: the projection's 95% interval); "
        "dashed: measured = projected, "
        "grey band: within ±10%. Each point's shape and budget: the speed table.",
        sharey=False,
        w=4.6,
        h=4.4,
        legend="pair · dataset · setting",
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


def section(ctx: Ctx) -> str:
    live = ctx.t.live
    lines = served_sentences(ctx.data.served, ctx.t.rows)
    served = [bullets(lines, "")] if lines else []
    if live.empty:
        return "\n\n".join(served)
    error = measured.error_sentence(ctx.t.speed)  # the main page: Finding 2's
    found = bullets(
        [error][: bool(error)] + findings.sentences(ctx.t.findings, "speed") + measured.bench_detail(ctx.t),
        "",
    )
    checked = live[live.projected.notna()]  # batch B > 1: under Batch size
    note = f"The {len(live) - len(checked)} live runs without a projection (batch B > 1) are under *Batch size*."
    if checked.empty:
        return "\n\n".join(["_No live run has a projection (results/steps.csv.gz or costs missing)._", *served])
    runs = measured.section(ctx.t, every=True)
    bench = ["Every run of the interleaved benchmark at batch 1, each on the machine named:", *runs] if runs else []
    bench += controls.pooled_sentences(ctx.t) if runs else []
    return "\n\n".join(
        [*bench, table(checked.to_dict("records"), LIVE_COLS), *[note][: len(checked) < len(live)], found, *served]
        + fig_links(ctx, "speed_measured_vs_projected.png")
    )
