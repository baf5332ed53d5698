"""HSD (Zhou et al. 2026, as its public code runs it) and GBV (greedy multi-path block
verification, derived after Thomas and Pal 2026): specbench/verify/seqlevel.py.

Exact checks enumerate every drafted tree of a small Markov world and every verifier coin
(through each mode's own law, ``distshift.path_end_law``); chi-square through the drafter's
child selection; expected accepted, exact, over 100 random worlds (in expectation over the
draws); paired-verification fit."""

from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare

from specbench.study.job.checks import paired_fits
from specbench.verify import distshift, seqlevel
from specbench.verify.block import root_path
from specbench.verify.modes import get_mode
from test_block_traversal import CHAIN3, TREE12, TREE21, drafted_trees, random_chain, random_tables
from test_lossless_modes import NOREP, STAR3, UNBALANCED, markov_joint, step_joint, three_tokens
from test_mode_orderings import WORLDS, mean_accepted, world
from test_verify import draft_tree

PATHS2 = [-1, 0, 0, 1, 2, 3, 4]  # two paths of three tokens from the root (K = 2 candidate paths)
CHAIN1 = [-1, 0]


def tv(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().sum()) / 2


# --------------------------------------------------------------------------
# HSD: the public code's formulas, and its exact law
# --------------------------------------------------------------------------
def public_code_hsd(p: torch.Tensor, q: torch.Tensor, tokens: list[int]):
    """HSD's ``_speculative_sampling`` (backward, capped) on one chain, written from the public
    code's tensors: per position k < g the stop probability sum(p_primes[k]) and the full-draft
    acceptance min(1, prod p/q)."""
    g = len(tokens) - 1
    p_i = torch.tensor([float(p[k, tokens[k + 1]]) for k in range(g)], dtype=torch.float64)
    q_i = torch.tensor([float(q[k, tokens[k + 1]]) for k in range(g)], dtype=torch.float64)
    jp = torch.cat([torch.ones(1, dtype=torch.float64), p_i.cumprod(0)[:-1]])  # P(X_1:k), k < g
    jq = torch.cat([torch.ones(1, dtype=torch.float64), q_i.cumprod(0)[:-1]])
    cap = torch.cummax(torch.maximum(jp / jq, torch.ones_like(jp)), 0).values
    diffs = (jp / cap)[:, None] * p[:g] - jq[:, None] * q[:g]
    plus, minus = diffs.clamp_min(0).sum(-1), (-diffs).clamp_min(0).sum(-1)
    stop = plus / torch.maximum(plus, minus)
    return stop.tolist(), min(1.0, float((p_i / q_i).prod()))


def test_hsd_is_the_public_codes_rule():
    """Our plan's final weights are the code's stop probabilities (k < g) and its full-draft
    acceptance (k = g); and HSD differs from block verification only at the leaf."""
    g = torch.Generator().manual_seed(0)
    differs = 0
    for _ in range(30):
        n = 5
        p, q, tokens, tree = random_chain(g, n)
        _, final = seqlevel.hsd_plan(tree, p, q)
        _, block_final = seqlevel.plan(tree, p, q)
        stop, full = public_code_hsd(p, q, tokens.tolist())
        assert final[1 : n - 1] == pytest.approx(stop[1:], abs=1e-12) and stop[0] == pytest.approx(1.0)
        assert final[n - 1] == pytest.approx(full, abs=1e-12)
        assert final[: n - 1] == block_final[: n - 1] and final[n - 1] >= block_final[n - 1] - 1e-15
        differs += final[n - 1] > block_final[n - 1] + 1e-9
    assert differs > 0


def test_hsd_as_published_is_lossy_by_exact_enumeration():
    """The paper calls HSD lossless; its public code's one-step rule is not: the law of the
    first four emitted tokens after one HSD step on a chain of 3 (then the target) is off the
    target's by TV > 0.01.  On a chain of one token it is speculative sampling (exact)."""
    P, Q = random_tables(0)
    got = step_joint("hsd", {}, CHAIN3, P, Q, "sample", 4)
    assert tv(got, markov_joint(P, 0, 4)) > 0.01
    assert tv(step_joint("block", {}, CHAIN3, P, Q, "sample", 4), markov_joint(P, 0, 4)) < 1e-12
    assert tv(step_joint("hsd", {}, CHAIN1, P, Q, "sample", 2), markov_joint(P, 0, 2)) < 1e-12
    assert not get_mode("hsd").lossless and get_mode("hsd").chain_only


def one_step_law(mode: str, parents, P, Q, rule: str) -> dict:
    """Exact law of one step's emitted tokens (accepted path + next token), as a dict."""
    spec = get_mode(mode)
    prm, out = spec.params(), {}
    for w, tree, p, q in drafted_trees(parents, P, Q, rule):
        for node, end, nxt in distshift.path_end_law(spec, tree, p, q, prm):
            toks = tuple(int(tree.tokens[n]) for n in root_path(tree, node))
            for y in range(P.shape[0]):
                key = toks + (y,)
                out[key] = out.get(key, 0.0) + w * end * float(nxt[y])
    return out


def test_hsd_verdict_follows_its_exact_law():
    """chi-square: HSD's verdict through the drafter (one step, V = 2, chain of 3) against
    its own exact (lossy) law, so what the engine runs is what the enumeration measured."""
    P, Q = random_tables(3, v=2)
    law = one_step_law("hsd", CHAIN3, P, Q, "sample")
    keys = sorted(k for k, v in law.items() if v > 0)
    spec, rng, n = get_mode("hsd"), torch.Generator().manual_seed(5), 4000
    counts = dict.fromkeys(keys, 0)
    for _ in range(n):
        tree, p, q = draft_tree(0, [1, 1, 1], "sample", P, Q, rng)
        v = spec.verdict(tree, p, q, rng, spec.params())
        counts[tuple(int(tree.tokens[i]) for i in v.path) + (v.next_token,)] += 1
    want = torch.tensor([law[k] for k in keys], dtype=torch.float64)
    want = want / want.sum() * n
    assert chisquare(torch.tensor([counts[k] for k in keys], dtype=torch.float64), want).pvalue > 0.01


# --------------------------------------------------------------------------
# GBV: lossless on every child rule it accepts
# --------------------------------------------------------------------------
@pytest.mark.parametrize("params,rule", [({}, "sample"), (NOREP, "sample_noreplace")])
def test_gbv_is_lossless_by_exact_enumeration(params, rule):
    P, Q = random_tables(4)
    Q[0] = torch.tensor([0.75, 0.25, 0.0], dtype=torch.float64)  # a zero of q at the root
    for parents in (CHAIN3, PATHS2, TREE21, TREE12, STAR3, UNBALANCED):
        m = 4 if parents in (CHAIN3, PATHS2) else 3
        if parents is PATHS2 and rule == "sample_noreplace":
            m = 3  # keeps the enumeration small
        got = step_joint("gbv", params, parents, P, Q, rule, m)
        assert tv(got, markov_joint(P, 0, m)) < 1e-12, (params, rule, parents)


@pytest.mark.parametrize("params,expansion", [({}, [2, 1, 1]), (NOREP, [2, 1])])
def test_gbv_chi2_three_token_continuations(params, expansion):
    P, Q = random_tables(6)
    n = 1500
    counts = three_tokens("gbv", params, expansion, P, Q, n, seed=12)
    assert chisquare(counts, markov_joint(P, 0, 3).flatten() * n).pvalue > 0.01


def test_gbv_is_traversals_scan_and_block_on_a_chain():
    P, Q = random_tables(2)
    gbv, trav, blk = get_mode("gbv"), get_mode("traversal"), get_mode("block")
    for parents, other in ((PATHS2, trav), (CHAIN3, blk)):
        for _, t, p, q in drafted_trees(parents, P, Q, "sample"):
            assert (
                distshift.path_law(gbv, t, p, q, gbv.params()).reach
                == distshift.path_law(other, t, p, q, other.params()).reach
            )


# --------------------------------------------------------------------------
# expected accepted, exact, over 100 worlds (in expectation over the draws)
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def table():
    rows = []
    for seed in range(WORLDS):
        P, Q = world(seed)
        rows.append(
            {
                "gbv_2paths": mean_accepted("gbv", {}, PATHS2, P, Q, "sample"),
                "gbv_chain": mean_accepted("gbv", {}, CHAIN3, P, Q, "sample"),
                "mss_storage_2paths": mean_accepted("mss", {"order": "storage"}, PATHS2, P, Q, "sample"),
                "hsd": mean_accepted("hsd", {}, CHAIN3, P, Q, "sample"),
                "block": mean_accepted("block", {}, CHAIN3, P, Q, "sample"),
                "speculative": mean_accepted("speculative", {}, CHAIN3, P, Q, "sample"),
            }
        )
    return rows


@pytest.mark.parametrize(
    "better,baseline",
    [
        ("gbv_2paths", "block"),
        ("gbv_2paths", "mss_storage_2paths"),
        ("gbv_chain", "block"),
        ("hsd", "block"),
        ("hsd", "speculative"),
    ],
)
def test_ordering_in_expectation_in_every_world(table, better, baseline):
    fails = [(i, r[better], r[baseline]) for i, r in enumerate(table) if r[better] < r[baseline] - 1e-12]
    assert not fails, f"{better} < {baseline} in worlds {fails}"


def test_gbv_equals_block_on_a_chain_and_gains_with_paths(table):
    assert all(abs(r["gbv_chain"] - r["block"]) < 1e-12 for r in table)
    assert max(r["gbv_2paths"] - r["block"] for r in table) > 1e-2


def test_hsds_extra_acceptance_is_what_it_loses(table):
    """HSD accepts more than block in some worlds (the paper's claim) -- the mass that makes
    it lossy: block is optimal among lossless rules on one chain."""
    assert max(r["hsd"] - r["block"] for r in table) > 1e-3


# --------------------------------------------------------------------------
# paired verification: which drafted trees each may verify
# --------------------------------------------------------------------------
def test_paired_fit():
    m = get_mode
    assert paired_fits(m("speculative"), m("hsd"), "sample", chain=True)
    assert paired_fits(m("speculative"), m("gbv"), "sample", chain=True)
    assert paired_fits(m("block"), m("hsd"), "sample", chain=True)
    assert not paired_fits(m("mss"), m("hsd"), "sample", chain=False)  # chains only
    assert paired_fits(m("mss"), m("gbv"), "sample", chain=False)
    assert paired_fits(m("sequoia"), m("gbv"), "sample_noreplace", chain=False)  # drafts like sequoia
    assert not paired_fits(m("sequoia"), m("hsd"), "sample_noreplace", chain=True)
    assert not paired_fits(m("greedy"), m("gbv"), "topk", chain=False)
    assert get_mode("gbv", NOREP).child_rule == "sample_noreplace"
