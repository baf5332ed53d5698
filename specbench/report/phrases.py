"""Sentence specs: the one place that phrases a group, a claim, an interval and each analysis
sentence of REPORT.md, every number read from the tables (`tables.compute`)."""

from __future__ import annotations

import pandas as pd

from . import analysis, fixed, tables
from .hardware import schedule_sentences


def where(r) -> str:
    """'qwen_coder on humaneval (float32, replayed, 64 new tokens)': a group, phrased once."""
    return f"{r['pair']} on {r['dataset']} {setting(r)}"


def setting(r) -> str:
    """'(float32, replayed, 64 new tokens)': how a group ran."""
    eng = {"replay": "replayed", "live": "live"}.get(str(r.get("engine")), str(r.get("engine", "")))
    parts = [str(r["dtype"])] + ([eng] if eng and eng != "?" else []) + [f"{int(r['max_new_tokens'])} new tokens"]
    return f"({', '.join(parts)})"


def interval(v, lo, hi, n, digits: int = 2) -> str:
    """A value with its 95% CI, or with the reason no interval is printed (fewer than MIN_CI prompts)."""
    if v is None or v != v:
        return "n/a"
    n = int(n) if n == n and n is not None else 0
    if n < tables.MIN_CI:
        return f"{analysis.fmt(float(v), digits)} (n={n}, no CI)"
    return analysis.fmt_ci(float(v), lo, hi, digits)


def metric(r: dict, name: str, digits: int = 2) -> str:
    return interval(r.get(name), r.get(f"{name}_lo"), r.get(f"{name}_hi"), r.get("n_prompts"), digits)


def projected(r: dict) -> str:
    """'1.39 [1.36, 1.42]', or '–' without a projection."""
    if r.get("projected") != r.get("projected") or r.get("projected") is None:
        return "–"
    return f"{r['projected']:.2f} [{r['projected_lo']:.2f}, {r['projected_hi']:.2f}]"


def speed(r: dict) -> str:
    """'1.39× [1.36, 1.42] (projected)', or '1.42× (measured; projected 1.39× [1.36, 1.42])'."""
    if r.get("speed") != r.get("speed") or r.get("speed") is None:
        return "not recorded"
    lo, hi = r.get("projected_lo"), r.get("projected_hi")
    ci = f" [{lo:.2f}, {hi:.2f}]" if lo == lo and lo is not None else ""
    if r.get("speed_basis") == "projected":
        return f"{r['speed']:.2f}×{ci} (projected)"
    proj = f"; projected {r['projected']:.2f}×{ci}" if r.get("projected") == r.get("projected") else ""
    return f"{r['speed']:.2f}× (measured{proj})"


def claim_word(r: dict) -> str:
    return "ranked" if tables.is_ranked(r["claim"]) else r["claim"]


# --------------------------------------------------------------------------
def tldr(t: dict) -> list[str]:
    ans, rows = t["answer"], t["rows"]
    out = []
    if ans.empty:
        return ["No greedy configuration ran, so there is no answer table."]
    n_max = int(rows.n_prompts.max()) if "n_prompts" in rows else 0
    ranked = ans[ans.claim.map(tables.is_ranked)]
    out.append(
        f"{len(ranked)} of {len(ans)} answer rows carry a ranked claim (≥ {tables.MIN_RANKED} prompts, ≤ "
        f"{tables.MAX_CUT:.0%} of steps cut by max_new_tokens); the largest prompt set is {n_max}"
        + ("." if len(ranked) else ', so every "fastest" below is exploratory.')
    )
    for pair in widest_first(ans):
        if best := fastest_per_dataset(ans[ans.pair == pair]):
            out.append(pair_sentence(pair, best))
    out += schedule_sentences(t.get("schedule", pd.DataFrame()))
    capped = rows[(rows.temperature == 0) & (rows.cut > tables.MAX_CUT)]
    if len(rows.cut.dropna()):
        out.append(
            f"{len(capped)} of {int(rows.cut.notna().sum())} configurations had more than {tables.MAX_CUT:.0%} of "
            f"their steps cut by max_new_tokens (largest share {rows.cut.max():.0%}); their budgets are never "
            "ranked."
        )
    # a count over the fixed list (never the largest of many), naming the baselines its rows declare
    fixed_line = fixed.sentence(t.get("comparisons"), analysis.role_names(t.get("df", t["rows"])))
    return out + ([fixed_line] if fixed_line else []) + speed_sentences(t["live"])


def widest_first(ans: pd.DataFrame) -> list[str]:
    """The answer's pairs, the one with the most answer rows (the main pair) first, then by name."""
    return sorted(set(ans.pair), key=lambda p: (-int((ans.pair == p).sum()), p))


def fastest_per_dataset(g: pd.DataFrame) -> list[dict]:
    """A pair's fastest answer row per dataset: from its ranked rows (the full-size study) where it has
    any, else from all of them (then each says exploratory); a measured speed before a projected one."""
    g = g[g.speed.notna()]
    ranked = g[g.claim.map(tables.is_ranked)]
    out = []
    for _ds, d in (ranked if len(ranked) else g).groupby("dataset", sort=True):
        meas = d[d.speed_basis == "measured"]
        out.append((meas if len(meas) else d).sort_values(["speed", "shape"], ascending=[False, True]).iloc[0])
    return [r.to_dict() for r in out]


def pair_sentence(pair: str, best: list[dict]) -> str:
    """'qwen_coder (bfloat16, replayed, 128 new tokens), fastest per dataset: humaneval chain N=4 at …'."""
    one = len({setting(b) for b in best}) == 1
    items = [
        f"{b['dataset']}{'' if one else ' ' + setting(b)} {b['shape']} N={int(b['budget'])} at {speed(b)}, "
        f"{analysis.fmt(b['tokens_per_step'], 2)} tokens/step, "
        f"acceptance rate {analysis.fmt(b['acceptance_rate'], 2)}, "
        f"{claim_word(b)}"
        for b in best
    ]
    return f"{pair}{' ' + setting(best[0]) if one else ''}, fastest per dataset: {'; '.join(items)}."


def gain(r: dict) -> str:
    p = r["paired"]
    if int(r["n_shared"]) < tables.MIN_CI:
        return f"{p.diff:+.2f} (n={int(r['n_shared'])}, no CI)"
    return analysis.fmt_diff(p)


def answer_sentences(ans: pd.DataFrame) -> list[str]:
    out: list[str] = []
    if ans.empty:
        return out
    for _, g in ans.groupby(analysis.GROUP, sort=True):
        g = g[g.speed.notna()]
        if len(g) < 2:
            continue
        first, last = g.iloc[0].to_dict(), g.iloc[-1].to_dict()
        big = g.sort_values("tokens_per_step", ascending=False).iloc[0].to_dict()
        tail = (
            f"; the most tokens per step, {big['shape']} N={int(big['budget'])} "
            f"({analysis.fmt(big['tokens_per_step'], 2)}), "
            f"runs at {speed(big)}"
            if big["config_hash"] != first["config_hash"]
            else ""
        )
        out.append(
            f"{where(first)}: {first['shape']} N={int(first['budget'])} is fastest at {speed(first)} and "
            f"{last['shape']} N={int(last['budget'])} slowest at {speed(last)}{tail} ({claim_word(first)})."
        )
    return out


def cap_sentences(rows: pd.DataFrame) -> list[str]:
    out: list[str] = []
    if rows.empty:
        return out
    for _, g in rows[rows.temperature == 0].groupby(analysis.GROUP, sort=True):
        over = g[g.cut > tables.MAX_CUT]
        if len(over):
            budgets = ", ".join(str(int(b)) for b in sorted(over.budget.unique()))
            out.append(
                f"{where(g.iloc[0])}: {len(over)} of {len(g)} configurations lose more than {tables.MAX_CUT:.0%} "
                f"of their steps to max_new_tokens (budgets {budgets}; worst {over.cut.max():.0%}, "
                f"{over.sort_values('cut').iloc[-1]['shape']}): at these budgets tokens_per_step partly "
                "measures the length cap."
            )
    return out


WHY = {
    ("chain", "sequoia"): "the Sequoia DP, given the measured acceptance vector, builds a chain at this budget",
    ("binary", "medusa63"): "the first N rank paths of medusa63 are those of binary at this budget",
    ("chain", "specinfer"): "specinfer's expansion keeps one child per node at these depths",
    ("chain", "ngram_trie"): "the n-gram trie has one continuation per node here, a chain",
    ("mss", "speculative"): "multi-step speculative sampling with one child per node is speculative sampling",
    ("mss", "sequoia"): "on a chain Sequoia's rule tries the single child, as speculative sampling does",
    ("block", "traversal"): "on a chain traversal verification reduces to block verification",
    ("speculative", "speculative"): "the paired re-verification of a decode's own trees reproduces the decode",
}


def identity_sentences(idents: pd.DataFrame) -> list[str]:
    """Each identity stated once: the rows, the budgets and why they coincide."""
    if idents.empty:
        return []
    out = []
    keys = ["pair", "dtype", "mode", "shape", "ref_mode", "ref_shape"]
    for _k, g in idents.groupby(keys, sort=True):
        r = g.iloc[0].to_dict()
        a, b = (r["ref_tree"], r["tree"]) if r["tree"] != r["ref_tree"] else (r["ref_verify"], r["verify"])
        why = WHY.get(tuple(sorted((a, b)))) or "they build and accept the same trees here"
        places = "; ".join(
            f"{ds} N={', '.join(str(int(x)) for x in sorted(x.budget.unique()))}"
            for ds, x in g.groupby("dataset", sort=True)
        )
        out.append(
            f"{r['pair']} ({r['dtype']}): {r['shape']} under {r['mode']} = {r['ref_shape']} under "
            f"{r['ref_mode']}, step for step on every prompt ({places}): {why}."
        )
    return out


def cross_sentences(cross: pd.DataFrame) -> list[str]:
    out: list[str] = []
    if cross.empty:
        return out
    for (ds, dt, mnt, shape, budget), g in cross.groupby(
        ["dataset", "dtype", "max_new_tokens", "cross_shape", "budget"], sort=True
    ):
        g = g.sort_values("tps_shared", ascending=False)
        order = ", ".join(f"{r.pair} {analysis.fmt(r.tps_shared, 2)}" for r in g.itertuples())
        out.append(
            f"{ds} ({dt}, {int(mnt)} new tokens), {shape} N={int(budget)} on the {int(g.n_shared.iloc[0])} "
            f"prompts all {len(g)} pairs ran: {order} tokens/step."
        )
    return out


def speed_sentences(live: pd.DataFrame) -> list[str]:
    """Per live setting (prompts × tokens): the projection's error over the runs that have both
    (median and worst) and how many measured speedups fall inside the projection's interval."""
    both = live[live.projected.notna()] if len(live) else live
    out: list[str] = []
    if both.empty or not {"n_prompts", "max_new_tokens"} <= set(both.columns):
        return out
    for (n, toks), g in both.groupby(["n_prompts", "max_new_tokens"], sort=True):
        err = g.error.abs()
        inside = int(((g.measured >= g.projected_lo) & (g.measured <= g.projected_hi)).sum())
        b = g.sort_values(["measured", "config_hash"], ascending=[False, True]).iloc[0].to_dict()
        out.append(
            f"Live batch-1 runs of {int(n)} prompts × {int(toks)} tokens ({len(g)} configurations): the projection's "
            f"error is {err.median():.0%} (median absolute) and {err.max():.0%} at worst; {inside} of {len(g)} measured "
            f"speedups fall inside its 95% interval; the highest measured is {b['measured']:.2f}× ({b['pair']} on "
            f"{b['dataset']}, {b['shape']} N={int(b['budget'])})."
        )
    return out


def calibration_sentence(calib: pd.DataFrame) -> str:
    if calib.empty:
        return "No Sequoia configuration ran, so no calibration is used."
    counts = calib.calibration.str.split(" ").str[0].value_counts()
    if set(counts.index) == {"not"} and calib.calibration.str.startswith("not recorded").all():
        return (
            "The calibration prompts of the acceptance vectors are not recorded (results/acceptance_vector.csv "
            "has no `prompt_ids` column), so whether the Sequoia trees were calibrated on the prompts they are "
            "scored on cannot be checked; their rows are not ranked."
        )
    parts = [f"{n} {k}" for k, n in sorted(counts.items())]
    return (
        f"Calibration prompts against scored prompts, per Sequoia configuration: {', '.join(parts)}; an "
        "in-sample tree, or one whose calibration prompts are not recorded, is never ranked."
    )
