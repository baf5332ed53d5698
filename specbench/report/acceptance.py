"""Acceptance by position and rank (the analysis page) and the main page's acceptance finding: the
per-depth conditional acceptance (`alpha_by_depth.png`), the calibrated acceptance vectors
(`acceptance_vector.png`) and the classic figure, acceptance rate and acceptance length against the
draft tokens per step (`acceptance_vs_budget.png`, with the finding's sentence).

The classic figure: on the main dataset's replayed greedy grid (each on its main prompt set, `analysis.main_set`),
one row of two panels (rate, length) per question: the main pair's asked shapes; the advanced
drafters on its target (each at the tree it built, not its upper bound); each pair's chain per
target.  At most six series a panel; shapes that built the same trees are drawn once, named
together; every look from `palette`.  Shaded: the 95% bootstrap interval over prompts (none from
fewer than `tables.MIN_CI` prompts).  The finding that links it states the trade-off, computed
from the same rows.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from . import analysis, figures, palette, tables
from .context import Ctx
from .markdown import fig_links

NAME = "acceptance_vs_budget.png"
METRICS = (("acceptance_rate", "acceptance rate"), ("acceptance_length", "acceptance length"))
MIN_BUDGETS = 2  # a pair × dataset with fewer budgets has no curve to draw


def series(rows: pd.DataFrame, sums) -> list[tuple[tuple[str, str], pd.DataFrame]]:
    """((pair, dataset), rows) of every pair's greedy grid on its main prompt set, with 2+ budgets."""
    out = []
    for k, g in analysis.greedy_groups(rows, main_only=True):
        main = analysis.main_set(g, sums)
        if main.budget.nunique() >= MIN_BUDGETS:
            out.append(((str(k[0]), str(k[1])), main))
    return out


STATIC = ("chain", "binary", "kary", "topk_wide", "specinfer", "sequoia", "medusa63", "paths")  # the asked shapes
MAX_SERIES = 6  # per panel


def is_static(shape: str) -> bool:
    """A fixed shape whose budget is its tree (a cost-aware Sequoia, sized by its costs, is not)."""
    return figures.base_name(shape) in STATIC and "costs=" not in shape


def short(shape: str) -> str:
    """'kary(width=3)' stays; 'merged(ngram_share=0.5, shape=chain)' -> 'merged:chain'; a cost-aware
    Sequoia -> 'sequoia (cost-aware)'."""
    if shape.startswith("merged(") and "shape=" in shape:
        return "merged:" + shape.split("shape=", 1)[1].split(",")[0].rstrip(")")
    if "costs=" in shape:
        return f"{figures.base_name(shape)} (cost-aware)"
    return shape.replace("specinfer(expansion=[1, 1, 3, 1, 1, 1, 1, 1])", "specinfer")


def built(g: pd.DataFrame) -> pd.Series:
    """Draft tokens per step, the tree each configuration built: Σ tree_size ÷ steps = length ÷ rate."""
    rate = g.acceptance_rate.where(g.acceptance_rate > 0)
    return (g.acceptance_length / rate).fillna(g.budget.astype(float))


def dedupe(named: list[tuple[str, dict, pd.DataFrame]]) -> list[tuple[str, dict, pd.DataFrame]]:
    """Series that build the same trees (identical x and both metrics at every point) drawn once,
    labelled by every name ('binary = medusa63')."""
    out: list[tuple[str, dict, pd.DataFrame]] = []
    for label, look, s in named:
        sig = s[["x", "acceptance_rate", "acceptance_length"]].round(6).to_numpy().tolist()
        twin = next((i for i, (_l, _k, o) in enumerate(out) if o[["x", "acceptance_rate", "acceptance_length"]]
                     .round(6).to_numpy().tolist() == sig), None)  # fmt: skip
        if twin is None:
            out.append((label, look, s))
        else:
            lab, lk, o = out[twin]
            out[twin] = (f"{lab} = {label}", lk, o)
    return out


def _series(g: pd.DataFrame, label, look) -> list[tuple[str, dict, pd.DataFrame]]:
    out = []
    for shape, s in g.groupby("shape", sort=True):
        s = s.assign(x=built(s)).sort_values("x")
        out.append((label(shape, s), look(shape, s), s))
    return out


def shape_look(shape: str, _s=None) -> dict:
    return figures.style(shape, "shape")


def advanced_look(shape: str, _s=None) -> dict:
    """A merged tree: merged's colour with the filled shape's marker; any other: the shape's look."""
    if shape.startswith("merged"):
        return dict(zip(("color", "marker"), palette.merged_look(shape)))
    return shape_look(shape)


def _target(g: pd.DataFrame) -> str:
    """The rows' target model ('' where summary.csv does not name it)."""
    return "" if g.empty or pd.isna(g["target"].iloc[0]) else str(g["target"].iloc[0])  # NaN: not recorded


def panel_sets(groups, pair: str) -> tuple[list[tuple[str, list]], list[str]]:
    """The figure's rows: the main pair's asked shapes; its advanced drafters (and those of the pairs
    sharing its target, one per pair in turn); then per target, each pair's chain. At most
    MAX_SERIES series each; the labels that limit left out."""
    by = {k: g for k, g in groups}
    ds = sorted({d for (p, d) in by if p == pair}, key=lambda d: (d != "humaneval", d))
    if not ds:
        return [], []
    d, main = ds[0], by[(pair, ds[0])]
    asked = main[main["shape"].map(is_static)]
    asked = asked.assign(o=asked["shape"].map(lambda sh: STATIC.index(figures.base_name(sh)))).sort_values("o")
    ser = dedupe(_series(asked, lambda sh, _s: short(sh), shape_look))
    ser.sort(key=lambda x: STATIC.index(figures.base_name(x[0])))
    rows = [(f"{pair}, {d}: the asked shapes", ser)]
    pool: list[tuple] = []
    for (p, dd), g in sorted(by.items(), key=lambda kg: (kg[0][0] != pair, kg[0])):
        if dd == d and (p == pair or _target(g) == _target(main)):
            a = g[~g["shape"].map(is_static)]
            own = _series(a, lambda sh, _s, p=p: short(sh) + ("" if p == pair else f" ({p})"), advanced_look)
            pool += [(p != pair, i, lab, lk, s_) for i, (lab, lk, s_) in enumerate(own)]
    adv = dedupe([(lab, lk, s_) for _o, _i, lab, lk, s_ in sorted(pool, key=lambda x: x[:3])])
    if adv:
        rows.append((f"{d}: the advanced drafters on {pair}'s target", adv))
    targets = {_target(g) for (p, dd), g in by.items() if dd == d}
    for tgt in sorted(targets, key=lambda x: (x != _target(main), x)):
        chains = []
        for (p, dd), g in sorted(by.items(), key=lambda kg: (-len(kg[1]), kg[0])):
            if dd == d and _target(g) == tgt:
                c = g[g["shape"].map(lambda sh: short(sh) in ("chain", "merged:chain"))]
                chains += _series(c.head(len(c)), lambda sh, _s, p=p: f"{p} ({short(sh)})",
                                  lambda _sh, _s, p=p: figures.style(p, "pair"))  # fmt: skip
        if len(chains) >= 2:  # noqa: SIM102
            rows.append((f"{d}: each pair's chain" + (f", target {tgt}" if tgt else ""), chains))
    gone = sorted(label for _t, ser in rows for label, _k, _s in ser[MAX_SERIES:])
    return [(title, ser[:MAX_SERIES]) for title, ser in rows if ser], gone


def log2_axis(ax, xs) -> None:
    """log2 x axis ticked at powers of two."""
    ax.set_xscale("log", base=2)
    lo, hi = max(float(np.min(xs)), 0.25), float(np.max(xs))
    ticks = [2.0**k for k in range(int(np.floor(np.log2(lo))), int(np.ceil(np.log2(hi))) + 1)]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()


def band(s: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """The interval's ends, collapsed to the value where it is missing or from < MIN_CI prompts."""
    v = s[metric].to_numpy(float)
    lo_err, hi_err = figures.ci(v, s.get(f"{metric}_lo"), s.get(f"{metric}_hi"), s.get("n_prompts"))
    return v - lo_err, v + hi_err


def draw_metric(ax, series: list, metric: str) -> None:
    """Each series' line (its look from the palette), its interval and its cut budgets."""
    for label, look, s in series:
        x = s.x.to_numpy(float)
        ax.plot(x, s[metric], ms=4, lw=1.2, mfc="none", mew=1.1, label=label, **look)
        lo, hi = band(s, metric)
        ax.fill_between(x, lo, hi, color=look["color"], alpha=0.15, lw=0)
        cut = (s.cut > tables.MAX_CUT).to_numpy()
        ax.plot(x[cut], s[metric].to_numpy()[cut], ls="none", marker="o", ms=10, mfc="none", mec=look["color"])
    log2_axis(ax, np.concatenate([s.x.to_numpy(float) for _l, _k, s in series]))
    ax.set_xlabel("draft tokens per step (tree built)")


def fig_acceptance_vs_budget(rows: pd.DataFrame, sums, pair=None) -> figures.Fig | None:
    groups = series(rows, sums)
    pair = pair or (sorted(groups, key=lambda kg: -len(kg[1]))[0][0][0] if groups else None)
    sets, gone = panel_sets(groups, pair) if groups else ([], [])
    if not sets:
        return None
    with plt.rc_context(figures.RC):
        fig, axes = plt.subplots(len(sets), 2, figsize=(10.5, 3.0 * len(sets)), squeeze=False)
        for i, (title, ser) in enumerate(sets):
            for m, (metric, ylabel) in enumerate(METRICS):
                draw_metric(axes[i][m], ser, metric)
                axes[i][m].set_ylabel(ylabel)
            axes[i][0].set_title(title, loc="left", fontsize=9, fontweight="bold")
            axes[i][1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, fontsize=8)
        fig.tight_layout()
    return figures.Fig(
        NAME,
        fig,
        "Acceptance rate (accepted ÷ drafted tokens, left) and acceptance length (accepted draft tokens per step, "
        "bonus not counted, right) against the draft tokens each configuration built per step (a fixed shape's "
        "budget N; a dynamic drafter's mean tree), on the main dataset's replayed greedy grid: the main pair's asked "
        "shapes, the advanced drafters on its target, then each pair's chain per target. Shapes that built the same "
        "trees are one line (named together). Shaded: 95% bootstrap CI over prompts (none from fewer than "
        f"{tables.MIN_CI}); large rings: more than {tables.MAX_CUT:.0%} of the steps cut by max_new_tokens (never "
        "ranked). Every pair and dataset: the answer tables"
        + (f"; left out here (six series a panel): {', '.join(gone)}." if gone else "."),
    )


def _at(s: pd.DataFrame, metric: str, budget) -> str:
    """The value at one budget with its 95% interval where one is printed (≥ MIN_CI prompts)."""
    r = s[s.budget == budget].iloc[0]
    lo, hi = r.get(f"{metric}_lo"), r.get(f"{metric}_hi")
    ok = lo is not None and hi is not None and lo == lo and hi == hi and r.get("n_prompts", 0) >= tables.MIN_CI
    return f"{r[metric]:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if ok else "")


def tradeoff_sentence(rows: pd.DataFrame, sums, pair) -> str | None:
    """Rate falls and length grows with N: the main pair's chain (or first shape) at its smallest and
    largest budget, and how many of the figure's shape series do the same."""
    groups = series(rows, sums)
    if not groups:
        return None
    falls = grows = n = 0
    for _k, g in groups:
        for _shape, s in g.groupby("shape", sort=True):
            if s.budget.nunique() >= MIN_BUDGETS:
                s = s.sort_values("budget")
                n += 1
                falls += bool(s.acceptance_rate.iloc[-1] < s.acceptance_rate.iloc[0])
                grows += bool(s.acceptance_length.iloc[-1] > s.acceptance_length.iloc[0])
    main = sorted(groups, key=lambda kg: (kg[0][0] != pair, kg[0][1] != "humaneval", kg[0]))[0]
    (p, d), g = main
    shapes = sorted(g["shape"].unique(), key=lambda s: (s != "chain", s))
    s = g[g["shape"] == shapes[0]]
    lo, hi = s.budget.min(), s.budget.max()
    over = f" (95% intervals over its {int(s.n_prompts.min())} prompts)" if s.n_prompts.notna().any() else ""
    return (
        f"The trade-off: a larger budget lowers the acceptance rate and raises the acceptance length. {p}'s "
        f"{shapes[0]} on {d} accepts {_at(s, 'acceptance_rate', lo)} of its draft tokens at N={int(lo)} and "
        f"{_at(s, 'acceptance_rate', hi)} at N={int(hi)}, while its acceptance length grows from "
        f"{_at(s, 'acceptance_length', lo)} to {_at(s, 'acceptance_length', hi)} tokens per step{over}; of the {n} "
        "shape series of every pair's replayed greedy grid, "
        f"the rate at the largest budget is below the smallest budget's in {falls} "
        f"and the length above it in {grows}."
    )


MIN_REACH = 20  # a depth is drawn only where at least this many steps reached it


def position_acceptance(steps: pd.DataFrame, hashes) -> pd.DataFrame:
    """SPEED-Bench-style per-position conditional acceptance: for depth d, the steps that reached it
    (tree_depth >= d and accepted >= d-1) and the share of them that accepted d."""
    s = steps[steps.config_hash.isin(hashes)]
    rows = []
    for h, g in s.groupby("config_hash", sort=True):
        acc, dep = g.accepted.to_numpy(), g.tree_depth.to_numpy()
        for d in range(1, int(dep.max()) + 1):
            reach = (dep >= d) & (acc >= d - 1)
            if reach.sum() >= MIN_REACH:
                rows.append(dict(config_hash=h, depth=d, n=int(reach.sum()), alpha=float((acc[reach] >= d).mean())))
    return pd.DataFrame(rows)


def fig_alpha(rows, sums, steps, pair, budget: int = 16) -> figures.Fig | None:
    """At N = `budget`, or the largest budget below it that the main sweep ran."""
    groups = figures.main_groups(rows, sums, pair)
    if not groups or steps is None or steps.tree_depth.isna().all():  # NaN: not recorded (results.optional)
        return None
    ran = sorted({int(b) for _, g in groups for b in g.budget})
    budget = max([b for b in ran if b <= budget] or ran[:1])
    pick = [(t, g[g.budget == budget]) for t, g in groups]
    pick = [(t, g) for t, g in pick if len(g)]
    if not pick:
        return None
    alpha = position_acceptance(steps, set().union(*[set(g.config_hash) for _, g in pick]))
    if alpha.empty:
        return None

    def draw(ax, g):
        for r in g.sort_values("shape").to_dict("records"):
            a = alpha[alpha.config_hash == r["config_hash"]]
            if len(a):
                ax.plot(a.depth, a.alpha, ms=3, label=r["shape"], **figures.style(r["shape"]))
        ax.set_xlabel("depth d (position in the accepted path)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("P(accept d | reached d)")
        ax.set_ylim(0, 1.05)

    return figures.panels(
        pick,
        "alpha_by_depth.png",
        draw,
        f"Per-position conditional acceptance (SPEED-Bench style) for {pair}, greedy, every shape at "
        f"N={budget}: the share of steps that reached depth d (tree deep enough and d−1 accepted) which "
        f"accepted d; a depth is drawn only where at least {MIN_REACH} steps reached it.",
    )


def current_vectors(vector: pd.DataFrame, summary: pd.DataFrame | None) -> tuple[pd.DataFrame, int]:
    """The greedy vectors of the pair identities summary.csv holds now (by ``pair_id``: a model folder
    changed in place leaves its old vectors under the same name), and how many vectors were left out."""
    v = vector[vector.temperature.astype(float) == 0]  # 0 where not recorded (results.optional)
    if summary is None or vector.pair_id.isna().all() or summary.pair_id.isna().all():  # NaN: not recorded
        return v, 0
    now = v.pair_id.astype(str).isin(set(summary.pair_id.astype(str)))
    return v[now], v[~now].groupby(["pair_id", "dataset"]).ngroups


def fig_acceptance_vector(vector: pd.DataFrame | None, summary: pd.DataFrame | None = None) -> figures.Fig | None:
    """results/acceptance_vector.csv as it is: P(accept | draft rank k), one panel per dataset and target
    (a drafter family's two pairs share a colour, so they never share a panel), one line per pair."""
    if vector is None or not {"rank", "p_accept", "dataset", "pair"} <= set(vector.columns):
        return None
    v, stale = current_vectors(vector, summary)
    target = pd.Series(dtype=str)
    if summary is not None:  # target NaN where not recorded: "target not recorded" below
        target = summary.drop_duplicates("pair").set_index("pair").target
    v = v.assign(target=v.pair.map(target).fillna("target not recorded"))
    rows = v.groupby("target").dataset.nunique().sort_values(ascending=False, kind="mergesort")  # a row per target
    groups = [
        (f"{d}\ntarget {str(t).removesuffix('-instruct')}", g)
        for t in rows.index
        for d, g in v[v.target == t].groupby("dataset", sort=True)
    ]
    if not groups:
        return None

    def draw(ax, g):
        for pair, gp in g.groupby("pair", sort=True):
            gp = gp[gp.p_accept.astype(float) > 0].sort_values("rank")
            ax.plot(gp["rank"], gp.p_accept, ms=5, lw=1.2, label=pair, **figures.style(pair, "pair"))
        ax.set_xlabel("draft rank k")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_yscale("log")
        ax.set_ylabel("P(accept rank-k token)")

    left = f" ({stale} vectors of pair identities no longer in summary.csv left out)" if stale else ""
    return figures.page_panels(
        groups[: figures.MAX_PANELS],
        "acceptance_vector.png",
        draw,
        "The greedy acceptance vectors of results/acceptance_vector.csv (the Sequoia calibration input): "
        "per pair, the probability that the target's next token is the draft's rank-k token (log scale; ranks "
        f"never accepted are not drawn), one panel per dataset and target model{left}.",
        legend="pair",
        sharey=True,
    )


def section(ctx: Ctx) -> str:
    return "\n\n".join(fig_links(ctx, "alpha_by_depth.png", "acceptance_vector.png"))
