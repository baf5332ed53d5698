"""Report figures (matplotlib Agg, byte-deterministic PNGs; no torch).

Each ``fig_*`` function takes the data, writes one PNG into ``out_dir`` and
returns ``(filename, caption)``, or ``None`` when its data is missing (the
report then says why).  Rules every figure keeps: never average across
datasets or prompt sets (one panel per dataset / comparison group); one
colour per shape everywhere (`shape_style`, a fixed palette keyed by the
shape's tree name, a marker per parameter variant); legends outside the data;
shared y-axes where panels show the same metric.
"""
from __future__ import annotations

import math
import os
import zlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import pandas as pd  # noqa: E402

from . import analysis as A  # noqa: E402
from ..study.results import atomic_write  # noqa: E402

RC = {"svg.hashsalt": "specbench", "font.family": "DejaVu Sans", "font.size": 8,
      "axes.titlesize": 8, "legend.fontsize": 7, "figure.dpi": 100, "savefig.dpi": 100,
      "path.simplify": False, "axes.grid": True, "grid.alpha": 0.3}
PNG_META = {"Software": None}
SHAPE_COLORS = {"none": "#000000", "chain": "#1f77b4", "binary": "#ff7f0e", "kary": "#2ca02c",
                "topk_wide": "#d62728", "specinfer": "#9467bd", "medusa63": "#8c564b", "sequoia": "#e377c2",
                "eagle2": "#17becf", "adaptive_chain": "#7f7f7f", "paths": "#bcbd22"}
EXTRA_COLORS = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def shape_style(shape: str) -> dict:
    """Colour by the tree name (fixed palette), marker by the parameter variant: same shape, same look."""
    tree = shape.split("(", 1)[0]
    color = SHAPE_COLORS.get(tree) or EXTRA_COLORS[zlib.crc32(tree.encode()) % len(EXTRA_COLORS)]
    marker = "o" if "(" not in shape else MARKERS[zlib.crc32(shape.encode()) % len(MARKERS)]
    return dict(color=color, marker=marker)


def save(fig, out_dir: str, name: str) -> str:
    """Write fig atomically as out_dir/name with no time or version metadata; legends may sit outside."""
    path = os.path.join(out_dir, name)
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", metadata=PNG_META, bbox_inches="tight"))
    plt.close(fig)
    return name


def _grid(n: int, w: float = 3.6, h: float = 2.8, sharey: bool = False, sharex: bool = False):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False,
                             sharey=sharey, sharex=sharex)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def _legend_outside(fig, axes, title: str | None = None) -> None:
    """One legend for the figure, right of the panels below the titles' line, entries sorted by label."""
    seen = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if seen:
        labels = sorted(seen)
        fig.legend([seen[k] for k in labels], labels, loc="upper left", bbox_to_anchor=(1.0, 0.9),
                   title=title, frameon=False)


def _budget_axis(ax, budgets):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(budgets))
    ax.set_xticklabels([str(int(b)) for b in sorted(budgets)])
    ax.minorticks_off()
    ax.set_xlabel("budget N (draft tokens)")


def _ci(v, lo, hi):
    v, lo, hi = (np.asarray(x, float) for x in (v, lo, hi))
    lo, hi = np.where(np.isfinite(lo), lo, v), np.where(np.isfinite(hi), hi, v)
    return [np.maximum(v - lo, 0), np.maximum(hi - v, 0)]


def _panels(groups, out_dir: str, name: str, draw, sharey: bool = True, sharex: bool = False, w=3.6, h=2.8,
            legend: str = "shape") -> str:
    """One panel per (title, rows) in groups; draw(ax, rows) fills it; one legend outside; saved as name."""
    with plt.rc_context(RC):
        fig, axes = _grid(len(groups), w=w, h=h, sharey=sharey, sharex=sharex)
        for ax, (title, rows) in zip(axes, groups):
            draw(ax, rows)
            ax.set_title(title)
            if sharey:
                ax.yaxis.set_tick_params(labelleft=True)
            if sharex:
                ax.xaxis.set_tick_params(labelbottom=True)
        _legend_outside(fig, axes[:len(groups)], legend)
        fig.tight_layout()
        return save(fig, out_dir, name)


# --------------------------------------------------------------------------
# acceptance figures (main pair, one panel per dataset)
# --------------------------------------------------------------------------
def fig_tokens_per_step(groups, pair: str, out_dir: str):
    if not groups:
        return None

    def draw(ax, g):
        for shape, s in g.groupby("shape", sort=True):
            s = s.sort_values(["budget", "tokens_per_step"], ascending=[True, False]).drop_duplicates("budget")
            lo = s.tokens_per_step_lo if "tokens_per_step_lo" in s else s.tokens_per_step
            hi = s.tokens_per_step_hi if "tokens_per_step_hi" in s else s.tokens_per_step
            ax.errorbar(s.budget, s.tokens_per_step, yerr=_ci(s.tokens_per_step, lo, hi), ms=3, capsize=2,
                        label=shape, **shape_style(shape))
        _budget_axis(ax, g.budget.unique())
        ax.set_ylabel("tokens_per_step")

    name = _panels(groups, out_dir, "tokens_per_step_vs_budget.png", draw)
    return name, (f"tokens_per_step against budget for {pair}, greedy, one panel per dataset (each on its "
                  "own prompt set, never averaged); bars: 95% bootstrap CI over prompts.")


def fig_gain_vs_chain(diffs: pd.DataFrame, pair: str, out_dir: str):
    if diffs.empty or pair not in set(diffs.pair):
        return None
    d = diffs[diffs.pair == pair]
    groups = [(f"{k[1]} ({k[2]}, {int(k[3])} tok)", g) for k, g in d.groupby(A.GROUP, sort=True)]
    shapes = sorted(d["shape"].unique())

    def draw(ax, g):
        for shape, s in g.groupby("shape", sort=True):
            s = s.sort_values("budget")
            x = s.budget * 2 ** (0.08 * (shapes.index(shape) - (len(shapes) - 1) / 2))  # dodge
            ax.errorbar(x, s["diff"], yerr=_ci(s["diff"], s.lo, s.hi), ms=3, capsize=2, ls="none",
                        label=shape, **shape_style(shape))
        ax.axhline(0, color="k", lw=0.6)
        _budget_axis(ax, g.budget.unique())
        ax.set_ylabel("Δ tokens_per_step vs chain")

    name = _panels(groups, out_dir, "gain_vs_chain.png", draw)
    return name, (f"Paired difference in tokens_per_step of each shape over chain at the same budget "
                  f"({pair}, greedy), on the prompts both ran; bars: 95% paired bootstrap interval.")


def fig_alpha(groups, pair: str, out_dir: str):
    cols = A.alpha_cols(groups[0][1]) if groups else []
    if not cols:
        return None

    def draw(ax, g):
        for shape, s in g.groupby("shape", sort=True):
            top = s[s.budget == s.budget.max()].iloc[0]
            d = [int(c[6:]) for c in cols if top[c] == top[c]]
            ax.plot(d, [top[f"alpha_{i}"] for i in d], ms=3, label=shape, **shape_style(shape))
        ax.set_xlabel("depth d")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("alpha_d")
        ax.set_ylim(0, 1.05)

    name = _panels(groups, out_dir, "alpha_by_depth.png", draw)
    return name, (f"Per-depth conditional acceptance alpha_d = P(accepted ≥ d | accepted ≥ d−1, tree_depth ≥ d) "
                  f"for {pair}, greedy, at each shape's largest budget; one panel per dataset.")


def fig_acceptance_vector(steps: pd.DataFrame | None, out_dir: str):
    """Share of accepted draft tokens by draft rank (steps.csv accept_path), greedy, per dataset."""
    if steps is None or not {"accept_path", "dataset", "temperature"} <= set(steps.columns):
        return None
    s = steps[(steps.temperature.astype(float) == 0) & steps.accept_path.notna()
              & (steps.accept_path.astype(str) != "")]
    if s.empty:
        return None
    groups = [(d, g) for d, g in s.groupby("dataset", sort=True)]

    def draw(ax, g):
        for pair, gp in g.groupby("pair", sort=True):
            ranks = [int(r) for p in gp.accept_path.astype(str) for r in p.split(".") if r != ""]
            counts = np.bincount(ranks)
            ax.plot(range(len(counts)), counts / counts.sum(), marker="o", ms=3, label=pair)
        ax.set_xlabel("draft rank of an accepted token")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("share of accepted tokens")

    name = _panels(groups, out_dir, "acceptance_vector.png", draw, legend="pair")
    return name, ("Empirical acceptance vector: share of accepted draft tokens by draft rank (greedy, all "
                  "shapes of each pair; accept_path in steps.csv), one panel per dataset.")




# --------------------------------------------------------------------------
# mode comparison, lossy trade-off (paired gains with intervals)
# --------------------------------------------------------------------------
def _group_title(k) -> str:
    return f"{k[0]} · {k[1]} ({k[2]}, {int(k[3])} tok)"


def fig_mode_gains(gains: pd.DataFrame, out_dir: str):
    if gains.empty:
        return None
    groups = [(_group_title(k), g.sort_values(["mode", "shape", "budget"], kind="mergesort"))
              for k, g in gains.groupby(A.GROUP, sort=True)]
    rows = max(len(g) for _, g in groups)

    def draw(ax, g):
        y = np.arange(len(g))[::-1]
        for yi, r in zip(y, g.to_dict("records")):
            ax.errorbar([r["diff"]], [yi], xerr=_ci([r["diff"]], [r["lo"]], [r["hi"]]), ms=4, capsize=2,
                        ls="none", label=r["shape"], **shape_style(r["shape"]))
        ax.set_yticks(y, [f"{r['mode']} vs {r['ref_mode'].split(' ')[0]} · N={int(r['budget'])}"
                          for r in g.to_dict("records")])
        ax.axvline(0, color="k", lw=0.6)
        ax.set_xlabel("Δ tokens_per_step (paired)")

    name = _panels(groups, out_dir, "mode_gains.png", draw, sharey=False, sharex=True, w=4.6, h=0.8 + 0.28 * rows)
    return name, ("Mode comparison at T>0: paired gain in tokens_per_step of each mode over the token-level "
                  "rule on the same shape and budget (speculative on chains, mss on trees), on the prompts both "
                  "ran; bars: 95% paired bootstrap interval.")


def fig_lossy(gains: pd.DataFrame, out_dir: str):
    if gains.empty or "first_token_tv" not in gains:
        return None
    lossy = gains[~gains.lossless.astype(str).str.lower().isin(["true", "1"]) & gains.first_token_tv.notna()]
    if lossy.empty:
        return None
    groups = [(_group_title(k), g) for k, g in lossy.groupby(A.GROUP, sort=True)]
    modes = sorted(lossy["mode"].unique())

    def draw(ax, g):
        for r in g.sort_values(["mode", "shape", "budget"], kind="mergesort").to_dict("records"):
            st = dict(shape_style(r["shape"]), marker=MARKERS[modes.index(r["mode"]) % len(MARKERS)])
            ax.errorbar([r["first_token_tv"]], [r["diff"]], yerr=_ci([r["diff"]], [r["lo"]], [r["hi"]]),
                        ms=4, capsize=2, ls="none", label=f"{r['shape']} · {r['mode']}", **st)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xlabel("first_token_tv (drift from the target distribution)")
        ax.set_ylabel("Δ tokens_per_step vs token-level rule")

    name = _panels(groups, out_dir, "lossy_tradeoff.png", draw, legend="shape (colour) · mode (marker)")
    return name, ("Lossy rules: paired gain in tokens_per_step over the lossless token-level rule against the "
                  "first-token total-variation distance from the target distribution.")


# --------------------------------------------------------------------------
# speedup
# --------------------------------------------------------------------------
def fig_speedup(table: pd.DataFrame, keys: list[tuple], out_dir: str):
    """Projected speedup per budget, one panel per main comparison group `keys` (GROUP tuples) of one pair."""
    if table.empty or "projected" not in table or table.projected.isna().all() or not keys:
        return None
    t = table[(table.temperature == 0) & table.projected.notna()]
    groups = [(f"{k[1]} ({k[2]}, {int(k[3])} tok)", g) for k, g in t.groupby(A.GROUP, sort=True) if k in keys]
    if not groups:
        return None

    def draw(ax, g):
        for shape, s in g.groupby("shape", sort=True):
            m = s.groupby("budget", sort=True).projected.max()
            ax.plot(m.index, m.values, ms=3, label=shape, **shape_style(shape))
        ax.axhline(1, color="k", lw=0.6)
        _budget_axis(ax, g.budget.unique())
        ax.set_ylabel("projected speedup ×")

    name = _panels(groups, out_dir, "projected_speedup.png", draw)
    return name, (f"Projected speedup against budget for {keys[0][0]}, greedy, one panel per dataset "
                  "(its main sweep; definition above).")


def _frontier(x: np.ndarray, y: np.ndarray):
    """Points not dominated in (higher x, higher y), sorted by x."""
    order = np.lexsort((-y, -x))
    keep, best = [], -np.inf
    for i in order:
        if y[i] > best:
            keep.append(i)
            best = y[i]
    keep = sorted(keep, key=lambda i: x[i])
    return x[keep], y[keep]


def fig_pareto(live: pd.DataFrame, out_dir: str):
    """Measured tokens/s against tokens_per_step for the live set, baseline included (tokens_per_step 1)."""
    if live.empty:
        return None
    groups = [(_group_title(k), g) for k, g in live.groupby(A.GROUP, sort=True)]

    def draw(ax, g):
        for shape, s in g.groupby("shape", sort=True):
            ax.scatter(s.tokens_per_step, s.tokens_per_s, s=18, label=shape, color=shape_style(shape)["color"],
                       marker=shape_style(shape)["marker"], zorder=3)
        fx, fy = _frontier(g.tokens_per_step.to_numpy(float), g.tokens_per_s.to_numpy(float))
        ax.plot(fx, fy, color="k", lw=0.7, ls="--", marker="o", mfc="none", ms=9, zorder=2, label="Pareto frontier")
        ax.set_xlabel("tokens_per_step")
        ax.set_ylabel("measured tokens/s")

    name = _panels(groups, out_dir, "pareto_live.png", draw, sharey=False)
    return name, ("Live runs: measured tokens/s against tokens_per_step (plain decoding = shape none at 1 "
                  "token/step); dashed: the Pareto frontier. Every mode of a group shares its panel.")


ATTN_TIME = ("median_s", "ms", "mean_ms", "time_ms", "median_ms", "seconds", "mean_s", "time_s")
ATTN_X = ("batch", "batch_size", "kv_len", "seq_len", "draft_len", "tree_size", "budget")
ATTN_SERIES = ("impl", "method", "kind", "variant", "mode")


def attention_columns(att: pd.DataFrame):
    time = next((c for c in ATTN_TIME if c in att), None)
    series = next((c for c in ATTN_SERIES if c in att), None)
    xs = [c for c in ATTN_X if c in att and att[c].nunique() > 1]
    return time, series, xs


def fig_attention(att: pd.DataFrame | None, out_dir: str):
    if att is None or att.empty:
        return None
    time, series, xs = attention_columns(att)
    if time is None or not xs:
        return None
    with plt.rc_context(RC):
        fig, axes = _grid(len(xs))
        for ax, x in zip(axes, xs):
            for key, g in (att.groupby(series, sort=True) if series else [("time", att)]):
                m = g.groupby(x, sort=True)[time].median()
                ax.plot(m.index, m.values, marker="o", ms=3, label=str(key))
            ax.set_xscale("log", base=2)
            ax.set_xlabel(x)
            ax.set_ylabel(f"{time} (median over other settings)")
            ax.legend(loc="best")
        fig.tight_layout()
        name = save(fig, out_dir, "attention_timing.png")
    return name, f"Tree-attention timing ({time}) against {', '.join(xs)}."


