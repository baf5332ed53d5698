"""Probabilities from logits, the residual distribution, and child selection.

Shared by the drafter (``choose_children``), the verifier (``residual``,
``accept_prob``, ``sequoia_next_q``) and the exact distribution-shift code, so
that all three use the very same arithmetic.

Conventions
-----------
* ``probs(logits, temperature, top_p)`` returns float32 probabilities.  At
  temperature 0 it returns the one-hot argmax distribution (greedy).
* ``residual(p, q)`` = norm(max(0, p - q)).  If that has no mass (p <= q
  everywhere, i.e. p == q up to rounding, where a rejection has probability 0)
  it returns p unchanged.
* ``choose_children(q_row, k, how, rng)`` returns ``(tokens, ranks)`` in the
  order the drafter must store the children (the verifier of ``sequoia`` tries
  children in that order).  ``ranks`` are the tokens' draft ranks under
  ``q_row`` (0 = most likely; ties broken by token id).
"""

from __future__ import annotations

import torch

CHILD_RULES = ("topk", "sample", "sample_noreplace")  # how a drafter can pick children from q
TREE_CHILD_RULES = CHILD_RULES + ("fixed",)  # + candidates not drawn from q (n-gram, merged)
MIN_TEMPERATURE = 1e-6  # below this (but > 0) logits / T can overflow float32: NaN probabilities


def check_temperature(temperature, key: str = "verify.temperature") -> float:
    """``temperature`` as a float, or a one-line ValueError naming ``key``: it must be
    finite and either 0 (greedy) or >= MIN_TEMPERATURE (a positive temperature below
    that overflows ``logits / T`` in float32 and ``probs`` would return NaN rows)."""
    try:
        t = float(temperature)
    except (TypeError, ValueError):
        raise ValueError(f"{key}={temperature!r}: must be a number >= 0 (0 = greedy), e.g. {key}=0") from None
    if not t == t or t in (float("inf"), float("-inf")) or t < 0:
        raise ValueError(f"{key}={temperature}: must be a finite number >= 0 (0 = greedy)")
    if 0 < t < MIN_TEMPERATURE:
        raise ValueError(
            f"{key}={temperature}: a positive temperature below {MIN_TEMPERATURE:g} "
            "overflows the logits (NaN probabilities); use 0 for greedy"
        )
    return t


def probs(logits: torch.Tensor, temperature: float = 1.0, top_p: float = 1.0) -> torch.Tensor:
    """Softmax of ``logits / temperature`` restricted to the top-p nucleus (float32, last dim).

    temperature 0 gives the one-hot argmax distribution.  top_p = 1 keeps every token.
    """
    temperature = 0.0 if temperature is None else check_temperature(temperature)
    top_p = 1.0 if top_p is None else float(top_p)
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"verify.top_p={top_p}: must be in (0, 1]")
    logits = logits.float()
    if temperature == 0:
        out = torch.zeros_like(logits)
        return out.scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    out = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        srt, idx = out.sort(dim=-1, descending=True)
        before = srt.cumsum(-1) - srt  # mass strictly before each sorted token
        srt = srt.masked_fill(before >= top_p, 0.0)  # the top token always survives
        out = torch.zeros_like(out).scatter_(-1, idx, srt)
        out = out / out.sum(-1, keepdim=True)
    return out


def as_dist(row: torch.Tensor) -> torch.Tensor:
    """float64 copy renormalised to sum 1 (a zero row stays zero)."""
    r = row.double()
    s = r.sum()
    return r / s if s > 0 else r.clone()


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)); p itself when that has no mass."""
    r = (p - q).clamp_min(0)
    s = r.sum()
    return p.clone() if s <= 0 else r / s


def accept_prob(p_row: torch.Tensor, q_row: torch.Tensor, x: int) -> float:
    """min(1, p(x)/q(x)).  A token the draft gave probability 0 cannot have been drawn
    from q, so it is never accepted (0.0); the sampling verifiers skip such a child
    without a residual update, which keeps them lossless on the remaining children.
    A NaN p(x) or q(x) is a ValueError (``min(1.0, nan)`` would be 1.0: always accept)."""
    px, qx = float(p_row[x]), float(q_row[x])
    if px != px or qx != qx:
        raise ValueError(
            f"accept_prob: NaN probability at token {x} (p={px}, q={qx}); check the logits and the temperature"
        )
    if qx <= 0:
        return 0.0
    return min(1.0, px / qx)


def sequoia_next_q(q_row: torch.Tensor, rejected: torch.Tensor) -> torch.Tensor:
    """Sequoia's draft update: zero the rejected tokens and renormalise; if no
    mass is left, uniform over the tokens not yet rejected."""
    q = q_row.masked_fill(rejected, 0.0)
    s = q.sum()
    if s > 0:
        return q / s
    free = (~rejected).to(q_row.dtype)
    if free.sum() <= 0:
        raise ValueError(
            "sequoia: every vocabulary token was rejected; the tree has more "
            "children at one node than the vocabulary has tokens"
        )
    return free / free.sum()


def token_ranks(q: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Draft rank of ``tokens[..., j]`` under the rows of ``q`` (0 = most likely;
    ties by token id): #(more likely tokens) + #(equally likely, smaller id).
    O(V) per token, no sort."""
    qx = q.gather(-1, tokens)[..., None]  # [..., k, 1]
    ids = torch.arange(q.shape[-1], device=q.device)
    rows = q[..., None, :]  # [..., 1, V]
    return (rows > qx).sum(-1) + ((rows == qx) & (ids < tokens[..., None])).sum(-1)


def ranks_of(q_row: torch.Tensor, tokens: torch.Tensor) -> list[int]:
    """Draft rank of each token under q_row (0 = most likely; ties by token id)."""
    return token_ranks(q_row.reshape(-1), torch.as_tensor(tokens).reshape(-1)).tolist()


def top_tokens(q_row: torch.Tensor, k: int) -> torch.Tensor:
    """The k most likely tokens, ties by token id (the order `token_ranks` counts),
    sorting only the tokens at or above the k-th largest probability."""
    cut = torch.topk(q_row, k).values[-1]
    cand = (q_row >= cut).nonzero().flatten()  # ascending ids
    return cand[torch.argsort(-q_row[cand].double(), stable=True)][:k]


def choose_children(
    q_row: torch.Tensor, k: int, how: str, rng: torch.Generator | None = None
) -> tuple[list[int], list[int]]:
    """Pick k child tokens from the draft distribution ``q_row``.

    how = "topk": the k most likely tokens (deterministic);
          "sample": k i.i.d. draws from q (duplicates possible, SpecInfer MSS);
          "sample_noreplace": k sequential draws without replacement, each from q
          with the earlier draws zeroed and renormalised, falling back to uniform
          over the not-yet-drawn tokens when q has no mass left (Sequoia; this is
          exactly the distribution ``verify.sequoia`` assumes).
    Returns (tokens, ranks) as Python lists in storage order.
    """
    if how not in CHILD_RULES:
        raise ValueError(f"unknown child rule '{how}'. Valid: {', '.join(CHILD_RULES)}")
    q_row = q_row.reshape(-1)
    v = q_row.numel()
    if k < 1:
        raise ValueError(f"choose_children: k={k} must be >= 1")
    if how != "sample" and k > v:
        raise ValueError(f"choose_children: k={k} children but only {v} vocabulary tokens")
    if how == "topk":
        tokens = top_tokens(q_row, k)
        return tokens.tolist(), list(range(k))
    elif how == "sample":
        tokens = torch.multinomial(q_row.double(), k, replacement=True, generator=rng)
    else:
        drawn = torch.zeros(v, dtype=torch.bool)
        picks = []
        qd = q_row.double()
        for _ in range(k):
            w = sequoia_next_q(qd, drawn)
            x = int(torch.multinomial(w, 1, generator=rng))
            picks.append(x)
            drawn[x] = True
        tokens = torch.tensor(picks, dtype=torch.long)
    return tokens.tolist(), ranks_of(q_row, tokens)


def choose_slots(
    q_row: torch.Tensor, slots, how: str, rng: torch.Generator | None = None
) -> tuple[list[int], list[int]]:
    """Children for the sibling slots ``slots`` (strictly increasing: the last element of
    each kept rank path under one parent, e.g. [0, 2] for ``[[0], [2]]``).

    "topk": slot r is the r-th most likely token (a gap skips tokens);
    "sample" / "sample_noreplace": len(slots) draws in order, the j-th draw filling the
    j-th slot.  A gap never discards a draw: without replacement, a discarded draw
    would change the law of the later ones, which the Sequoia verifier assumes.
    Without gaps this is exactly ``choose_children(q_row, len(slots), how, rng)``.
    Returns (tokens, ranks) aligned with ``slots``.
    """
    slots = [int(s) for s in slots]
    if not slots or slots[0] < 0 or any(b <= a for a, b in zip(slots, slots[1:])):
        raise ValueError(f"choose_slots: slots {slots} must be strictly increasing ranks >= 0")
    if how != "topk":
        return choose_children(q_row, len(slots), how, rng)
    tokens, ranks = choose_children(q_row, slots[-1] + 1, how, rng)
    return [tokens[s] for s in slots], [ranks[s] for s in slots]


def sample(row: torch.Tensor, rng: torch.Generator | None) -> int:
    """One token from a probability row."""
    return int(torch.multinomial(row.double(), 1, generator=rng))
