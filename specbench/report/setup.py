"""REPORT.md's setup, limitations and appendix (the grouped table of every configuration, with hashes)."""

from __future__ import annotations

import json
import os

import pandas as pd

from ..results import costcurve
from . import analysis, defaultrun, findings, floors, onerun, phrases, tables
from .markdown import md_table, table

DEFAULT_COMMANDS = [
    "bash run_all.sh",
    "python -m specbench.run -m sweep=reference",
    "python -m specbench.attention_bench",
    "python -m specbench.collect",
    "python -m specbench.report",
]
ENV_PER_PAIR = ("commands", "draft", "target", "dtype")  # per pair in the pairs table, not one value for all
CSVS = (  # one string, split on spaces
    "summary.csv steps.csv.gz outputs.jsonl.gz acceptance_vector.csv acceptance_matrix.csv"
    " gap_to_optimum.csv costs.csv lossless_check.csv continuation_divergence.csv divergence_margins.csv"
    " bf16_replay_divergence.csv attention.csv attention_threads1.csv environment.json run_times.csv"
).split()
SETUP_STEP = "set-up"  # run_all.sh's first step (environment + models): timed apart from the study
EXTENDED_STEP = "extended:"  # run_all.sh's steps under SPECBENCH_EXTENDED=1: timed apart from the hour


def divergence_sentence(div: pd.DataFrame | None) -> str:
    """How often batched float32 continuations (replay's default) differ from batch-1 ones."""
    head = (
        "Replay computes the target's float32 continuations `batch_size` prompts per forward; batched "
        "kernels round differently, so at an exact near-tie a batched continuation can take the other token "
        "(`exact_continuations=true` computes them one prompt at a time, bit-exact with batch-1 live decoding)."
    )
    if div is None or div.empty:
        return head + " _results/continuation_divergence.csv is absent: `scripts/bench_batch.py` measures it._"
    parts = [
        f"{int(r.diverged)} of {int(r.n_prompts)} {r.dataset} continuations of {int(r.max_new_tokens)} tokens "
        f"at batch {int(r.batch_size)} differ from batch-1 ({int(r.tokens_before_divergence)} of {int(r.tokens)} "
        f"tokens before the first divergence{'; ' + r.divergences if r.diverged else ''}; batched "
        f"{float(r.speedup):.2f}× faster)"
        for r in div.itertuples()
    ]
    return head + " Measured by `scripts/bench_batch.py` on the real target: " + "; ".join(parts) + "."


def bf16_replay_sentence(df: pd.DataFrame | None) -> str:
    """How far live bf16 decoding is from the bf16 batched continuation that bf16 replay stands on."""
    if df is None or df.empty:
        return (
            "_results/bf16_replay_divergence.csv is absent: `scripts/bench_bf16_replay.py` measures how far "
            "live bf16 decoding is from the bf16 batched continuation._"
        )
    parts = [
        f"{r.pair} {r.tree}/{int(r.budget)}: {int(r.diverged)} of {int(r.prompts)} prompts diverge"
        + (
            f" (mean first position {r.first_divergence_mean:.1f}, the target's top-1 minus top-2 logit there "
            f"at most {r.margin_max:.3f})"
            if r.diverged
            else ""
        )
        + ", tokens_per_step live minus replay "
        + phrases.interval(r.diff_live_minus_replay, r.diff_ci_lo, r.diff_ci_hi, int(r.prompts))
        + (" (the interval includes zero)" if r.diff_ci_lo <= 0 <= r.diff_ci_hi else "")
        + rank_replay_words(r)
        for r in df.itertuples()
    ]
    return (
        "**bf16 replay against bf16 live decoding** (`scripts/bench_bf16_replay.py`, "
        f"{int(df.max_new_tokens.iloc[0])} new tokens, HumanEval, live batch {int(df.live_batch.iloc[0])}): "
        + "; ".join(parts)
        + "."
    )


def rank_replay_words(r) -> str:
    """Live minus rank replay (the grids' engine for static shapes), where the row measured it."""
    diff = getattr(r, "diff_live_minus_rank_replay", float("nan"))
    if diff != diff:
        return ""
    lo, hi = r.rank_diff_ci_lo, r.rank_diff_ci_hi
    return (
        ", live minus rank replay "
        + phrases.interval(diff, lo, hi, int(r.prompts))
        + (" (the interval includes zero)" if lo <= 0 <= hi else "")
    )


PAIR_COLS = [
    ("pair", lambda r: r["pair"]),
    ("draft", lambda r: r["draft"]),
    ("target", lambda r: r["target"]),
    ("dtype", lambda r: r["dtype"]),
    ("engine", lambda r: r["engines"]),
    ("weight quantisation (GGUF source)", lambda r: r["quant"]),
    ("prompts per dataset", lambda r: r["prompts"]),
    ("configurations", lambda r: r["configs"]),
]


def setup(t: dict, data: dict) -> str:
    out = [
        "**Pairs.** One row per pair and dtype (a pair run in two dtypes is two model conversions):\n\n"
        + table(t["setup"].to_dict("records"), PAIR_COLS)
    ]
    if (t["setup"].quant == "not recorded").any():
        out.append(
            "_The GGUF weight quantisation of the embedded models is not recorded in results/ (summary.csv "
            "has no `draft_quant` / `target_quant` columns), so it is not stated here._"
        )
    env = data["env"]
    if env:
        items = [(k, v) for k, v in sorted(env.items()) if k not in ENV_PER_PAIR]
        out.append(
            "**Machine and libraries.**\n\n"
            + md_table(
                [[k, v if isinstance(v, str) else json.dumps(v, sort_keys=True)] for k, v in items], ["item", "value"]
            )
        )
    else:
        out.append("_results/environment.json is absent: hardware and library versions were not recorded._")
    s = data["summary"]
    common = [c for c in ("max_new_tokens", "device", "seed") if c in s]
    if common:
        out.append(
            "**Run settings.**\n\n"
            + md_table(
                [[c, ", ".join(map(str, sorted(s[c].astype(str).unique())))] for c in common], ["setting", "values"]
            )
        )
    shapes = t["df"].drop_duplicates("shape").sort_values("shape")[["shape", "tree", "tree_params"]]
    if len(shapes):
        out.append(
            "**Shapes.**\n\n"
            + md_table(
                [[r.shape, r.tree, _short(r.tree_params)] for r in shapes.itertuples()],
                ["label", "tree", "tree_params"],
            )
        )
    out.append(run_times(data.get("run_times"), data.get("costs")))
    cmds = (env or {}).get("commands") or DEFAULT_COMMANDS
    out.append("**Commands.**\n\n```\n" + "\n".join(cmds) + "\n```")
    return "\n\n".join(out)


def run_times(times: pd.DataFrame | None, costs: pd.DataFrame | None = None) -> str:
    """Each step's wall time in the `bash run_all.sh` runs that wrote results/ (run_times.csv; a
    resumed run appends its own rows, and a step a run skipped reads near 0: per step, the run
    that did its work), beside its compute ceiling where its forwards were counted (study.ceiling,
    each model's widest forward on its ``costcurve.CEILING`` curve of ``costs``)."""
    if times is None or times.empty:
        return "_results/run_times.csv is absent: the steps' wall times of `bash run_all.sh` were not recorded._"
    runs = times.run.nunique() if "run" in times else 1
    per = times.loc[times.groupby("step", sort=False).seconds.idxmax()].reset_index(drop=True)
    per = per.reindex(columns=[*per.columns, *(c for c in CEILING if c not in per)])
    setup = per.step.astype(str).str.startswith(SETUP_STEP)
    extended = per.step.astype(str).str.startswith(EXTENDED_STEP)
    study, more = int(per.seconds[~setup & ~extended].sum()), int(per.seconds[extended].sum())
    cols = ["step", "seconds", "minutes"] + (["ceiling (s)", "ratio"] if per.ratio.notna().any() else [])
    rows = [
        [str(r.step), f"{int(r.seconds)}", f"{r.seconds / 60:.1f}", *_ceiling_cells(r)][: len(cols)]
        for r in per.itertuples()
    ]
    how = (
        "one run"
        if runs == 1
        else f"{runs} runs (a later one resumed where an earlier one stopped; per step, the run that did its work)"
    )
    return (
        f"**Run times.** Each step of `bash run_all.sh` on this machine, {how}: wall seconds, and beside them "
        "the step's compute ceiling: the seconds the tokens its forwards processed would take at each model's "
        f"{ceiling_width(costs)} forward rate here (results/costs.csv), and the ratio ceiling / wall. Total without "
        f"the set-up, up to the report: {study} s = {study / 60:.1f} min"
        + (
            f"; the steps marked extended (`SPECBENCH_EXTENDED=1`) took {more} s = {more / 60:.1f} min more"
            if extended.any()
            else ""
        )
        + ". "
        + ceiling_sentence(per[~setup])
        + "\n\n"
        + md_table(rows, cols)
    )


CEILING = ["ceiling_s", "ratio", "in_forwards", "busiest", "tokens_per_forward"]
LOW_RATIO = 0.4  # a step below this share of its ceiling is named, with why (#35)


def ceiling_width(costs: pd.DataFrame | None) -> str:
    """The widest forward of each model's ``costcurve.CEILING`` curve, the rate a step's ceiling assumes, in words."""
    curves = costcurve.curves(costs, costcurve.CEILING) if costs is not None else {}
    return onerun.width_words(c.sizes[-1] for c in curves.values())


def _ceiling_cells(r) -> list[str]:
    if pd.isna(r.ratio):
        return ["", ""]
    return [f"{r.ceiling_s:.0f}", f"{r.ratio:.2f}"]


def ceiling_sentence(per: pd.DataFrame) -> str:
    """How many steps have a ceiling, and each below ``LOW_RATIO`` of it with what keeps it there
    (``_why_low``: narrow forwards, or time outside them)."""
    have = per.dropna(subset=["ratio"])
    if have.empty:
        counted = int((pd.to_numeric(per.get("forwards", pd.Series(dtype=float)), errors="coerce") > 0).sum())
        if counted:
            return (
                f"No step has a ceiling: {counted} step{'s' if counted != 1 else ''} counted forwards, but results/costs.csv names none of "
                "their models (rows from before its `model` column: rerun `python -m specbench.study.costs`)."
            )
        return "No step has a ceiling: these runs predate the forward counts (`specbench.study.ceiling`)."
    low = have[have.ratio < LOW_RATIO]
    out = (
        f"{len(have) - len(low)} of {len(have)} steps with counted forwards run at {LOW_RATIO} of their ceiling or more"
    )
    if low.empty:
        return out + "."
    return f"{out}; below it: " + "; ".join(_why_low(r) for r in low.itertuples()) + "."


def _why_low(r) -> str:
    """Why one step sits below its ceiling, from its counts: narrow forwards, or time outside them."""
    width = f"{r.busiest}'s forwards average {r.tokens_per_forward:.1f} tokens"
    share = f"its forwards at their own widths on this machine's cost curves would take {r.in_forwards:.2f} of its wall time"
    if r.in_forwards >= 0.5:
        return f"{r.step} ({r.ratio:.2f}): narrow forwards: {width}, and {share}"
    return f"{r.step} ({r.ratio:.2f}): time outside the models' forwards: {width}, and {share}"


def floor_sentences(summary: pd.DataFrame) -> list[str]:
    """The study's size floors (report/floors.py): how many are met, and each unmet one with its cost."""
    st = floors.status(summary)
    if st.empty:
        return [f"summary.csv lacks one of {', '.join(floors.NEEDED)}: the study's size floors are not checked."]
    met = st[st.missing == 0]
    out = [
        f"Study size: {len(met)} of {len(st)} floors of the reference study are met in full "
        f"({'; '.join(met.floor) if len(met) else 'none'})."
    ]
    for r in st[st.missing > 0].itertuples():
        priced = (
            "at the measured wall time per prompt-token of the same pair's runs of the same kind here "
            "(replay, live sampling, live at batch 1 or batched; the same tree where run) they would take "
            + minutes_more(r.minutes)
        )
        if r.unpriced:
            priced = f"{r.unpriced} of the decodes they need have no run of their pair and kind here to price them" + (
                f"; the others would take {minutes_more(r.minutes)}" if r.minutes > 0 else ""
            )
        out.append(f"Floor not met: {r.floor}: {r.missing} of {r.cells} configurations absent; {priced}.")
    return out


def minutes_more(minutes: float) -> str:
    """'about 12 min more', or 'under a minute more' (a rank-replayed grid prices at seconds)."""
    return f"about {minutes:.0f} min more" if minutes >= 0.5 else "under a minute more"


def _short(text, n: int = 90) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def limitations(t: dict, data: dict) -> list[str]:
    rows = t["rows"]
    out = []
    if "n_prompts" in rows and len(rows):
        small = rows[rows.n_prompts < tables.MIN_RANKED]
        out.append(
            f"{len(small)} of {len(rows)} configurations ran fewer than {tables.MIN_RANKED} prompts (smallest "
            f"{int(rows.n_prompts.min())}); their orderings are exploratory."
        )
    if len(ans := t["answer"]) and "n_prompts" in rows:
        out.append(
            f"{int(ans.claim.map(tables.is_ranked).sum())} of {len(ans)} answer rows (per pair, dataset and shape, "
            f"the fastest budget) carry a ranked claim (≥ {tables.MIN_RANKED} prompts, ≤ {tables.MAX_CUT:.0%} of steps "
            f"cut by max_new_tokens); the largest prompt set is {int(rows.n_prompts.max())}."
        )
    if "max_new_tokens" in rows and len(rows):
        caps = ", ".join(str(int(x)) for x in sorted(rows.max_new_tokens.unique()))
        out.append(
            f"Generations stop at max_new_tokens = {caps}; a large tree can finish a prompt in a few steps, "
            f"and {int((rows.cut > tables.MAX_CUT).sum())} configurations lose more than {tables.MAX_CUT:.0%} of their "
            "steps to that cap."
        )
    out.append(findings.calibration_claim(t["calib"])["sentence"])
    if "device" in rows:
        out.append(
            f"Every timing is on {', '.join(sorted(rows.device.astype(str).unique()))}"
            + (f" ({data['env'].get('cpu')}, {data['env'].get('cores')} cores)" if data["env"] else "")
            + "; projected speedups transfer to other hardware only through re-measured forward costs."
        )
    out.append(defaultrun.sentence(data.get("default_run"), data.get("acceptance_check")))
    if t["live"].empty or t["live"].measured.isna().all():
        out.append("No live configuration has a matching baseline: every speedup is projected.")
    return out


def bookkeeping(t: dict, data: dict) -> list[str]:
    """The study's bookkeeping (the setup page): its size floors, the least time one run takes, and
    where each answer row's best budget sits among the budgets tried."""
    least = onerun.sentence(t.get("least"))
    return floor_sentences(data["summary"]) + ([least] if least else []) + bracket_sentences(t["answer"], t["rows"])


def live_budgets(rows: pd.DataFrame, r: dict) -> str:
    """'N = 1, 2, 3, 4, 6 (16 × 32); 3 (8 × 64)': every live batch-1 run in summary.csv of r's pair,
    shape, dataset and dtype, by run size (prompts × new tokens)."""
    keep = (rows.engine == "live") & (rows.batch_size.astype(float) == 1)
    for k in ("pair", "shape", "dataset", "dtype"):
        keep &= rows[k].astype(str) == str(r[k])
    runs = [
        f"{', '.join(str(int(b)) for b in sorted(set(g.budget)))} ({int(n)} × {int(k)})"
        for (n, k), g in rows[keep].groupby(["n_prompts", "max_new_tokens"], sort=True)
    ]
    return "N = " + "; ".join(runs) if runs else "no live batch-1 run"


def bracket_sentences(ans: pd.DataFrame, rows: pd.DataFrame | None = None) -> list[str]:
    """How many answer rows' best budget sits at an edge of the budgets tried, per pair; a live
    check's edge names the replayed grid's best for the same shape (``tables.replayed_best``) and its bracket."""
    if ans.empty or "bracket" not in ans:
        return []
    kind = ans.bracket.astype(str).map(lambda b: "at an edge" if b.startswith("edge") else b)
    counts = ", ".join(f"{n} {k}" for k, n in kind.value_counts().sort_index().items())
    edge = ans[kind == "at an edge"]
    out = [
        f"Where each of the {len(ans)} answer rows' best budget sits among the budgets tried (answer.md's labels): "
        f"{counts}. Only an interior best (or N = 1, the smallest admitted) is an optimum; one budget tried "
        "brackets nothing, and an edge's optimum may lie beyond it."
    ]
    if edge.empty:
        return out
    per = ", ".join(f"{p} {len(g)}" for p, g in edge.groupby("pair", sort=True))
    out.append(f"The edges per pair: {per}.")
    live = edge[edge.get("engine", pd.Series("", index=edge.index)) == "live"]
    if len(edge) > len(live):
        out.append(f"{len(edge) - len(live)} of them are grids not run dense at the low end (budgets 1, 2, 3, ...).")
    best = tables.replayed_best(ans)
    for r in live.to_dict("records"):
        now = best.get(tuple(str(r[k]) for k in tables.LIVE_KEY))
        moved = f"; the replayed grid's best is now N={int(now['budget'])}, {now['bracket']} there" if now else ""
        ran = live_budgets(rows, r) if rows is not None else f"N = {r['budgets']}"
        out.append(
            f"{r['pair']}'s live check of {r['shape']} on {r['dataset']} has its best at an edge of N = "
            f"{r['budgets']} at {int(r['max_new_tokens'])} new tokens; its live batch-1 runs (prompts × tokens): "
            f"{ran}{moved} (`run_all.sh` re-picks its live budgets from the current projection)."
        )
    return out


APPENDIX_COLS = [
    ("config_hash", lambda r: r["config_hash"]),
    ("shape", lambda r: r["shape"]),
    ("N", lambda r: int(r["budget"])),
    ("dtype", lambda r: r["dtype"]),
    ("max_new_tokens", lambda r: analysis.fmt(r.get("max_new_tokens"))),
    ("engine", lambda r: r.get("engine", "")),
    ("role", lambda r: r.get("pair_role", "")),
    ("prompts", lambda r: analysis.fmt(r.get("n_prompts"))),
    ("steps", lambda r: analysis.fmt(r.get("n_steps"))),
    ("acceptance_rate", lambda r: phrases.metric(r, "acceptance_rate", 3)),
    ("acceptance_length", lambda r: phrases.metric(r, "acceptance_length")),
    ("tokens_per_step", lambda r: phrases.metric(r, "tokens_per_step")),
    ("cut", lambda r: phrases.pct(r.get("cut"))),
    ("speedup", phrases.speed),
]


def appendix(t: dict, data: dict) -> str:
    res = data["results"]
    have = [f for f in CSVS if os.path.isfile(os.path.join(res, f))]
    out = [
        "**Inputs.** " + ", ".join(f"[{f}](../{f})" for f in have) + ".",  # from results/tables/appendix.md
        f"**Every configuration** ({len(data['summary'])} rows of summary.csv), grouped by pair · dataset · rule.",
    ]
    for (pair, ds, mode), g in t["rows"].groupby(["pair", "dataset", "mode"], sort=True):
        out.append(f"### {pair} · {ds} · {mode}\n\n" + table(g.to_dict("records"), APPENDIX_COLS))
    base = analysis.baselines(data["summary"])
    if not base.empty:
        cols = [
            ("config_hash", lambda r: r["config_hash"]),
            ("pair", lambda r: r["pair"]),
            ("dataset", lambda r: r["dataset"]),
            ("dtype", lambda r: r["dtype"]),
            ("max_new_tokens", lambda r: analysis.fmt(r.get("max_new_tokens"))),
            ("engine", lambda r: r.get("engine", "")),
            ("prompts", lambda r: analysis.fmt(r.get("n_prompts"))),
            ("tokens_per_s", lambda r: analysis.fmt(r.get("tokens_per_s"), 2)),
        ]
        out.append("### Baseline (plain target decoding, tree none)\n\n" + table(base.to_dict("records"), cols))
    return "\n\n".join(out)
