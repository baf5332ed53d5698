"""The one cost-curve module's named rules (``results.costcurve``) on a hand-made costs table, so every
expected number is arithmetic here: ``AT_CONTEXT`` (a pair's role at a 256-token context, clamped) and
``CEILING`` (a model's rows pooled over pairs at its shortest KV length, linear beyond the widest)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specbench.results import costcurve as cc
from specbench.results.optional import filled


def _row(pair, role, model, kv, n, seconds, samples="", dtype="bfloat16", device="cpu"):
    return dict(pair=pair, role=role, model=model, kv_len=kv, n_tokens=n, seconds=seconds, samples=samples,
                dtype=dtype, device=device)  # fmt: skip


COSTS = pd.DataFrame(
    [
        # pair a's target (model T) at KV 128 and 512; sizes 1 and 8 (and 16 at 128 only: not on a 256 curve)
        _row("a", "target", "T", 128, 1, 0.10, "0.09 0.10 0.20"),
        _row("a", "target", "T", 128, 8, 0.40, "0.40"),
        _row("a", "target", "T", 128, 16, 0.70),
        _row("a", "target", "T", 512, 1, 0.40, "0.40 0.50 0.30"),
        _row("a", "target", "T", 512, 8, 1.00),
        # pair b's target is the same model T: the ceiling pools a's and b's rows
        _row("b", "target", "T", 128, 1, 0.20),
        _row("b", "target", "T", 128, 8, 0.60),
        _row("b", "target", "T", 128, 16, 0.90),
        _row("b", "target", "T", 512, 16, 5.00),  # a longer context: never the ceiling's rate
        # pair a's draft (model D), and a float32 and a CUDA row the bf16 CPU curves never read
        _row("a", "draft", "D", 128, 1, 0.01),
        _row("a", "draft", "D", 128, 4, 0.02),
        _row("a", "draft", "D", 128, 4, 9.0, dtype="float32"),
        _row("a", "draft", "D", 128, 4, 9.0, device="cuda"),
    ]
)


def test_at_context_weights_the_bracketing_kv_lengths_and_clamps():
    c = cc.curve(COSTS, cc.AT_CONTEXT, "a", "target", "bfloat16")
    assert list(c.sizes) == [1, 8]  # 16 was measured at 128 only
    # 256 lies a third of the way from 128 to 512: weights 2/3 and 1/3; each point's median of its repeats
    assert c.values() == pytest.approx([2 / 3 * 0.10 + 1 / 3 * 0.40, 2 / 3 * 0.40 + 1 / 3 * 1.00])
    assert c.seconds(4.5) == pytest.approx(np.mean(c.values()))  # linear between sizes
    assert c.seconds(64) == pytest.approx(c.values()[-1])  # clamped beyond the widest
    assert c.seconds(0) == pytest.approx(c.values()[0])
    assert [len(x) for x in c.samples[0]] == [3, 3]  # its repeats kept, for the bootstrap
    assert cc.curve(COSTS, cc.AT_CONTEXT, "a", "target", "float32") is None
    assert cc.curve(COSTS, cc.AT_CONTEXT, "b", "draft", "bfloat16") is None  # never another pair's


def test_at_context_reads_the_callers_dtype_and_device():
    assert cc.curve(COSTS, cc.AT_CONTEXT, "a", "draft", "float32").values() == pytest.approx([9.0])
    assert cc.curve(COSTS, cc.AT_CONTEXT, "a", "draft", "bfloat16", "cuda").values() == pytest.approx([9.0])
    no_device = COSTS.drop(columns="device")  # rows that name no device are the CPU's
    assert cc.curve(no_device, cc.AT_CONTEXT, "a", "draft", "bfloat16").values() == pytest.approx([0.01, 0.02])


def test_ceiling_pools_a_models_pairs_at_its_shortest_kv_and_is_linear_beyond():
    c = cc.curve(COSTS, cc.CEILING, "T")
    assert list(c.sizes) == [1, 8, 16]
    assert c.values() == pytest.approx([0.15, 0.50, 0.80])  # the median over pairs a and b at KV 128
    assert c.seconds(32) == pytest.approx(0.80 * 32 / 16)  # linear in n beyond the widest
    assert c.at(np.array([4.5, 32.0])) == pytest.approx([0.325, 1.6])
    assert c.per_token() == pytest.approx(0.80 / 16)
    both = cc.curves(COSTS, cc.CEILING)
    assert set(both) == {"T", "D"} and both["D"].values() == pytest.approx([0.01, 0.02])  # bf16, cpu
    assert cc.curves(COSTS.drop(columns="model"), cc.CEILING) == {}
    assert cc.model_of(COSTS, "a", "draft") == "D" and cc.model_of(COSTS, "c", "target") is None


def test_the_file_reader_reads_by_the_rule_and_names_the_fix(tmp_path):
    path = tmp_path / "costs.csv"
    COSTS.to_csv(path, index=False)
    got = cc.read(str(path), cc.AT_CONTEXT, "a", "target", "bfloat16")
    assert got.values() == pytest.approx(cc.curve(COSTS, cc.AT_CONTEXT, "a", "target", "bfloat16").values())
    with pytest.raises(ValueError, match=r"no draft costs of pair q in bfloat16 on cpu: run `python -m specbench"):
        cc.read(str(path), cc.AT_CONTEXT, "q", "draft", "bfloat16")


def test_kv_weights_clamp_to_the_measured_lengths():
    assert cc.kv_weights([128, 512]) == pytest.approx({128: 2 / 3, 512: 1 / 3})
    assert cc.kv_weights([512, 1024]) == {512: 1.0} and cc.kv_weights([64, 128], at=512) == {128: 1.0}


def test_two_machines_never_make_one_curve_and_the_study_reads_the_machine_with_most_pairs():
    """A default run on another CPU in the committed dtype keeps its curve beside the study's (costs.csv keys a
    curve by machine): the study's projections read the machine that measured the most pairs there (then the
    most points), a pair only the other machine measured reads that one's, and every machine's live rows are at
    home on their own curve."""
    study = COSTS.assign(machine_id="amd")
    other = COSTS[COSTS.pair == "a"].assign(machine_id="intel", seconds=7.0, samples="7.0")
    only_there = COSTS[COSTS.pair == "b"].assign(pair="c", machine_id="intel")
    both = pd.concat([other, study, only_there], ignore_index=True)
    assert cc.study_machines(both)[("cpu", "bfloat16")] == "amd"
    one = cc.one_per_curve(both)
    assert set(one[one.pair.isin(["a", "b"])].machine_id) == {"amd"} and set(one[one.pair == "c"].machine_id) == {
        "intel"
    }
    assert cc.curve(one, cc.AT_CONTEXT, "a", "target", "bfloat16").values() == pytest.approx(
        cc.curve(study, cc.AT_CONTEXT, "a", "target", "bfloat16").values()
    )
    assert cc.curve(cc.of_machine(both, "intel"), cc.AT_CONTEXT, "a", "target", "bfloat16").values() == pytest.approx(
        [7.0, 7.0]
    )
    homes = cc.machines(both)
    assert homes[("a", "cpu", "bfloat16")] == {"amd", "intel"} and homes[("c", "cpu", "bfloat16")] == {"intel"}
    rows = pd.DataFrame({"pair": ["a", "a", "c", "a"], "dtype": "bfloat16", "machine_id": ["amd", "intel", "amd", ""]})
    assert cc.at_home(rows, homes) == [True, True, False, False]
    assert cc.study_machines(pd.concat([study, other.assign(machine_id="aaa")]))[("cpu", "bfloat16")] == "amd"


def test_the_file_reader_reads_the_study_machines_curve(tmp_path):
    path = tmp_path / "costs.csv"
    pd.concat(
        [COSTS.assign(machine_id="amd"), COSTS[COSTS.pair == "a"].assign(machine_id="b", seconds=7.0, samples="7")]
    ).to_csv(path, index=False)
    assert cc.read(str(path), cc.AT_CONTEXT, "a", "draft", "bfloat16").values() == pytest.approx([0.01, 0.02])


def test_another_machines_curve_is_stated_apart_on_the_hardware_page():
    from specbench.report import hardware

    other = COSTS[COSTS.pair == "a"].assign(
        machine_id="intel", machine="CPU B (AVX512), 2 cores", seconds=lambda c: 2 * c.seconds
    )
    every = filled(pd.concat([COSTS.assign(machine_id="amd", machine="CPU A"), other], ignore_index=True), "costs.csv")
    pts = hardware.other_points(every, cc.one_per_curve(every))
    assert list(zip(pts.pair, pts.machine_id)) == [("a", "intel")]
    text = hardware.other_sentence(pts)
    assert "a in bfloat16 on cpu (CPU B (AVX512), 2 cores): t(1) " in text and "kept apart" in text
    assert hardware.other_points(every.assign(machine_id="amd"), cc.one_per_curve(every.assign(machine_id="amd"))).empty


def test_two_points_of_one_device_in_a_phase_panel_are_named_apart():
    """The phase diagram's markers: a float32 curve of one CPU and a bfloat16 curve of another are named by
    machine and dtype in the legend (both read 'cpu' once); a GPU curve of random weights says so."""
    from specbench.report import hardware_page

    pts = pd.DataFrame(
        dict(pair="a", device=["cpu", "cpu", "cuda"], dtype=["float32", "bfloat16", "float16"], r=0.3, m=0.1,
             weights=["pretrained", "pretrained", "random"], machine=["AMD EPYC (AVX2), 2 cores", "AMD EPYC (AVX512), 2 cores", "H200"])
    )  # fmt: skip
    assert [hardware_page.machine_name(p) for p in pts.to_dict("records")] == [
        "AMD EPYC (AVX2) · float32",
        "AMD EPYC (AVX512) · bfloat16",
        "H200 · float16 (random weights)",
    ]


def test_a_region_label_keeps_clear_of_a_measured_point_and_its_region():
    """The phase diagram: the AVX2 host's star sat at the plain-decoding region's innermost cell and its label
    covered the region's 'plain decoding' (2026-12-05); the AVX-512 host's label sat on medusa63's region
    (#83).  A region's label now lies wholly inside its region, clear of every point's marker, and where it
    fits nowhere, none is drawn (colour and legend); the points are named in the legend only."""
    import numpy as np

    from specbench.report import hardware_page
    from specbench.report.hardware import MS, RS

    class Ax:
        def __init__(self):
            self.texts = []

        def text(self, x, y, s, **_kw):
            self.texts.append((x, y, s))

    code = np.full((len(RS), len(MS)), -1)  # one region: plain decoding everywhere
    free, ax = Ax(), Ax()
    hardware_page._label_regions(free, code, [])
    ((x0, y0, name),) = free.texts  # alone: the innermost cell, near the grid's centre
    assert name == "plain decoding"
    hardware_page._label_regions(ax, code, [], [(x0, y0)])  # a point measured just there
    ((x, y, _),) = ax.texts
    cx, cy, px, py = (int(np.searchsorted(a, v)) for a, v in ((RS, x), (MS, y), (RS, x0), (MS, y0)))
    assert abs(cx - px) >= len(name) / 2 + 2 or abs(cy - py) >= hardware_page.LABEL_ROWS / 2 + 2
    half = np.zeros((len(RS), len(MS)), int) - 1
    half[: len(RS) // 2] = 0  # a region too narrow for its label: unlabelled, the other one labelled inside itself
    narrow, names = Ax(), ["a-very-long-region-label-that-cannot-fit N=1"]
    hardware_page._label_regions(narrow, half, names)
    assert [t[2] for t in narrow.texts] == ["plain decoding"] and narrow.texts[0][0] > RS[len(RS) // 2]
    nowhere, everywhere = Ax(), [(r, m) for r in RS[::5] for m in MS[::4]]  # every cell near a point
    hardware_page._label_regions(nowhere, code, [], everywhere)
    assert nowhere.texts == []
