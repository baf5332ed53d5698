"""REPORT.md's claims are sized to their evidence, its figures share one palette, it regenerates
byte-identically, and it refuses truncated or inconsistent inputs before writing anything."""

from __future__ import annotations

import gzip
import re
import shutil
import sys
from pathlib import Path

import matplotlib.colors as mcolors
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from make_results import make_results  # noqa: E402

from specbench.core.atomic import gzip_bytes  # noqa: E402
from specbench.report import build as B  # noqa: E402
from specbench.report import phrases as P  # noqa: E402
from specbench.report import tables as T  # noqa: E402
from specbench.study.results import STEPS_FILE  # noqa: E402
from test_report import run_report  # noqa: E402  (the one report subprocess helper)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """The fixture study with 40 prompts per configuration (ranked claims possible), rendered."""
    d = tmp_path_factory.mktemp("big")
    make_results(str(d / "results"), n_prompts=40)
    proc = run_report(d)
    assert proc.returncode == 0, proc.stderr
    return d


def answer_rows(text: str) -> list[dict]:
    """The answer tables of REPORT.md as records (header cells -> values), with their group title."""
    section = text.split("## Answer: the fastest budget per shape", 1)[1].split("\n## ", 1)[0]
    rows, title, header = [], None, None
    for line in section.splitlines():
        if line.startswith("**") and line.endswith("**"):
            title, header = line.strip("*"), None
        elif line.startswith("|") and header is None:
            header = [c.strip() for c in line.strip("|").split("|")]
        elif line.startswith("|") and not set(line) <= set("|-"):
            rows.append(dict(zip(header, [c.strip() for c in line.strip("|").split("|")]), group=title))
    return rows


def test_answer_table_for_every_pair_and_dataset(big):
    text = (big / "REPORT.md").read_text()
    data = B.load(str(big / "results"))
    t = T.compute(data)
    greedy = t["rows"][t["rows"].temperature == 0]
    titles = {r["group"] for r in answer_rows(text)}
    for _, g in greedy.groupby(["pair", "dataset", "dtype", "max_new_tokens"]):
        assert P.where(g.iloc[0].to_dict()) in titles
        shapes = {r["shape"].split(" (= ")[0] for r in answer_rows(text) if r["group"] == P.where(g.iloc[0].to_dict())}
        assert shapes == set(g["shape"])  # one row per shape


def test_ranked_claims_rest_on_32_prompts_and_uncapped_budgets(big):
    rows = answer_rows((big / "REPORT.md").read_text())
    ranked = [r for r in rows if r["claim"] == "ranked"]
    assert ranked and len(ranked) < len(rows)  # the eagle2 subset (3 prompts) stays exploratory
    for r in ranked:
        assert int(r["prompts / tokens"].split(" / ")[0]) >= T.MIN_RANKED
        assert float(r["cut by cap"].rstrip("%")) <= 100 * T.MAX_CUT
        assert re.search(r"\[\d", r["tokens/step [95% CI]"])  # 40 prompts: an interval is printed
    for r in rows:
        if int(r["prompts / tokens"].split(" / ")[0]) < T.MIN_CI:
            assert "no CI" in r["tokens/step [95% CI]"] and "[" not in r["tokens/step [95% CI]"]
        if int(r["prompts / tokens"].split(" / ")[0]) < T.MIN_RANKED:
            assert r["claim"] != "ranked"


def _steps(emitted_accepted: list[tuple[int, int]], prompts=("a", "b"), h="x") -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(config_hash=h, prompt_id=p, step=i, emitted=e, accepted=a, tree_size=4)
            for p in prompts
            for i, (e, a) in enumerate(emitted_accepted)
        ]
    )


def test_cut_share_and_capped_budgets_are_never_ranked():
    summary = pd.DataFrame([dict(config_hash="x", max_new_tokens=8), dict(config_hash="y", max_new_tokens=8)])
    # x: 3 + 3 + 2 tokens, the last step accepted 4 but could emit only 2 -> 1 of 3 steps cut
    steps = pd.concat([_steps([(3, 2), (3, 2), (2, 4)]), _steps([(1, 0)] * 8, h="y")])
    share = T.cut_share(steps, summary)
    assert share["x"] == pytest.approx(1 / 3) and share["y"] == 0
    assert T.claim(40, 1 / 3).startswith("not ranked") and T.claim(40, 0.05) == "ranked"
    assert T.claim(31, 0.0).startswith("exploratory")
    base = dict(
        pair="p",
        dataset="d",
        dtype="float32",
        max_new_tokens=8,
        temperature=0.0,
        shape="chain",
        tokens_per_step=1.0,
        speed_basis="projected",
    )
    rows = pd.DataFrame(
        [
            dict(base, config_hash="fast", budget=16, speed=2.0, cut=0.3, claim=T.claim(40, 0.3)),
            dict(base, config_hash="slow", budget=4, speed=1.5, cut=0.05, claim=T.claim(40, 0.05)),
        ]
    )
    pick = T.answer(rows).iloc[0]
    assert pick.config_hash == "slow" and pick.claim == "ranked"  # the faster budget is capped


def test_calibration_prompts_disjoint_from_scored_prompts():
    df = pd.DataFrame([dict(config_hash="s", tree="sequoia", pair="p", pair_id="pid", dataset="d")])
    sums = T.prompt_sums(_steps([(2, 1)], prompts=("q1", "q2"), h="s"))

    def vec(ids):
        return pd.DataFrame([dict(pair="p", pair_id="pid", dataset="d", rank=0, p_accept=0.9, prompt_ids=ids)])

    assert T.calibration(df, sums, vec("c1;c2")).calibration.iloc[0] == "disjoint"
    inside = T.calibration(df, sums, vec("c1;q2"))
    assert inside.calibration.iloc[0] == "in-sample (1 shared)"
    assert T.calibration(df, sums, vec("c1").drop(columns="prompt_ids")).calibration.iloc[0] == "not recorded"
    assert T.claim(40, 0.0, T.calibration_issue(inside.calibration.iloc[0])).startswith("not ranked")
    assert T.claim(40, 0.0, T.calibration_issue("not recorded")).startswith("not ranked")
    assert T.calibration_issue("disjoint") is None
    other = df.assign(tree_params='{"calib_dataset": "other"}')  # calibrated on another dataset
    assert T.calibration(other, sums, None).calibration.iloc[0] == "disjoint (calibrated on other)"
    # on the committed results: wherever calibration prompts are recorded, no ranked row is in-sample
    t = T.compute(B.load(str(ROOT / "results")))
    ranked = t["rows"][t["rows"].claim == "ranked"]
    assert not ranked.calibration.fillna("").str.startswith("in-sample").any()


def _colours(fig) -> dict[str, str]:
    """label -> colour of every labelled artist of a figure (lines, error bars, bars, scatters)."""
    out = {}
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if hasattr(h, "lines"):  # ErrorbarContainer
                c = h.lines[0].get_color()
            elif hasattr(h, "patches"):  # BarContainer
                c = h.patches[0].get_facecolor()
            elif hasattr(h, "get_facecolor") and not hasattr(h, "get_color"):
                c = h.get_facecolor()[0]
            else:
                c = h.get_color() if not hasattr(h, "get_facecolor") else h.get_facecolor()[0]
            out.setdefault(lab, set()).add(mcolors.to_hex(c))
    return out


def test_one_palette_across_figures(tmp_path):
    make_results(str(tmp_path / "results"))
    text, figs, _ = B.build(B.load(str(tmp_path / "results")) | {"results": "results"}, "results/figures")
    seen: dict[str, set] = {}
    for f in figs:
        for lab, cols in _colours(f.fig).items():
            seen.setdefault(lab, set()).update(cols)
    shared = [lab for lab in seen if sum(lab in _colours(f.fig) for f in figs) > 1]
    assert len(figs) >= 10 and len(shared) >= 3  # names recur across figures
    for lab, cols in seen.items():
        assert len(cols) == 1, (lab, cols)


def test_committed_report_regenerates_byte_identically(tmp_path):
    shutil.copytree(ROOT / "results", tmp_path / "results")
    proc = run_report(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "REPORT.md").read_bytes() == (ROOT / "REPORT.md").read_bytes()
    committed = sorted(p.name for p in (ROOT / "results" / "figures").iterdir())
    assert sorted(p.name for p in (tmp_path / "results" / "figures").iterdir()) == committed


# --------------------------------------------------------------------------
# robustness (issue 24): refuse before writing; figures and REPORT.md together; no stale figure
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rendered_once(tmp_path_factory):
    d = tmp_path_factory.mktemp("rendered")
    make_results(str(d / "results"))
    assert run_report(d).returncode == 0
    return d


@pytest.fixture()
def rendered(rendered_once, tmp_path):
    """A rendered fixture study (REPORT.md + figures) of this test's own, and a snapshot of its outputs."""
    shutil.copytree(rendered_once, tmp_path, dirs_exist_ok=True)
    snap = {p: p.read_bytes() for p in [tmp_path / "REPORT.md", *(tmp_path / "results" / "figures").iterdir()]}
    return tmp_path, snap


def _refused(tmp_path: Path, snap: dict, name: str) -> None:
    proc = run_report(tmp_path)
    assert proc.returncode == 2, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and name in lines[0] and "specbench.collect" in lines[0], proc.stderr
    now = [tmp_path / "REPORT.md", *(tmp_path / "results" / "figures").iterdir()]
    assert {p: p.read_bytes() for p in now} == snap  # nothing written, nothing removed
    assert not list(tmp_path.glob(".tmp-*")) and not list((tmp_path / "results").glob(".figures-*"))


@pytest.mark.parametrize("name", ["summary.csv", STEPS_FILE])
def test_truncated_file_is_refused_in_one_line(rendered, name):
    tmp_path, snap = rendered
    path = tmp_path / "results" / name
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])  # cut mid-line, as a full disk leaves it
    _refused(tmp_path, snap, name)


def test_steps_missing_lines_is_refused(rendered):
    tmp_path, snap = rendered
    path = tmp_path / "results" / STEPS_FILE
    lines = gzip.open(path, "rt").read().splitlines(keepends=True)
    path.write_bytes(gzip_bytes("".join(lines[: len(lines) // 2])))  # whole lines lost: counts disagree
    _refused(tmp_path, snap, STEPS_FILE)


def test_deleted_steps_degrades_with_the_right_reason_and_no_stale_figure(rendered):
    tmp_path, _ = rendered
    (tmp_path / "results" / STEPS_FILE).unlink()
    (tmp_path / "results" / "figures" / "stale_old_figure.png").write_bytes(b"old")
    proc = run_report(tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "REPORT.md").read_text()
    assert "steps.csv.gz is absent, so no paired mode comparison is shown" in text
    links = {Path(x).name for x in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)}
    assert {p.name for p in (tmp_path / "results" / "figures").iterdir()} == links
    assert "mode_gains.png" not in links


def test_mode_baseline_names_its_sibling_order(tmp_path):
    """A baseline that records the order it tries siblings in (mss: random or storage) is named with it."""
    make_results(str(tmp_path / "results"))
    data = B.load(str(tmp_path / "results"))
    s = data["summary"]
    data["summary"] = s.assign(sibling_order=["storage" if v == "mss" else "" for v in s.verify])
    gains = T.compute(data)["modes"]
    vs_mss = gains[gains.ref_mode.str.startswith("mss")]
    assert len(vs_mss) and vs_mss.baseline.str.startswith("mss (storage order), ").all()
    assert not gains[gains.ref_mode.str.startswith("speculative")].baseline.str.contains("order").any()


def test_the_tldr_best_lossless_gain_rests_on_32_shared_prompts():
    """A larger gain on 16 prompts is never called "best": only comparisons with >= MIN_RANKED
    shared prompts are ranked; with none, the line says the largest gain is exploratory."""
    from specbench.report.compare import Paired

    where = dict(pair="p", dataset="humaneval", dtype="bfloat16", engine="live", max_new_tokens=64)

    def gain(h, verify, diff, n):
        return dict(
            where,
            config_hash=h,
            verify=verify,
            mode=f"{verify} T=1",
            ref_mode="mss T=1",
            baseline="mss",
            shape="binary",
            budget=16,
            lossless_b=True,
            diff=diff,
            n_shared=n,
            paired=Paired(h, "b", n, 4.0 + diff, 4.0, diff, diff - 0.1, diff + 0.1),
        )

    both = pd.DataFrame([gain("a", "sequoia", 0.4, 16), gain("c", "traversal", 0.1, 32)])
    (line,) = P.mode_tldr(both)
    assert (
        line.startswith(
            f"Best lossless rule gain over its token-level baseline (≥ {T.MIN_RANKED} prompts): traversal T=1"
        )
        and "+0.10 [+0.00, +0.20]" in line
    )
    (line,) = P.mode_tldr(both.iloc[:1])
    assert line.startswith("Largest lossless rule gain") and "exploratory" in line and "on 16 prompts" in line


def test_tldr_quotes_each_pairs_ranked_study_per_dataset_before_an_exploratory_measurement():
    row = dict(
        dtype="bfloat16",
        max_new_tokens=128,
        engine="replay",
        speed_basis="projected",
        budget=4,
        tokens_per_step=3.0,
        acceptance_rate=0.5,
        claim="ranked",
    )
    ans = pd.DataFrame(
        [
            {**row, "pair": "main", "dataset": "he", "shape": "chain", "speed": 1.5},
            {**row, "pair": "main", "dataset": "he", "shape": "binary", "speed": 1.4},
            {**row, "pair": "main", "dataset": "mt", "shape": "binary", "speed": 1.2},
            {
                **row,
                "pair": "main",
                "dataset": "he",
                "shape": "chain",
                "speed": 0.9,
                "engine": "live",
                "max_new_tokens": 64,
                "speed_basis": "measured",
                "claim": "exploratory (16 prompts < 32)",
            },
            {**row, "pair": "aside", "dataset": "he", "shape": "chain", "speed": 0.8, "claim": "exploratory (8 < 32)"},
        ]
    )
    lines = P.tldr(
        {
            "answer": ans,
            "rows": ans.assign(n_prompts=64, temperature=0.0, cut=0.0),
            "modes": pd.DataFrame(),
            "live": pd.DataFrame(),
        }
    )
    main, aside = lines[1:3]  # the pair with the most answer rows first
    assert main == (
        "main (bfloat16, replayed, 128 new tokens), fastest per dataset: he chain N=4 at 1.50× "
        "(projected), 3.00 tokens/step, acceptance rate 0.50, ranked; mt binary N=4 at 1.20× (projected), "
        "3.00 tokens/step, acceptance rate 0.50, ranked."
    )
    assert aside.startswith("aside (bfloat16, replayed, 128 new tokens), fastest per dataset: he chain N=4 at 0.80×")
    assert aside.endswith("exploratory (8 < 32).")  # no ranked row: said so
