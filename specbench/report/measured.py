"""The TL;DR's measured answer: the interleaved speed benchmark's runs (results/speed.csv, through
``results.speedstats``), per pair and dataset the configuration shown among those that tie the
fastest, its paired interval, the ties, the run's controls, and the same configuration's
acceptance from its full replay; and the projection's error against live timing."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..results import costcurve, speedstats
from . import benchcheck, controls, phrases
from .context import Tables
from .markdown import span, table


def shown(t: Tables, every: bool = False) -> pd.DataFrame:
    """One row per benchmark run at batch 1 (``t.measured``): the configuration shown, its
    ties' names, its verdict and the full replay's acceptance of the same tree and budget; only each
    pair and dataset's run on the machine whose curves the study's projections read (``t.cost_study``),
    else on a machine that measured a curve of its own (``t.cost_machines``: the projection is checked
    there), then the largest (the most prompts timed; the latest among equals: run ids start with their
    time), unless ``every``: a default run's few prompts, or another machine's run, never hide the study's."""
    m = t.measured
    if m.empty:
        return m
    m = speedstats.answer_first(m[m.batch_size.astype(int) == 1])
    if not every:  # the TL;DR's is specbench's loop (llama.cpp's runs: ``llamacpp.brief``)
        m = m[speedstats.with_engine(m).engine == speedstats.SPECBENCH]
        if m.empty:
            return m
        key = costcurve.run_order(m, t.cost_study, t.cost_machines)
        m = m[[k == b for k, b in zip(key, m.assign(_k=key).groupby(["pair", "dataset"])._k.transform("max"))]]
    out = []
    for _run, g in m.groupby("run_id", sort=False):
        r = g[g.shown].iloc[0].to_dict()
        r["name"], r["candidate"] = r["candidate"], built(r)
        others = g[g.tie & ~g.shown].sort_values("speedup", ascending=False)
        r["n_ties"] = len(others)
        r["ties"] = ", ".join(f"{c} {s:.2f}×" for c, s in zip(others.candidate, others.speedup)) or "none"
        r["verdict"] = verdict(r)
        out.append({**r, **replay_metrics(t.rows, r)})
    return pd.DataFrame(out).sort_values(["pair", "dataset"], kind="mergesort").reset_index(drop=True)


def runs_at_batch1(t: Tables) -> int:
    """How many benchmark runs at batch 1 there are (what ``shown(t, every=True)`` lists)."""
    m = t.measured
    return 0 if m.empty else int(speedstats.answer_first(m[m.batch_size.astype(int) == 1]).run_id.nunique())


def built(r: dict) -> str:
    """The candidate's name, and the tree it built where that is smaller than its budget (a
    cost-aware Sequoia DP, an n-gram trie without a match): 'sequoia N=64 (builds 3.0 nodes, depth 2)'."""
    n, d = r.get("drafted_per_step"), r.get("tree_depth")
    if n is None or n != n or n >= 0.95 * float(r["budget"]):
        return str(r["candidate"])
    return f"{r['candidate']} (builds {n:.1f} nodes, depth {int(d or 0)})"


def verdict(r: dict) -> str:
    if r.get("interval") is False or r["lo"] != r["lo"]:
        return f"fewer than {speedstats.MIN_UNITS} prompts: no interval, not ranked"
    if not r["controls_hold"]:
        return "a control failed: not ranked"
    if r["pays"]:
        return "pays"
    return "slower than plain decoding" if r["slower"] else "includes 1×"


def replay_metrics(rows: pd.DataFrame, r: dict) -> dict:
    """The acceptance rate and length, with intervals and their prompt count, of the same pair,
    dataset, tree, budget and dtype in the replayed greedy study (its longest run), else {}."""
    if rows.empty:
        return {}
    g = rows[
        (rows.pair == r["pair"])
        & (rows.dataset == r["dataset"])
        & (rows.tree == r["tree"])
        & (rows.budget.astype(int) == int(r["budget"]))
        & (rows.dtype == r["dtype"])
        & (rows.engine == "replay")
        & (rows.temperature.astype(float) == 0)
    ]
    if g.empty:
        return {}
    best = g.sort_values(["max_new_tokens", "n_prompts"], ascending=False, kind="mergesort").iloc[0]
    cols = [f"acceptance_{m}{s}" for m in ("rate", "length") for s in ("", "_lo", "_hi")]
    return {
        **{c: best[c] for c in cols},
        "n_prompts_replay": best["n_prompts"],
        "tokens_replay": best["max_new_tokens"],
    }


def speed_cell(r: dict) -> str:
    """'1.27× [1.18, 1.36]' with its verdict unless it pays; '0.76×, fewer than 5 prompts: ...' without an interval."""
    ci = f" [{r['lo']:.2f}, {r['hi']:.2f}]" if r["lo"] == r["lo"] else ""
    return f"{r['speedup']:.2f}×{ci}" + ("" if r["verdict"] == "pays" else f", {r['verdict']}")


def replay_cell(name: str):
    def cell(r: dict) -> str:
        if r.get(name) != r.get(name) or r.get(name) is None:
            return "no replay of this tree"
        return phrases.metric({**r, "n_prompts": r["n_prompts_replay"]}, name)

    return cell


COLUMNS = [
    ("pair", lambda r: r["pair"]),
    ("dataset", lambda r: r["dataset"]),
    ("tree (shown)", lambda r: r["candidate"]),
    ("measured speedup [95% CI]", speed_cell),
    ("ties it (paired difference includes 0)", lambda r: r["ties"]),
    ("acceptance rate, full replay [95% CI]", replay_cell("acceptance_rate")),
    ("acceptance length, full replay [95% CI]", replay_cell("acceptance_length")),
]


def brief_tree(r: dict) -> str:
    """'chain N=2 +4': the shown tree and how many others tie it."""
    return f"{r['name']} +{r['n_ties']}"


def brief_speed(r: dict) -> str:
    """'1.27× [1.18, 1.36]', with 'slower' or 'not ranked' where so (an interval across 1× speaks for itself)."""
    cell = f"{r['speedup']:.2f}×" + (f" [{r['lo']:.2f}, {r['hi']:.2f}]" if r["lo"] == r["lo"] else "")
    return cell + {"pays": "", "includes 1×": ""}.get(r["verdict"], f", {r['verdict'].split(':')[0]}")


BRIEF = [  # the TL;DR's table: the ties' names, acceptance (rates and lengths) and every run on speed.md
    ("pair/dataset", lambda r: f"{r['pair']}/{r['dataset']}"),
    ("tree (shown) +ties", brief_tree),
    ("speedup [95% CI]", brief_speed),
]


def brief_lead(rec: pd.DataFrame, short: bool = False) -> str:
    """The TL;DR table's lead: where it was timed and what 'shown' means (``short``: in fewer words, where the
    TL;DR holds llama.cpp's table too); each row's acceptance is on speed.md."""
    machines = "; ".join(sorted(str(m).split(",")[0] for m in set(rec.machine)))
    words = (
        "*Shown*: the tie (paired difference includes 0) drafting fewest tokens; acceptance: speed.md."
        if short
        else "*Shown*: of those tying the fastest (Bonferroni-adjusted paired difference includes 0), the one "
        "drafting fewest tokens; each row's acceptance: speed.md."
    )
    return (
        f"**Per pair on {machines}** (batch 1, {span(rec.n_prompts, '.0f')} prompts × "
        f"{span(rec.max_new_tokens, '.0f')} tokens; pays in {int((rec.verdict == 'pays').sum())} of {len(rec)}). "
        + words
    )


def lead(rec: pd.DataFrame) -> str:
    machines = "; ".join(sorted(set(rec.machine))) if rec.machine.nunique() == 1 else "the machine in each row"
    by_len: dict[int, list[int]] = {}
    for n, k in zip(rec.n_prompts.astype(int), rec.max_new_tokens.astype(int)):
        by_len.setdefault(k, []).append(n)
    size = ", ".join(f"{span(ns, '.0f')} prompts × {k} tokens" for k, ns in sorted(by_len.items()))
    pays = int((rec.verdict == "pays").sum())
    return (
        f"**Measured** (the interleaved speed benchmark, `python -m specbench.study.tools.speed`; batch 1, greedy, "
        f"{size}, timed on {machines}): each configuration and plain decoding decode the same prompts, "
        "interleaved in random order; speedup: the paired throughput ratio, 95% bootstrap interval over "
        f"prompts{controls.offset_clause(rec)}. Ties: a Bonferroni-adjusted paired difference to the fastest that includes 0; shown: "
        f"{speedstats.PICK_SHORT}. Speculation pays (interval above 1×) in {pays} "
        f"of the {len(rec)} measured rows."
    )


def error_sentence(speed: pd.DataFrame) -> str:
    """The projection's error (projected ÷ measured - 1) over every live batch-1 configuration with
    both, median absolute and worst, from speedup.csv: with each prompt's measured prefill counted
    (``error``, ``speedup.with_prefill``), and on decoding alone (``error_decode``) where recorded."""
    if speed is None or speed.empty:  # speedup.speed_table's rows carry error, error_decode and prefill_s
        return ""
    live = speed[(speed.batch_size.astype(int) == 1) & speed.error.notna()]
    if live.empty:
        return ""

    def spread(col: str) -> str:
        e = live[col].astype(float)
        return f"median absolute error {e.abs().median():.0%}, worst {e.iloc[int(np.argmax(e.abs().to_numpy()))]:+.0%}"

    decode = (
        f"; on decoding alone (prefill left out, as the projections in the tables are) {spread('error_decode')}"
        if live.error_decode.notna().all()
        else ""
    )
    pre = live.prefill_s.dropna()
    counted = (
        f", counting each prompt's prefill as the plain run measured it ({pre.min():.2f}–{pre.max():.2f} s of "
        "target forward per prompt; the draft's: speed.md)"
        if len(pre)
        else ""
    )
    return (
        f"The cost model's projection against live timing at batch 1 (one live run per configuration, on the "
        f"machine that measured the costs){counted}: {spread('error')}, over {len(live)} configurations{decode}."
    )


def on_cost_machine(rows: pd.DataFrame, t: Tables) -> pd.DataFrame:
    """``rows`` (with pair and machine_id) timed on the machine their pair's cost curve was measured on
    (``t.cost_machines``: ``results.costcurve.machines`` of results/costs.csv)."""
    if rows is None or rows.empty:
        return pd.DataFrame() if rows is None else rows
    return rows[costcurve.at_home(rows, t.cost_machines)]


def projection_check(t: Tables) -> str:
    """The projection against the benchmark's measured speedups, only where the pair's cost curve was
    measured on the machine that timed them (each cost row's ``machine_id``); otherwise it says none is
    compared, and why.  Each candidate is projected from its own timed steps (``t.bench_check``,
    ``benchcheck``) where the run's steps are at hand, else from the replay of the same tree and budget."""
    m, speed = t.measured, t.speed
    if m.empty or speed is None or speed.empty:
        return ""
    m = speedstats.answer_first(m[m.batch_size.astype(int) == 1])  # the projection is batch 1's
    same = on_cost_machine(m, t)
    if same.empty:
        return (
            "The benchmark's speedups are not set against the projection: no pair's cost curve "
            "(results/costs.csv) names the machine that timed it (a row's `machine_id`), and a speedup is "
            "never formed across machines."
        )
    own = answering(on_cost_machine(t.bench_check, t))
    if len(own):
        live = live_errors(speed)
        every = pd.concat([live.error.astype(float), own.error], ignore_index=True)
        return (
            f"Against the benchmark (each candidate costed on its own timed steps, prefill counted): "
            f"{benchcheck.spread(own.error)}, over {len(own)} configurations{host_clause(own, t)}; all {len(every)} live batch-1 "
            f"ones: {benchcheck.spread(every)}; by term: speed.md."
        )
    study = m[costcurve.at_home(m, t.cost_study)]  # the replay's curves' machine
    both = study.merge(benchcheck.replayed(speed), on=benchcheck.KEY, how="inner")
    if both.empty:
        return ""
    err = both.projected / both.speedup - 1
    return (
        f"On the benchmark's machine, the projection's error against its measured speedups: median absolute "
        f"{err.abs().median():.0%}, worst {err.iloc[int(np.argmax(err.abs().to_numpy()))]:+.0%}, over {len(err)} "
        "configurations."
    )


def host_clause(own: pd.DataFrame, t: Tables) -> str:
    """Of ``own`` (benchmark rows on their cost curve's machine id), the error of those timed on the very
    host that measured the curve (``t.cost_hosts``, ``inputs.machine.host``), or that no row says so."""
    same = own[costcurve.at_home(own, t.cost_hosts, "host")]
    if len(same):
        return f" ({len(same)} timed on the host that measured the costs: {benchcheck.spread(same.error)})"
    return (
        " (none both timed and costed on one recorded host: hosts of one machine id differ 10-25% in rate, "
        "so part of this error may be the host's)"
    )


def live_errors(speed: pd.DataFrame | None) -> pd.DataFrame:
    """speedup.csv's live batch-1 rows with their own error (prefill counted)."""
    if speed is None or speed.empty:
        return pd.DataFrame(columns=["error"])
    return speed[(speed.engine == "live") & (speed.batch_size.astype(int) == 1) & speed.error.notna()]


def bench_detail(t: Tables) -> list[str]:
    """speed.md's account of the benchmark against the model (``benchcheck.sentences``), on the costs' machine,
    then each random-weight run's (``benchcheck.timing_only_sentences``: a GPU's, timing steps alone)."""
    checked = on_cost_machine(t.bench_check, t)
    own = answering(checked)
    out = benchcheck.sentences(own, live_errors(t.speed)) if len(own) else []
    return out + benchcheck.timing_only_sentences(checked, t.controls)


def answering(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` less the random-weight runs' rows (``speedstats.random_weights``): those time steps, they answer nothing."""
    return df[~speedstats.random_weights(df)]


def section(t: Tables, every: bool = False, brief: bool = False, short: bool = False) -> list[str]:
    """The measured table with its lead and the controls, or nothing without a benchmark run: each
    pair and dataset's largest run (``shown``; every run, ``every``: speed.md); the machine of each row where the
    runs name more than one, and where other runs were left out, where they are; ``brief``: the TL;DR's
    short table (``BRIEF``; ``short``: its lead in fewer words)."""
    rec = shown(t, every)
    if rec.empty:
        return []
    cols = COLUMNS + [("timed on", lambda r: r["machine"])] * (rec.machine.nunique() > 1)
    others = 0 if every else runs_at_batch1(t) - len(rec)
    note = [f"Other runs of the same pairs and datasets ({others}: earlier, smaller or on another machine): speed.md."][
        : others > 0
    ]
    if brief:
        return [brief_lead(rec, short), table(rec.to_dict("records"), BRIEF), controls.short(t, rec.run_id)]
    return [
        lead(rec),
        table(rec.to_dict("records"), cols),
        *[s for s in [controls.sentence(t, rec.run_id, brief=not every)] if s],
        *note,
    ]
