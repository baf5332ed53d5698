"""`python -m specbench.study.lossless [--draws N] [--out CSV] [hydra overrides]`

The empirical losslessness check of the sampling modes on a real pair (REPORT.md,
"Losslessness", part b), e.g.

    flock /tmp/specbench-real.lock python -m specbench.study.lossless --draws 2000 \\
        pair=qwen_coder dataset=humaneval dataset.limit=3 dtype=float32

For every lossless sampling mode registered in ``specbench.verify`` (each lossless
mode but greedy) and every prompt of the dataset (a fixed real prefix), N seeded
draws each run ONE step of the engine's one loop (``engine.loop.decode_prompt``
with max_new_tokens=1): the pair's drafter grows the mode's tree, the live
verifier scores it, the mode's verdict gives the first emitted token.  Drafter
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

Writes results/lossless_check.csv (``COLUMNS``) atomically, replacing the rows of
the same pair_id, dataset, prefix, mode, temperature, top_p and seed (``REPLACE_KEY``):
a rerun with another ``seed=`` adds an independent replication beside them.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..core.sampling import probs
from ..drafting.drafters import DRAFTERS
from ..engine.loop import Decoding, LiveVerifier, decode_prompt, prompt_seed
from ..engine.memo import MemoModel
from ..trees.policies import make_policy
from ..verify.modes import get_mode
from ..verify.modespec import MODES, check_compatible

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ["pair", "pair_id", "draft", "target", "dataset", "prefix_id", "prefix_tokens", "verify", "tree",
           "budget", "temperature", "top_p", "dtype", "seed", "n_draws", "n_bins", "chi2", "chi2_p", "tv",
           "tv_null", "p_max", "target_forwards", "wall_s"]
REPLACE_KEY = ["pair_id", "dataset", "prefix_id", "prefix_tokens", "verify", "tree", "budget", "temperature", "top_p",
               "seed"]
NUMERIC_KEY = ("prefix_tokens", "budget", "temperature", "top_p", "seed")   # a CSV reads 1.0 back as 1
MIN_EXPECTED = 5.0          # χ² bins: expected count >= 5 (the usual rule)
NULL_SAMPLES = 200
TAIL_MASS = 1e-4            # tv_null pools the tokens past 1 - TAIL_MASS of p (changes it by < TAIL_MASS)


def sampling_modes() -> list[str]:
    """Every registered lossless mode that samples (all but greedy)."""
    return [n for n in MODES.names() if get_mode(n).lossless and get_mode(n).params({})["temperature"] > 0]


def draw_rng(seed: int, prompt: int, draw: int) -> torch.Generator:
    return torch.Generator().manual_seed(prompt_seed(seed, prompt) * 1_000_003 + draw)


def first_tokens(pair, prompt_ids, prompt_index: int, mode_name: str, tree: tuple[str, int], n: int,
                 params: dict, seed: int = 0) -> list[int]:
    """The first emitted token of ``n`` seeded one-step decodes through the one loop."""
    mode = get_mode(mode_name)
    params = mode.params(params)
    drafter = DRAFTERS.get(pair.drafter).from_pair(pair, params["draft_temperature"], params["top_p"])
    check_compatible(mode, drafter.child_rule(make_policy(*tree).kind, mode.child_rule))
    verifier = LiveVerifier(pair.target, params["temperature"], params["top_p"])
    run = Decoding(mode, params, 1, frozenset(), seed, measure_shift=False)
    return [decode_prompt("check", prompt_ids, drafter, verifier, make_policy(*tree), run,
                          draw_rng(seed, prompt_index, j)).tokens[0] for j in range(n)]


def fit(tokens, p: torch.Tensor, seed: int = 0) -> dict:
    """χ² goodness of fit and TV of the drawn tokens against p (module docstring)."""
    from scipy.stats import chisquare
    p = p.double().cpu().numpy()
    p = p / p.sum()
    n = len(tokens)
    counts = np.bincount(np.asarray(tokens, dtype=np.int64), minlength=len(p))
    big = n * p >= MIN_EXPECTED
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


def check_prompt(pair, prompt, index: int, modes, trees: dict, n: int, params: dict, seed: int,
                 widths=(48, 160), draw_threads: int = 1) -> list[dict]:
    """One row per mode for one prefix; drafter and verifier share memoised models, warmed
    first (``warm``).  The draws run on ``draw_threads`` torch threads: they are small
    vector operations, which OpenMP threads on a busy machine slow down (the memo's
    forwards before them use the process's threads)."""
    memo = replace(pair, draft=MemoModel(pair.draft) if pair.draft is not None else None,
                   target=MemoModel(pair.target))
    memo.target.set_base(prompt.ids[:-1])
    if memo.draft is not None:
        memo.draft.set_base(prompt.ids[:-1])
    root = (int(prompt.ids[-1]),)
    p = probs(memo.target.logits([root])[0], params["temperature"], params["top_p"])
    warm(memo, root[0], get_mode(modes[0]).params(params) if modes else params, widths)
    rows, threads = [], torch.get_num_threads()
    for name in modes:
        tree = trees["chain"] if get_mode(name).chain_only else trees["tree"]
        t0, f0 = time.perf_counter(), memo.target.forwards
        torch.set_num_threads(draw_threads)
        try:
            tokens = first_tokens(memo, prompt.ids, index, name, tree, n, params, seed)
        finally:
            torch.set_num_threads(threads)
        rows.append({"prefix_id": prompt.id, "prefix_tokens": len(prompt.ids), "verify": name, "tree": tree[0],
                     "budget": tree[1], "temperature": params["temperature"], "top_p": params["top_p"],
                     "seed": seed, **fit(tokens, p, seed), "target_forwards": memo.target.forwards - f0,
                     "wall_s": time.perf_counter() - t0})
        print(f"  {prompt.id:>14} {name:>12}: chi2_p={rows[-1]['chi2_p']:.3f} tv={rows[-1]['tv']:.4f} "
              f"(null {rows[-1]['tv_null']:.4f}), {rows[-1]['target_forwards']} target forwards, "
              f"{rows[-1]['wall_s']:.1f}s", flush=True)
    return rows


def replace_keys(table: pd.DataFrame) -> list[tuple]:
    """Each row's ``REPLACE_KEY``: the numeric columns as floats, identifiers as text (a hash
    like 3726142e8142 is not a number)."""
    def norm(column, v):
        return float(v) if column in NUMERIC_KEY else str(v)
    return [tuple(norm(c, v) for c, v in zip(REPLACE_KEY, row)) for row in table[REPLACE_KEY].to_numpy()]


def merge_rows(path: Path, new: pd.DataFrame) -> pd.DataFrame:
    """``new`` plus the rows of ``path`` with another ``REPLACE_KEY``."""
    from .results import read_csv
    if not path.exists():
        return new
    old = read_csv(str(path))
    keys = set(replace_keys(new))
    old = old[[k not in keys for k in replace_keys(old)]]
    return pd.concat([old, new], ignore_index=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m specbench.study.lossless", description=__doc__.split("\n\n")[1])
    ap.add_argument("--draws", type=int, default=2000, help="seeded one-step draws per mode and prefix (N)")
    ap.add_argument("--modes", default=",".join(sampling_modes()), help="comma-separated verify modes")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--chain-budget", type=int, default=2, help="chain length for chain-only modes")
    ap.add_argument("--tree", default="binary", help="tree shape for the other modes")
    ap.add_argument("--tree-budget", type=int, default=4)
    ap.add_argument("--prefix-search", type=int, default=32,
                    help="cut each prompt where the target is least certain among its last K tokens (0: no cut)")
    ap.add_argument("--warm", default="48,160", help="memo warm-up: likeliest draft paths per depth")
    ap.add_argument("--draw-threads", type=int, default=1, help="torch threads during the draws")
    ap.add_argument("--out", default="results/lossless_check.csv", help="CSV (relative: repo root)")
    args, overrides = ap.parse_known_args(argv)
    from ..inputs import data, models
    from . import identity, jobspec
    from .launch import compose
    from .results import write_csv
    try:
        if args.draws < 1:
            raise ValueError(f"--draws={args.draws}: must be >= 1")
        modes = [m for m in args.modes.split(",") if m]
        for m in modes:
            if m not in sampling_modes():
                raise ValueError(f"--modes: {m!r} is not a lossless sampling mode: use any of "
                                 f"{', '.join(sampling_modes())}")
        job = jobspec.from_config(compose(overrides))
        ident = identity.job_identity(job)
        pair = models.load_pair(job.pair.as_dict(), job.dtype, job.device)
        prompts = data.load_prompts(job.dataset.config, pair.tokenizer,
                                    max_prompt_tokens=job.dataset.max_prompt_tokens)
        params = {"temperature": args.temperature, "top_p": args.top_p}
        trees = {"chain": ("chain", args.chain_budget), "tree": (args.tree, args.tree_budget)}
        widths = [int(w) for w in args.warm.split(",") if w]
        prompts = [replace(pr, ids=informative_prefix(pair.target, pr.ids, args.temperature, args.top_p,
                                                      args.prefix_search)) for pr in prompts]
        rows = [r for i, pr in enumerate(prompts) for r in check_prompt(
            pair, pr, i, modes, trees, args.draws, params, job.seed, widths, args.draw_threads)]
    except (ValueError, KeyError, FileNotFoundError) as e:
        sys.exit(f"specbench: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    keys = {"pair": job.pair.name, "pair_id": identity.pair_id(ident, job.pair.drafter, job.pair.drafter_params),
            "draft": pair.draft_name, "target": pair.target_name, "dataset": job.dataset.name, "dtype": job.dtype}
    out = Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out
    table = merge_rows(out, pd.DataFrame([{**keys, **r} for r in rows])[COLUMNS])
    write_csv(table.sort_values(["pair_id", "dataset", "prefix_id", "verify"], kind="mergesort"), str(out))
    print(f"specbench: lossless check ({len(rows)} rows, {args.draws} draws each) -> {out}")


if __name__ == "__main__":
    main()
