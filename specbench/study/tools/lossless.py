"""`python -m specbench.study.tools.lossless [--draws N] [--out CSV] [hydra overrides]`

The empirical losslessness check of the sampling modes on a real pair (REPORT.md,
"Losslessness", part b), e.g.

    flock /tmp/specbench-real.lock python -m specbench.study.tools.lossless --draws 2000 \\
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
logits after the prefix, at ``--temperature`` / ``--top-p``): Pearson's χ² (``chi2``,
``chi2_p``), the empirical total variation distance ``tv`` and ``tv_null``, what an exact
sampler shows at this N (``study.tools.lossless_check``, which runs one prefix).

The prefix is each prompt cut where the target is least certain among its last
``--prefix-search`` tokens (``informative_prefix``): right after a HumanEval prompt
the next token has p ≈ 0.99 and χ² would have one bin.  Before the draws the memos
are warmed with the draft's likeliest paths (``warm``: one batched forward per
depth instead of one per new node).  Measured cost on this 2-core CPU: see
docs/verification.md ("The empirical check's power").

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

import os
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ...core.args import Parser, listed, number
from ...core.readers import TableError
from ...results.files import read_lossless
from ...results.power import draws_for_power
from ...results.schemas import (
    LOSSLESS_COLUMNS,
    LOSSLESS_CONTROL,
    LOSSLESS_CONTROL_COLUMNS,
    LOSSLESS_KEY,
    LOSSLESS_NUMBERS,
)
from ...results.upsert import key_text, replace_rows, upsert_all
from ...verify.modes import get_mode
from ...verify.modespec import MODES
from ..job import checks, identity
from ..job.argv import check_out, fail
from ..job.context import context
from ..job.jobspec import ConfigError
from ..job.launch import checked_job, compose, compose_tree
from .lossless_check import check_prompt, informative_prefix
from .lossless_variant import ModeVariant

ROOT = Path(__file__).resolve().parents[3]
COLUMNS, CONTROL_COLUMNS = LOSSLESS_COLUMNS, LOSSLESS_CONTROL_COLUMNS  # results.schemas: the files' definitions
REPLACE_KEY, NUMERIC_KEY = LOSSLESS_KEY, LOSSLESS_NUMBERS


def sampling_modes() -> list[str]:
    """Every registered lossless mode that samples (all but greedy)."""
    return [n for n in MODES.names() if get_mode(n).lossless and get_mode(n).params({})["temperature"] > 0]


def reported_modes() -> list[str]:
    """The default ``--modes``: every lossless sampling mode at its defaults, plus the
    variants the reference sweeps report (storage-order mss, traversal on trees drawn
    without replacement)."""
    return sampling_modes() + ["mss[order=storage]", "traversal[children=sample_noreplace]"]


def replace_keys(table: pd.DataFrame) -> list[tuple]:
    """Each row's ``REPLACE_KEY`` (``results.upsert.key_text``): the numeric columns as numbers, identifiers
    as text (a hash like 3726142e8142 is not a number)."""
    return list(key_text(table, REPLACE_KEY, NUMERIC_KEY))


def merge_rows(old: pd.DataFrame | None, new: pd.DataFrame) -> pd.DataFrame:
    """``new`` plus the rows of ``old`` (None: no file yet) with another ``REPLACE_KEY``."""
    if old is not None:  # rows written before a key column existed
        old = old.assign(**{c: "" for c in REPLACE_KEY if c not in old.columns})
    return replace_rows(old, new, REPLACE_KEY, NUMERIC_KEY)


def parse_args(argv):
    ap = Parser(prog="python -m specbench.study.tools.lossless", description=__doc__.split("\n\n")[1])
    ap.add_argument(
        "--draws",
        default="auto",
        type=number(int, 1, 10**8, allow=("auto",)),
        help="seeded one-step draws per mode and prefix (N), or auto: "
        "the fewest with --power against --tv at --alpha over --max-bins bins",
    )
    ap.add_argument(
        "--modes",
        default=",".join(reported_modes()),
        help="comma-separated verify modes (NAME or NAME[key=value;...], e.g. mss[order=storage])",
    )
    ap.add_argument("--control", default="ratio,typical", help="lossy rules run as positive controls ('' = none)")
    ap.add_argument(
        "--tv",
        type=number(float, 0, 1, above=True, below=True),
        default=0.02,
        help="first-token TV the check must detect",
    )
    ap.add_argument(
        "--power",
        type=number(float, 0, 1, above=True, below=True),
        default=0.9,
        help="probability of detecting it (sets --draws auto)",
    )
    ap.add_argument(
        "--alpha", type=number(float, 0, 1, above=True, below=True), default=0.01, help="level of each χ² test"
    )
    ap.add_argument(
        "--max-bins", type=number(int, 2, 1000), default=8, help="χ² bins: the likeliest tokens plus one rest bin"
    )
    ap.add_argument("--temperature", type=number(float, 0, 100, above=True), default=1.0)
    ap.add_argument("--top-p", type=number(float, 0, 1, above=True), default=1.0)
    ap.add_argument("--chain-budget", type=number(int, 1, 1024), default=4, help="chain length for chain-only modes")
    ap.add_argument("--tree", default="binary", help="tree shape for the other modes")
    ap.add_argument("--tree-budget", type=number(int, 1, 1024), default=16)
    ap.add_argument(
        "--prefix-search",
        type=number(int, 0, 10**5),
        default=32,
        help="cut each prompt where the target is least certain among its last K tokens (0: no cut)",
    )
    ap.add_argument(
        "--warm",
        default=[48, 160],
        type=listed(number(int, 0, 10**5)),
        help="memo warm-up: likeliest draft paths per depth",
    )
    ap.add_argument("--batch", type=number(int, 1, 4096), default=32, help="draws in flight per step of the loop")
    ap.add_argument(
        "--out",
        default="results/lossless_check.csv",
        help="CSV (relative: repo root); the controls go to lossless_control.csv beside it",
    )
    return ap.parse_known_args(argv)


def check_trees(args, overrides) -> dict:
    """{"chain": ..., "tree": ...}: each a TreeSpec as a study job composes its option (the
    option's file, resolved against this run's overrides), or one line naming the flag and exit 2."""
    cfg = compose(overrides)
    flags = {"chain": ("--chain-budget", "chain", args.chain_budget), "tree": ("--tree", args.tree, args.tree_budget)}
    trees = {}
    for key, (flag, name, budget) in flags.items():
        try:
            trees[key] = compose_tree(cfg, name, budget)
        except ConfigError as e:
            fail(f"{flag}: {e}")
    return trees


def check_args(args) -> tuple[int, list[ModeVariant], list[ModeVariant]]:
    """(N, modes, controls) from the arguments (each flag's range is its parser type's, ``parse_args``), each mode
    parsed once, or a one-line ValueError."""
    n = draws_for_power(args.max_bins - 1, args.tv, args.alpha, args.power) if args.draws == "auto" else int(args.draws)
    if n < 1:
        raise ValueError(f"--draws={args.draws}: must be >= 1 or auto")
    modes, controls = [], []
    for m in filter(None, args.modes.split(",")):
        mode = ModeVariant.parse(m)
        if mode.name not in sampling_modes():
            raise ValueError(
                f"--modes: {m!r} is not a lossless sampling mode: use any of {', '.join(sampling_modes())}"
            )
        get_mode(mode.name).params(mode.own)
        modes.append(mode)
    for m in filter(None, args.control.split(",")):
        control = ModeVariant.parse(m)
        if get_mode(control.name).lossless:
            raise ValueError(f"--control: {m!r} is lossless; a positive control must be a lossy rule")
        controls.append(control)
    if not modes:  # "," or "": no mode would be checked, and the run would still load the pair
        raise ValueError(f"--modes={args.modes!r}: names no mode; give some of {', '.join(sampling_modes())}")
    return n, modes, controls


def merged(old: pd.DataFrame | None, rows: list[dict], keys: dict, columns: list[str]) -> pd.DataFrame:
    table = merge_rows(old, pd.DataFrame([{**keys, **r} for r in rows])[columns])
    return table.sort_values(["pair_id", "dataset", "prefix_id", "verify"], kind="mergesort")


def control_file(out: Path) -> str:
    return str(out.with_name("lossless_control.csv"))


def read_check(path: str) -> pd.DataFrame:
    return read_lossless(path)  # LOSSLESS_CHECK


def read_control(path: str) -> pd.DataFrame:
    return read_lossless(path, LOSSLESS_CONTROL)


def check_destination(out: Path) -> None:
    """``--out`` and its controls' file beside it, where there, read as strictly as the merge reads them, before
    any model loads: a file the tool did not write is one line, exit 2, and kept."""
    for path, read in ((str(out), read_check), (control_file(out), read_control)):
        if os.path.isfile(path):
            try:
                read(path)
            except TableError as e:
                fail(str(e))


def main(argv=None) -> None:
    args, overrides = parse_args(argv)

    out = Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out
    try:
        n, modes, controls = check_args(args)
    except ValueError as e:
        fail(str(e).splitlines()[0])
    job = checked_job(overrides)  # as run checks it: one line, no model yet
    trees = check_trees(args, overrides)
    check_out(str(out), "--out")
    check_destination(out)
    try:
        ident = identity.job_identity(job)
        ctx = context(job)
        prompts = ctx.prompts(ctx.tokenizer())
        checks.check_context(job, ctx.positions(), prompts)  # lengths vs the models' positions: no weights yet
        pair = ctx.load_pair()
        params = {"temperature": args.temperature, "top_p": args.top_p}
        widths = list(args.warm)
        test = {"tv": args.tv, "alpha": args.alpha, "max_bins": args.max_bins}
        prompts = [
            replace(pr, ids=informative_prefix(pair.target, pr.ids, args.temperature, args.top_p, args.prefix_search))
            for pr in prompts
        ]
        rows = [
            r
            for i, pr in enumerate(prompts)
            for r in check_prompt(pair, pr, i, modes + controls, trees, n, params, job.seed, widths, args.batch, test)
        ]
    except (ValueError, KeyError, FileNotFoundError) as e:
        fail(str(e).splitlines()[0] if str(e) else type(e).__name__)  # a bad input: one line, exit 2
    keys = {
        "pair": job.pair.name,
        "pair_id": identity.pair_id(ident, job.pair.drafter, job.pair.drafter_params),
        "draft": pair.draft_name,
        "target": pair.target_name,
        "dataset": job.dataset.name,
        "dtype": job.dtype,
    }
    lossy = {m.name for m in controls}
    check = [r for r in rows if r["verify"] not in lossy]
    tables = {str(out): (lambda old: merged(old, check, keys, COLUMNS), read_check)}
    if controls:  # the check and its controls replaced together (one unit, one writer: results.upsert)
        lossy_rows = [r for r in rows if r["verify"] in lossy]
        tables[control_file(out)] = (lambda old: merged(old, lossy_rows, keys, CONTROL_COLUMNS), read_control)
    upsert_all(tables)
    print(f"specbench: lossless check ({len(rows)} rows, {n} draws each) -> {out}")


if __name__ == "__main__":
    main()
