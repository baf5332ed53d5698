"""`python -m specbench.study.lossless [--draws N] [--out CSV] [hydra overrides]`

The empirical losslessness check of the sampling modes on a real pair (REPORT.md,
"Losslessness", part b), e.g.

    flock /tmp/specbench-real.lock python -m specbench.study.lossless --draws 2000 \\
        pair=qwen_coder dataset=humaneval dataset.limit=3 dtype=float32

For every lossless sampling mode registered in ``specbench.verify`` (each lossless
mode but greedy) and every prompt of the dataset (a fixed real prefix), N seeded
draws each run ONE step of the engine's one loop (``engine.loop.decode`` with
max_new_tokens=1, the draws as rows of a batch): the pair's drafter grows the mode's
tree, the live verifier scores it, the mode's verdict gives the first emitted token;
the modes that draft alike verify the same drafted trees (``groups``).  Drafter
and verifier see their models through ``engine.memo.MemoModel``, so each distinct
tree node is forwarded once per prefix, not once per draw.  The counts of the
first tokens are compared with the target's own first-token distribution p (its
logits after the prefix, at ``--temperature`` / ``--top-p``):

* ``chi2``, ``chi2_p``: Pearson's χ² goodness of fit (scipy) over the tokens with
  expected count N·p ≥ 5, plus one bin pooling the rest (``n_bins`` bins);
* ``tv``: ½ Σ |count/N − p|, the empirical total variation distance;
* ``tv_null``: the mean of that TV over 200 samples of N draws from p itself (its
  tail past 1 - 1e-4 of the mass pooled into one token): what
  an exact sampler shows at this N (the empirical TV is biased upwards).

The prefix is each prompt cut where the target is least certain among its last
``--prefix-search`` tokens (``informative_prefix``): right after a HumanEval prompt
the next token has p ≈ 0.99 and χ² would have one bin.  Before the draws the memos
are warmed with the draft's likeliest paths (``warm``: one batched forward per
depth instead of one per new node).  Measured cost on this 2-core CPU: see the
README (The report).

A lossless mode gives p-values spread uniformly on [0, 1] and tv ≈ tv_null.  (The
exact ``first_token_tv`` in steps.csv is zero by each lossless mode's algebra, so
it is no evidence by itself; this check is.)  Chain-only modes draft a chain of
``--chain-budget`` tokens, the others a ``--tree`` of ``--tree-budget`` tokens, so
nodes past depth 1 matter where the mode looks at them (block, traversal).

Power and a positive control (``power``)
----------------------------------------
``--draws auto`` (the default) takes the smallest N at which the χ² test at level
``--alpha`` detects any first-token law at total variation ``--tv`` (0.02) from p with
probability ``--power`` (0.9), with at most ``--max-bins`` bins: for binned TV δ the
noncentrality is N·Σ d²/p ≥ 4Nδ² (split the shifted mass δ over bins of total p a and
b, a + b ≤ 1: δ²/a + δ²/b ≥ 4δ²), so the noncentral χ² bound is a worst case over
alternatives.  Each row records ``power`` at its own N and bins, and ``tv_target``,
``alpha``.  (A shift inside the pooled rest bin is invisible to this test: the bins
are the tokens the target gives the most mass.)  ``--control`` names lossy rules run
through the same check at the same N (default: ratio and typical): their rows go to
``lossless_control.csv`` beside ``--out`` with ``exact_tv``, the rule's exact
first-token TV at the prefix (their children are the draft's top-k, so their law is
computable), and ``rejected``; a check whose control has exact_tv ≥ tv and is not
rejected has no power.

``--modes`` takes variants as ``name[key=value;...]``, e.g. ``mss[order=storage]``,
``traversal[children=sample_noreplace]``; rows carry ``child_rule`` and ``sibling_order``.
The reported configurations are the defaults: ``--chain-budget 4``, ``--tree binary
--tree-budget 16``, the config's dtype (bfloat16).

Writes results/lossless_check.csv (``COLUMNS``) atomically, replacing the rows of
the same pair_id, dataset, prefix, mode (and its child rule and order), temperature,
top_p and seed (``REPLACE_KEY``): a rerun with another ``seed=`` adds an independent
replication beside them.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

from ..core.sampling import probs
from ..engine.loop import appended, decode, decode_prompt, prompt_seed
from ..engine.memo import MemoModel
from ..verify.modes import get_mode
from ..verify.modespec import MODES, check_compatible, row_tags
from .context import DecodePlan, context
from .jobspec import tree_spec, verify_spec
from .lossless_power import draws_for_power, parse_variant, power

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ["pair", "pair_id", "draft", "target", "dataset", "prefix_id", "prefix_tokens", "verify", "child_rule",
           "sibling_order", "tree", "budget", "temperature", "top_p", "dtype", "seed", "n_draws", "n_bins", "chi2",
           "chi2_p", "tv", "tv_null", "p_max", "tv_target", "alpha", "power", "target_forwards", "wall_s"]
CONTROL_COLUMNS = COLUMNS + ["exact_tv", "rejected"]
REPLACE_KEY = ["pair_id", "dataset", "prefix_id", "prefix_tokens", "verify", "child_rule", "sibling_order", "tree",
               "budget", "temperature", "top_p", "seed", "n_draws"]     # a run at another N adds its rows
NUMERIC_KEY = ("prefix_tokens", "budget", "temperature", "top_p", "seed", "n_draws")   # a CSV reads 1.0 back as 1
MIN_EXPECTED = 5.0          # χ² bins: expected count >= 5 (the usual rule)
NULL_SAMPLES = 200
TAIL_MASS = 1e-4            # tv_null pools the tokens past 1 - TAIL_MASS of p (changes it by < TAIL_MASS)


def sampling_modes() -> list[str]:
    """Every registered lossless mode that samples (all but greedy)."""
    return [n for n in MODES.names() if get_mode(n).lossless and get_mode(n).params({})["temperature"] > 0]


def reported_modes() -> list[str]:
    """The default ``--modes``: every lossless sampling mode at its defaults, plus the
    variants the reference sweeps report (storage-order mss, traversal on trees drawn
    without replacement)."""
    return sampling_modes() + ["mss[order=storage]", "traversal[children=sample_noreplace]"]


def capture(spec, sink: list):
    """``spec`` whose every verdict also appends the first token it emits to ``sink``."""
    def verdict(tree, p, q, rng, params):
        v = spec.verdict(tree, p, q, rng, params)
        sink.append(appended(tree, v, 1, frozenset())[0])
        return v
    return replace(spec, verdict=verdict)


def one_step(mode_name: str, params: dict, tree: tuple[str, int], seed: int = 0) -> DecodePlan:
    """The plan of one decode step of ``tree`` = (shape, budget) verified by the mode with
    ``params`` (the mode's own included, e.g. order or children), no exact law per step."""
    return DecodePlan(tree_spec({"name": tree[0], "budget": tree[1]}), verify_spec({"name": mode_name, **params}),
                      1, seed, measure_shift=False)


def first_tokens(pair, prompt_ids, prompt_index: int, modes, tree: tuple[str, int], n: int,
                 params: dict, seed: int = 0, batch: int = 1) -> list[list[int]]:
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
    run = replace(plans[0].decoding(frozenset()), mode=probes[0],
                  paired=tuple((probe, plan.params) for probe, plan in zip(probes[1:], plans[1:])))
    draws = [SimpleNamespace(id=f"draw{j}", ids=list(prompt_ids)) for j in range(n)]
    decode(draws, drafters, plans[0].live_verifier(pair), plans[0].new_policy, run, None, batch)
    return sinks


def fit(tokens, p: torch.Tensor, seed: int = 0, max_bins: int = 0) -> dict:
    """χ² goodness of fit and TV of the drawn tokens against p (module docstring); at most
    ``max_bins`` bins when > 0 (the likeliest tokens, the rest pooled)."""
    from scipy.stats import chisquare
    p = p.double().cpu().numpy()
    p = p / p.sum()
    n = len(tokens)
    counts = np.bincount(np.asarray(tokens, dtype=np.int64), minlength=len(p))
    big = n * p >= MIN_EXPECTED
    if max_bins > 1 and big.sum() > max_bins - 1:
        big = np.zeros_like(big)
        big[np.argsort(-p, kind="stable")[:max_bins - 1]] = True
    obs, exp = list(counts[big]), list(n * p[big])
    rest_obs, rest_exp = counts[~big].sum(), n * p[~big].sum()
    if rest_exp >= MIN_EXPECTED or (rest_obs > 0 and not exp):
        obs, exp = obs + [rest_obs], exp + [rest_exp]
    elif exp:                                     # a small rest pools into the smallest bin
        i = int(np.argmin(exp))
        obs[i], exp[i] = obs[i] + rest_obs, exp[i] + rest_exp
    chi2, chi2_p = (chisquare(obs, np.asarray(exp) * n / sum(exp)) if len(obs) > 1 else (np.nan, np.nan))
    order = np.argsort(-p)                        # tv_null over the head of p plus one tail bin
    keep = order[:int(np.searchsorted(np.cumsum(p[order]), 1 - TAIL_MASS)) + 1]
    p_small = np.append(p[keep], max(0.0, 1 - p[keep].sum()))
    null = np.random.default_rng(seed).multinomial(n, p_small / p_small.sum(), size=NULL_SAMPLES) / n
    return {"n_draws": n, "n_bins": len(obs), "chi2": float(chi2), "chi2_p": float(chi2_p),
            "tv": 0.5 * float(np.abs(counts / n - p).sum()),
            "tv_null": float(0.5 * np.abs(null - p_small).sum(axis=1).mean()), "p_max": float(p.max())}


def informative_prefix(target, ids, temperature: float, top_p: float, search: int) -> list[int]:
    """``ids`` cut after the position, among its last ``search``, where the target's next-token
    distribution has the most entropy: a real prefix on which χ² has bins to compare (right
    after a HumanEval prompt the next token is all but certain).  ``search=0``: ``ids``."""
    from .calibrate import position_logits
    if search <= 0 or len(ids) < 2:
        return list(ids)
    start = max(1, len(ids) - search)
    p = probs(position_logits(target, ids[:start], ids[start:]), temperature, top_p)
    entropy = -(p * p.clamp_min(1e-30).log()).sum(-1)
    return list(ids[:start + int(entropy.argmax())])


def warm(memo, root: int, params: dict, widths) -> None:
    """Fill the memos with the nodes the draws will most likely visit: level by level, the
    ``widths[d]`` likeliest depth-(d+1) paths under the draft (cumulative q), one draft forward
    per level and one target forward in all.  Exact (the memo holds real logits only); a
    draw that leaves these paths pays its own forward."""
    if memo.draft is None:
        return
    level, nodes = [((root,), 1.0)], [(root,)]
    for width in widths:
        q = probs(memo.draft.logits([s for s, _ in level]), params["draft_temperature"], params["top_p"])
        top = q.topk(min(int(width), q.shape[-1]), dim=-1)
        cands = [(s + (int(t),), c * float(v)) for (s, c), vs, ts in zip(level, top.values, top.indices)
                 for v, t in zip(vs, ts)]
        level = sorted(cands, key=lambda x: -x[1])[:int(width)]
        nodes += [s for s, _ in level]
    memo.target.logits(nodes)


def groups(modes, trees: dict, params: dict) -> dict:
    """The modes (names or ``name[key=value;...]``) by how they draft: {(tree, child rule):
    [mode, ...]}, in order of first appearance; one drafting serves a group (``first_tokens``)."""
    out: dict = {}
    for text in modes:
        name, own = parse_variant(text)
        spec = get_mode(name, {**params, **own})
        out.setdefault((trees["chain"] if spec.chain_only else trees["tree"], spec.child_rule), []).append(text)
    return out


def check_prompt(pair, prompt, index: int, modes, trees: dict, n: int, params: dict, seed: int,
                 widths=(48, 160), batch: int = 32, test: dict | None = None) -> list[dict]:
    """One row per mode (a name or ``name[key=value;...]``) for one prefix; drafter and
    verifier share memoised models, warmed first (``warm``); the modes that draft alike
    share their drafted trees (``groups``; a row's ``wall_s`` and ``target_forwards`` are its
    group's).  ``test``: {"tv", "alpha", "max_bins"} of the power calculation (``lossless_power``)."""
    test = {"tv": 0.02, "alpha": 0.01, "max_bins": 0, **(test or {})}
    memo = replace(pair, draft=MemoModel(pair.draft) if pair.draft is not None else None,
                   target=MemoModel(pair.target))
    memo.target.set_base(prompt.ids[:-1])
    if memo.draft is not None:
        memo.draft.set_base(prompt.ids[:-1])
    root = (int(prompt.ids[-1]),)
    p = probs(memo.target.logits([root])[0], params["temperature"], params["top_p"])
    warm(memo, root[0], get_mode(parse_variant(modes[0])[0]).params(params) if modes else params, widths)
    rows = []
    for (tree, _), texts in groups(modes, trees, params).items():
        t0, f0 = time.perf_counter(), memo.target.forwards
        tokens = first_tokens(memo, prompt.ids, index, [parse_variant(t) for t in texts], tree, n, params, seed,
                              batch)
        cost = {"target_forwards": memo.target.forwards - f0, "wall_s": time.perf_counter() - t0}
        for text, toks in zip(texts, tokens):
            rows.append(check_row(memo, prompt, text, tree, toks, p, params, seed, test) | cost)
            print(f"  {prompt.id:>14} {text:>12}: chi2_p={rows[-1]['chi2_p']:.3g} tv={rows[-1]['tv']:.4f} "
                  f"(null {rows[-1]['tv_null']:.4f}), power {rows[-1]['power']:.3f} at TV {test['tv']}", flush=True)
        print(f"  {prompt.id:>14} {len(texts)} modes on the same {n} drafted {tree[0]}/{tree[1]} trees: "
              f"{cost['target_forwards']} target forwards, {cost['wall_s']:.1f}s", flush=True)
    return rows


def check_row(pair, prompt, text: str, tree: tuple[str, int], tokens: list[int], p: torch.Tensor, params: dict,
              seed: int, test: dict) -> dict:
    """One mode's row: the fit of its first tokens against p, the power at its N and bins
    and, for a lossy control, its exact TV and whether it was rejected (``control_law``)."""
    name, own = parse_variant(text)
    spec = get_mode(name, {**params, **own})
    got = fit(tokens, p, seed, test["max_bins"])
    row = {"prefix_id": prompt.id, "prefix_tokens": len(prompt.ids), "verify": name,
           **row_tags(spec, spec.params({**params, **own})), "tree": tree[0], "budget": tree[1],
           "temperature": params["temperature"], "top_p": params["top_p"], "seed": seed, **got,
           "tv_target": test["tv"], "alpha": test["alpha"],
           "power": power(got["n_draws"], got["n_bins"] - 1, test["tv"], test["alpha"])}
    if not spec.lossless:
        row.update(control_law(pair, prompt, spec, {**params, **own}, tree, p, test["alpha"], row["chi2_p"]))
    return row


def control_law(pair, prompt, spec, params: dict, tree: tuple[str, int], p: torch.Tensor, alpha: float,
                chi2_p: float) -> dict:
    """A lossy control's exact first-token TV at this prefix where its children are the draft's
    top-k (one deterministic tree, so its law is exact; NaN for sampled trees, e.g. hsd's
    chains) and whether the check rejected it."""
    from ..verify.distshift import first_token_tv
    if spec.child_rule != "topk":
        return {"exact_tv": float("nan"), "rejected": bool(chi2_p < alpha)}
    plan = one_step(spec.name, params, tree)
    law = {}

    def grab(tree_, p_, q_, rng, prm_):
        law["tv"] = first_token_tv(spec, tree_, p_, q_, prm_)
        return spec.verdict(tree_, p_, q_, rng, prm_)
    run = replace(plan.decoding(frozenset()), mode=replace(spec, verdict=grab))
    decode_prompt("control", prompt.ids, plan.drafters(pair)(), plan.live_verifier(pair), plan.new_policy(), run,
                  torch.Generator().manual_seed(0))
    return {"exact_tv": law.get("tv", float("nan")), "rejected": bool(chi2_p < alpha)}


def replace_keys(table: pd.DataFrame) -> list[tuple]:
    """Each row's ``REPLACE_KEY``: the numeric columns as floats, identifiers as text (a hash
    like 3726142e8142 is not a number)."""
    def norm(column, v):
        if column in NUMERIC_KEY:
            return float(v)
        return "" if v is None or v != v else str(v)       # an empty cell reads back as NaN
    return [tuple(norm(c, v) for c, v in zip(REPLACE_KEY, row)) for row in table[REPLACE_KEY].to_numpy()]


def merge_rows(path: Path, new: pd.DataFrame) -> pd.DataFrame:
    """``new`` plus the rows of ``path`` with another ``REPLACE_KEY``."""
    from .results import read_csv
    if not path.exists():
        return new
    old = read_csv(str(path))
    for c in REPLACE_KEY:                          # rows written before a key column existed
        if c not in old.columns:
            old[c] = ""
    keys = set(replace_keys(new))
    old = old[[k not in keys for k in replace_keys(old)]]
    return pd.concat([old, new], ignore_index=True)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m specbench.study.lossless", description=__doc__.split("\n\n")[1])
    ap.add_argument("--draws", default="auto", help="seeded one-step draws per mode and prefix (N), or auto: "
                    "the fewest with --power against --tv at --alpha over --max-bins bins")
    ap.add_argument("--modes", default=",".join(reported_modes()), help="comma-separated verify modes "
                    "(NAME or NAME[key=value;...], e.g. mss[order=storage])")
    ap.add_argument("--control", default="ratio,typical", help="lossy rules run as positive controls ('' = none)")
    ap.add_argument("--tv", type=float, default=0.02, help="first-token TV the check must detect")
    ap.add_argument("--power", type=float, default=0.9, help="probability of detecting it (sets --draws auto)")
    ap.add_argument("--alpha", type=float, default=0.01, help="level of each χ² test")
    ap.add_argument("--max-bins", type=int, default=8, help="χ² bins: the likeliest tokens plus one rest bin")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--chain-budget", type=int, default=4, help="chain length for chain-only modes")
    ap.add_argument("--tree", default="binary", help="tree shape for the other modes")
    ap.add_argument("--tree-budget", type=int, default=16)
    ap.add_argument("--prefix-search", type=int, default=32,
                    help="cut each prompt where the target is least certain among its last K tokens (0: no cut)")
    ap.add_argument("--warm", default="48,160", help="memo warm-up: likeliest draft paths per depth")
    ap.add_argument("--batch", type=int, default=32, help="draws in flight per step of the loop")
    ap.add_argument("--out", default="results/lossless_check.csv", help="CSV (relative: repo root); the "
                    "controls go to lossless_control.csv beside it")
    return ap.parse_known_args(argv)


def check_args(args) -> tuple[int, list[str], list[str]]:
    """(N, modes, controls) from the arguments, or a one-line ValueError."""
    if args.max_bins < 2:
        raise ValueError(f"--max-bins={args.max_bins}: must be >= 2")
    n = draws_for_power(args.max_bins - 1, args.tv, args.alpha, args.power) if args.draws == "auto" \
        else int(args.draws)
    if n < 1:
        raise ValueError(f"--draws={args.draws}: must be >= 1 or auto")
    modes = [m for m in args.modes.split(",") if m]
    controls = [m for m in args.control.split(",") if m]
    for m in modes:
        name, own = parse_variant(m)
        if name not in sampling_modes():
            raise ValueError(f"--modes: {m!r} is not a lossless sampling mode: use any of "
                             f"{', '.join(sampling_modes())}")
        get_mode(name).params(own)
    for m in controls:
        if get_mode(parse_variant(m)[0]).lossless:
            raise ValueError(f"--control: {m!r} is lossless; a positive control must be a lossy rule")
    return n, modes, controls


def write_rows(out: Path, rows: list[dict], keys: dict, columns: list[str]) -> None:
    table = merge_rows(out, pd.DataFrame([{**keys, **r} for r in rows])[columns])
    from .results import write_csv
    write_csv(table.sort_values(["pair_id", "dataset", "prefix_id", "verify"], kind="mergesort"), str(out))


def main(argv=None) -> None:
    args, overrides = parse_args(argv)
    from . import identity, jobspec
    from .launch import compose
    try:
        n, modes, controls = check_args(args)
        job = jobspec.from_config(compose(overrides))
        ident = identity.job_identity(job)
        ctx = context(job)
        pair = ctx.load_pair()
        prompts = ctx.prompts(pair.tokenizer)
        params = {"temperature": args.temperature, "top_p": args.top_p}
        trees = {"chain": ("chain", args.chain_budget), "tree": (args.tree, args.tree_budget)}
        widths = [int(w) for w in args.warm.split(",") if w]
        test = {"tv": args.tv, "alpha": args.alpha, "max_bins": args.max_bins}
        prompts = [replace(pr, ids=informative_prefix(pair.target, pr.ids, args.temperature, args.top_p,
                                                      args.prefix_search)) for pr in prompts]
        rows = [r for i, pr in enumerate(prompts) for r in check_prompt(
            pair, pr, i, modes + controls, trees, n, params, job.seed, widths, args.batch, test)]
    except (ValueError, KeyError, FileNotFoundError) as e:
        sys.exit(f"specbench: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    keys = {"pair": job.pair.name, "pair_id": identity.pair_id(ident, job.pair.drafter, job.pair.drafter_params),
            "draft": pair.draft_name, "target": pair.target_name, "dataset": job.dataset.name, "dtype": job.dtype}
    out = Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out
    lossy = {parse_variant(m)[0] for m in controls}
    write_rows(out, [r for r in rows if r["verify"] not in lossy], keys, COLUMNS)
    if controls:
        write_rows(out.with_name("lossless_control.csv"), [r for r in rows if r["verify"] in lossy], keys,
                   CONTROL_COLUMNS)
    print(f"specbench: lossless check ({len(rows)} rows, {n} draws each) -> {out}")


if __name__ == "__main__":
    main()
