"""python -m specbench.report: determinism, links, coverage, no empty tables or sections, paired
comparisons (refusals and a hand-computed bootstrap), losslessness, no torch, graceful degradation."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import forkserver
from conftest import report_figures, report_text

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from make_results import make_results  # noqa: E402

from specbench.report import compare  # noqa: E402
from specbench.report.markdown import md_table  # noqa: E402
from specbench.results.files import (  # noqa: E402
    STEPS_FILE,
    SUMMARY_REQUIRED,  # noqa: E402
    read_csv,
)
from specbench.results.optional import filled  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def run_report(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m specbench.report ARGS`` in cwd (forked from an interpreter that has imported the
    report's modules, and not torch: forkserver.py)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return forkserver.run(
        ["specbench.report", *args], cwd=cwd, env=env, timeout=900, preload=("specbench.report.build",)
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The fixture results rendered twice, in two separate folders."""
    src = make_results(str(tmp_path_factory.mktemp("src") / "results"))
    outs = []
    for name in ("a", "b"):
        d = tmp_path_factory.mktemp(name)
        shutil.copytree(src, d / "results")
        proc = run_report(d)
        assert proc.returncode == 0, proc.stderr
        outs.append(d)
    return outs


def test_report_is_byte_deterministic(built):
    a, b = built
    assert (a / "REPORT.md").read_bytes() == (b / "REPORT.md").read_bytes()
    figs_a = sorted(p.name for p in (a / "results" / "figures").glob("*.png"))
    figs_b = sorted(p.name for p in (b / "results" / "figures").glob("*.png"))
    assert figs_a == figs_b and len(figs_a) >= 8
    for name in figs_a:
        assert (a / "results" / "figures" / name).read_bytes() == (b / "results" / "figures" / name).read_bytes(), name


def test_every_linked_figure_exists(built):
    d = built[0]
    links = report_figures(d / "REPORT.md")  # a page's links are relative to its folder
    assert len(links) >= 8 and all(p.is_file() for p in links), links
    expected = {
        "acceptance_vs_budget.png",
        "gain_vs_chain.png",
        "alpha_by_depth.png",
        "acceptance_vector.png",
        "mode_gains.png",
        "lossy_tradeoff.png",
        "attention_time.png",
        "attention_speedup.png",
        "attention_grid.png",
        "attention_fusion.png",
        "attention_model.png",
        "projected_speedup.png",
        "speed_measured_vs_projected.png",
        "gap_to_optimum.png",
        "accept_length_hist.png",
    }
    assert expected <= {Path(link).name for link in links}
    # every file in results/figures/ is linked: no stale figure survives
    assert {p.name for p in (d / "results" / "figures").iterdir()} == {Path(link).name for link in links}


def test_every_configuration_appears(built):
    d = built[0]
    text = report_text(d / "REPORT.md")
    summary = read_csv(d / "results" / "summary.csv")
    for h in summary.config_hash:
        assert f"| {h} |" in text, h


def test_sections_and_definitions(built):
    text = report_text(built[0] / "REPORT.md")
    headings = re.findall(r"^## (.+)$", (built[0] / "REPORT.md").read_text(), flags=re.M)  # the body's
    order = ["TL;DR", "Findings", "Method", "Limitations", "The rest of the report"]
    assert headings == order  # the answer comes first; the long sections are linked pages
    assert "bonus token is **not** counted" in text and "bonus token **is** counted" in text
    assert "ratio of sums" in text and "paired" in text
    for ref in (
        "Leviathan",
        "Chen",
        "SpecInfer",
        "Sequoia",
        "EAGLE-2",
        "EAGLE-3",
        "EAGLE:",
        "Medusa",
        "Spec-Bench",
        "Block Verification",
        "Traversal Verification",
        "Heterogeneous",
        "LayerSkip",
        "Draft & Verify",
        "Prompt Lookup",
        "Flex Attention",
    ):
        assert ref in text, ref
    assert "block T=1 | speculative, same trees | chain | 4 |" in text
    assert "traversal T=1 | mss (random order), same trees | binary | 4 |" in text  # the baseline names its order
    assert "(n=6, no CI)" in text and "exploratory (6 prompts < 32)" in text
    assert "measured ×" in text and "| synthetic |" in text and "DP prediction, best tree" in text


def _tables(text: str) -> list[list[str]]:
    blocks, cur = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cur.append(line)
        elif cur:
            blocks.append(cur)
            cur = []
    return blocks


def _assert_no_empty_parts(text: str) -> None:
    for t in _tables(text):
        assert len(t) >= 3 and set(t[1]) <= set("|-"), t[:2]  # header, rule, at least one row
    sections = re.split(r"^#{2,3} .+$", text, flags=re.M)[1:]
    assert all(s.strip() for s in sections), "a heading with nothing under it"


def test_no_empty_table_or_section(built):
    _assert_no_empty_parts(report_text(built[0] / "REPORT.md"))
    with pytest.raises(RuntimeError, match="empty table"):
        md_table([], ["a", "b"])


def test_losslessness_section(built):
    text = report_text(built[0] / "REPORT.md")
    assert "| 83.3% | mt_bench/0@5 |" in text  # the one divergent output, located
    assert "53 of 54" in text and "zero by its algebra" in text and "not evidence by itself" in text
    assert "| synth | mss | 1.000 | humaneval/0 | 2000 |" in text  # lossless_check.csv shown


def test_lossless_rows_of_a_pair_id_no_summary_row_has_are_left_out_and_counted(built, tmp_path):
    """A check measured under an earlier identity of the models is not shown beside the current pair."""
    shutil.copytree(built[0] / "results", tmp_path / "results")
    summary = pd.read_csv(tmp_path / "results" / "summary.csv")
    check = pd.read_csv(tmp_path / "results" / "lossless_check.csv")
    check["pair_id"] = [summary.pair_id.iloc[0]] * (len(check) - 1) + ["stale0000000"]
    check.to_csv(tmp_path / "results" / "lossless_check.csv", index=False)
    proc = run_report(tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = report_text(tmp_path / "REPORT.md")
    assert "1 row of results/lossless_check.csv belongs to a pair_id that no row of summary.csv has" in text
    assert text.count("| synth | mss |") + text.count("| synth | speculative |") == len(check) - 1


# --------------------------------------------------------------------------
# the comparison helper
# --------------------------------------------------------------------------
def _steps(config: str, per_prompt: dict) -> pd.DataFrame:
    return pd.DataFrame(
        [dict(config_hash=config, prompt_id=p, emitted=e) for p, emitted in per_prompt.items() for e in emitted]
    )


ROW = dict(dataset="humaneval", temperature=0.0, dtype="float32", max_new_tokens=64)


def test_paired_bootstrap_hand_computed():
    """a: p0 emits 2,2 and p1 1,1 -> 6/4 = 1.5; b: 1 everywhere -> 1.0; p2 only in a is ignored.
    Resampling two prompts: {p0,p0} gives Δ=1, {p1,p1} Δ=0, mixed Δ=0.5 (prob 1/4, 1/4, 1/2), so the
    2.5th and 97.5th percentiles of the bootstrap are exactly 0 and 1."""
    steps = pd.concat([_steps("a", {"p0": [2, 2], "p1": [1, 1], "p2": [5]}), _steps("b", {"p0": [1, 1], "p1": [1, 1]})])
    p = compare.paired_difference(compare.prompt_sums(steps), dict(ROW, config_hash="a"), dict(ROW, config_hash="b"))
    assert (p.n_prompts, p.a_value, p.b_value, p.diff) == (2, 1.5, 1.0, 0.5)
    assert (p.lo, p.hi) == (0.0, 1.0) and p.includes_zero
    # ratio of sums, not a mean of per-prompt means: p0 3 steps of 3, p1 1 step of 1 -> 10/4, not 2;
    # resamples {p0,p0} Δ=2, {p1,p1} Δ=0, mixed Δ=10/4-1=1.5 -> interval [0, 2]
    steps = pd.concat([_steps("a", {"p0": [3, 3, 3], "p1": [1]}), _steps("b", {"p0": [1, 1, 1], "p1": [1]})])
    p = compare.paired_difference(compare.prompt_sums(steps), dict(ROW, config_hash="a"), dict(ROW, config_hash="b"))
    assert (p.a_value, p.diff, p.lo, p.hi) == (2.5, 1.5, 0.0, 2.0)


@pytest.mark.parametrize(
    "key,value", [("temperature", 1.0), ("dtype", "bfloat16"), ("max_new_tokens", 128), ("dataset", "mt_bench")]
)
def test_comparison_refuses_mismatched_settings(key, value):
    sums = compare.prompt_sums(pd.concat([_steps("a", {"p0": [2]}), _steps("b", {"p0": [1]})]))
    with pytest.raises(compare.Incomparable, match=key) as e:
        compare.paired_difference(sums, dict(ROW, config_hash="a"), dict(ROW, config_hash="b", **{key: value}))
    assert "\n" not in str(e.value)


def test_comparison_refuses_no_shared_prompts():
    sums = compare.prompt_sums(pd.concat([_steps("a", {"p0": [2]}), _steps("b", {"p1": [1]})]))
    with pytest.raises(compare.Incomparable, match="share no prompts") as e:
        compare.paired_difference(sums, dict(ROW, config_hash="a"), dict(ROW, config_hash="b"))
    assert "\n" not in str(e.value)


def test_output_equality():
    assert compare.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert compare.first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert compare.first_divergence([1, 2], [1, 2, 7]) == 2
    outs = {
        ("a", "p0"): [1, 2],
        ("a", "p1"): [3, 4],
        ("base", "p0"): [1, 2],
        ("base", "p1"): [3, 9],
        ("base", "p2"): [0],
    }
    assert compare.output_equality(outs, "a", "base") == dict(n_prompts=2, identical=1, diverged=[("p1", 1)])


def test_report_does_not_import_torch(tmp_path):
    """... and, written outside the working folder (--out in another folder than --results' parent),
    still lists its inputs on the appendix page (it had looked for them from the wrong folder)."""
    make_results(str(tmp_path / "results"))
    (tmp_path / "out").mkdir()
    out = str(tmp_path / "out" / "R.md")
    code = (
        "import sys; from specbench.report import build as report; "
        f"rc = report.main(['--results', {str(tmp_path / 'results')!r}, '--out', {out!r}]); "
        "assert rc == 0; print('torch' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False"
    inputs = (tmp_path / "results" / "tables" / "appendix.md").read_text().split("**Inputs.**")[1].splitlines()[0]
    assert "[summary.csv](../summary.csv)" in inputs, inputs


def test_degrades_with_summary_only(tmp_path):
    src = tmp_path / "full"
    make_results(str(src))
    res = tmp_path / "results"
    res.mkdir()
    summary = read_csv(src / "summary.csv")
    keep = list(SUMMARY_REQUIRED)  # the report's required summary columns alone
    summary.loc[0, "config_hash"] = "0123e4567890"  # looks like a float: must stay text
    summary[keep].to_csv(res / "summary.csv", index=False)
    proc = run_report(tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = report_text(tmp_path / "REPORT.md")
    assert "attention.csv is absent" in text and "no speedup is measured" in text
    assert "environment.json is absent" in text and "outputs.jsonl.gz is absent" in text
    assert "steps.csv.gz is absent, so no paired mode comparison is shown" in text
    _assert_no_empty_parts(text)
    for h in summary.config_hash:
        assert f"| {h} |" in text
    for fig in report_figures(tmp_path / "REPORT.md"):
        assert fig.is_file(), fig


def test_missing_summary_is_one_line_error(tmp_path):
    proc = run_report(tmp_path)
    assert proc.returncode == 2
    assert "specbench.collect" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "REPORT.md").exists()


def test_notebook_executes(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    make_results(str(tmp_path / "results"))
    monkeypatch.setenv("SPECBENCH_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(ROOT / "notebooks" / "analysis.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "notebooks")}}
    ).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    from specbench.report import build, findings

    found = build.compute(build.load(str(tmp_path / "results"))).findings
    assert "configurations" in text and all(s in text for s in findings.sentences(found, "analysis"))


def test_paired_rows_are_compared_on_their_own_trees(tmp_path):
    """block/traversal at N=4 verified the token-level rule's trees (pair_key): their reference is
    that decode, the gain is paired per prompt (and the exact laws give it on those trees); at N=8 each decoded alone."""
    from specbench.report import analysis

    src = Path(make_results(str(tmp_path / "results")))
    summary, steps = read_csv(src / "summary.csv"), read_csv(src / STEPS_FILE)
    df, sums = analysis.prepare(summary), compare.prompt_sums(steps)
    gains = analysis.mode_gains(df, sums).set_index(["verify", "budget"])
    for mode, ref in (("block", "speculative"), ("traversal", "mss")):
        paired, alone = gains.loc[(mode, 4)], gains.loc[(mode, 8)]
        assert paired.same_trees and not alone.same_trees
        assert paired.ref_hash == paired.pair_key
        assert summary.set_index("config_hash").loc[paired.ref_hash, "verify"] == ref
        # the fixture's paired rows accept >= their reference on every step: a positive paired gain
        assert paired["diff"] > 0 and paired["lo"] >= 0 and paired["n_shared"] == 6
        assert paired["exact_gain"] > 0 and alone["exact_gain"] != alone["exact_gain"]  # NaN on own trees
    old = summary.drop(columns=["pair_key", "pair_role"])  # CSVs from before pairing
    assert not analysis.mode_gains(analysis.prepare(old), sums).empty


def test_gap_to_optimum_section(built):
    """The DP's prediction per budget, each shape's measured share of it, and sentences from the rows."""
    d = built[0]
    text = report_text(d / "REPORT.md")
    gap = read_csv(d / "results" / "gap_to_optimum.csv")
    section = text.split("### Gap to the Sequoia DP's prediction", 1)[1].split("\n## ", 1)[0]
    assert (
        "| **DP prediction, best tree** |" in section
        and "synth on humaneval: the best static shape per budget" in section
    )
    r = gap[(gap.dataset == "humaneval") & (gap.tree == "chain") & (gap.budget == 4) & (gap.dtype == "float32")].iloc[0]
    assert f"{r.tokens_per_step:.2f} ({r.fraction:.0%}; DP {r.predicted:.2f})" in section
    assert set(gap.tree) == {"chain", "binary", "kary"}  # eagle2 is not a static shape
    assert (gap.predicted <= gap.optimum + 1e-6).all()
    matrix = read_csv(d / "results" / "acceptance_matrix.csv")
    assert set(matrix.scope) == {"config", "pooled"} and matrix.conditional.dropna().between(0, 1).all()


def test_setup_quotes_the_measured_continuation_divergence_or_says_it_is_absent():
    import pandas as pd

    from specbench.report.batch import divergence_sentence

    assert "continuation_divergence.csv is absent" in divergence_sentence(None)
    div = pd.DataFrame(
        [
            dict(
                pair="p",
                dtype="float32",
                dataset="humaneval",
                n_prompts=32,
                max_new_tokens=128,
                batch_size=32,
                tokens=4096,
                diverged=1,
                tokens_before_divergence=4000,
                divergences="HumanEval/3@17 (margin 0.0012)",
                batch1_s=10.0,
                batched_s=2.0,
                speedup=5.0,
            )
        ]
    )
    text = divergence_sentence(div)
    assert "1 of 32 humaneval continuations of 128 tokens at batch 32 differ" in text
    assert "HumanEval/3@17 (margin 0.0012)" in text and "5.00× faster" in text and "exact_continuations=true" in text


def test_a_paired_control_is_not_compared_and_traversal_on_a_chain_meets_mss_on_its_trees():
    """mss re-verifying its own decode's chains (a control) is no subject of the mode table; traversal
    on those chains is compared with that control (mss on a chain is speculative sampling), paired."""
    from specbench.report import analysis

    base = dict(
        pair="p",
        dataset="d",
        dtype="bfloat16",
        max_new_tokens=48,
        tree="chain",
        tree_params="{}",
        budget=4,
        temperature=1.0,
    )
    from specbench.study.job.describe import mode_columns

    rows = [
        dict(base, config_hash="spec", verify="speculative", pair_key="spec", pair_role="decode"),
        dict(base, config_hash="mss", verify="mss", pair_key="mss", pair_role="decode"),
        dict(base, config_hash="mss_ctl", verify="mss", pair_key="mss", pair_role="paired"),
        dict(base, config_hash="trav", verify="traversal", pair_key="mss", pair_role="paired"),
    ]
    df = pd.DataFrame([dict(r, **mode_columns(r["verify"])) for r in rows])  # each mode's declared role
    assert list(df.config_hash[analysis._controls(df)]) == ["mss_ctl"]
    keys = analysis.GROUP + ["tree", "tree_params", "budget", "temperature"]

    def ref(h):
        return analysis._reference_row(df, df.set_index("config_hash").loc[h].to_dict() | {"config_hash": h}, keys)

    assert list(ref("trav").config_hash) == ["mss_ctl"]  # the same drafted chains
    assert list(ref("mss").config_hash) == ["spec"]  # never itself: speculative's own decode


def test_the_hour_excludes_the_set_up_and_the_extended_steps():
    from specbench.report.runtimes import run_times

    times = pd.DataFrame(
        {
            "run": [1, 1, 1, 2, 2],
            "seconds": [70, 600, 5, 900, 10],
            "step": [
                "set-up (environment)",
                "study: sweep=reference",
                "extended: study: sweep=x",
                "extended: losslessness at 90% power",
                "study: sweep=reference",
            ],
        }
    )
    times = filled(times, "run_times.csv")  # as the report reads it
    text = run_times(times)
    assert "up to the report: 600 s = 10.0 min; the steps marked extended" in text  # per step, the longest run
    assert "took 905 s = 15.1 min more." in text
    assert "extended" not in run_times(times[~times.step.str.startswith("extended")])


def test_a_served_deployment_sits_beside_the_study(built, tmp_path):
    """results/served.csv (import_metrics) puts each served deployment's tokens per step beside
    the study's row of the same pair, data, tree and budget."""
    from specbench.study.serving.import_metrics import main as import_main
    from test_import_metrics import VLLM_DUMP

    shutil.copytree(built[0] / "results", tmp_path / "results")
    rows = read_csv(tmp_path / "results" / "summary.csv")
    chain = rows[(rows.tree == "chain") & (rows.temperature == 0) & (rows.budget > 0)].iloc[0]
    dump = tmp_path / "metrics.txt"
    dump.write_text(VLLM_DUMP)
    import_main(
        [
            str(dump),
            "--engine",
            "vllm",
            "--pair",
            chain.pair,
            "--dataset",
            chain.dataset,
            "--out",
            str(tmp_path / "results" / "served.csv"),
        ]
    )  # fmt: skip  (vLLM's budget is counted: 3)
    proc = run_report(tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = report_text(tmp_path / "REPORT.md")  # with its pages: the served line is on speed.md
    line = next(ln for ln in text.splitlines() if ln.startswith("- vllm served "))
    assert f"{chain.pair} chain N=3 on {chain.dataset}: 2.80 tokens/step over 100 steps" in line
    assert "the study measured" in line or "no greedy row" in line
