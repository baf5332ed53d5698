"""Report figures (matplotlib Agg, byte-deterministic PNGs; no torch).

Each ``fig_*`` function takes the data, writes one PNG into ``out_dir`` and
returns ``(filename, caption)``, or ``None`` when its data is missing.
"""
from __future__ import annotations

import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from . import analysis as A  # noqa: E402
from .results import atomic_write  # noqa: E402

RC = {"svg.hashsalt": "specbench", "font.family": "DejaVu Sans", "font.size": 8,
      "axes.titlesize": 8, "legend.fontsize": 6, "figure.dpi": 100, "savefig.dpi": 100,
      "path.simplify": False, "axes.grid": True, "grid.alpha": 0.3}
PNG_META = {"Software": None}


def save(fig, out_dir: str, name: str) -> str:
    """Write fig atomically as out_dir/name with no time or version metadata."""
    path = os.path.join(out_dir, name)
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", metadata=PNG_META))
    plt.close(fig)
    return name


def _grid(n: int, w: float = 3.6, h: float = 2.8):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def _budget_axis(ax, budgets):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(budgets))
    ax.set_xticklabels([str(int(b)) for b in sorted(budgets)])
    ax.minorticks_off()
    ax.set_xlabel("budget N (draft tokens)")


def _pair_mode_panels(df: pd.DataFrame, out_dir: str, name: str, draw) -> str:
    """One panel per (pair, mode); draw(ax, rows of that panel) fills it."""
    panels = sorted(df.groupby(["pair", "mode"]).groups)
    with plt.rc_context(RC):
        fig, axes = _grid(len(panels))
        for ax, (pair, mode) in zip(axes, panels):
            draw(ax, df[(df.pair == pair) & (df["mode"] == mode)])
            ax.set_title(f"{pair} · {mode}")
            ax.legend(loc="best")
        fig.tight_layout()
        return save(fig, out_dir, name)


def fig_metric_vs_budget(df: pd.DataFrame, out_dir: str, metric: str):
    if df.empty or metric not in df:
        return None

    def draw(ax, g):
        for shape, s in g.groupby("shape", sort=True):
            m = s.groupby("budget", sort=True).agg(v=(metric, "mean"),
                                                    lo=(f"{metric}_lo", "mean") if f"{metric}_lo" in s else (metric, "mean"),
                                                    hi=(f"{metric}_hi", "mean") if f"{metric}_hi" in s else (metric, "mean"))
            ax.errorbar(m.index, m.v, yerr=[m.v - m.lo, m.hi - m.v], marker="o", ms=3, capsize=2,
                        label=shape)
        _budget_axis(ax, g.budget.unique())
        ax.set_ylabel(metric)

    name = _pair_mode_panels(df, out_dir, f"{metric}_vs_budget.png", draw)
    return name, (f"{metric} against budget, one line per shape, a panel per pair × mode "
                  "(mean over datasets and engines; bars: 95% bootstrap CI).")


def fig_alpha(df: pd.DataFrame, out_dir: str):
    cols = A.alpha_cols(df)
    if df.empty or not cols:
        return None

    def draw(ax, g):
        for shape, s in g.groupby("shape", sort=True):
            top = s[s.budget == s.budget.max()]
            a = top[cols].mean()
            d = [int(c[6:]) for c in cols if a[c] == a[c]]
            ax.plot(d, [a[f"alpha_{i}"] for i in d], marker="o", ms=3,
                    label=f"{shape} N={int(s.budget.max())}")
        ax.set_xlabel("depth d")
        ax.set_ylabel("alpha_d")
        ax.set_ylim(0, 1.05)

    name = _pair_mode_panels(df, out_dir, "alpha_by_depth.png", draw)
    return name, ("Per-depth conditional acceptance alpha_d = P(accepted ≥ d | accepted ≥ d−1, "
                  "tree_depth ≥ d) at each shape's largest budget.")


def fig_acceptance_vector(vec: pd.DataFrame | None, steps: pd.DataFrame | None, out_dir: str):
    """Measured acceptance vector if given (columns rank + a probability column), else the
    rank distribution of accepted draft tokens from steps.csv accept_path."""
    with plt.rc_context(RC):
        if vec is not None and "rank" in vec:
            val = next((c for c in ("p", "prob", "acceptance", "accept_prob", "p_accept") if c in vec), None)
            if val is None:
                return None
            group = [c for c in ("pair", "dataset") if c in vec]
            fig, ax = plt.subplots(figsize=(5, 3))
            for key, g in (vec.groupby(group, sort=True) if group else [("all", vec)]):
                g = g.groupby("rank", sort=True)[val].mean()
                ax.plot(g.index, g.values, marker="o", ms=3, label=" · ".join(map(str, np.atleast_1d(key))))
            ax.set_xlabel("draft rank k")
            ax.set_ylabel(val)
            ax.legend(loc="best")
            caption = "Acceptance vector: probability that the draft's rank-k candidate is accepted."
        else:
            if steps is None or "accept_path" not in steps:
                return None
            s = steps[steps.accept_path.notna() & (steps.accept_path.astype(str) != "")]
            if s.empty:
                return None
            fig, ax = plt.subplots(figsize=(5, 3))
            for pair, g in s.groupby("pair", sort=True):
                ranks = [int(r) for p in g.accept_path.astype(str) for r in p.split(".") if r != ""]
                counts = np.bincount(ranks)
                ax.plot(range(len(counts)), counts / counts.sum(), marker="o", ms=3, label=pair)
            ax.set_xlabel("draft rank of an accepted token")
            ax.set_ylabel("share of accepted tokens")
            ax.legend(loc="best")
            caption = ("Empirical acceptance vector: share of accepted draft tokens by their draft rank "
                       "(from accept_path in steps.csv, all shapes and modes).")
        fig.tight_layout()
        name = save(fig, out_dir, "acceptance_vector.png")
    return name, caption


def fig_heatmap(df: pd.DataFrame, out_dir: str, metric: str = "tokens_per_step"):
    if df.empty:
        return None
    panels = sorted(df.groupby(["pair", "mode"]).groups)
    with plt.rc_context(RC):
        fig, axes = _grid(len(panels), w=4.2, h=3.2)
        for ax, (pair, mode) in zip(axes, panels):
            g = df[(df.pair == pair) & (df["mode"] == mode)]
            m = g.pivot_table(index="shape", columns="budget", values=metric, aggfunc="mean").sort_index()
            im = ax.imshow(m.to_numpy(float), aspect="auto", cmap="viridis")
            ax.set_xticks(range(m.shape[1]), [str(int(b)) for b in m.columns])
            ax.set_yticks(range(m.shape[0]), list(m.index))
            vals = m.to_numpy(float)
            mid = np.nanmean([np.nanmin(vals), np.nanmax(vals)])
            for (i, j), v in np.ndenumerate(vals):
                if v == v:
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6,
                            color="k" if v > mid else "w")
            ax.set_xlabel("budget N")
            ax.set_title(f"{pair} · {mode}")
            ax.grid(False)
            fig.colorbar(im, ax=ax, label=metric)
        fig.tight_layout()
        name = save(fig, out_dir, "heatmap_shape_budget.png")
    return name, f"{metric}, shape × budget (mean over datasets and engines)."


def fig_by_dataset(df: pd.DataFrame, out_dir: str):
    if df.empty or df.dataset.nunique() < 1:
        return None
    t = df.groupby(["mode", "dataset"], sort=True).agg(v=("acceptance_rate", "mean")).reset_index()
    modes, datasets = sorted(t["mode"].unique()), sorted(t.dataset.unique())
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(modes) * len(datasets) / 2 + 2), 3))
        w = 0.8 / len(datasets)
        for i, d in enumerate(datasets):
            v = [t[(t["mode"] == m) & (t.dataset == d)].v.mean() for m in modes]
            ax.bar(np.arange(len(modes)) + i * w, v, width=w, label=d)
        ax.set_xticks(np.arange(len(modes)) + w * (len(datasets) - 1) / 2, modes)
        ax.set_ylabel("mean acceptance_rate")
        ax.legend(loc="best")
        fig.tight_layout()
        name = save(fig, out_dir, "acceptance_by_dataset.png")
    return name, "Mean acceptance_rate per verification mode and dataset (all shapes and budgets)."


def fig_lossy(table: pd.DataFrame, out_dir: str):
    if table.empty or table.first_token_tv.isna().all():
        return None
    gain = table.gain_vs_lossless.where(table.gain_vs_lossless.notna(), table.gain_vs_greedy)
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(5, 3.2))
        for mode in sorted(table["mode"].unique()):
            sel = table["mode"] == mode
            ax.scatter(table.first_token_tv[sel], gain[sel], s=12, label=mode)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xlabel("first_token_tv (drift from the target distribution)")
        ax.set_ylabel("acceptance_rate gained")
        ax.legend(loc="best")
        fig.tight_layout()
        name = save(fig, out_dir, "lossy_tradeoff.png")
    return name, ("Lossy modes: acceptance_rate gained over the lossless modes at the same temperature "
                  "(over greedy where none ran) against first-token total-variation distance.")


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


def fig_speedup(proj: pd.DataFrame, out_dir: str):
    if proj.empty:
        return None
    panels = sorted(proj.groupby(["pair", "mode"]).groups)
    with plt.rc_context(RC):
        fig, axes = _grid(len(panels))
        for ax, (pair, mode) in zip(axes, panels):
            g = proj[(proj.pair == pair) & (proj["mode"] == mode)]
            for shape, s in g.groupby("shape", sort=True):
                m = s.groupby("budget", sort=True).projected.mean()
                ax.plot(m.index, m.values, marker="o", ms=3, label=shape)
            ax.axhline(1, color="k", lw=0.6)
            _budget_axis(ax, g.budget.unique())
            ax.set_ylabel("projected speedup ×")
            ax.set_title(f"{pair} · {mode}")
            ax.legend(loc="best")
        fig.tight_layout()
        name = save(fig, out_dir, "projected_speedup.png")
    return name, "Projected speedup (see the definition above) against budget, one line per shape."
