"""The per-step cost model: each step charged what it did, on a measured cost curve.

A step costs one draft-model forward per entry of its ``scored`` column (the tokens
the drafter's model scored in that forward: the committed tokens not yet in its
cache, then each expanded depth's nodes) plus one target forward over its
``tree_size + 1`` tokens (the root and the draft tokens it verified).  A drafter
that runs no model (n-gram) is charged its measured lookup time (the step's
``draft_s``; ``cost_basis = lookup``).  Steps from before ``scored`` was recorded are
charged a derived frontier, ``tree_depth`` forwards of about ``tree_size / tree_depth``
tokens (``cost_basis = derived``: such a row is never ranked), never the budget's worst case.

Cost curves come from results/costs.csv by ``results.costcurve.AT_CONTEXT``: per
(pair, role, dtype) the median seconds of a forward of n tokens at each measured KV
length, interpolated linearly to ``KV`` tokens of context and, between measured
sizes, in n.  The
bootstrap (``projection``) resamples prompts and, independently, every cost
point's repeats (``samples``), so the interval carries both the prompts' and the
machine's spread.  pandas and numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..results import ranking
from ..results.costcurve import SEED, Curve
from . import analysis


def forwards(steps: pd.DataFrame) -> pd.Series:
    """Per step, the query tokens of each draft forward (a tuple; empty without a model)."""
    cells = steps.scored.to_numpy(object)
    has = steps.scored.notna().to_numpy()  # NaN: steps from before ``scored`` (results.optional)
    parsed = {s: tuple(int(x) for x in s.split(".")) if s else () for s in set(cells[has])}  # each parsed once
    if has.all():
        return pd.Series([parsed[s] for s in cells], index=steps.index, dtype=object)
    depth, size = steps.tree_depth.to_numpy(), steps.tree_size.to_numpy()
    out = [parsed[s] if h else derived_frontier(int(d), int(n)) for s, h, d, n in zip(cells, has, depth, size)]
    return pd.Series(out, index=steps.index, dtype=object)


def derived_frontier(depth: int, size: int) -> tuple[int, ...]:
    """Steps without ``scored``: the root's forward, then ``depth - 1`` forwards of the mean width."""
    if size <= 0:
        return ()
    return (1, *([math.ceil(size / depth)] * (depth - 1)))


@dataclass(frozen=True)
class Counts:
    """One configuration's steps, per prompt: tokens emitted, draft forwards by size,
    verify forwards by size and measured lookup seconds (drafters without a model)."""

    emitted: np.ndarray  # [P]
    draft_sizes: np.ndarray  # [S_d]
    draft: np.ndarray  # [P, S_d] forwards of each size
    verify_sizes: np.ndarray  # [S_v]
    verify: np.ndarray  # [P, S_v]
    lookup: np.ndarray  # [P] seconds
    steps: np.ndarray  # [P]
    derived: bool


def counts(g: pd.DataFrame) -> Counts:
    """``Counts`` of one configuration's step rows."""
    fw = forwards(g)
    prompts = pd.Index(sorted(g.prompt_id.astype(str).unique()))
    pid = prompts.get_indexer(g.prompt_id.astype(str))
    ks = np.fromiter((k for f in fw for k in f), int)
    ps = np.repeat(pid, fw.map(len).to_numpy(int))
    d_sizes = np.unique(ks)
    draft = np.zeros((len(prompts), len(d_sizes)))
    np.add.at(draft, (ps, np.searchsorted(d_sizes, ks)), 1)
    v = g.tree_size.astype(int).to_numpy() + 1
    v_sizes = np.unique(v)
    verify = np.zeros((len(prompts), len(v_sizes)))
    np.add.at(verify, (pid, np.searchsorted(v_sizes, v)), 1)
    lookup = np.zeros(len(prompts))
    np.add.at(lookup, pid, g.draft_s.astype(float).fillna(0).to_numpy())
    return Counts(
        emitted=np.bincount(pid, g.emitted.astype(float), len(prompts)),
        draft_sizes=d_sizes,
        draft=draft,
        verify_sizes=v_sizes,
        verify=verify,
        lookup=lookup,
        steps=np.bincount(pid, minlength=len(prompts)).astype(float),
        derived=bool(g.scored.isna().any()),
    )


class StepCounts:
    """Each configuration's ``Counts`` in one steps table, made on first use and kept (the
    projection and the phase diagram read the same configurations)."""

    def __init__(self, steps: pd.DataFrame):
        self.groups = dict(tuple(steps.groupby("config_hash", sort=False)))
        self.made: dict[str, Counts] = {}

    def get(self, config_hash: str) -> Counts | None:
        if config_hash not in self.made and config_hash in self.groups:
            self.made[config_hash] = counts(self.groups[config_hash])
        return self.made.get(config_hash)


def step_costs(c: Counts, draft: tuple[Curve, np.ndarray] | None, target: tuple[Curve, np.ndarray] | None):
    """(draft seconds per prompt, verify seconds per prompt, plain decoding's seconds per token) for every
    row of the curves' ``draws`` at once: [P, R], [P, R] and [R] for R rows (row 0: the medians)."""
    assert target is not None, "a projection needs the target's curve"
    (tc, tv) = target
    verify = c.verify @ (tc.weights_at(c.verify_sizes) @ tv.T)
    if draft is None:
        drafting = np.repeat(c.lookup[:, None], len(tv), axis=1)
    elif not len(c.draft_sizes):
        drafting = np.zeros_like(verify)
    else:
        drafting = c.draft @ (draft[0].weights_at(c.draft_sizes) @ draft[1].T)
    return drafting, verify, tv @ tc.weights_at(1)[0]


def basis(c: Counts, draft) -> str:
    """``scored`` (each step's recorded draft forwards), ``lookup`` (a drafter without a model: its
    measured lookup seconds, whatever its steps record) or ``derived`` (a model drafter's steps without
    ``scored``: the derived frontier, never ranked)."""
    if draft is None:
        return "lookup"
    return "derived" if c.derived else "scored"


def projection(c: Counts, draft: tuple[Curve, np.ndarray] | None, target: tuple[Curve, np.ndarray]) -> dict:
    """Projected speedup = Σ emitted × t_target(1) ÷ Σ step costs, with its 95% percentile
    interval over joint resamples of the prompts and of the cost repeats (row b of each
    curve's ``draws`` with the b-th resample of the prompts), and the model's draft and verify
    seconds per step.  ``draft`` / ``target``: (curve, its draws); ``draft`` None: the drafter
    runs no model."""
    d, v, base = step_costs(c, draft, target)
    total = d + v
    out = {
        "projected": c.emitted.sum() * base[0] / total[:, 0].sum(),
        "draft_s_step_model": d[:, 0].sum() / c.steps.sum(),
        "verify_s_step_model": v[:, 0].sum() / c.steps.sum(),
        "cost_basis": basis(c, draft),
    }
    rng = np.random.default_rng(SEED)
    n = len(c.emitted)
    picks = rng.integers(0, n, (len(base) - 1, n))  # the stream of one draw of n per resample, drawn at once
    w = np.bincount((picks + n * np.arange(len(picks))[:, None]).ravel(), minlength=picks.size).reshape(picks.shape)
    w = w.astype(float)  # w[b, p]: how often resample b drew prompt p
    reps = (w @ c.emitted) * base[1:] / np.einsum("rp,pr->r", w, total[:, 1:])
    out["projected_lo"], out["projected_hi"] = np.percentile(reps, [2.5, 97.5])
    return out


__all__ = ["counts", "StepCounts", "projection", "forwards"]


# the linear (r, m) model of a cost curve (``hardware``'s module docstring)
def speedup(a: pd.DataFrame, r: np.ndarray, m: np.ndarray) -> np.ndarray:
    """[configs, len(r), len(m)] modelled speedups (module docstring)."""
    E, F_, K, S, V = (a[c].to_numpy(float)[:, None, None] for c in "EFKSV")
    rr, mm = r[None, :, None], m[None, None, :]
    return E / (rr * (F_ + mm * (K - F_)) + S + mm * (V - S))


def best_at(a: pd.DataFrame, r: float, m: float) -> dict:
    """The modelled best configuration of ``a`` at one (r, m), with its speedup."""
    s = speedup(a, np.array([r]), np.array([m]))[:, 0, 0]
    i = int(ranking.best_index(a, s))  # the one ranking's pick, the modelled speedup its criterion
    return {**a.iloc[i].to_dict(), "modelled": float(s[i])}


def label(r: dict) -> str:
    """'eagle2 N=16', 'merged:chain N=4': the shape without its parameters (a merged tree's
    model part kept), and the budget."""
    shape = str(r["shape"])
    if (built := analysis.built_label(r)) is not None:  # a cost-aware Sequoia: the tree it built
        return f"{shape} {built}"
    name, _, args = shape.partition("(")
    part = [a.split("=", 1)[1] for a in args.rstrip(")").split(", ") if a.startswith("shape=")]
    return f"{name}{':' + part[0] if part else ''} N={int(r['budget'])}"
