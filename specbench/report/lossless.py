"""REPORT.md's losslessness subsection (the analysis page), its numbers and words: greedy outputs against
plain decoding's on the same prompts (`lossless_table`, matched as `speedup.OUTPUT_MATCH` says; with the
target's logit margin at each divergence) and the empirical first-token check of the sampling modes
(Holm-adjusted per pair, its power and its control)."""

from __future__ import annotations

import math

import pandas as pd

from ..results.power import draws_for_power, power_tv
from . import analysis, compare, speedup
from .context import Ctx
from .markdown import bullets, md_table

LOSSLESS_ALGEBRA = (
    "**(b) Sampling modes.** The exact `first_token_tv` of a lossless mode is zero by its algebra "
    "(the mode's first-token law is computed, not sampled), so a zero there is not evidence by "
    "itself; the evidence is an empirical check: at fixed real prefixes, the first emitted token "
    "over many seeded draws against the target's distribution (χ² p-value and TV)."
)


def margin_note(table: pd.DataFrame, margins: pd.DataFrame | None) -> str:
    """One line on the target's logit margin at the greedy divergences (results/divergence_margins.csv)."""
    n = int(sum(len(d) for d in table.diverged))
    if not n:
        return ""
    margins = _shown_margins(table, margins)
    if margins is None:
        return (
            "_results/divergence_margins.csv is absent (`python -m specbench.study.tools.margins` writes it), so no "
            "divergence's logit margin is shown._"
        )
    if margins.empty:
        return (
            "_results/divergence_margins.csv has no row for these divergences (`python -m specbench.study.tools.margins` "
            "says why it skipped them), so no logit margin is shown._"
        )
    worst, neg = float(margins.margin.abs().max()), int((margins.margin < 0).sum())
    return (
        f"Δlogit: the target's float32 logit of the baseline's token minus that of the configuration's token at "
        f"the first divergence (one forward over the prompt and the shared prefix, `python -m "
        f"specbench.study.tools.margins`); {len(margins)} of {n} divergences measured, |Δlogit| at most {worst:.3f} "
        f"(a probability ratio of {math.exp(worst):.3f} between the two tokens); {neg} of {len(margins)} "
        f"negative (there float32 prefers the configuration's token to the baseline's)."
    )


def _shown_margins(table: pd.DataFrame, margins: pd.DataFrame | None) -> pd.DataFrame | None:
    """The margin rows of the table's divergences (same configuration, baseline and prompt)."""
    if margins is None:
        return None
    shown = {(r["config_hash"], r.get("baseline_hash"), p) for r in table.to_dict("records") for p, _ in r["diverged"]}
    keep = [k in shown for k in zip(margins.config_hash, margins.baseline_hash, margins.prompt_id)]
    return margins[keep]


def _divergence_cell(r: dict, margins: pd.DataFrame | None) -> str:
    by = (
        {}
        if margins is None
        else dict(zip(zip(margins.config_hash, margins.baseline_hash, margins.prompt_id), margins.margin))
    )
    margin = {p: by.get((r["config_hash"], r.get("baseline_hash"), p)) for p, _ in r["diverged"][:3]}
    cells = [
        f"{p}@{pos}" + ("" if margin[p] is None else f" (Δlogit {margin[p]:+.3f})") for p, pos in r["diverged"][:3]
    ]
    return ", ".join(cells) + (" …" if len(r["diverged"]) > 3 else "")


def lossless_section(
    table,
    check: pd.DataFrame | None,
    has_outputs: bool,
    has_baseline: bool,
    margins: pd.DataFrame | None = None,
    control: pd.DataFrame | None = None,
    pair_ids: set | None = None,
) -> str:
    """``pair_ids``: the pairs of summary.csv; check and control rows of any other pair_id (a pair
    measured under another identity of its models) are left out, and counted."""
    out = _greedy_outputs(table, has_outputs, has_baseline, margins)
    out.append(LOSSLESS_ALGEBRA)
    stale = 0
    if pair_ids is not None and check is not None and check.pair_id.notna().any():  # NaN: not recorded
        keep = check.pair_id.astype(str).isin(pair_ids)
        check, stale = check[keep], int((~keep).sum())
        if control is not None and control.pair_id.notna().any():
            control = control[control.pair_id.astype(str).isin(pair_ids)]
    if stale:
        out.append(
            f"{stale} {'row' if stale == 1 else 'rows'} of results/lossless_check.csv "
            f"{'belongs' if stale == 1 else 'belong'} to a pair_id that no row of summary.csv has "
            f"(a pair measured under an earlier identity of its models) and {'is' if stale == 1 else 'are'} not shown."
        )
    if check is None or check.empty:
        what = "has no rows of these pairs" if stale else "is absent"
        out.append(f"_results/lossless_check.csv {what}, so no empirical first-token check is shown._")
        return "\n\n".join(out)
    return "\n\n".join(out + _first_token_check(check, control))


def _greedy_outputs(table, has_outputs: bool, has_baseline: bool, margins: pd.DataFrame | None) -> list[str]:
    """Part (a): the greedy configurations' tokens against the plain-decoding baseline's."""
    out = [
        "**(a) Greedy outputs against plain decoding** (Spec-Bench `equal.py` style): every greedy "
        "configuration's generated tokens against the plain-decoding baseline's (tree none, same pair, "
        "dataset, dtype, max_new_tokens and batch size) on the prompts both ran. In float32 all should be identical; "
        "bf16 kernels may round differently, and any divergence is reported, never hidden."
    ]
    if table.empty:
        why = (
            "results/outputs.jsonl.gz is absent"
            if not has_outputs
            else "results/summary.csv has no plain-decoding baseline row (tree none)"
            if not has_baseline
            else "no greedy configuration shares prompts and settings with a baseline in outputs.jsonl"
        )
        out.append(f"_{why}, so no greedy output is compared._")
        return out
    head = ["pair", "dataset", "dtype", "shape", "N", "engine", "prompts", "token-identical"]
    order = table.sort_values(analysis.GROUP + ["shape", "budget", "config_hash"], kind="mergesort")
    rows = [
        [r["pair"], r["dataset"], r["dtype"], r["shape"], int(r["budget"]), r.get("engine", ""), r["n_prompts"]]
        + [f"{r['identical'] / r['n_prompts']:.1%}", _divergence_cell(r, margins) or "—"]
        for r in order.to_dict("records")
    ]
    out.append(md_table(rows, head + ["first divergence (prompt@token)"]))
    out.append(bullets(lossless_sentences(table), ""))
    return out + [note for note in [margin_note(table, margins)] if note]


def _first_token_check(check: pd.DataFrame, control: pd.DataFrame | None) -> list[str]:
    """Part (b)'s empirical check (results/lossless_check.csv) and its positive controls."""
    check = check.assign(holm_p=check.groupby("pair").chi2_p.transform(lambda p: holm(p.astype(float))))
    out = [
        "The empirical check (`python -m specbench.study.tools.lossless`): per prefix, N seeded one-step "
        "draws through the drafter, verifier and mode (the modes that draft alike verify the same drafted "
        "trees); χ² p-value of the first tokens against the target's distribution (`holm_p`: "
        "Holm-adjusted over all of the pair's checks), their TV, the TV of N exact draws from the target "
        "(`tv_null`), and the test's power against a first-token TV of `tv_target`."
    ]
    out.append(_check_table(check, CHECK_COLS))
    out.append(bullets(lossless_check_sentences(check) + power_sentences(check) + control_sentences(control), ""))
    if control is not None and not control.empty:
        out.append(_check_table(control, CONTROL_COLS))
    return out


CHECK_COLS = "pair verify child_rule sibling_order dtype temperature prefix_id seed n_draws tree budget".split()
CHECK_COLS += ["chi2_p", "holm_p", "tv", "tv_null", "power"]
CONTROL_COLS = "pair verify child_rule dtype prefix_id n_draws tree budget chi2_p tv exact_tv rejected".split()


def _check_table(check: pd.DataFrame, want) -> str:
    cols = [c for c in want if c in check]
    rows = [
        [
            analysis.fmt(r[c], 4 if c.startswith(("tv", "exact")) else 3) if isinstance(r[c], float) else r[c]
            for c in cols
        ]
        for r in check.sort_values(cols[:4], kind="mergesort").to_dict("records")
    ]
    return md_table(rows, cols)


def power_sentences(check: pd.DataFrame) -> list[str]:
    """What the checks can detect: the power bound of ``results.power`` at each run's N and bins."""
    if "power" not in check or check.power.isna().all():  # its table shows the columns a file has
        return []
    g = check[check.power.notna()]
    out = []
    for n, h in g.groupby(g.n_draws.astype(int), sort=True):
        bins, tv, alpha = int(h.n_bins.max()), float(h.tv_target.iloc[0]), float(h.alpha.iloc[0])
        need = draws_for_power(bins - 1, tv, alpha, 0.9)
        short = (
            f" 90% power at TV {tv:g} takes {need} draws per group of modes (`--draws auto`), {need / n:.1f}× "
            f"these (`SPECBENCH_EXTENDED=1 SPECBENCH_POWER90=1 bash run_all.sh` runs it, outside the hour)."
            if h.power.min() < 0.9
            else ""
        )
        out.append(
            f"Power at {n} draws ({len(h)} checks, up to {bins} bins): each χ² test at level {alpha:g} "
            f"rejects a first-token law at total variation {tv:g} from the target with probability at least "
            f"{analysis.fmt(h.power.min(), 3)} (a worst-case bound over such laws); 90% power is reached against a "
            f"TV of {analysis.fmt(power_tv(n, bins - 1, alpha, 0.9), 3)}.{short}"
        )
    return out


def control_sentences(control: pd.DataFrame | None) -> list[str]:
    """The positive controls: lossy rules through the same check, which it must reject."""
    if control is None or control.empty or control.rejected.isna().all():
        return [
            "No positive control (results/lossless_control.csv is absent): a lossy rule run through the same "
            "check would show that a pass means something."
        ]
    rej = control.rejected.astype(str).str.lower() == "true"
    names = ", ".join(sorted(set(control.verify)))
    return [
        f"Positive controls ({names}, lossy rules through the same check at the same N): {int(rej.sum())} of "
        f"{len(control)} rejected at level {analysis.fmt(control.alpha.astype(float).max())}; their exact first-token "
        f"TV at the prefix is {analysis.fmt(control.exact_tv.astype(float).min(), 3)}–"
        f"{analysis.fmt(control.exact_tv.astype(float).max(), 3)}."
    ]


def section(ctx: Ctx) -> str:
    t, d = ctx.t, ctx.data
    return lossless_section(
        t.lossless,
        d.lossless_check,
        bool(d.outputs),
        not analysis.baselines(d.summary).empty,
        d.margins,
        d.lossless_control,
        None if d.summary.pair_id.isna().all() else set(d.summary.pair_id.astype(str)),
    )


def lossless_table(df: pd.DataFrame, summary: pd.DataFrame, outputs: dict) -> pd.DataFrame:
    """Every greedy configuration's outputs against its greedy (T=0) baseline's on the same prompts."""
    base = analysis.baselines(summary)
    base = base[(base.verify.astype(str) == "greedy") & (base.temperature.astype(float) == 0)] if len(base) else base
    if not outputs or base.empty:
        return pd.DataFrame()
    rows, match = [], speedup.baseline_matcher(base, speedup.OUTPUT_MATCH)
    for r in df[(df.verify == "greedy") & (df.temperature == 0)].to_dict("records"):
        b = match(r)
        if b is None:
            continue
        eq = compare.output_equality(outputs, r["config_hash"], b["config_hash"])
        if eq["n_prompts"]:
            rows.append({**r, **eq, "baseline_hash": b["config_hash"]})
    return pd.DataFrame(rows)


def lossless_sentences(table: pd.DataFrame) -> list[str]:
    out: list[str] = []
    if table.empty:
        return out
    keys = [k for k in speedup.OUTPUT_MATCH if k in table]
    for key, g in table.groupby(keys, sort=True):
        where = dict(zip(keys, key))
        n, same = int(g.n_prompts.sum()), int(g.identical.sum())
        bad = g[g.identical < g.n_prompts]
        tail = (
            "every output is token-identical to plain decoding."
            if bad.empty
            else (
                f"{len(bad)} of {len(g)} configurations differ somewhere; the earliest divergence is at token "
                f"{min(pos for d in bad.diverged for _, pos in d)}."
            )
        )
        out.append(
            f"{where['pair']} on {where['dataset']} ({where['dtype']}, {int(where['max_new_tokens'])} new tokens"
            + (f", batch {int(where['batch_size'])}" if "batch_size" in where else "")
            + f"): {same} of {n} "
            f"(configuration, prompt) outputs of {len(g)} greedy configurations equal the baseline's "
            f"({same / n:.1%}); " + tail
        )
    return out


CHECK_ALPHA = 0.01  # a Holm-adjusted χ² p-value below this flags a (pair, mode, prefix) check


def holm(p: pd.Series) -> pd.Series:
    """Holm-adjusted p-values over the non-NaN ``p`` (``compare.holm``); NaN stays NaN."""
    q = p.dropna()
    return pd.Series(compare.holm(q.to_numpy(float))[0], index=q.index).reindex(p.index)


def lossless_check_sentences(check: pd.DataFrame) -> list[str]:
    """Per pair and mode: how many prefixes' χ² p-values fall below CHECK_ALPHA, raw and
    Holm-adjusted over all of the pair's checks (many modes x prefixes x seeds: at 18
    checks one raw p < 0.01 comes up about one time in six from exact samplers), and
    the empirical TV beside the TV an exact sampler shows at the same N (``tv_null``)."""
    out: list[str] = []
    if check is None or check.empty or "chi2_p" not in check:  # a check with one bin has no p: still a check
        return out
    check = check.assign(holm_p=check.groupby("pair").chi2_p.transform(lambda p: holm(p.astype(float))))
    for (pair, mode), g in check.groupby(["pair", "verify"], sort=True):
        p, m = g.chi2_p.astype(float), int(check.chi2_p[check.pair == pair].astype(float).notna().sum())
        low, flagged = int((p < CHECK_ALPHA).sum()), int((g.holm_p < CHECK_ALPHA).sum())
        tv = (
            f"; empirical TV {analysis.fmt(g.tv.astype(float).mean(), 4)} "
            f"against {analysis.fmt(g.tv_null.astype(float).mean(), 4)}"
            " for exact sampling at the same N"
            if "tv_null" in g and g.tv_null.notna().any()
            else ""
        )
        out.append(
            f"{pair}, {mode}: {low} of {len(g)} checks (prefix × seed) have p < {CHECK_ALPHA:g} (smallest "
            f"p = {analysis.fmt(p.min())}, Holm-adjusted over the pair's {m} checks {analysis.fmt(g.holm_p.min())}; "
            f"{int(g.n_draws.min())}+ draws each){tv}; "
            + (
                "consistent with a lossless sampler."
                if flagged == 0
                else f"{flagged} reject the target's distribution after adjustment: look at these prefixes."
            )
        )
    return out
