"""The empirical first-token check of the sampling modes (`python -m specbench.study.tools.lossless`):
memoised draws equal plain ones, lossless modes pass and a lossy rule fails on tiny models,
the CLI writes results/lossless_check.csv atomically and the report shows it."""

import os
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import report_text
from specbench.core.atomic import umask
from specbench.inputs.data import Prompt
from specbench.inputs.models import Pair
from specbench.results.files import read_csv
from specbench.study.job.jobspec import tree_spec
from specbench.study.tools import lossless, lossless_check
from specbench.study.tools.lossless_variant import ModeVariant
from specbench.verify.modes import get_mode
from test_hydra import specbench

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from make_results import make_results  # noqa: E402

TREES = {"chain": tree_spec({"name": "chain", "budget": 3}), "tree": tree_spec({"name": "binary", "budget": 4})}
T1 = {"temperature": 1.0, "top_p": 1.0}


@pytest.fixture(scope="module")
def pair_and_prompt(tiny_draft, tiny_target, tiny_tokenizer):
    pair = Pair("tiny", "d", "t", tiny_draft, tiny_target, tiny_tokenizer, False)
    return pair, Prompt("p0", "", tiny_tokenizer.encode("def fibonacci(n):\n    if n"), "x")


@pytest.mark.parametrize(
    "mode,tree,other",
    [
        ("mss", TREES["tree"], "traversal"),
        ("traversal", TREES["tree"], "mss"),
        ("block", TREES["chain"], "speculative"),
    ],
)
def test_memoised_batched_draws_equal_the_plain_engines_draws(pair_and_prompt, mode, tree, other):
    """Memo, batching and a second mode verifying the same drafted trees change no draw."""
    from dataclasses import replace

    from specbench.engine.memo import MemoModel

    pair, pr = pair_and_prompt
    (plain,) = lossless_check.first_tokens(pair, pr.ids, 0, [(mode, {})], tree, 25, T1)
    memo = replace(pair, draft=MemoModel(pair.draft), target=MemoModel(pair.target))
    grouped = lossless_check.first_tokens(memo, pr.ids, 0, [(mode, {}), (other, {})], tree, 25, T1, batch=8)
    assert grouped[0] == plain and len(grouped[1]) == 25
    assert 0 < memo.target.forwards <= 25 / 8 + 1  # the batch's new nodes in one forward
    warmed = replace(pair, draft=MemoModel(pair.draft), target=MemoModel(pair.target))
    for m in (warmed.draft, warmed.target):
        m.set_base(pr.ids[:-1])
    lossless_check.warm(warmed, pr.ids[-1], get_mode(mode).params(T1), (16, 64))  # one batched forward per depth
    assert warmed.target.forwards == 1 and len(warmed.target.memo) == 1 + 16 + 64
    assert lossless_check.first_tokens(warmed, pr.ids, 0, [(mode, {})], tree, 25, T1, batch=5)[0] == plain
    with pytest.raises(ValueError, match="one prompt at a time"):
        warmed.target.set_base(pr.ids[:-1])
        lossless_check.first_tokens(warmed, pr.ids[:-1], 0, [(mode, {})], tree, 2, T1, batch=2)


def test_groups_share_drafting_by_tree_and_child_rule():
    texts = [
        "speculative",
        "mss",
        "block",
        "mss[order=storage]",
        "sequoia",
        "traversal[children=sample_noreplace]",
        "hsd",
        "naive",
        "typical",
    ]
    g = lossless_check.groups([ModeVariant.parse(t) for t in texts], TREES, T1)
    assert {key: [m.text for m in modes] for key, modes in g.items()} == {
        (TREES["chain"], "sample"): ["speculative", "block", "hsd"],
        (TREES["tree"], "sample"): ["mss", "mss[order=storage]"],
        (TREES["tree"], "sample_noreplace"): ["sequoia", "traversal[children=sample_noreplace]"],
        (TREES["tree"], "topk"): ["naive", "typical"],
    }


def test_every_lossless_sampling_mode_passes_and_a_lossy_rule_fails(pair_and_prompt):
    pair, pr = pair_and_prompt
    assert set(lossless.sampling_modes()) >= {"speculative", "mss", "sequoia", "block", "traversal"}
    assert "greedy" not in lossless.sampling_modes()
    modes = [ModeVariant.parse(m) for m in lossless.sampling_modes() + ["typical"]]
    rows = lossless_check.check_prompt(pair, pr, 0, modes, TREES, 600, T1, seed=0)
    by_mode = {r["verify"]: r for r in rows}
    for name in lossless.sampling_modes():
        r = by_mode[name]
        assert r["chi2_p"] > 1e-3 and r["tv"] < r["tv_null"] + 0.05, r
    assert by_mode["typical"]["chi2_p"] < 1e-10 and by_mode["typical"]["tv"] > by_mode["typical"]["tv_null"] + 0.05
    assert by_mode["block"]["tree"] == "chain" and by_mode["mss"]["tree"] == "binary"


def test_cli_writes_the_csv_atomically_replaces_its_rows_and_the_report_shows_it(tiny_pair_dirs, tmp_path):
    out = tmp_path / "results" / "lossless_check.csv"
    make_results(str(tmp_path / "results"))
    os.remove(out)
    common = [
        f"--out={out}",
        "pair=local",
        f"pair.draft.path={tiny_pair_dirs[0]}",
        f"pair.target.path={tiny_pair_dirs[1]}",
        "dtype=float32",
        "device=cpu",
        "dataset=smoke",
        "dataset.limit=2",
    ]
    r = specbench("specbench.study.tools.lossless", "--draws=40", "--modes=mss,speculative", *common)
    assert r.returncode == 0, r.stderr[-2000:]
    table = read_csv(out)
    assert list(table.columns) == lossless.COLUMNS and len(table) == 4
    assert os.stat(out).st_mode & 0o777 == 0o666 & ~umask()
    r = specbench("specbench.study.tools.lossless", "--draws=40", "--modes=block,mss", *common)
    assert r.returncode == 0, r.stderr[-2000:]
    table = read_csv(out)  # a (prefix, mode, seed, N) check's row is replaced, the others kept
    assert sorted(table.verify) == ["block", "block", "mss", "mss", "speculative", "speculative"]
    r = specbench("specbench.study.tools.lossless", "--draws=30", "--modes=mss", "--control=", *common)
    assert r.returncode == 0, r.stderr[-2000:]
    table = read_csv(out)  # a run at another N adds its rows beside the first
    assert table.groupby("verify").n_draws.apply(sorted).to_dict() == {
        "block": [40, 40],
        "mss": [30, 30, 40, 40],
        "speculative": [40, 40],
    }
    bad = specbench("specbench.study.tools.lossless", "--modes=typical", *common)
    assert bad.returncode != 0 and bad.stderr.strip().splitlines()[-1].startswith("specbench: error: --modes")
    summary = pd.read_csv(tmp_path / "results" / "summary.csv")  # the check's pair is one of the study's
    summary.loc[0, "pair_id"] = str(table.pair_id.iloc[0])  # (rows of another pair_id are left out)
    summary.to_csv(tmp_path / "results" / "summary.csv", index=False)
    report = tmp_path / "REPORT.md"
    r = specbench("specbench.report", "--results", str(tmp_path / "results"), "--out", str(report))
    assert r.returncode == 0, r.stderr[-2000:]
    text = report_text(report)
    assert (
        "| pair | verify | child_rule | sibling_order | dtype | temperature | prefix_id | seed | n_draws | tree "
        "| budget | chi2_p | holm_p | tv | tv_null | power |"
    ) in text
    assert "Positive controls (ratio, typical, lossy rules through the same check at the same N)" in text
    assert "| ratio | topk | float32 | smoke/0 |" in text
    assert "block: 0 of 2 checks (prefix × seed) have p < 0.01" in text and "not evidence by itself" in text
    tested = int(table.chi2_p.notna().sum())  # a check with one bin has no χ² p: not a test
    assert f"Holm-adjusted over the pair's {tested} checks" in text
    shutil.rmtree(tmp_path / "results" / "figures", ignore_errors=True)


def test_the_checks_trees_are_composed_as_a_study_job_composes_them(capsys):
    """--tree medusa63 carries its option's path list (a bare {"name", "budget"} has none and
    cannot be built); an unknown shape is one line naming the flag, before any model loads."""
    from types import SimpleNamespace

    args = SimpleNamespace(chain_budget=3, tree="medusa63", tree_budget=6)
    trees = lossless.check_trees(args, ["dataset=smoke"])
    assert trees["chain"] == tree_spec({"name": "chain", "budget": 3})
    assert (trees["tree"].name, trees["tree"].budget) == ("medusa63", 6)
    assert trees["tree"].params["paths"][:3] == [[0], [0, 0], [1]]
    assert len({trees["tree"], lossless.check_trees(args, ["dataset=smoke"])["tree"]}) == 1  # a key by content
    with pytest.raises(SystemExit) as e:
        lossless.check_trees(SimpleNamespace(chain_budget=3, tree="nosuch", tree_budget=6), [])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and err[0].startswith("specbench: error: --tree: nosuch/6"), err


def test_holm_adjusts_the_family_and_only_a_surviving_check_is_flagged():
    import pandas as pd

    from specbench.report.lossless import holm, lossless_check_sentences

    p = pd.Series([0.04, 0.001, 0.03, 0.5], index=[3, 1, 2, 0])
    # by hand, ascending: 4 x 0.001, 3 x 0.03 = 0.09, max(2 x 0.04, 0.09) = 0.09, 0.5
    assert holm(p).to_dict() == pytest.approx({3: 0.09, 1: 0.004, 2: 0.09, 0: 0.5})
    rows = [
        dict(pair="x", verify=m, chi2_p=q, n_draws=600, tv=0.1, tv_null=0.1)
        for m, q in (("a", 0.003), ("a", 0.5), ("b", 0.2), ("b", 0.9))
    ]
    text = " ".join(lossless_check_sentences(pd.DataFrame(rows)))
    assert "a: 1 of 2 checks" in text and "Holm-adjusted over the pair's 4 checks 0.012" in text
    assert "look at" not in text  # 0.003 x 4 = 0.012 survives no 0.01 test
    rows[0]["chi2_p"] = 0.001
    assert "1 reject the target's distribution after adjustment" in " ".join(
        lossless_check_sentences(pd.DataFrame(rows))
    )


def test_replace_keys_keep_hash_like_identifiers_as_text():
    """A pair_id like 3726142e8142 is no number: two such ids never collide as float('inf')."""
    from specbench.study.tools.lossless import REPLACE_KEY, replace_keys

    row = {k: 0 for k in REPLACE_KEY}
    a, b = dict(row, pair_id="3726142e8142", temperature="1.0"), dict(row, pair_id="1234567e9999", temperature=1)
    ka, kb = replace_keys(pd.DataFrame([a, b]))
    assert ka != kb and ka[REPLACE_KEY.index("pair_id")] == "3726142e8142"
    assert ka[REPLACE_KEY.index("temperature")] == kb[REPLACE_KEY.index("temperature")] == "1"


def test_holm_ignores_missing_p_values():
    from specbench.report.lossless import holm

    got = holm(pd.Series([0.01, 0.04, float("nan"), 0.03, 0.005]))
    assert got.isna().tolist() == [False, False, True, False, False]
    assert got.dropna().round(6).tolist() == [0.03, 0.06, 0.06, 0.02]


def test_a_memoised_context_keeps_its_first_logits(pair_and_prompt):
    """An ancestor re-forwarded for a new child's keys is not overwritten (in bf16 the new
    forward's batch would move its logits, and the check's target law with them)."""
    from dataclasses import replace

    from specbench.engine.memo import MemoModel

    pair, pr = pair_and_prompt
    memo = replace(pair, target=MemoModel(pair.target)).target
    memo.set_base(pr.ids[:-1])
    root = (int(pr.ids[-1]),)
    first = memo.logits([root])[0].clone()
    memo.memo[root] = first + 1.0  # a stand-in for the first forward's rounding
    child = root + (int(first.argmax()),)
    memo.logits([child])
    assert memo.forwards == 2 and child in memo.memo
    assert bool((memo.memo[root] == first + 1.0).all())


def test_the_report_states_the_checks_power():
    from specbench.report.lossless import power_sentences

    rows = pd.DataFrame(
        {
            "n_draws": [1200, 1200, 15148],
            "n_bins": [6, 5, 8],
            "tv_target": 0.02,
            "alpha": 0.01,
            "power": [0.048, 0.05, 0.9],
        }
    )
    small, full = power_sentences(rows)  # one sentence per run size (N)
    assert small.startswith("Power at 1200 draws (2 checks, up to 6 bins)") and "at least 0.048" in small
    assert "against a TV of 0.068" in small and "takes 13768 draws per group" in small
    assert full.startswith("Power at 15148 draws (1 checks, up to 8 bins)") and "at least 0.9" in full
    assert "takes" not in full
