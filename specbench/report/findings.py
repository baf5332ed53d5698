"""The findings table: the computed claims of REPORT.md's analysis, identities, speed, gap, hardware
and comparisons sections as rows (id, section, sentence, numbers), built in one place (`frame`) from
the tables of `tables.compute`; a section prints its rows as bullets (`sentences`).  `numbers` holds the values a sentence rests on.  Imports
shared modules only: analysis, compare (Holm's level), costmodel (the linear model's best at a machine's point), tables
and phrases (the wording of a group, a speed, a claim)."""

from __future__ import annotations

import pandas as pd

from ..results import ranking
from . import analysis, compare, costmodel, tables
from .context import Inputs, Tables
from .phrases import claim_word, speed, where

COLUMNS = ["id", "section", "sentence", "numbers"]


def claim(section: str, key: str, sentence: str, **numbers) -> dict:
    return dict(id=f"{section}:{key}", section=section, sentence=sentence, numbers=numbers)


def frame(t: Tables, data: Inputs) -> pd.DataFrame:
    """Every computed claim, in the order its section prints them."""
    rows = [
        *answer_claims(t.answer),
        *cap_claims(t.rows),
        *cross_claims(t.cross),
        calibration_claim(t.calib),
        *identity_claims(t.idents),
        *comparison_claims(t.comparisons, analysis.role_names(t.df), token_level_rules(t.df)),
        *speed_claims(t.live),
        *gap_claims(t.gap),
        *machine_claims(t.points, data.envs or {}),
        *phase_claims(t.phase, t.points),
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def sentences(found: pd.DataFrame, section: str) -> list[str]:
    return list(found.sentence[found.section == section])


def answer_claims(ans: pd.DataFrame) -> list[dict]:
    out: list[dict] = []
    for key, g in analysis.groups(ans):
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
        sentence = (
            f"{where(first)}: {first['shape']} N={int(first['budget'])} is fastest at {speed(first)} and "
            f"{last['shape']} N={int(last['budget'])} slowest at {speed(last)}{tail} ({claim_word(first)})."
        )
        nums = dict(fastest=first["speed"], slowest=last["speed"], most_tokens_per_step=big["tokens_per_step"])
        out.append(claim("analysis", f"answer/{'/'.join(map(str, key))}", sentence, **nums))
    return out


def cap_claims(rows: pd.DataFrame) -> list[dict]:
    out: list[dict] = []
    for key, g in analysis.groups(rows[rows.temperature == 0] if len(rows) else rows):
        over = g[g.cut > tables.MAX_CUT]
        if len(over):
            budgets = ", ".join(str(int(b)) for b in sorted(over.budget.unique()))
            sentence = (
                f"{where(g.iloc[0])}: {len(over)} of {len(g)} configurations lose more than {tables.MAX_CUT:.0%} "
                f"of their steps to max_new_tokens (budgets {budgets}; worst {over.cut.max():.0%}, "
                f"{over.sort_values('cut').iloc[-1]['shape']}): at these budgets tokens_per_step partly "
                "measures the length cap."
            )
            nums = dict(over=len(over), of=len(g), worst_cut=over.cut.max())
            out.append(claim("analysis", f"cap/{'/'.join(map(str, key))}", sentence, **nums))
    return out


def cross_claims(cross: pd.DataFrame) -> list[dict]:
    out: list[dict] = []
    keys = ["dataset", "dtype", "max_new_tokens", "cross_shape", "budget"]
    for (ds, dt, mnt, shape, budget), g in analysis.groups(cross, keys):
        g = g.sort_values("tps_shared", ascending=False)
        order = ", ".join(f"{r.pair} {analysis.fmt(r.tps_shared, 2)}" for r in g.itertuples())
        sentence = (
            f"{ds} ({dt}, {int(mnt)} new tokens), {shape} N={int(budget)} on the {int(g.n_shared.iloc[0])} "
            f"prompts all {len(g)} pairs ran: {order} tokens/step."
        )
        nums = dict(zip(g.pair, g.tps_shared))
        out.append(claim("analysis", f"cross/{ds}/{dt}/{int(mnt)}/{shape}/{int(budget)}", sentence, **nums))
    return out


def calibration_claim(calib: pd.DataFrame) -> dict:
    if calib.empty:
        return claim("analysis", "calibration", "No Sequoia configuration ran, so no calibration is used.")
    few = calib.calibration.str.startswith("disjoint, ")  # disjoint, but from too few prompts
    kinds = calib.calibration.str.split(" ").str[0].where(~few, f"from-fewer-than-{tables.MIN_CALIB}-prompts")
    counts = kinds.value_counts()
    if set(counts.index) == {"not"} and calib.calibration.str.startswith("not recorded").all():
        sentence = (
            "The calibration prompts of the acceptance vectors are not recorded (results/acceptance_vector.csv "
            "has no `prompt_ids` column), so whether the Sequoia trees were calibrated on the prompts they are "
            "scored on cannot be checked; their rows are not ranked."
        )
        return claim("analysis", "calibration", sentence, not_recorded=len(calib))
    parts = [f"{n} {k.replace('-', ' ')}" for k, n in sorted(counts.items())]
    sentence = (
        f"Calibration prompts against scored prompts, per Sequoia configuration: {', '.join(parts)}; an "
        f"in-sample tree, one calibrated on fewer than {tables.MIN_CALIB} prompts, or one whose calibration "
        "prompts are not recorded, is never ranked."
    )
    return claim("analysis", "calibration", sentence, **{k: int(n) for k, n in counts.items()})


def token_level_rules(df: pd.DataFrame) -> set | None:
    """The rules the rows declare token-level (`token_level_on`); None where no row says."""
    if df.token_level_on.isna().all():  # analysis.prepare's rows carry it ("" where not described)
        return None
    return set(df.loc[df.token_level_on.notna(), "verify"].astype(str))


def comparison_claims(comp: pd.DataFrame | None, names: dict, token_level: set | None = None) -> list[dict]:
    """How many comparisons of the fixed list clear zero after Holm's adjustment (`comparisons_sentence`)."""
    line = comparisons_sentence(comp, names, token_level)
    return [] if line is None or comp is None else [claim("comparisons", "fixed", line, m=len(comp))]


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


def identity_claims(idents: pd.DataFrame) -> list[dict]:
    """Each identity stated once: the rows, the budgets and why they coincide."""
    out: list[dict] = []
    for key, g in analysis.groups(idents, ["pair", "dtype", "mode", "shape", "ref_mode", "ref_shape"]):
        r = g.iloc[0].to_dict()
        a, b = (r["ref_tree"], r["tree"]) if r["tree"] != r["ref_tree"] else (r["ref_verify"], r["verify"])
        why = WHY.get(tuple(sorted((a, b)))) or "they build and accept the same trees here"
        budgets = {ds: sorted(int(x) for x in d.budget.unique()) for ds, d in g.groupby("dataset", sort=True)}
        places = "; ".join(f"{ds} N={', '.join(map(str, b))}" for ds, b in budgets.items())
        sentence = (
            f"{r['pair']} ({r['dtype']}): {r['shape']} under {r['mode']} = {r['ref_shape']} under "
            f"{r['ref_mode']}, step for step on every prompt ({places}): {why}."
        )
        out.append(claim("identities", "/".join(map(str, key)), sentence, **budgets))
    return out


def speed_claims(live: pd.DataFrame) -> list[dict]:
    """Per live setting (prompts × tokens): the projection's error over the runs that have both
    (median and worst) and how many measured speedups fall inside the projection's interval."""
    both = live[live.projected.notna()] if len(live) else live
    out: list[dict] = []
    if both.empty or not {"n_prompts", "max_new_tokens"} <= set(both.columns):
        return out
    for (n, toks), g in both.groupby(["n_prompts", "max_new_tokens"], sort=True):
        err = g.error.abs()
        inside = int(((g.measured >= g.projected_lo) & (g.measured <= g.projected_hi)).sum())
        b = g.sort_values(["measured", "config_hash"], ascending=[False, True]).iloc[0].to_dict()
        sentence = (
            f"Live batch-1 runs of {int(n)} prompts × {int(toks)} tokens ({len(g)} configurations): the projection's "
            f"error is {err.median():.0%} (median absolute) and {err.max():.0%} at worst; {inside} of {len(g)} measured "
            f"speedups fall inside its 95% interval; the highest measured is {b['measured']:.2f}× ({b['pair']} on "
            f"{b['dataset']}, {b['shape']} N={int(b['budget'])})."
        )
        nums = dict(median_error=err.median(), worst_error=err.max(), inside=inside, best=b["measured"])
        out.append(claim("speed", f"{int(n)}x{int(toks)}", sentence, **nums))
    return out


def gap_claims(rows: pd.DataFrame) -> list[dict]:
    """Per pair and dataset: the best static shape per budget as a share of the DP's prediction."""
    out: list[dict] = []
    for (pair, dataset), g in analysis.groups(rows, ["pair", "dataset"]):
        best = [ranking.order(gb, "fraction").iloc[0] for _b, gb in g.groupby("budget", sort=True)]  # ranking.best
        parts = [
            f"N={int(r['budget'])}: {r['shape']} {r['fraction']:.0%} of {analysis.fmt(r['optimum'], 2)}" for r in best
        ]
        over, short = g[g.tokens_per_step > g.optimum], g[g.model_gap > 0]
        worst = g.loc[g.model_gap.idxmax()]
        sentence = (
            f"{pair} on {dataset}: the best static shape per budget as a share of the DP's prediction for its "
            f"best tree (tokens/step): " + "; ".join(parts) + f". {len(over)} of {len(g)} shapes measure above "
            f"that prediction and {len(short)} below the DP's prediction for themselves (mean "
            f"{g.model_gap.mean():+.2f} tokens/step, predicted minus measured); the largest shortfall is "
            f"{worst['shape']} at N={int(worst.budget)}: {analysis.fmt(worst.tokens_per_step, 2)} measured vs "
            f"{analysis.fmt(worst.predicted, 2)} predicted."
        )
        nums = dict(above=len(over), below=len(short), mean_gap=g.model_gap.mean(), worst_gap=worst.model_gap)
        out.append(claim("gap", f"{pair}/{dataset}", sentence, **nums))
    return out


def machine_claims(points: pd.DataFrame, envs: dict) -> list[dict]:
    """Per measured device and dtype (each curve on the machine its cost rows name: a default run on an AVX2
    CPU adds a float32 curve beside the committed bf16 one): what was timed, where, how its target's cost grows."""
    out: list[dict] = []
    several = len(points) and points.groupby("device").dtype.nunique().max() > 1
    for (device, dtype), g in analysis.groups(points, ["device", "dtype"]):
        env = envs.get(device) or {}
        named = " / ".join(sorted({m for m in g.get("machine", pd.Series(dtype=str)).astype(str) if m}))
        where = f"{named}, {dtype}" if named else (env.get("gpu") or env.get("cpu") or "machine not recorded")
        what = (
            "the pairs' architectures with random weights (the weight files cannot reach that machine; a "
            "forward's time depends on the shapes, not the values)"
            if (g.weights == "random").any()
            else "the pairs' own models"
        )
        t = g.iloc[0]
        sentence = (
            f"{device} ({where}"
            + ("" if named else f", torch {env.get('torch', '?')}, {env.get('measured_on', '?')}")
            + f"): {what}. {t.pair}'s target's one-token forward takes {t.t1 * 1e3:.1f} ms and a "
            f"{t.n_max}-token one {t.t_max * 1e3:.1f} ms ({t.t_max / t.t1:.2f}×); draft-to-target ratios r "
            + ", ".join(f"{p} {r:.2f}" if r else f"{p} 0 (no draft model)" for p, r in zip(g.pair, g.r))
            + "."
            + " No live run on this device times the pairs, so its best trees are the linear model's alone."
            * (device != "cpu")
        )
        key = f"{device} {dtype}" if several else str(device)
        out.append(claim("machines", key, sentence, t1=t.t1, t_max=t.t_max, **dict(zip(g.pair, g.r))))
    return out


def phase_claims(a: pd.DataFrame, points: pd.DataFrame) -> list[dict]:
    """Per pair × dataset and measured machine: where it sits, and the modelled best there."""
    out: list[dict] = []
    if a.empty or points.empty:
        return out
    for (pair, ds), g in a.groupby(["pair", "dataset"], sort=True):
        for pt in points[points.pair == pair].to_dict("records"):
            b = costmodel.best_at(g.reset_index(drop=True), pt["r"], pt["m"])
            sentence = (
                f"{pair} on {ds}: this {pt.get('device', '')} {pt['dtype']} curve sits at r = {pt['r']:.2f}, "
                f"m = {pt['m']:.3f}; the linear model's best there is {costmodel.label(b)} ({b['modelled']:.2f}×)."
            )
            key = f"{pair}/{ds}/{pt.get('device', '')}/{pt['dtype']}"
            out.append(claim("phase", key, sentence, r=pt["r"], m=pt["m"], modelled=b["modelled"]))
    return out


def comparisons_scope(comp: pd.DataFrame) -> str:
    """What the comparisons rest on: pairs, datasets, trees, temperatures, prompts and the metric."""
    trees = sorted({(str(r.tree), int(r.budget)) for r in comp.itertuples()}, key=lambda tb: (tb[1], tb[0]))
    temps = ", ".join(f"{t:g}" for t in sorted(set(comp.temperature.astype(float))))
    lo, hi = int(comp.n_prompts.min()), int(comp.n_prompts.max())
    return (
        f"They rest on {', '.join(sorted(set(comp.pair.astype(str))))} only, on "
        f"{', '.join(sorted(set(comp.dataset.astype(str))))}, with the trees "
        f"{', '.join(f'{t} N={b}' for t, b in trees)}, at T = {temps}, on {lo}{'' if lo == hi else f'–{hi}'} prompts, "
        "and compare tokens per step (acceptance), not timed speed."
    )


def comparisons_sentence(comp: pd.DataFrame | None, names: dict, token_level: set | None = None) -> str | None:
    """How many comparisons of the fixed list clear zero after Holm's adjustment, per rule in each
    direction and neither (the nulls with the positives), which lossless alternative to the
    token-level rules (``token_level``) clears zero above its baseline, and what they rest on."""
    if comp is None or comp.empty:
        return None
    head = (
        f"Of the {len(comp)} comparisons fixed in advance (each rule at T>0 against its strongest token-level "
        f"baseline, each lossy rule against {names['tree']} on trees ({names['chain']} on "
        f"chains) and against {names[analysis.LOSSY_BASELINE]}; Holm-adjusted, family-wise {compare.ALPHA:.0%}), "
        f"{int(comp.clears_zero.sum())} clear zero. Per rule, above zero / below zero / neither"
    )
    up, down = comp.clears_zero & (comp["diff"] > 0), comp.clears_zero & (comp["diff"] < 0)

    def counts(rules) -> str:
        return ", ".join(
            f"{v} {int((up & (comp.verify == v)).sum())} / {int((down & (comp.verify == v)).sum())} / "
            f"{int(((comp.verify == v) & ~comp.clears_zero).sum())}"
            for v in rules
        )

    lossless = comp.lossless.map(analysis.is_lossless)
    parts = [
        f"lossless rules: {counts(sorted(set(comp.verify[lossless])))}" if lossless.any() else "",
        f"lossy rules: {counts(sorted(set(comp.verify[~lossless])))}" if (~lossless).any() else "",
    ]
    out = head + ": " + "; ".join(p for p in parts if p) + "."
    alt = comp[lossless & ~comp.verify.isin(token_level or set()) & comp.against.astype(str).str.contains("baseline")]
    if token_level is not None and len(alt):
        per = ", ".join(f"{v} {int((up & (comp.verify == v))[alt.index].sum())} of {int((alt.verify == v).sum())}"
                        for v in sorted(set(alt.verify)))  # fmt: skip
        n_up = int(up[alt.index].sum())
        lead = (
            "No comparison of a lossless alternative to the token-level rules clears"
            if n_up == 0
            else f"{n_up} of the {len(alt)} comparisons of a lossless alternative to the token-level rules clear"
        )
        out += f" {lead} zero above its baseline ({per})."
    return out + " " + comparisons_scope(comp)
