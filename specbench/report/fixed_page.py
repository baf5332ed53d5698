"""The *Comparisons fixed in advance* section (results/tables/comparisons.md): the list of
`fixed.comparisons`, one table per group and temperature, each row with its adjusted interval, under
the findings table's count of those that clear zero (its note is in templates/report.md.j2).
Imports analysis, findings, fixed, phrases and tables."""

from __future__ import annotations

import pandas as pd

from . import analysis, compare, findings, fixed, phrases, tables
from .context import Ctx
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
    return f"1 − α/{round(compare.ALPHA / r['holm_alpha'])}"


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


def section(ctx: Ctx) -> str:
    """The lead finding and one table per group and temperature (the template holds the note)."""
    comp = ctx.t.comparisons
    out = [c["sentence"] for c in findings.comparison_claims(comp, analysis.role_names(ctx.t.df))] or [""]
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
