"""REPORT.md's tree-attention section from a small hand-made attention table: it shows time over batch,
KV length and draft length, the roofline fraction, the noise against the effects, why fusion helps
(re-read and recompute ratios), the real model's view, and draws its three figures."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from specbench.attention import heatmap
from specbench.report.tree_attention import figures, section, stats
from specbench.results.optional import filled

# shape -> (fused time factor: one computation, so this is noise; sequential ÷ fused; geometry at N)
SHAPES = {
    "chain": (1.00, 1.0, lambda n: (n + 1, 1, n + 1)),
    "binary": (1.10, 4.0, lambda n: (n + 1, n // 2 + 1, 3 * (n + 1))),
    "topk_wide": (1.20, 1.05, lambda n: (n + 1, 4, n + 4)),
}


def table(roof: bool = True, model: bool = True) -> pd.DataFrame:
    rows = []
    for b in (1, 2):
        for kv in (128, 1024):
            for n in (4, 64):
                for shape, (noise, ratio, geo) in SHAPES.items():
                    nodes, nb, bt = geo(n)
                    fused = b * (kv + 8 * n) * 1e-6 * noise
                    for impl, t in (("fused", fused), ("sequential", fused * ratio)):
                        r = dict(level="kernel", batch=b, kv_len=kv, tree_size=n, shape=shape, dtype="float32")
                        r.update(impl=impl, median_s=t, q25_s=0.99 * t, q75_s=1.01 * t, iqr_s=0.02 * t, repeats=5)
                        r.update(steady_iqr=0.25)
                        r.update(nodes=nodes, n_branches=nb, branch_tokens=bt)
                        if roof:
                            r.update(
                                bandwidth_gbs=40.0, peak_gflops=200.0, bw_bound_s=0.1 * t, compute_bound_s=0.25 * t
                            )
                            r.update(roofline_frac=0.25)
                        rows.append(r)
    if model:
        for shape, nb, tree, per in (("binary", 33, 0.75, 8.25), ("topk_wide", 4, 0.6, 1.2)):
            for impl, t in (("model_tree", tree), ("model_branches", per)):
                rows.append(
                    dict(level="model", batch=1, kv_len=1024, tree_size=64, shape=shape, dtype="float32", impl=impl)
                    | dict(median_s=t, repeats=3, nodes=65, n_branches=nb, branch_tokens=200, note="real test forward")
                )
    return filled(pd.DataFrame(rows), "attention.csv")  # as the report reads it: its optional columns decided


def test_section_shows_batch_kv_and_draft_length():
    text = section.markdown(table(), None, {})
    assert "from batch 1 to 2" in text and "KV length 128 to 1024" in text and "N=4 to N=64" in text
    # fused time doubles with the batch at every (KV, N): 2.0×–2.0×
    assert "2.0×–2.0× from batch 1 to 2" in text


def test_section_shows_the_roofline_fraction():
    text = section.markdown(table(), None, {})
    assert "**Roofline.**" in text and "float32 a median 25%" in text
    assert "40.0 GB/s" in text and "FLOP bound is the larger at 100% of the points" in text
    assert "No roofline is recorded" in section.markdown(table(roof=False), None, {})


def test_section_shows_noise_and_why_fusion_helps():
    text = section.markdown(table(), None, {})
    # the three shapes' fused times of one computation differ by 1.20 ÷ 1.00
    assert "differ by a median 1.20×" in text
    # binary's 4× exceeds the spread everywhere; topk_wide's 1.05× never does
    assert "binary 8 of 8, topk_wide 0 of 8" in text and "marked ≈" in text
    assert "**Why fusion helps some shapes and not others.**" in text and "re-reads the prefix KV" in text
    kern = stats.kernels(table())
    sp = stats.speedups(kern, stats.fused_cells(kern))
    b = sp[(sp["shape"] == "binary") & (sp.kv_len == 1024) & (sp.tree_size == 64)].iloc[0]
    assert b.reread == pytest.approx((33 * 1024 + 195) / (1024 + 65)) and b.recompute == pytest.approx(3.0)


def test_section_shows_the_model_view():
    text = section.markdown(table(), None, {})
    assert "**The real model's view**" in text
    assert "0.75 s for binary against 8.25 s" in text and "(11.0×)" in text
    assert "| binary | 33 | 0.75 | 8.25 | 11.0× | 4.0× |" in text
    assert "model_view=true" in section.markdown(table(model=False), None, {})


def test_section_places_each_figure_link():
    links = {n: f"![{n}](x/{n})" for n in section.FIGURES}
    text = section.markdown(table(), None, links)
    assert all(link in text for link in links.values())
    assert text.index("attention_grid.png") < text.index("**Noise") < text.index("attention_fusion.png")


def test_figures_are_drawn():
    grid = figures.fig_attention_grid(stats.kernels(table()))
    assert grid is not None and grid.name == "attention_grid.png"
    assert len(grid.fig.axes) == 4  # time and roofline rows × two KV lengths
    assert "measured at KV" not in grid.caption  # both batches ran at both KV lengths
    fusion = figures.fig_attention_fusion(stats.kernels(table()))
    model = figures.fig_attention_model(table())
    assert fusion is not None and model is not None and model.name == "attention_model.png"
    no_roof = figures.fig_attention_grid(stats.kernels(table(roof=False)))
    assert no_roof is not None and len(no_roof.fig.axes) == 2
    assert figures.fig_attention_model(table(model=False)) is None
    for f in (grid, fusion, model, no_roof):
        plt.close(f.fig)


def test_a_ratio_from_an_unsteady_timing_is_marked_and_the_caption_says_why():
    """A sequential timing whose IQR is over a quarter of its median (a 17 ms median, IQR 10 ms, for a
    call that takes 3 ms beside it) is drawn with a dagger, and the caption counts such cells."""
    kern = table(model=False)
    odd = (kern["shape"] == "binary") & (kern.kv_len == 1024) & (kern.tree_size == 4) & (kern.impl == "sequential")
    kern.loc[odd & (kern.batch == 1), "median_s"] *= 3  # 12x where its cell's steady twin reads 4x
    kern.loc[odd & (kern.batch == 1), "iqr_s"] = 0.6 * kern.loc[odd & (kern.batch == 1), "median_s"]
    fig = figures.fig_attention_ratio(stats.kernels(kern))
    assert fig is not None and "(1 of 12 cells)" in fig.caption and "†: a ratio" in fig.caption and "25%" in fig.caption
    texts = [t.get_text() for ax in fig.fig.axes for t in ax.texts]
    assert sum(t.endswith("†") for t in texts) == 1 and len(texts) == 12
    steady = figures.fig_attention_ratio(stats.kernels(table(model=False)))
    assert steady is not None and "disturbed" not in steady.caption
    one = kern[(kern.batch == 1) & (kern.level == "kernel")]  # the colour scale is the steady cells'
    assert heatmap.shared_norm(heatmap.ratios(one)).vmax == pytest.approx(4.0)
    assert heatmap.ratios(one).r.max() == pytest.approx(12.0)
    assert not heatmap.ratios(one.drop(columns="steady_iqr")).unsteady.any()  # a grid that did not record it
    plt.close(fig.fig)
    plt.close(steady.fig)
