"""`python -m specbench.calibrate [--ranks K] [--out CSV] [hydra overrides]`

Measures Sequoia's *acceptance vector* for one pair / dataset / verify mode:
p_accept[k] = probability that, at an accepted node, the child of sibling
rank k is the one the verifier accepts (Sequoia's ``test_accept``).  The
overrides are the study's own (``conf/config.yaml``), e.g.

    flock /tmp/specbench-real.lock python -m specbench.calibrate \
        pair=qwen_coder dataset=humaneval dataset.limit=8 max_new_tokens=64 verify=greedy

For sampling modes, per prompt, the target generates its continuation (greedy, or sampled at the
verify temperature/top-p); one teacher-forced forward of each model over
prompt + continuation then gives the target and draft distributions at every
position.
* greedy: the accepted sibling is the draft rank of the target's greedy token
  (ties by token id), exactly -- taken from the replay engine's rank cache
  (``replay.prompt_ranks``: computed once, shared with replay study jobs of
  the same pair / dataset / max_new_tokens / dtype).
* other modes: at every position a one-level tree of K children is drawn the
  way that mode's drafts are (``children`` meta: top-k / sampling with or
  without replacement) and the mode itself verifies it; the recorded rank is
  the accepted child's position among its siblings (the order in which a tree
  stores them, which is what a static shape's rank paths address).
n = the number of positions measured; ranks with no acceptance get 0.

Writes results/acceptance_vector.csv (columns pair, dataset, verify,
temperature, rank, p_accept, n) atomically, replacing the rows of the same
(pair, dataset, verify, temperature).  ``tree=sequoia`` reads it.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

import torch
from tqdm import tqdm

from .decode import prompt_rng, prompt_seed
from .sampling import choose_children, probs
from .trees import DraftTree

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["pair", "dataset", "verify", "temperature", "rank", "p_accept", "n"]


@torch.inference_mode()
def position_logits(model, prompt_ids, cont) -> torch.Tensor:
    """Logits [len(cont), V] predicting each continuation token (teacher forcing)."""
    ids = torch.tensor([list(prompt_ids) + list(cont)], device=model.device)
    out = model(input_ids=ids, use_cache=False).logits[0].float()
    return out[len(prompt_ids) - 1:len(prompt_ids) - 1 + len(cont)]


@torch.inference_mode()
def continuation(target, prompt_ids, n: int, eos: set[int], temperature: float, top_p: float,
                 seed: int) -> list[int]:
    """The target's own continuation: greedy, or sampled (HF generate)."""
    ids = torch.tensor([list(prompt_ids)], device=target.device)
    kw = dict(do_sample=False) if temperature == 0 else dict(do_sample=True, temperature=temperature,
                                                              top_p=top_p, top_k=0)
    torch.manual_seed(seed)
    out = target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                          eos_token_id=sorted(eos) or None, pad_token_id=min(eos) if eos else None, **kw)
    return out[0, ids.shape[1]:].tolist()


def star_trial(mode, verify_cfg, how: str, k: int, root: int, p_row, q_row,
               rng: torch.Generator) -> int | None:
    """Draw k children of one node as the mode's drafts would, verify; the
    accepted child's sibling position, or None."""
    toks, ranks = choose_children(q_row, k, how, rng)
    v = p_row.shape[-1]
    tree = DraftTree(parents=[-1] + [0] * k, tokens=torch.tensor([root] + list(toks)),
                     ranks=[0] + list(ranks), q=torch.zeros(k + 1, v), slots=[-1] * (k + 1))
    tree.q[0] = q_row
    p = p_row.expand(k + 1, v).clone()
    verdict = mode(tree, p, tree.q, rng, verify_cfg)
    return verdict.path[0] - 1 if verdict.path else None


def measure(cfg, pair, prompts, ranks: int, eos: set[int]) -> tuple[list[float], int]:
    from .verify import MODES
    name = cfg.verify.name
    mode, how = MODES.get(name), MODES.meta(name)["children"]
    temp = float(cfg.verify.get("temperature", 0.0) or 0.0)
    dtemp = float(cfg.verify.get("draft_temperature", temp) or 0.0)
    top_p = float(cfg.verify.get("top_p", 1.0) or 1.0)
    counts: Counter = Counter()
    n = 0
    store = None
    if name == "greedy":
        from .diskcache import DiskCache, cache_root
        from .replay import prompt_ranks
        store = DiskCache(cache_root(cfg))
    for i, pr in enumerate(tqdm(prompts, desc=f"calibrate {pair.name}/{name}", disable=not cfg.progress)):
        if store is not None:                  # the replay engine's (cached) ranks: exact for greedy
            got = [r if r < ranks else None for r in prompt_ranks(cfg, pair, pr.ids, eos, store)]
        else:
            cont = continuation(pair.target, pr.ids, int(cfg.max_new_tokens), eos, temp, top_p,
                                prompt_seed(cfg.seed, i))
            if not cont:
                continue
            dlog = position_logits(pair.draft, pr.ids, cont)
            tlog = position_logits(pair.target, pr.ids, cont)
            rng = prompt_rng(cfg.seed, i)
            roots = [pr.ids[-1]] + cont[:-1]
            got = [star_trial(mode, cfg.verify, how, ranks, roots[j], probs(tlog[j], temp, top_p),
                              probs(dlog[j], dtemp, top_p), rng) for j in range(len(cont))]
        n += len(got)
        counts.update(r for r in got if r is not None)
    if n == 0:
        raise ValueError("calibrate: no positions measured (empty continuations): raise max_new_tokens")
    return [counts.get(k, 0) / n for k in range(ranks)], n


def write_vector(path: Path, key: dict, vector: list[float], n: int) -> None:
    """Replace the rows of `key` in the CSV (atomic: temp file + os.replace)."""
    rows = []
    if path.exists():
        with open(path, newline="") as f:
            rows = [r for r in csv.DictReader(f)
                    if any(r[c] != str(key[c]) for c in ("pair", "dataset", "verify", "temperature"))]
    rows += [{**key, "rank": k, "p_accept": f"{p:.6f}", "n": n} for k, p in enumerate(vector)]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m specbench.calibrate", description=__doc__.split("\n\n")[1])
    ap.add_argument("--ranks", type=int, default=16, help="sibling ranks measured (K)")
    ap.add_argument("--out", default="results/acceptance_vector.csv", help="CSV (relative: repo root)")
    args, overrides = ap.parse_known_args(argv)
    if args.ranks < 1:
        sys.exit("specbench: error: --ranks must be >= 1")
    from hydra import compose, initialize_config_dir

    from . import data, models
    from .run import eos_ids
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    try:
        if cfg.pair.get("drafter", "model") == "ngram":
            raise ValueError(f"pair={cfg.pair.name} has no draft model: calibrate a model pair")
        pair = models.load_pair(cfg.pair, cfg.dtype, cfg.device)
        prompts = data.load_prompts(cfg.dataset, pair.tokenizer)
        vector, n = measure(cfg, pair, prompts, args.ranks, eos_ids(pair))
    except (ValueError, KeyError, FileNotFoundError) as e:
        sys.exit(f"specbench: error: {e}")
    out = Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out
    key = {"pair": cfg.pair.name, "dataset": cfg.dataset.name, "verify": cfg.verify.name,
           "temperature": float(cfg.verify.get("temperature", 0.0) or 0.0)}
    write_vector(out, key, vector, n)
    print(f"specbench: acceptance vector ({n} positions) -> {out}")
    print("  " + " ".join(f"{k}:{p:.3f}" for k, p in enumerate(vector)))


if __name__ == "__main__":
    main()
