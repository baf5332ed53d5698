"""Two more sequence-level rules: HSD (chains; LOSSY as published) and GBV (multi-path).

Both reuse block / traversal verification's machinery (``block.plan``: the weight of every
node and its final acceptance weight; ``block.verdict_from_plan`` / ``law_from_plan``: the
leaves-to-root scan and its exact law), so each is one registration here.

HSD -- Zhou et al., "Overcoming Joint Intractability with Lossless Hierarchical Speculative
Decoding" (ICLR 2026, arXiv 2601.05724), as its public code runs it
----------------------------------------------------------------------------------------
The paper's own text was not readable here; the rule is transcribed from its public code
(github ZhouYuxuanYX/Hierarchical-Speculative-Decoding, ``transformers/generation/utils.py``,
``_speculative_sampling`` with ``backward=True`` and the capping docs/verification.md calls "HSD (clever)",
run by ``eval_speculative_qwen_backward_clever.sh``; ``algorithm.py`` is the same computation).
On a chain X_1..X_g with prefix ratios R_k = prod_{j<=k} p_{j-1}(X_j)/q_{j-1}(X_j) (R_0 = 1):

* capped joint target ``p~_k = P(X_1:k) / max(1, R_0..R_k)`` (``torch.cummax``), so
  D_k = p~_k P_k - Q(X_1:k) Q_k = Q(X_1:k) (w_k P_k - Q_k) with w_k = R_k / max(1, R_0..R_k);
* step-back probability at position k < g: 1 - sum(D_k^+) / max(sum D_k^+, sum D_k^-), i.e.
  a stop probability h_k = r_k / (r_k + 1 - w_k), r_k = sum max(0, w_k P_k - Q_k);
* the whole draft is accepted with probability min(1, R_g) (``probability_ratio``, uncapped);
  otherwise the path ends at the LAST position k < g whose coin did not step back (k = 0 when
  all did), and the next token is drawn from norm(max(0, D_k)).

w_k is exactly block verification's weight (min(1, w_{k-1} p/q) = R_k / max(1, R_0..R_k) by
induction) and h_k its stop probability, so HSD is block verification (Sun et al. 2025,
Algorithm 2) with ONE change: the full draft is accepted with min(1, R_g) instead of block's
w_g = R_g / max(1, R_0..R_g) <= min(1, R_g).  It therefore accepts at least as much as block
on every drafted chain, strictly more whenever some prefix ratio exceeds both 1 and R_g.
Block verification is optimal among lossless rules that see on-path probabilities (Sun et al.,
Theorem 2; Thomas and Pal 2026 extend it to off-path ones), so this cannot be lossless, and
exact enumeration confirms it (``tests/test_hsd_gbv.py``: first-four-token TV > 0.01 on a V = 3
chain of 3).  On a chain of ONE token HSD, block and speculative sampling coincide (lossless).
The non-capped variant of the code continues a rejected step with "forward sampling" (more draft
calls inside the step), which a verdict on one drafted tree cannot express; it is not built.
Registered LOSSY (``lossless_for`` empty), chains only, drafting from q with replacement, so it
pairs with speculative / block / mss on the same drafted chains.  Choices where the code is
silent: a drawn token with q = 0 (impossible under the draft) gets ratio 0, as block does; a
residual with no mass keeps the target row (block's ``_rejected``).  Its first-token marginal
is not computable in closed form (it is not the shared first-stage law): first_token_tv is NaN
on its sampled trees.

GBV -- Thomas and Pal, "Greedy Multi-Path Block Verification for Faster Decoding in Speculative
Sampling" (arXiv 2602.16961): DERIVED here, not transcribed
----------------------------------------------------------------------------------------
The paper's algorithm text was not available to us (only its abstract: block verification is
optimal even given off-path probabilities; multi-path generalisations form an LP whose optimum
is intractable; GBV is the greedy member of that class).  We build the natural greedy
multi-path generalisation of block verification and say so: the candidate paths are the
tree's root-to-leaf paths (K chains drafted i.i.d. from q, or a trie of paths sharing
prefixes), verified one after another in storage order, each by block verification against
the target mass the earlier paths left: when a path is rejected back to a node it shares with
the next path, that node's state (weight w, target row P, and for draws without replacement
draft row Q) becomes the residual (w' = r / (1 - w + r), P' = norm(max(0, w P - Q)); Sequoia's
Q update), and the next path starts from it.  Greedy: each path takes all the acceptance that
block verification allows it given the residual, before the next path is looked at.  This is
exactly traversal verification's scan (Weng et al. 2025, Algorithm 1) on the same tree, so the
two modes give equal verdicts and laws by construction; on a single chain GBV is block
verification, which the paper proves optimal there.  Lossless on trees drawn from q with and
without replacement (the proof in ``block``'s docstring; exact enumeration in the tests); with
K > 1 paths it accepts at least what block accepts on its first path alone.
"""

from __future__ import annotations

import torch

from ..core.sampling import as_dist
from ..core.tree import DraftTree
from .block import (
    SAMPLED,
    law_from_plan,
    node_stages,
    plan,
    traversal,
    traversal_law,
    traversal_next,
    verdict_from_plan,
)
from .modespec import ChildrenParams, Law, ModeSpec, PathLaw, Verdict, register


def joint_ratio(tree: DraftTree, p: torch.Tensor, q: torch.Tensor) -> float:
    """R_g = prod over the chain of p(x)/q(x) (0 when a drawn token has q = 0)."""
    out, tokens = 1.0, tree.tokens.tolist()
    for v in range(1, len(tree.parents)):
        u = tree.parents[v]
        qx = float(as_dist(q[u])[tokens[v]])
        if qx <= 0:
            return 0.0
        out *= float(as_dist(p[u])[tokens[v]]) / qx
    return out


def hsd_plan(tree: DraftTree, p: torch.Tensor, q: torch.Tensor) -> tuple[list[float], list[float]]:
    """Block verification's plan with the leaf's acceptance replaced by min(1, R_g)."""
    entry, final = plan(tree, p, q)
    leaf = len(tree.parents) - 1  # a chain is stored root first
    if leaf > 0:
        final[leaf] = min(1.0, joint_ratio(tree, p, q))
    return entry, final


def hsd(tree: DraftTree, p: torch.Tensor, q, rng: torch.Generator, params) -> Verdict:
    """HSD with capping (Zhou et al. 2026; public code's ``_speculative_sampling``, backward
    + clever) on a chain: the whole draft with min(1, R_g), else the last position whose
    step-back coin fails, then a token from its capped residual (module docstring)."""
    return verdict_from_plan(tree, p, q, rng, *hsd_plan(tree, p, q))


def hsd_law(tree: DraftTree, p, q, params, need_next: bool = True) -> PathLaw:
    reach = law_from_plan(tree, hsd_plan(tree, p, q)[1])
    return PathLaw(reach, node_stages(tree, 0, p, q, 1.0)[2] if need_next else None)


def gbv(tree: DraftTree, p: torch.Tensor, q, rng: torch.Generator, params) -> Verdict:
    """Greedy multi-path block verification (after Thomas and Pal 2026; derived, see the
    module docstring): the tree's paths in storage order, each verified by block verification
    against the residual the earlier paths left (= traversal verification's scan)."""
    return traversal(tree, p, q, rng, params)


register(
    ModeSpec(
        name="hsd",
        verdict=hsd,
        child_rule="sample",
        lossless_for=frozenset(),
        needs_q=True,
        chain_only=True,
        law=Law(hsd_law, next_laws=traversal_next),
        doc="Hierarchical speculative decoding (Zhou et al. 2026) as its public code runs it (capping, one "
        "step): block verification's weights, full chain accepted with min(1, prod p/q). LOSSY (exact).",
    )
)
register(
    ModeSpec(
        name="gbv",
        verdict=gbv,
        child_rule="sample",
        lossless_for=frozenset(SAMPLED),
        needs_q=True,
        law=Law(traversal_law, SAMPLED, next_laws=traversal_next),
        params_type=ChildrenParams,
        sibling_order="storage",
        doc="Greedy multi-path block verification (after Thomas and Pal 2026; derived): the tree's paths in "
        "turn, each by block verification against the earlier paths' residual (= traversal's scan).",
    )
)
