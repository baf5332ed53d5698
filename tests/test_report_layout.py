"""REPORT.md's layout (#53): a main page a reader finishes in ten minutes, pages that begin with
their own summary, one palette whose series never look alike in a panel, and sentences that name
what was run computed from the CSVs."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import matplotlib.colors as mcolors
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from make_results import make_results  # noqa: E402

from specbench.report import bookkeeping, build, mainpage, palette, tables  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_the_word_count_is_wc_w_without_image_only_and_link_only_lines():
    text = (
        "# Title\n\n![fig.png](results/figures/fig.png)\n\n| a | b |\n|---|---|\n| 1.5× | x y |\n\n"
        "see [page.md](t/page.md) now.\n- [speed.md](t/speed.md)\n"
    )
    # "# Title"; "| a | b |"; "|---|---|"; "| 1.5× | x y |"; "see [page.md](t/page.md) now." (as `wc -w` counts)
    assert mainpage.words(text) == 2 + 5 + 1 + 6 + 3


def test_the_committed_main_page_reads_in_ten_minutes_and_each_page_opens_with_its_summary():
    report = ROOT / "REPORT.md"
    if not report.exists():
        pytest.skip("no committed REPORT.md")
    body = report.read_text()
    assert mainpage.words(body) <= mainpage.MAX_WORDS
    assert re.findall(r"^## (.+)$", body, flags=re.M)[:2] == ["TL;DR", "Findings"]
    assert len(re.findall(r"^### \d\. ", body, flags=re.M)) <= 5
    for page in re.findall(r"\]\(([^)\s]+\.md)\)", body):
        lines = [x for x in (report.parent / page).read_text().splitlines() if x.strip()]
        title = next(i for i, x in enumerate(lines) if x.startswith("# "))
        assert lines[title + 1].startswith("> ") and lines[title + 2].startswith("> "), page


def _look(h) -> tuple:
    """(colour, marker, face, hatch) of a legend handle: a line, an error bar, bars or a patch."""
    if hasattr(h, "lines") and h.lines and h.lines[0] is not None:  # ErrorbarContainer
        h = h.lines[0]
    if hasattr(h, "patches"):  # BarContainer
        p = h.patches[0]
        return (mcolors.to_hex(p.get_facecolor()), None, None, p.get_hatch())
    if hasattr(h, "get_marker"):
        face = h.get_markerfacecolor()
        face = face if isinstance(face, str) and face in ("none", "auto") else mcolors.to_hex(face)
        return (mcolors.to_hex(h.get_color()), h.get_marker(), face, None)
    return (mcolors.to_hex(h.get_facecolor()), None, None, getattr(h, "get_hatch", lambda: None)())


@pytest.fixture(scope="module")
def figs(tmp_path_factory):
    res = tmp_path_factory.mktemp("layout") / "results"
    make_results(str(res))
    _text, made, _t = build.build(replace(build.load(str(res)), results="results"), "results/figures")
    return made


def test_no_two_series_in_one_panel_look_alike(figs):
    for f in figs:
        for ax in f.fig.axes:
            seen: dict[tuple, str] = {}
            for h, label in zip(*ax.get_legend_handles_labels()):
                look = _look(h)
                assert seen.setdefault(look, label) == label, (f.name, ax.get_title(), label, seen[look])


def test_the_palette_is_shared_and_colour_blind_safe():
    assert len(palette.COLORS) == 8 and len(set(palette.COLORS)) == 8
    for name, table in palette.TABLES.items():
        looks = list(table.values())
        assert len(set(looks)) == len(looks), name  # no two names of one kind share a look
        assert {c for c, _m in looks} <= set(palette.COLORS + palette.EXTRA), name
    assert palette.look("sequoia", "rule") == palette.look("sequoia", "shape")  # one name, one look
    assert palette.look("kary(width=3)")[0] == palette.look("kary")[0]  # a variant keeps its name's colour


def test_a_shape_has_one_colour_in_every_figure(figs):
    seen: dict[str, set] = {}
    for f in figs:
        for ax in f.fig.axes:
            for h, label in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(label, set()).add(_look(h)[0])
    shapes = [s for s in palette.SHAPES if s in seen]
    assert shapes  # the fixture's figures draw shapes by name
    for s in shapes:
        assert seen[s] == {palette.look(s, "shape")[0].lower()}, (s, seen[s])


def _runs(budgets: dict) -> pd.DataFrame:
    """summary-like rows: live batch-1 runs of one pair, shape and dataset, per (prompts, tokens)."""
    rows = [
        dict(
            engine="live",
            batch_size=1,
            pair="p",
            shape="chain",
            dataset="he",
            dtype="bf16",
            budget=b,
            n_prompts=n,
            max_new_tokens=k,
        )  # fmt: skip
        for (n, k), bs in budgets.items()
        for b in bs
    ]
    return pd.DataFrame(rows)


def test_the_sentence_that_names_what_ran_follows_the_summary():
    """The live check's sentence lists every live batch-1 run of its shape from summary.csv's rows,
    so a changed summary changes it (#53: 'ran N = 3, 4 only' was stale)."""
    ans = pd.DataFrame(
        [
            dict(
                pair="p",
                dataset="he",
                dtype="bf16",
                shape="chain",
                engine="live",
                budget=4,
                budgets="3, 4",
                bracket="edge (largest tried)",
                max_new_tokens=64,
            )
        ]  # fmt: skip
    )
    before = bookkeeping.bracket_sentences(ans, _runs({(8, 64): [3], (16, 64): [4]}))
    after = bookkeeping.bracket_sentences(ans, _runs({(8, 64): [3], (16, 64): [4], (16, 32): [1, 2, 3, 4, 6]}))
    live = [s for s in before if "live check" in s]
    assert live and "N = 3 (8 × 64); 4 (16 × 64)" in live[0]
    changed = [s for s in after if "live check" in s][0]
    assert changed != live[0] and "N = 3 (8 × 64); 1, 2, 3, 4, 6 (16 × 32); 4 (16 × 64)" in changed


def test_the_live_check_and_its_sentence_read_one_replayed_best():
    """#56: the answer's live checks and the setup's sentence find the replayed grid's best by one
    rule (``tables.replayed_best``): the longest replayed run of the pair, dataset, dtype and shape,
    whatever its budget; a live edge is relabelled only where that best is bracketed at its budget."""
    common = dict(pair="p", dataset="he", dtype="bf16", shape="chain")
    rows = [
        dict(common, engine="replay", max_new_tokens=128, budget=5, budgets="1, 3, 5, 8", bracket="interior"),
        dict(common, engine="replay", max_new_tokens=32, budget=3, budgets="1, 3, 5", bracket="interior"),
        dict(common, engine="live", max_new_tokens=64, budget=3, budgets="3, 4", bracket="edge: smallest tried (N=3)"),
        dict(common, engine="live", max_new_tokens=16, budget=5, budgets="5, 6", bracket="edge: smallest tried (N=5)"),
    ]
    ans = tables.live_checks(pd.DataFrame(rows))
    best = tables.replayed_best(ans)
    assert list(best) == [("p", "he", "bf16", "chain")] and best[("p", "he", "bf16", "chain")]["budget"] == 5
    # the 32-token replayed run's best is N=3, but the longest run's is N=5: only the N=5 live check is one
    assert list(ans.bracket[2:]) == [
        "edge: smallest tried (N=3)",
        "live check of the replayed grid's best (interior there)",
    ]
    said = [s for s in bookkeeping.bracket_sentences(ans) if "live check of chain" in s]
    assert len(said) == 1 and "the replayed grid's best is now N=5, interior there (" in said[0]


PAGE_WIDTH_FIGURES = {  # #83: the figures redrawn to be read at page width
    "mode_gains.png",
    "phase_diagram.png",
    "projected_speedup.png",
    "gain_vs_chain.png",
    "acceptance_vector.png",
    "bench_schedule.png",
    "gap_to_optimum.png",
}


def test_page_width_figures_read_at_1000_px(figs, tmp_path):
    """Each of these, saved as the report saves it, is at most 1000 px wide with every text 9 pt or more and at
    most six panels, none of them an empty slot."""
    from matplotlib.text import Text
    from PIL import Image

    from specbench.report import figures

    drawn = [f for f in figs if f.name in PAGE_WIDTH_FIGURES]
    assert drawn
    for f in drawn:
        f.fig.savefig(tmp_path / f.name, format="png", bbox_inches="tight")
        assert Image.open(tmp_path / f.name).size[0] <= 1000, f.name
        sizes = [t.get_fontsize() for t in f.fig.findobj(Text) if t.get_text().strip() and t.get_visible()]
        assert min(sizes) >= figures.MIN_PT, (f.name, min(sizes))
        axes = [ax for ax in f.fig.axes if ax.get_visible()]
        assert len(axes) <= figures.MAX_PANELS and all(ax.has_data() for ax in axes), f.name
