"""The least time one run that regenerates the whole committed study takes on this machine: the part
no engine work can remove, from the committed results alone.

* The live configurations timed at batch 1 (batch-1 speed and the projection's live check): their
  measured wall time (``summary.wall_s``). Their batch is what they measure, so nothing batches them.
* Every other live decode (the sampling rules at batch 32, live speed and the batch-size study at
  batch 2-16): the tokens its forwards processed (steps.csv: ``tree_size + 1`` target tokens and the
  ``scored`` draft tokens of every step, ``costmodel.Counts``) at each model's widest measured forward
  rate here (results/costs.csv: the curve of the model the pair's forward ran, in the decode's dtype,
  by ``results.costcurve.CEILING``): a compute ceiling as ``study.tools.ceiling`` takes one.  A paired rule
  (``pair_role = paired``) is verified on its baseline's decode and costs no forward of its own.

Left out, so the sum is a lower bound: the replayed grids, prefill, the costs, the calibration and
the tree-attention benchmark. pandas and numpy only.
"""

from __future__ import annotations

import pandas as pd

from ..results import costcurve
from . import costmodel

NEEDED = ("engine", "pair_role", "batch_size", "wall_s", "config_hash", "pair", "dtype")


def rate(costs: pd.DataFrame, pair: str, role: str, dtype: str) -> costcurve.Curve | None:
    """The curve a pair's ``role`` forward is rated on: its model's by ``costcurve.CEILING`` in ``dtype``
    (None where costs.csv names no model for it, or has no rows of that model in ``dtype``)."""
    model = costcurve.model_of(costs, pair, role)
    return None if model is None else costcurve.curve(costs, costcurve.CEILING, model, dtype=dtype)


def width_words(widths) -> str:
    """'128-token' (each model's widest measured forward), '64- or 128-token', or 'widest measured'."""
    ws = sorted({int(w) for w in widths})
    return "widest measured" if not ws else "- or ".join(str(w) for w in ws) + "-token"


def decode_seconds(c: costmodel.Counts, target: float, draft: float | None) -> float:
    """One configuration's forward tokens at the widest rates: every verified tree's tokens on the
    target, every scored token on the draft (a drafter without a model scores none)."""
    verify = float(c.verify.sum(0) @ c.verify_sizes) * target
    scored = float(c.draft.sum(0) @ c.draft_sizes) if len(c.draft_sizes) else 0.0
    return verify + scored * (draft or 0.0)


def least(summary: pd.DataFrame, counted: costmodel.StepCounts | None, costs: pd.DataFrame | None) -> dict | None:
    """{b1_n, b1_min, wide_n, wide_min, unrated, replayed, widths}: the batch-1 configurations and their
    wall minutes, the other live decodes and their minutes at the ceiling, those with no steps or curve
    to rate them, the replayed configurations not counted, and the widest measured forward of each curve
    rated on; None where the inputs lack a column."""
    if counted is None or costs is None or not set(NEEDED) <= set(summary.columns):
        return None
    live = summary[(summary.engine == "live") & (summary.pair_role == "decode")]
    b1, wide = live[live.batch_size == 1], live[live.batch_size > 1]
    rates = {  # (pair, dtype) -> its (target, draft) curves, each read once
        (p, d): tuple(rate(costs, p, role, d) for role in ("target", "draft"))
        for p, d in set(zip(wide.pair, wide.dtype))
    }
    seconds, unrated, widths = 0.0, 0, set[float]()
    for r in wide.itertuples():
        c, (target, draft) = counted.get(r.config_hash), rates[(r.pair, r.dtype)]
        if c is None or target is None:
            unrated += 1
            continue
        seconds += decode_seconds(c, target.per_token(), None if draft is None else draft.per_token())
        widths |= {x.sizes[-1] for x in (target, draft) if x is not None}
    return dict(
        b1_n=len(b1),
        b1_min=float(b1.wall_s.sum()) / 60,
        wide_n=len(wide) - unrated,
        wide_min=seconds / 60,
        unrated=unrated,
        replayed=int((summary.engine == "replay").sum()),
        widths=sorted(widths),
    )


def sentence(b: dict | None) -> str:
    """The bound in one sentence (empty without it)."""
    if b is None or b["b1_n"] + b["wide_n"] == 0:
        return ""
    total = b["b1_min"] + b["wide_min"]
    out = (
        f"One run that regenerates every committed result takes at least {total:.0f} min on this machine: "
        f"the {b['b1_n']} live configurations timed at batch 1 took {b['b1_min']:.1f} min (their batch is what "
        f"they measure), and the forwards of the {b['wide_n']} other live decodes would take {b['wide_min']:.1f} min "
        f"at each model's {width_words(b['widths'])} forward rate here; the {b['replayed']} replayed configurations, prefill, "
        "the costs, the calibration and the tree-attention benchmark come on top"
    )
    if b["unrated"]:
        out += f" ({b['unrated']} live decodes have no steps or cost curve to rate them and are not counted)"
    return out + "."
