"""One prefix of the empirical lossless check (``python -m specbench.study.tools.lossless``, whose
docstring describes the check): the modes' first tokens over N seeded one-step draws through
the engine's loop (``first_tokens``; the modes that draft alike share their drafted trees,
``groups``), the memos warmed first (``warm``), each mode's fit against the target's
first-token distribution p (``fit``), and a lossy control's exact law (``control_law``).
The fit's columns:

* ``chi2``, ``chi2_p``: Pearson's χ² goodness of fit (scipy) over the tokens with
  expected count N·p ≥ 5, plus one bin pooling the rest (``n_bins`` bins);
* ``tv``: ½ Σ |count/N − p|, the empirical total variation distance;
* ``tv_null``: the mean of that TV over 200 samples of N draws from p itself (its
  tail past 1 - 1e-4 of the mass pooled into one token): what
  an exact sampler shows at this N (the empirical TV is biased upwards).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from scipy.stats import chisquare

from ...core.sampling import probs
from ...engine.loop import appended, decode, decode_prompt, prompt_seed
from ...engine.memo import MemoModel
from ...results.power import power
from ...verify.distshift import first_token_tv
from ...verify.modes import get_mode
from ...verify.modespec import check_compatible, row_tags
from ..job.context import DecodePlan
from ..job.jobspec import TreeSpec, verify_spec
from .calibrate import position_logits
from .lossless_variant import ModeVariant

MIN_EXPECTED = 5.0  # χ² bins: expected count >= 5 (the usual rule)
NULL_SAMPLES = 200
TAIL_MASS = 1e-4  # tv_null pools the tokens past 1 - TAIL_MASS of p (changes it by < TAIL_MASS)


def capture(spec, sink: list):
    """``spec`` whose every verdict also appends the first token it emits to ``sink``."""

    def verdict(tree, p, q, rng, params):
        v = spec.verdict(tree, p, q, rng, params)
        sink.append(appended(tree, v, 1, frozenset())[0])
        return v

    return replace(spec, verdict=verdict)


def one_step(mode_name: str, params: dict, tree: TreeSpec, seed: int = 0) -> DecodePlan:
    """The plan of one decode step of ``tree`` (as ``study.job.launch.compose_tree`` builds it)
    verified by the mode with ``params`` (the mode's own included, e.g. order or children), no
    exact law per step."""
    return DecodePlan(
        tree,
        verify_spec({"name": mode_name, **params}),
        1,
        seed,
        measure_shift=False,
    )


def first_tokens(
    pair,
    prompt_ids,
    prompt_index: int,
    modes,
    tree: TreeSpec,
    n: int,
    params: dict,
    seed: int = 0,
    batch: int = 1,
) -> list[list[int]]:
    """The first emitted token of ``n`` seeded one-step decodes through the one loop, for
    each of ``modes`` ([(name, own params)], e.g. [("mss", {"order": "storage"})]): the
    first mode drafts, the others verify the very same drafted trees as the engine's
    paired modes (``Decoding.paired``: their own generators, seeded apart from the drafting
    stream), so a group of modes that draft alike costs one drafting.  Draw j is row j of
    the loop with generator ``prompt_rng(prompt_seed(seed, prompt_index), j)``, ``batch``
    rows per step (a row's draw does not depend on the batch)."""
    plans = [one_step(name, {**params, **own}, tree, prompt_seed(seed, prompt_index)) for name, own in modes]
    drafters = plans[0].drafters(pair)
    rule = drafters().child_rule(plans[0].new_policy().kind, plans[0].mode.child_rule)
    for plan in plans:
        check_compatible(plan.mode, rule)
    sinks: list[list[int]] = [[] for _ in plans]
    probes = [capture(plan.mode, sink) for plan, sink in zip(plans, sinks)]
    run = replace(
        plans[0].decoding(frozenset()),
        mode=probes[0],
        paired=tuple((probe, plan.params) for probe, plan in zip(probes[1:], plans[1:])),
    )
    draws = [SimpleNamespace(id=f"draw{j}", ids=list(prompt_ids)) for j in range(n)]
    decode(draws, drafters, plans[0].live_verifier(pair), plans[0].new_policy, run, None, batch)
    return sinks


def fit(tokens, target: torch.Tensor, seed: int = 0, max_bins: int = 0) -> dict:
    """χ² goodness of fit and TV of the drawn tokens against the target's law p (module docstring); at most
    ``max_bins`` bins when > 0 (the likeliest tokens, the rest pooled)."""
    p = target.double().cpu().numpy()
    p = p / p.sum()
    n = len(tokens)
    counts = np.bincount(np.asarray(tokens, dtype=np.int64), minlength=len(p))
    big = n * p >= MIN_EXPECTED
    if max_bins > 1 and big.sum() > max_bins - 1:
        big = np.zeros_like(big)
        big[np.argsort(-p, kind="stable")[: max_bins - 1]] = True
    obs, exp = list(counts[big]), list(n * p[big])
    rest_obs, rest_exp = counts[~big].sum(), n * p[~big].sum()
    if rest_exp >= MIN_EXPECTED or (rest_obs > 0 and not exp):
        obs, exp = obs + [rest_obs], exp + [rest_exp]
    elif exp:  # a small rest pools into the smallest bin
        i = int(np.argmin(exp))
        obs[i], exp[i] = obs[i] + rest_obs, exp[i] + rest_exp
    chi2, chi2_p = chisquare(obs, np.asarray(exp) * n / sum(exp)) if len(obs) > 1 else (np.nan, np.nan)
    order = np.argsort(-p)  # tv_null over the head of p plus one tail bin
    keep = order[: int(np.searchsorted(np.cumsum(p[order]), 1 - TAIL_MASS)) + 1]
    p_small = np.append(p[keep], max(0.0, 1 - p[keep].sum()))
    null = np.random.default_rng(seed).multinomial(n, p_small / p_small.sum(), size=NULL_SAMPLES) / n
    return {
        "n_draws": n,
        "n_bins": len(obs),
        "chi2": float(chi2),
        "chi2_p": float(chi2_p),
        "tv": 0.5 * float(np.abs(counts / n - p).sum()),
        "tv_null": float(0.5 * np.abs(null - p_small).sum(axis=1).mean()),
        "p_max": float(p.max()),
    }


def informative_prefix(target, ids, temperature: float, top_p: float, search: int) -> list[int]:
    """``ids`` cut after the position, among its last ``search``, where the target's next-token
    distribution has the most entropy: a real prefix on which χ² has bins to compare (right
    after a HumanEval prompt the next token is all but certain).  ``search=0``: ``ids``."""
    if search <= 0 or len(ids) < 2:
        return list(ids)
    start = max(1, len(ids) - search)
    p = probs(position_logits(target, ids[:start], ids[start:]), temperature, top_p)
    entropy = -(p * p.clamp_min(1e-30).log()).sum(-1)
    return list(ids[: start + int(entropy.argmax())])


def warm(memo, root: int, params: Mapping[str, Any], widths) -> None:
    """Fill the memos with the nodes the draws will most likely visit: level by level, the
    ``widths[d]`` likeliest depth-(d+1) paths under the draft (cumulative q), one draft forward
    per level and one target forward in all.  Exact (the memo holds real logits only); a
    draw that leaves these paths pays its own forward."""
    if memo.draft is None:
        return
    level: list[tuple[tuple[int, ...], float]] = [((root,), 1.0)]
    nodes: list[tuple[int, ...]] = [(root,)]
    for width in widths:
        q = probs(memo.draft.logits([s for s, _ in level]), params["draft_temperature"], params["top_p"])
        top = q.topk(min(int(width), q.shape[-1]), dim=-1)
        cands = [
            (s + (int(t),), c * float(v))
            for (s, c), vs, ts in zip(level, top.values, top.indices)
            for v, t in zip(vs, ts)
        ]
        level = sorted(cands, key=lambda x: -x[1])[: int(width)]
        nodes += [s for s, _ in level]
    memo.target.logits(nodes)


def groups(modes: Sequence[ModeVariant], trees: dict, params: dict) -> dict[tuple, list[ModeVariant]]:
    """The modes by how they draft: {(tree, child rule): [mode, ...]}, in order of first
    appearance; one drafting serves a group (``first_tokens``)."""
    out: dict[tuple, list[ModeVariant]] = {}
    for mode in modes:
        spec = get_mode(mode.name, mode.params(params))
        out.setdefault((trees["chain"] if spec.chain_only else trees["tree"], spec.child_rule), []).append(mode)
    return out


def check_prompt(
    pair,
    prompt,
    index: int,
    modes: Sequence[ModeVariant],
    trees: dict,
    n: int,
    params: dict,
    seed: int,
    widths=(48, 160),
    batch: int = 32,
    test: dict | None = None,
) -> list[dict]:
    """One row per mode (a ``--modes`` / ``--control`` entry) for one prefix; drafter and
    verifier share memoised models, warmed first (``warm``); the modes that draft alike
    share their drafted trees (``groups``; a row's ``wall_s`` and ``target_forwards`` are its
    group's).  ``test``: {"tv", "alpha", "max_bins"} of the power calculation (``results.power``)."""
    test = {"tv": 0.02, "alpha": 0.01, "max_bins": 0, **(test or {})}
    memo = replace(pair, draft=MemoModel(pair.draft) if pair.draft is not None else None, target=MemoModel(pair.target))
    memo.target.set_base(prompt.ids[:-1])
    if memo.draft is not None:
        memo.draft.set_base(prompt.ids[:-1])
    root = (int(prompt.ids[-1]),)
    p = probs(memo.target.logits([root])[0], params["temperature"], params["top_p"])
    warm(memo, root[0], get_mode(modes[0].name).params(params) if modes else params, widths)
    rows = []
    for (tree, _), group in groups(modes, trees, params).items():
        t0, f0 = time.perf_counter(), memo.target.forwards
        tokens = first_tokens(memo, prompt.ids, index, [(m.name, m.own) for m in group], tree, n, params, seed, batch)
        cost = {"target_forwards": memo.target.forwards - f0, "wall_s": time.perf_counter() - t0}
        for mode, toks in zip(group, tokens):
            rows.append(check_row(memo, prompt, mode, tree, toks, p, params, seed, test) | cost)
            print(
                f"  {prompt.id:>14} {mode.text:>12}: chi2_p={rows[-1]['chi2_p']:.3g} tv={rows[-1]['tv']:.4f} "
                f"(null {rows[-1]['tv_null']:.4f}), power {rows[-1]['power']:.3f} at TV {test['tv']}",
                flush=True,
            )
        print(
            f"  {prompt.id:>14} {len(group)} modes on the same {n} drafted {tree.name}/{tree.budget} trees: "
            f"{cost['target_forwards']} target forwards, {cost['wall_s']:.1f}s",
            flush=True,
        )
    return rows


def check_row(
    pair,
    prompt,
    mode: ModeVariant,
    tree: TreeSpec,
    tokens: list[int],
    p: torch.Tensor,
    params: dict,
    seed: int,
    test: dict,
) -> dict:
    """One mode's row: the fit of its first tokens against p, the power at its N and bins
    and, for a lossy control, its exact TV and whether it was rejected (``control_law``)."""
    own = mode.params(params)
    spec = get_mode(mode.name, own)
    got = fit(tokens, p, seed, test["max_bins"])
    row = {
        "prefix_id": prompt.id,
        "prefix_tokens": len(prompt.ids),
        "verify": mode.name,
        **row_tags(spec, spec.params(own)),
        "tree": tree.name,
        "budget": tree.budget,
        "temperature": params["temperature"],
        "top_p": params["top_p"],
        "seed": seed,
        **got,
        "tv_target": test["tv"],
        "alpha": test["alpha"],
        "power": power(got["n_draws"], got["n_bins"] - 1, test["tv"], test["alpha"]),
    }
    if not spec.lossless:
        row.update(control_law(pair, prompt, spec, own, tree, p, test["alpha"], row["chi2_p"]))
    return row


def control_law(pair, prompt, spec, params: dict, tree: TreeSpec, p: torch.Tensor, alpha: float, chi2_p: float) -> dict:
    """A lossy control's exact first-token TV at this prefix where its children are the draft's
    top-k (one deterministic tree, so its law is exact; NaN for sampled trees, e.g. hsd's
    chains) and whether the check rejected it."""
    if spec.child_rule != "topk":
        return {"exact_tv": float("nan"), "rejected": bool(chi2_p < alpha)}
    plan = one_step(spec.name, params, tree)
    law = {}

    def grab(tree_, p_, q_, rng, prm_):
        law["tv"] = first_token_tv(spec, tree_, p_, q_, prm_)
        return spec.verdict(tree_, p_, q_, rng, prm_)

    run = replace(plan.decoding(frozenset()), mode=replace(spec, verdict=grab))
    decode_prompt(
        "control",
        prompt.ids,
        plan.drafters(pair)(),
        plan.live_verifier(pair),
        plan.new_policy(),
        run,
        torch.Generator().manual_seed(0),
    )
    return {"exact_tv": law.get("tv", float("nan")), "rejected": bool(chi2_p < alpha)}
