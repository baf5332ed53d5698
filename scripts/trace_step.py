"""Follow one live decode step as data: the specbench modules it enters, in order, and how
often control comes back to a module it had already left.

    python scripts/trace_step.py [overrides ...]      # default: pair=qwen_coder dataset=humaneval

Runs ``specbench.run``'s job (the real pair, live, batch 1) on one prompt and traces the
third decode step (``engine.loop.step``; the first two warm the caches) with
``sys.setprofile``: every Python call and return whose frame is in a ``specbench`` module
moves "control" there (frames of torch / transformers leave it where it was).  Printed per
tree: the modules in first-visit order, their count, the *returns*: arrivals in a module
that control had left before (``a -> b -> a`` is one), and the functions of other modules
that ``engine.loop`` itself calls, in order (a step that goes down to each part once).  Last line: the counts, one per tree.
"""

from __future__ import annotations

import sys
import tempfile

from specbench.engine import loop
from specbench.study.job.launch import compose
from specbench.study.job.run import run_job

TREES = (("chain", 1), ("binary", 16))
BASE = ["pair=qwen_coder", "dataset=humaneval", "dataset.limit=1", "max_new_tokens=48", "engine=live"]


def trace(fn, *args):
    """(fn's result, the specbench modules control visited, collapsed, in order, and the
    functions ``engine.loop`` itself called in other modules, in order)."""
    seq: list[str] = []
    calls: list[str] = []

    def hook(frame, event, _arg):
        if event not in ("call", "return"):
            return
        name = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back is not None else ""
        if event == "call" and caller == "specbench.engine.loop" and name.startswith("specbench.") and name != caller:
            calls.append(f"{name.removeprefix('specbench.')}.{frame.f_code.co_name}")
        if event == "return":  # control goes back to the caller's frame
            frame = frame.f_back
            name = frame.f_globals.get("__name__", "") if frame is not None else ""
        if name.startswith("specbench.") and (not seq or seq[-1] != name):
            seq.append(name)

    sys.setprofile(hook)
    try:
        out = fn(*args)
    finally:
        sys.setprofile(None)
    return out, seq, calls


def returns(seq: list[str]) -> int:
    """Arrivals in a module control had already left."""
    seen: set[str] = set()
    n = 0
    for prev, cur in zip(seq, seq[1:]):
        seen.add(prev)
        n += cur in seen
    return n


def traced_step(tree: str, budget: int, extra: list[str]) -> tuple[list[str], list[str]]:
    """The module sequence of the third step of one live job, and the loop's own calls."""
    got: list = []
    real = loop.step

    def step(rows, verifier, run):
        if len(got) < 3:
            out, *seqs = trace(real, rows, verifier, run)
            got.append(seqs)
            return out
        return real(rows, verifier, run)

    loop.step = step
    try:
        with tempfile.TemporaryDirectory() as tmp:
            given = {o.split("=")[0] for o in extra}
            base = [o for o in BASE if o.split("=")[0] not in given]
            cfg = compose([*base, f"tree={tree}", f"tree.budget={budget}", f"out_root={tmp}", *extra])
            run_job(cfg, tmp)
    finally:
        loop.step = real
    if len(got) < 3:
        raise SystemExit(f"{tree}/{budget}: the job took {len(got)} steps; raise max_new_tokens to trace the third")
    return got[-1]


def main(argv: list[str]) -> list[str]:
    """Print each tree's trace; returns the count lines."""
    counts = []
    for tree, budget in TREES:
        seq, calls = traced_step(tree, budget, argv)
        order = list(dict.fromkeys(seq))
        counts.append(f"{tree}/{budget}: {len(order)} modules, {returns(seq)} returns, {len(calls)} loop calls")
        print(f"{tree}/{budget}: " + " > ".join(m.removeprefix("specbench.") for m in order))
        print(f"{tree}/{budget} loop calls: " + ", ".join(dict.fromkeys(calls)))
    print("; ".join(counts))
    return counts


if __name__ == "__main__":
    main(sys.argv[1:])
