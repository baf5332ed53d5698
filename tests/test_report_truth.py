"""REPORT.md says what the evidence shows (issue 83): the machine first, the limitations computed from the
rows, the word counts as `wc -w` counts them, one measured number per key on every page."""

import re
from pathlib import Path

import pandas as pd
import pytest

from specbench.report import limitations, machines, mainpage
from specbench.report.context import Inputs, Tables
from specbench.results import speedstats as ss
from test_speed_bench import table

ROOT = Path(__file__).resolve().parents[1]


def bench(machine: str, mid: str, walls: dict, run: str) -> pd.DataFrame:
    return table(walls, run=run, machine=machine, machine_id=mid, weights="pretrained", roster="answer")


def test_a_machine_where_no_tree_pays_answers_plain_decoding_first():
    fast = bench("CPU F (AVX512), 2 cores", "f", {"plain": 2.0, ss.PLAIN_AA: 2.0, "chain N=3": 1.4}, "r1")
    slow = bench("CPU S (AVX2), 2 cores", "s", {"plain": 2.0, ss.PLAIN_AA: 2.0, "chain N=3": 2.8}, "r2")
    t = Tables(measured=ss.answers(pd.concat([fast, slow], ignore_index=True)))
    c = machines.classes(t.measured).set_index("machine")
    assert c.loc["CPU F (AVX512)"].pays == 1 and c.loc["CPU S (AVX2)"].pays == 0
    text = machines.section(t)
    row = next(line for line in text.splitlines() if line.startswith("| CPU S (AVX2)"))
    assert "**plain decoding**" in row and "chain N=3 0.71×" in row


def test_a_new_machines_rows_are_named_in_the_limitations():
    old = bench("CPU F (AVX512), 2 cores", "f", {"plain": 2.0, "chain N=3": 1.4}, "r1")
    new = bench("Brand New CPU (AVX10), 2 cores", "n", {"plain": 2.0, "chain N=3": 1.9}, "r2")
    said = limitations.timing_machines(Tables(measured=ss.answers(pd.concat([old, new]))), Inputs())
    assert "Brand New CPU (AVX10): 1 keys" in said and "CPU F (AVX512)" in said and "2 machines" in said
    assert "Every" not in said and " only " not in said.split(";")[0]


def tldr_of(report: str) -> str:
    return report.split("## TL;DR", 1)[1].split("\n## ", 1)[0]


def test_the_committed_report_fits_its_word_counts_as_wc_counts_them():
    report = (ROOT / "REPORT.md").read_text()
    main = report.split("## The rest of the report", 1)[0]
    kept = [
        line for line in main.splitlines()
        if not line.lstrip().startswith("![") and not re.fullmatch(r"\s*(?:[-*]\s*)?\[[^\]]*\]\([^)]*\)[.,;]?\s*", line)
    ]  # fmt: skip
    assert mainpage.words(main) == sum(len(line.split()) for line in kept)
    assert mainpage.words(report) <= mainpage.MAX_WORDS
    assert mainpage.words(tldr_of(report)) <= mainpage.MAX_TLDR


def test_the_first_screen_names_each_machines_answer_and_the_same_number_on_speed_md():
    report = (ROOT / "REPORT.md").read_text()
    first = tldr_of(report)[:2500]
    assert "AMD EPYC (AVX2), specbench, fp32 | **plain decoding**" in first
    speed = (ROOT / "results" / "tables" / "speed.md").read_text()
    for m in re.finditer(
        r"^\| (\w+)/(\w+) \| ([^|+]+?) \+\d+ \| (\d\.\d\d× \[\d\.\d\d, \d\.\d\d\])", tldr_of(report), re.M
    ):
        pair, dataset, tree, cell = m.groups()
        assert f"| {pair} | {dataset} | {tree}" in speed and cell in speed, (pair, dataset)


def test_a_garbled_default_run_record_is_refused_in_one_line_not_reported_absent(tmp_path):
    from specbench.report.load import read_default_run

    assert read_default_run(str(tmp_path)) is None  # absent: said so in the report
    (tmp_path / "default_run.json").write_text('{"covered": "1 of 14", ')
    with pytest.raises(ValueError, match=r"default_run.json: unreadable .*git checkout") as e:
        read_default_run(str(tmp_path))
    assert "\n" not in str(e.value)
    (tmp_path / "default_run.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a JSON object"):
        read_default_run(str(tmp_path))


def test_finding_3_prices_each_width_where_the_secant_model_claims_wins_the_benchmark_refutes():
    """The AVX2 host's curve: t(3)/t(1) far above the secant's 1 + 2m, so the secant model's wins there are
    the per-width model's losses, as the benchmark on that host measured (REPORT.md, committed results)."""
    report = (ROOT / "REPORT.md").read_text()
    line = next(ln for ln in report.splitlines() if ln.startswith("Charging each replayed configuration"))
    avx2 = re.search(
        r"on AMD EPYC \(AVX2\) \(float32\) a tree beats plain decoding in (\d+) of (\d+) .*?secant model: (\d+)", line
    )
    assert avx2 and avx2.group(1) == "0" and int(avx2.group(3)) > 0


def test_one_keys_measured_speedup_is_one_number_in_the_tldr_answer_speed_speedup_csv_and_export():
    """The TL;DR's best tree on the AVX-512 EPYC (the benchmark's pooled estimate of its key): the same number
    in answer.md, speed.md, results/speedup.csv and the serving export of that configuration."""
    from specbench.study.serving.export import export

    row = next(line for line in tldr_of((ROOT / "REPORT.md").read_text()).splitlines() if "(AVX512), specbench" in line)
    pair, dataset, tree, budget, cell = re.search(
        r"\| (\w+)/(\w+) (\w+) N=(\d+) (\d\.\d\d× \[\d\.\d\d, \d\.\d\d\])", row
    ).groups()
    answer = (ROOT / "results" / "tables" / "answer.md").read_text()
    assert re.search(rf"^\| {tree} \| {budget} \(.*\| {re.escape(cell)} \(benchmark\) \|", answer, re.M)
    assert f"{tree} N={budget} {cell}" in (ROOT / "results" / "tables" / "speed.md").read_text()
    s = pd.read_csv(ROOT / "results" / "speedup.csv")
    s = s[(s.pair == pair) & (s.dataset == dataset) & (s.tree == tree) & (s.budget == int(budget))]
    s = s[s.benchmark.notna() & (s.batch_size == 1)]
    assert {f"{r.benchmark:.2f}× [{r.benchmark_lo:.2f}, {r.benchmark_hi:.2f}]" for r in s.itertuples()} == {cell}
    got, _ = export([f"pair={pair}", f"dataset={dataset}", f"tree={tree}", f"tree.budget={budget}", "format=vllm"])
    m = got["measured"]
    assert f"{m['speedup']:.2f}× [{m['interval_95'][0]:.2f}, {m['interval_95'][1]:.2f}]" == cell
