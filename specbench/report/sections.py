"""REPORT.md's result sections as markdown: headline, modes, speedup, losslessness, appendix.

Each section function returns markdown; a section with nothing to show returns
one italic line saying why (`md_table` refuses an empty table, so no header
is ever printed without rows).  Numbers come from `analysis` and `speedup`.
"""
from __future__ import annotations

import math

import pandas as pd

from . import analysis as A
from . import figures as F
from . import speedup as S

FOCUS_MODES = ("block", "traversal")   # the block/tree-level rules compared with their token-level rule


def md_table(rows: list[list], headers: list[str]) -> str:
    if not rows:
        raise RuntimeError(f"internal: empty table ({', '.join(headers)}); omit it and say why")

    def cell(x):
        return str(x).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(x) for x in r) + " |" for r in rows]
    return "\n".join(lines)


def with_ci(r, metric: str, digits: int = 3) -> str:
    return A.fmt_ci(r.get(metric), r.get(f"{metric}_lo"), r.get(f"{metric}_hi"), digits)


def bullets(lines: list[str], empty: str) -> str:
    return "\n".join(f"- {s}" for s in lines) if lines else f"_{empty}_"


def figure(out: list[str], made, rel: str) -> None:
    if made:
        name, caption = made
        out.append(f"![{name}]({rel}/{name})\n\n*{caption}*\n")


def _is_true(x) -> bool:
    return str(x).lower() in ("true", "1")


# --------------------------------------------------------------------------
def headline_section(df, sums, head, chain_diffs, pair, fig_dir, rel) -> str:
    if head.empty:
        return "_No greedy (T=0) configuration ran, so there is no best-shape headline._"
    out = ["Per pair and dataset (greedy, T=0), the shape with the highest tokens_per_step at each budget, "
           "among the configurations that ran the group's full prompt set, and its paired difference to "
           "chain at the same budget (definitions under *Metric definitions*)."]
    order = sorted(head.groupby(A.GROUP, sort=True).groups, key=lambda k: (k[0] != pair, k))
    for key in order:
        g = head[(head[A.GROUP] == pd.Series(key, index=A.GROUP)).all(axis=1)]
        rows = [[r.budget, r.shape, r.config_hash, A.fmt_ci(r.tokens_per_step, r.lo, r.hi),
                 A.fmt(r.chain_tps, 2) if r.has_chain else "not run",
                 A.fmt_diff(r.paired) if r.paired is not None else ("chain is best" if r.has_chain else "n/a"),
                 r.n_shapes] for r in g.itertuples(index=False)]
        out.append(f"**{key[0]} · {key[1]}** ({key[2]}, {int(key[3])} new tokens, "
                   f"{A.fmt(g.n_prompts.iloc[0])} prompts)\n\n" + md_table(
                       rows, ["N", "best shape", "config_hash", "tokens_per_step [95% CI]", "chain",
                              "Δ vs chain [95% paired CI]", "shapes ranked"]))
    groups = A.main_groups(df, sums, pair)
    figure(out, F.fig_tokens_per_step(groups, pair, fig_dir), rel)
    figure(out, F.fig_gain_vs_chain(chain_diffs, pair, fig_dir), rel)
    out.append(bullets(A.headline_sentences(head), "no headline rows"))
    subset = A.subset_sentences(chain_diffs, head)
    if subset:
        out.append("**Configurations run on fewer prompts** (compared with chain on the prompts both ran, "
                   "never ranked above):\n\n" + bullets(subset, ""))
    return "\n\n".join(out)


def modes_section(gains, fig_dir, rel) -> str:
    if gains.empty:
        return ("_No configuration ran at T>0 beside its token-level rule (speculative on a chain, mss on a tree) "
                "on shared prompts, so there is no mode comparison._")
    out = ["Each mode at T>0 against the token-level rule on the same shape, budget, temperature, dtype and "
           "max_new_tokens: speculative (Leviathan et al.) on chains, SpecInfer's mss on trees; Δ is paired on "
           "the prompts both ran.  Trees *same*: the mode verified the token-level rule's own drafted trees and "
           "target rows (`verify.paired_with`), so Δ is the gain per drafted tree; *own*: each rule drafted "
           "and decoded on its own (same prompts and seeds)."]
    rows = [[r["pair"], r["dataset"], r["dtype"], r["shape"], int(r["budget"]), r["mode"], r["ref_mode"],
             "same" if r.get("same_trees") is True else "own",
             "yes" if _is_true(r.get("lossless")) else "no", r["n_shared"], A.fmt(r["paired"].a_value, 2),
             A.fmt(r["paired"].b_value, 2), A.fmt_diff(r["paired"]), A.fmt(r.get("first_token_tv"))]
            for r in gains.sort_values(A.GROUP + ["mode", "shape", "budget"], kind="mergesort").to_dict("records")]
    out.append(md_table(rows, ["pair", "dataset", "dtype", "shape", "N", "mode", "vs", "trees", "lossless", "prompts",
                               "tokens_per_step", "ref tokens_per_step", "Δ [95% paired CI]", "first_token_tv"]))
    sent = A.mode_sentences(gains)
    focus = [s for s in sent if any(f": {m} T=" in s for m in FOCUS_MODES)]
    if focus:
        out.append("**Block and traversal verification.**\n\n" + bullets(focus, ""))
    rest = [s for s in sent if s not in focus]
    if rest:
        out.append(bullets(rest, ""))
    figure(out, F.fig_mode_gains(gains, fig_dir), rel)
    figure(out, F.fig_lossy(gains, fig_dir), rel)
    return "\n\n".join(out)


def live_set(table: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Greedy live rows with a measured speedup, plus their baselines at tokens_per_step 1."""
    if table.empty or "measured" not in table or table.measured.isna().all():
        return pd.DataFrame()
    live = table[table.measured.notna() & (table.temperature == 0)]
    base = A.baselines(summary)
    base = base[base.config_hash.isin(set(live.baseline_hash))].assign(shape="none")
    if "tokens_per_step" not in base or base.tokens_per_step.isna().any():
        base = base.assign(tokens_per_step=1.0)
    cols = A.GROUP + ["shape", "tokens_per_step", "tokens_per_s"]
    return pd.concat([live[cols], base[cols]], ignore_index=True)


def speedup_section(table, summary, pair, fig_dir, rel) -> str:
    out = ["Projected speedup = tokens_per_step × t_target(1) ÷ (draft_cost + verify_cost), with t_role(n) the "
           "median measured forward time for n query tokens on this machine (results/costs.csv, interpolated), "
           "verify_cost = t_target(N+1) (root plus N draft nodes in one forward) and " + S.DRAFT_COST_RULE +
           " Prefill is ignored. Measured speedup = live tokens_per_s ÷ tokens_per_s of the live plain-decoding "
           "baseline (tree none) with the same pair, dataset, dtype and max_new_tokens."]
    if table.empty:
        return out[0] + "\n\n_results/costs.csv is absent and no live run has a baseline, so no speedup is shown._"
    meas = table[table.measured.notna()] if "measured" in table else table.iloc[0:0]
    if meas.empty:
        out.append("_No live run has a matching plain-decoding baseline row (tree none), so only projected "
                   "speedup is shown (full table in Appendix B)._")
    else:
        rows = [[r["config_hash"], r["pair"], r["dataset"], r["dtype"], r["mode"], r["shape"], int(r["budget"]),
                 A.fmt(r["tokens_per_step"], 2), A.fmt(r["tokens_per_s"], 2), A.fmt(r["baseline_tokens_per_s"], 2),
                 A.fmt(r["measured"], 2), A.fmt(r.get("projected"), 2)]
                for r in meas.sort_values(A.GROUP + ["mode", "shape", "budget"], kind="mergesort").to_dict("records")]
        out.append(md_table(rows, ["config_hash", "pair", "dataset", "dtype", "mode", "shape", "N",
                                   "tokens_per_step", "tokens/s", "baseline tokens/s", "measured ×", "projected ×"]))
        figure(out, F.fig_pareto(live_set(table, summary), fig_dir), rel)
    keys = [k for k, _ in A.greedy_groups(table, main_only=True) if k[0] == pair] if "projected" in table else []
    figure(out, F.fig_speedup(table, keys, fig_dir), rel)
    out.append(bullets(S.speedup_sentences(table), "no speedup rows"))
    return "\n\n".join(out)


LOSSLESS_ALGEBRA = ("**(b) Sampling modes.** The exact `first_token_tv` of a lossless mode is zero by its algebra "
                    "(the mode's first-token law is computed, not sampled), so a zero there is not evidence by "
                    "itself; the evidence is an empirical check: at fixed real prefixes, the first emitted token "
                    "over many seeded draws against the target's distribution (χ² p-value and TV).")


def margin_note(table: pd.DataFrame, margins: pd.DataFrame | None) -> str:
    """One line on the target's logit margin at the greedy divergences (results/divergence_margins.csv)."""
    n = int(sum(len(d) for d in table.diverged))
    if not n:
        return ""
    margins = _shown_margins(table, margins)
    if margins is None:
        return ("_results/divergence_margins.csv is absent (`python -m specbench.study.margins` writes it), so no "
                "divergence's logit margin is shown._")
    if margins.empty:
        return ("_results/divergence_margins.csv has no row for these divergences (`python -m specbench.study.margins` "
                "says why it skipped them), so no logit margin is shown._")
    worst, neg = float(margins.margin.abs().max()), int((margins.margin < 0).sum())
    return (f"Δlogit: the target's float32 logit of the baseline's token minus that of the configuration's token at "
            f"the first divergence (one forward over the prompt and the shared prefix, `python -m "
            f"specbench.study.margins`); {len(margins)} of {n} divergences measured, |Δlogit| at most {worst:.3f} "
            f"(a probability ratio of {math.exp(worst):.3f} between the two tokens); {neg} of {len(margins)} "
            f"negative (there float32 prefers the configuration's token to the baseline's).")


def _shown_margins(table: pd.DataFrame, margins: pd.DataFrame | None) -> pd.DataFrame | None:
    """The margin rows of the table's divergences (same configuration, baseline and prompt)."""
    if margins is None:
        return None
    shown = {(r["config_hash"], r.get("baseline_hash"), p) for r in table.to_dict("records") for p, _ in r["diverged"]}
    keep = [k in shown for k in zip(margins.config_hash, margins.baseline_hash, margins.prompt_id)]
    return margins[keep]


def _divergence_cell(r: dict, margins: pd.DataFrame | None) -> str:
    by = {} if margins is None else dict(zip(zip(margins.config_hash, margins.baseline_hash, margins.prompt_id),
                                             margins.margin))
    key = lambda p: (r["config_hash"], r.get("baseline_hash"), p)    # noqa: E731
    cells = [f"{p}@{pos}" + (f" (Δlogit {by[key(p)]:+.3f})" if key(p) in by else "") for p, pos in r["diverged"][:3]]
    return ", ".join(cells) + (" …" if len(r["diverged"]) > 3 else "")


def lossless_section(table, check: pd.DataFrame | None, has_outputs: bool, has_baseline: bool,
                     margins: pd.DataFrame | None = None) -> str:
    out = ["**(a) Greedy outputs against plain decoding** (Spec-Bench `equal.py` style): every greedy "
           "configuration's generated tokens against the plain-decoding baseline's (tree none, same pair, "
           "dataset, dtype and max_new_tokens) on the prompts both ran. In float32 all should be identical; "
           "bf16 kernels may round differently, and any divergence is reported, never hidden."]
    if table.empty:
        why = ("results/outputs.jsonl is absent" if not has_outputs else
               "results/summary.csv has no plain-decoding baseline row (tree none)" if not has_baseline else
               "no greedy configuration shares prompts and settings with a baseline in outputs.jsonl")
        out.append(f"_{why}, so no greedy output is compared._")
    else:
        rows = []
        for r in table.sort_values(A.GROUP + ["shape", "budget", "config_hash"], kind="mergesort").to_dict("records"):
            div = _divergence_cell(r, margins)
            rows.append([r["config_hash"], r["pair"], r["dataset"], r["dtype"], r["shape"], int(r["budget"]),
                         r.get("engine", ""), r["n_prompts"], f"{r['identical'] / r['n_prompts']:.1%}", div or "—"])
        out.append(md_table(rows, ["config_hash", "pair", "dataset", "dtype", "shape", "N", "engine", "prompts",
                                   "token-identical", "first divergence (prompt@token)"]))
        out.append(bullets(S.lossless_sentences(table), ""))
        out += [note for note in [margin_note(table, margins)] if note]
    out.append(LOSSLESS_ALGEBRA)
    if check is None or check.empty:
        out.append("_results/lossless_check.csv is absent, so no empirical first-token check is shown._")
    else:
        check = check.assign(holm_p=check.groupby("pair").chi2_p.transform(lambda p: S.holm(p.astype(float))))
        cols = [c for c in ("pair", "verify", "temperature", "prefix_id", "seed", "n_draws", "tree", "budget",
                            "chi2_p", "holm_p", "tv", "tv_null") if c in check]
        rows = [[A.fmt(r[c], 4 if c.startswith("tv") else 3) if isinstance(r[c], float) else r[c] for c in cols]
                for r in check.sort_values(cols[:4], kind="mergesort").to_dict("records")]
        out.append("The empirical check (`python -m specbench.study.lossless`): per prefix, N seeded one-step "
                   "draws through the drafter, verifier and mode; χ² p-value of the first tokens against the "
                   "target's distribution (`holm_p`: Holm-adjusted over all of the pair's checks), their TV, "
                   "and the TV of N exact draws from the target (`tv_null`).")
        out.append(md_table(rows, cols))
        out.append(bullets(S.lossless_check_sentences(check), ""))
    return "\n\n".join(out)


# --------------------------------------------------------------------------
def appendix_configs(df: pd.DataFrame, summary: pd.DataFrame) -> str:
    out = [f"Every configuration in results/summary.csv ({len(summary)} rows), grouped by pair · dataset · mode."]
    has_tv = "first_token_tv" in df and df.first_token_tv.notna().any()
    headers = ["config_hash", "shape", "N", "dtype", "max_new_tokens", "engine", "prompts", "steps",
               "acceptance_rate", "acceptance_length", "tokens_per_step"] + (["first_token_tv"] if has_tv else [])
    for (pair, dataset, mode), g in df.groupby(["pair", "dataset", "mode"], sort=True):
        rows = [[r["config_hash"], r["shape"], int(r["budget"]), r["dtype"], A.fmt(r.get("max_new_tokens")),
                 r.get("engine", ""), A.fmt(r.get("n_prompts")), A.fmt(r.get("n_steps")),
                 with_ci(r, "acceptance_rate"), with_ci(r, "acceptance_length", 2), with_ci(r, "tokens_per_step", 2)]
                + ([A.fmt(r.get("first_token_tv"))] if has_tv else []) for r in g.to_dict("records")]
        out.append(f"### {pair} · {dataset} · {mode}\n\n" + md_table(rows, headers))
    base = A.baselines(summary)
    if not base.empty:
        rows = [[r["config_hash"], r["pair"], r["dataset"], r["dtype"], A.fmt(r.get("max_new_tokens")),
                 r.get("engine", ""), A.fmt(r.get("n_prompts")), A.fmt(r.get("tokens_per_s"), 2)]
                for r in base.to_dict("records")]
        out.append("### Baseline (plain target decoding, tree none)\n\n" + md_table(
            rows, ["config_hash", "pair", "dataset", "dtype", "max_new_tokens", "engine", "prompts", "tokens_per_s"]))
    return "\n\n".join(out)


def appendix_speedup(table: pd.DataFrame) -> str:
    if table.empty or "projected" not in table or table.projected.isna().all():
        return "_No projected speedup: results/costs.csv is absent or lacks role, n_tokens, seconds._"
    t = table[table.projected.notna()].sort_values(A.GROUP + ["mode", "shape", "budget"], kind="mergesort")
    rows = [[r["config_hash"], r["pair"], r["dataset"], r["mode"], r["shape"], int(r["budget"]),
             A.fmt(r["tokens_per_step"], 2), int(r["depth"]), A.fmt(r["draft_cost"] * 1e3, 2),
             A.fmt(r["verify_cost"] * 1e3, 2), A.fmt(r["projected"], 2), A.fmt(r.get("measured"), 2)]
            for r in t.to_dict("records")]
    return md_table(rows, ["config_hash", "pair", "dataset", "mode", "shape", "N", "tokens_per_step", "D",
                           "draft_cost ms", "verify_cost ms", "projected ×", "measured ×"])
