"""Power of the empirical lossless check (specbench/results/power.py): the N it picks
detects a first-token TV of 0.02 at the stated power, and a deliberately lossy rule fails
the check on tiny models while the lossless modes pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specbench.inputs.data import Prompt
from specbench.inputs.models import Pair
from specbench.results.power import draws_for_power, power, power_tv
from specbench.study.job.jobspec import tree_spec
from specbench.study.tools import lossless_check
from specbench.study.tools.lossless_variant import ModeVariant, parse_variant

TV, ALPHA, TARGET, BINS = 0.02, 0.01, 0.9, 8


def test_draws_for_power_is_the_smallest_n():
    n = draws_for_power(BINS - 1, TV, ALPHA, TARGET)
    assert power(n, BINS - 1, TV, ALPHA) >= TARGET > power(n - 1, BINS - 1, TV, ALPHA)
    assert draws_for_power(1, TV, ALPHA, TARGET) < n < draws_for_power(15, TV, ALPHA, TARGET)  # bins cost power
    with pytest.raises(ValueError):
        draws_for_power(BINS - 1, TV, ALPHA, 1.5)


def test_power_tv_inverts_the_power_bound():
    n = draws_for_power(BINS - 1, TV, ALPHA, TARGET)
    assert power_tv(n, BINS - 1, ALPHA, TARGET) == pytest.approx(TV, rel=1e-3)
    assert power_tv(n // 4, BINS - 1, ALPHA, TARGET) == pytest.approx(2 * TV, rel=1e-2)  # TV ~ 1/sqrt(N)


def shifted(p: np.ndarray, tv: float) -> np.ndarray:
    """A law at TV ``tv`` from p that moves mass between the two halves of p (the worst case
    of the bound: the least detectable shift of that size)."""
    order = np.argsort(-p)
    cum = np.cumsum(p[order])
    a = order[cum <= 0.5 + 1e-12]
    b = np.setdiff1d(order, a)
    out = p.copy()
    out[a] += tv * p[a] / p[a].sum()
    out[b] -= tv * p[b] / p[b].sum()
    return out


def test_a_tv_002_shift_is_rejected_at_the_stated_power():
    """Monte Carlo over 300 repetitions of the check at the N it picks: the rejection rate
    of a law at TV 0.02 is at least the stated power (up to Monte Carlo error), and an exact
    sampler is rejected at about alpha."""
    rng = np.random.default_rng(0)
    p = np.array([0.3, 0.2, 0.15, 0.1, 0.08, 0.06, 0.05, 0.03, 0.02, 0.01])
    n = draws_for_power(BINS - 1, TV, ALPHA, TARGET)
    bad = shifted(p, TV)
    assert 0.5 * np.abs(bad - p).sum() == pytest.approx(TV)
    reps = 300

    def rejected(law):
        tokens = rng.choice(len(p), size=n, p=law)
        return lossless_check.fit(tokens, torch.tensor(p), max_bins=BINS)["chi2_p"] < ALPHA

    rate = np.mean([rejected(bad) for _ in range(reps)])
    null = np.mean([rejected(p) for _ in range(reps)])
    assert rate >= TARGET - 3 * np.sqrt(TARGET * (1 - TARGET) / reps), rate
    assert null <= ALPHA + 3 * np.sqrt(ALPHA / reps), null


@pytest.fixture(scope="module")
def pair_and_prompt(tiny_draft, tiny_target, tiny_tokenizer):
    pair = Pair("tiny", "d", "t", tiny_draft, tiny_target, tiny_tokenizer, False)
    return pair, Prompt("p0", "", tiny_tokenizer.encode("def fibonacci(n):\n    if n"), "x")


def test_a_lossy_rule_fails_the_check_at_its_power_on_tiny_models(pair_and_prompt):
    """The positive control: at the N that gives 90% power against TV 0.1, the lossy
    ``typical`` rule (exact first-token TV >= 0.1 at this prefix) is rejected; storage-order
    mss and traversal on trees drawn without replacement pass the same check."""
    pair, pr = pair_and_prompt
    test = {"tv": 0.1, "alpha": ALPHA, "max_bins": BINS}
    n = draws_for_power(BINS - 1, test["tv"], ALPHA, TARGET)
    trees = {"chain": tree_spec({"name": "chain", "budget": 3}), "tree": tree_spec({"name": "binary", "budget": 4})}
    modes = [ModeVariant.parse(m) for m in ("mss[order=storage]", "traversal[children=sample_noreplace]", "typical")]
    rows = {
        r["verify"]: r
        for r in lossless_check.check_prompt(
            pair, pr, 0, modes, trees, n, {"temperature": 1.0, "top_p": 1.0}, seed=0, test=test
        )
    }
    control = rows["typical"]
    assert control["exact_tv"] >= test["tv"] and control["power"] >= TARGET and control["rejected"]
    assert rows["mss"]["sibling_order"] == "storage" and rows["traversal"]["child_rule"] == "sample_noreplace"
    for name in ("mss", "traversal"):
        assert rows[name]["chi2_p"] > ALPHA / 10 and rows[name]["power"] >= TARGET, rows[name]


def test_mode_variants_parse():
    assert parse_variant("mss[order=storage]") == ("mss", {"order": "storage"})
    assert parse_variant("traversal") == ("traversal", {})
    assert parse_variant("block[children=sample_noreplace;top_p=1]") == (
        "block",
        {"children": "sample_noreplace", "top_p": "1"},
    )
    for bad in ("mss[order]", "mss order=storage", "[x=1]"):
        with pytest.raises(ValueError, match="--modes"):
            parse_variant(bad)
    mode = ModeVariant.parse("mss[order=storage]")
    assert (mode.text, mode.name, mode.own) == ("mss[order=storage]", "mss", {"order": "storage"})
    assert mode.params({"temperature": 1.0, "order": "storage_rank"}) == {"temperature": 1.0, "order": "storage"}
    with pytest.raises(ValueError, match="--modes"):
        ModeVariant.parse("mss[order]")
