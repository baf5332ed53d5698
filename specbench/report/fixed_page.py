"""The *Comparisons fixed in advance* section (results/tables/comparisons.md): the list of
`fixed.comparisons`, one table per group and temperature, each row with its adjusted interval."""

from __future__ import annotations

import pandas as pd

from . import analysis, fixed, phrases, tables
from .markdown import table


def signed(v, lo, hi) -> str:
    """'+0.12 [+0.03, +0.21]', or the value alone without an interval."""
    if lo != lo or hi != hi or lo is None or hi is None:
        return "n/a" if v != v else f"{v:+.2f} (no CI)"
    return f"{v:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def p_text(p) -> str:
    return "–" if p != p else "<0.0001" if p < 1e-4 else f"{p:.4f}"


def level(r) -> str:
    """The adjusted interval's confidence level, '1 − α/97'."""
    return f"1 − α/{round(fixed.ALPHA / r['holm_alpha'])}"


COLS = [
    ("rule", lambda r: f"{r['verify']}" + ("" if r["lossless"] else " (lossy)")),
    ("against", lambda r: r["against"]),
    ("compared with", lambda r: f"{r['baseline_verify']}, {'same' if r['same_trees'] else 'own'} trees"),
    ("shape", lambda r: r["shape"]),
    ("N", lambda r: int(r["budget"])),
    ("prompts", lambda r: int(r["n_prompts"])),
    ("Δ tokens/step [95% CI]", lambda r: signed(r["diff"], r["diff_lo"], r["diff_hi"])),
    ("p", lambda r: p_text(r["p_value"])),
    ("Holm p", lambda r: p_text(r["holm_p"])),
    ("level", level),
    ("Δ [adjusted CI]", lambda r: signed(r["diff"], r["adj_lo"], r["adj_hi"])),
    ("clears 0", lambda r: "yes" if r["clears_zero"] else "no"),
    ("configs", lambda r: f"{r['config_hash']} − {r['baseline_hash']}"),
]

NOTE = (
    "The comparisons fixed in advance (issue #36), every one reported: the list is read from which rows exist "
    "(rule, shape, budget, temperature and which rows verified the same drafted trees), never from a result. At "
    "T>0, per group, shape, budget and temperature: (1) *baseline*: each rule against its strongest token-level "
    "baseline (the row *Verification rules against their token-level baselines* compares it with); (2) *best "
    "lossless*: each lossy rule against the best lossless rule, fixed before any result as the token-level "
    "reference ({tree} on trees, {chain} on chains), on the same drafted trees where it verified them, else its "
    "own decode on the same prompts; (3) *naive*: each lossy rule against {lossy} on the same drafted trees. A pair "
    "reached twice is listed once with both reasons. Δ = tokens_per_step of the rule minus the row it is compared "
    "with, on the prompts both ran (ratio of sums); its 95% interval and p-value come from one paired percentile "
    "bootstrap (`scipy.stats.bootstrap`, {boot} draws, seed 0); p is two-sided, the smallest α whose 1 − α "
    "interval excludes zero. Holm's step-down runs over all {m} comparisons at family-wise α = {alpha}. The "
    "adjusted interval is the same bootstrap's percentile interval at the level of the comparison's Holm step, "
    "1 − α/(m − i + 1) for p-value rank i, held at the first step Holm does not reject for every comparison "
    "after it: it excludes zero exactly when Holm rejects (*clears 0*). Every row: results/comparisons.csv."
)


def section(ctx) -> str:
    comp = ctx["t"].get("comparisons")
    if ctx["data"]["steps"] is None:
        return "_results/steps.csv.gz is absent, so no comparison is computed (it pairs the rows by prompt)._"
    if comp is None or comp.empty:
        return "_No configuration ran at T>0 beside a token-level rule, so the fixed list is empty._"
    names = analysis.role_names(ctx["t"]["df"])
    note = NOTE.format(
        tree=names["tree"],
        chain=names["chain"],
        lossy=names[analysis.LOSSY_BASELINE],
        boot=fixed.compare.N_PAIRED,
        m=len(comp),
        alpha=fixed.ALPHA,
    )
    out = [note, fixed.sentence(comp, names) or ""]
    if (comp.n_prompts < tables.MIN_CI).any():
        out.append(f"A comparison on fewer than {tables.MIN_CI} shared prompts counts in m with p = 1 and no interval.")
    for key, g in comp.groupby(analysis.GROUP + ["engine", "temperature"], sort=True, dropna=False):
        g = g.sort_values(
            ["lossless", "tree", "budget", "verify", "against"], ascending=[False, True, True, True, True]
        )
        out.append(f"**{phrases.where(g.iloc[0].to_dict())}, T={key[-1]:g}**\n\n" + table(g.to_dict("records"), COLS))
    return "\n\n".join(out)


def frame(comp: pd.DataFrame | None) -> pd.DataFrame:
    """results/comparisons.csv's rows (`fixed.COLUMNS`), empty with its header without comparisons."""
    return fixed.csv_frame(comp if comp is not None else pd.DataFrame(columns=fixed.COLUMNS))
