"""The acceptance-sample check's results (results/acceptance_check.csv, written by ``study.tools.recheck``
compare): the columns it compares per step (``COLUMNS``), the configuration columns a row repeats (``SAME``),
its kind (``CHECK``) and checked read (``read``), each machine's rows (``mine``, ``others``) and its ONE line, PASS
or FAIL naming what differs (``verdict``), which the recheck command prints, the default run's printout
(``study.tools.planview``) and the report (``report.defaultrun``) state.  pandas, scipy and ``core.readers``; no
torch.
"""

from __future__ import annotations

import pandas as pd
from scipy import stats

from ..core import readers
from ..core.readers import Col, Kind
from .files import lenient, read_csv
from .plan import plural

COLUMNS = ("tree_size", "tree_depth", "accepted", "emitted", "accept_path")  # per step, besides its count
SAME = ("pair", "tree", "tree_params", "budget", "verify", "temperature", "dataset", "seed", "max_new_tokens", "dtype")
CHECK = Kind(  # the file as ``compare`` writes it, read as strictly as collect reads its --out (a column this
    # version does not write is refused: rewriting would drop it; a row naming no machine is an older file's)
    "results/acceptance_check.csv (study.tools.recheck compare)",
    {c: Col("str", empty=c == "config_hash") for c in ("config_hash", *SAME, "prompt_id", "found", "identical")}
    | {c: Col("int", lo=0) for c in ("steps", "committed_steps", "emitted", "committed_emitted")}
    | {c: Col("float", lo=0, empty=True) for c in ("committed_batch", "batch", "same_prefix_steps")}
    | {f"same_{c}": Col("str") for c in COLUMNS}
    | {c: Col("str", empty=True, optional=True) for c in ("machine_id", "machine")},
    "repair it (git checkout results/acceptance_check.csv) or point --out at another file (other machines' checks are kept from it)",
    key=("machine_id", "config_hash", *SAME, "batch", "prompt_id"),
    closed=True,
)


@lenient
def read(path: str, key: str = "") -> pd.DataFrame:
    """An acceptance_check.csv checked against ``CHECK`` (a ``core.readers.TableError``: one line naming ``key``);
    ``strict=False``: parsed alone, unchecked (the plan's record, ``study.tools.planview``: no schema check)."""
    return readers.read(path, CHECK, key, read_csv)


def verdict(check: pd.DataFrame, brief: bool = False) -> str:
    """ONE line: PASS (every re-derived prompt identical) or FAIL naming what differs (``brief``: how many
    prompts and configurations, and whether their tokens per step moved)."""
    if check.empty:
        return "acceptance-sample check: FAIL: nothing was re-derived (see the recheck jobs above)"
    n_conf, n = check.config_hash.nunique(), len(check)
    if check.identical.all():
        return (
            f"acceptance-sample check: PASS: {plural(n_conf, 'configuration')}, {plural(n, 'prompt')} (each in its committed run, "
            f"at batch {_batches(check.batch)}) identical to the committed rows, column by column (per prompt, so in "
            "aggregate too)"
        )
    bad = check[~check.identical]
    moved = _acceptance(check[check.found & check.config_hash.isin(set(bad.config_hash))], brief)
    if brief:
        return f"acceptance-sample check: FAIL: {len(bad)} of {n} prompts differ, in {bad.config_hash.nunique()} of {n_conf} configurations{moved}"
    cols = [c for c in COLUMNS if not check[f"same_{c}"].all()]
    what = ", ".join(f"{r.pair} {r.tree}/{r.budget} {r.dataset} {r.prompt_id}" for r in bad.head(2).itertuples())
    missing = int((~check.found).sum())
    return (
        f"acceptance-sample check: FAIL: {len(bad)} of {n} prompts differ, in {bad.config_hash.nunique()} of {n_conf} "
        f"configurations ({what}{', ...' if len(bad) > 2 else ''}; columns {', '.join(cols) or 'none'}; {missing} "
        "without a committed row)" + _where(bad[bad.found]) + moved
    )


def _acceptance(rows: pd.DataFrame, brief: bool = False) -> str:
    """Whether the configurations with a differing prompt measure another acceptance: per configuration its
    tokens per step committed and re-derived, and the paired difference over its prompts with a 95% t interval
    (two decodes that part on a near-tie, bf16 kernels of another CPU rounding differently, can still measure
    the same acceptance); those whose interval excludes 0 are named, else the largest difference."""
    if rows.empty or "emitted" not in rows:
        return ""
    out = []
    for _, g in rows.groupby("config_hash", sort=False):
        per = g.emitted / g.steps.clip(lower=1) - g.committed_emitted / g.committed_steps.clip(lower=1)
        mean = float(per.mean())
        half = float(stats.sem(per) * stats.t.ppf(0.975, len(per) - 1)) if len(per) > 1 else float("nan")
        r = g.iloc[0]
        old, new = g.committed_emitted.sum() / g.committed_steps.sum(), g.emitted.sum() / g.steps.sum()
        diff = f"{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}]" if half == half else f"{mean:+.3f}, one prompt"
        text = f"{r.pair} {r.tree}/{r.budget} {r.dataset} {old:.3f} committed, {new:.3f} here ({diff})"
        out.append((not half == half or abs(mean) > half, abs(mean), text))
    moved = [t for m, _, t in out if m]
    if brief:
        return f"; tokens per step moved in {len(moved) or 'none'} of {'the ' * (not moved)}{len(out)} (paired 95% intervals)"
    if moved:
        return f"; tokens per step moved (or one prompt: untested) in {len(moved)} of {len(out)}: " + "; ".join(moved)
    largest = max(out)[2]
    return (
        f"; tokens per step moved in none of the {len(out)} (each paired 95% interval over its prompts includes 0; "
        f"the largest difference: {largest}); per prompt: acceptance_check.csv"
    )


def _batches(b: pd.Series) -> str:
    return "/".join(str(v) for v in sorted({int(x) for x in b.dropna()}))


def _where(bad: pd.DataFrame) -> str:
    """Where the differing prompts part: their first steps agree, and the batch the committed ones ran in
    (a replayed continuation is computed ``batch_size`` prompts per forward: in bf16 a padded batch can
    resolve a near-tie differently from a batch of one)."""
    if bad.empty or "same_prefix_steps" not in bad:
        return ""
    share = bad.same_prefix_steps / bad[["steps", "committed_steps"]].min(axis=1).clip(lower=1)
    batches = sorted({int(b) for b in bad.committed_batch.dropna()})
    return (
        f"; the differing prompts agree on their first {int(bad.same_prefix_steps.min())}-"
        f"{int(bad.same_prefix_steps.max())} steps (median {share.median():.0%} of their steps) before they part"
        + (
            f" (committed at batch {'/'.join(map(str, batches))}, re-derived at batch {_batches(bad.batch)})"
            if batches
            else ""
        )
    )


def mine(check: pd.DataFrame | None, machine_id: str | None) -> pd.DataFrame | None:
    """The rows of ``machine_id``'s check (a file that names no machine: all its rows)."""
    if check is None or "machine_id" not in check or not machine_id:
        return check
    return check[check.machine_id.astype(str) == str(machine_id)]


def others(check: pd.DataFrame | None, machine_id: str | None) -> list[tuple[str, pd.DataFrame]]:
    """(machine, rows) of every other machine's check kept in the file."""
    if check is None or "machine_id" not in check:
        return []
    rest = check[check.machine_id.astype(str) != str(machine_id)]
    return [(str(g.machine.iloc[0]), g) for _m, g in rest.groupby("machine_id", sort=True)]
