"""The TL;DR (docs/report.md, "REPORT.md, in this order"): per pair and dataset the tree to use on
this machine at batch 1, its speedup, acceptance rate and acceptance length with their intervals,
and where the answer moves with batch size (the interleaved benchmark's schedule, `results.schedule`, in a
few words: `short_stop`) and with another machine's cost curve (`costmodel.best_at` on its measured
point); every number read from `tables.compute`."""

from __future__ import annotations

import pandas as pd

from ..results import costtable, schedule
from . import analysis, benchcheck, costmodel, llamacpp, machines, measured, phrases, tables
from .context import Ctx, Tables
from .markdown import span


def label(r: dict, shapes: set[str]) -> str:
    """'binary N=3': the shape's name and budget; its parameters only where another of ``shapes``
    (the pair's recommended shapes) has the same name; the tokens it drafts where fewer than N; a
    cost-aware Sequoia by the tree it built ('sequoia(cost-aware) 3 nodes, depth 2 (N ≤ 64)')."""
    if analysis.built_label(r) is not None:
        return costmodel.label(r)
    name = costmodel.label({**r, "budget": 0})
    same = {s for s in shapes if costmodel.label({"shape": s, "budget": 0}) == name}
    text = costmodel.label(r) if len(same) < 2 else f"{r['shape']} N={int(r['budget'])}"
    return text + (f" ({d:.1f} drafted per step)" if (d := drafted(r)) < 0.95 * int(r["budget"]) else "")


def drafted(r: dict) -> float:
    """Mean draft tokens per step (acceptance length ÷ acceptance rate): below the budget where the
    drafter builds smaller trees (an n-gram trie without a match, a cost-aware Sequoia DP)."""
    rate, length = r.get("acceptance_rate"), r.get("acceptance_length")
    return float(length) / float(rate) if rate and length and rate == rate and length == length else float("nan")


def has_ci(r: dict) -> bool:
    lo = r.get("projected_lo")
    return lo is not None and lo == lo


def interval(r: dict) -> tuple[float, float] | None:
    """The interval a row's speed is judged by: the benchmark's paired interval, or the projection's; a
    single live run has none (it is judged by itself)."""
    if r["speed_basis"] == "benchmark":
        return r["benchmark_lo"], r["benchmark_hi"]
    return (r["projected_lo"], r["projected_hi"]) if r["speed_basis"] != "measured" and has_ci(r) else None


def verdict(r: dict) -> str:
    """'' where speculation pays, else what a reader must know: it loses, or the interval includes 1×
    (``interval``: above 1×: pays; below: loses; else includes 1×)."""
    ci = interval(r)
    if ci is not None and ci[0] <= 1 <= ci[1]:
        return "includes 1×"
    if r["speed"] <= 1 or (ci is not None and ci[1] < 1):
        return "slower than plain decoding"
    return ""


def speed_cell(r: dict) -> str:
    """'1.49× [1.29, 1.65]' (projected or benchmark) or '1.67× single run (projected [1.45, 1.85])', with its
    verdict (``r["verdict"]``)."""
    ci = interval(r)
    if r["speed_basis"] == "measured":
        proj = f" (projected [{r['projected_lo']:.2f}, {r['projected_hi']:.2f}])" if has_ci(r) else ""
        cell = f"{r['speed']:.2f}× single run{proj}"
    else:
        cell = f"{r['speed']:.2f}× [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else f"{r['speed']:.2f}×"
    return cell + (f", {r['verdict']}" if r["verdict"] else "")


def points(t: Tables, dtypes: set, here: bool = False) -> pd.DataFrame:
    """The measured machine points (costs.csv's), one per device and pair: the answer's dtype's
    (``dtypes``); this machine's (``here``) or the others'."""
    pts = t.points
    if pts.empty:  # no cost curves (hardware.machine_points: every row has its device and dtype)
        return pd.DataFrame(columns=["device", "pair"])
    pts = pts[(pts.device == "cpu") == here]
    pts = pts[pts.dtype.isin(dtypes)] if dtypes else pts
    return pts.drop_duplicates(["device", "pair"])


def modelled(t: Tables, r: dict, pt: dict) -> dict | None:
    """The linear model's best configuration of r's pair and dataset at the machine point pt."""
    a = t.phase
    g = a[(a.pair == r["pair"]) & (a.dataset == r["dataset"])] if len(a) else a
    return costmodel.best_at(g.reset_index(drop=True), pt["r"], pt["m"]) if len(g) else None


def note(r: dict) -> str:
    """' (largest tried)' where the best budget is an edge of the grid, ' (one budget tried)', and the
    claim unless ranked (a row costed on a derived basis is never ranked: its claim names it)."""
    edge = str(r.get("bracket", ""))
    where = [edge.split("(")[0].removeprefix("edge: ").strip()] if edge.startswith("edge") else []
    where += [edge] if edge == "one budget tried" else []
    return "".join(f" ({w})" for w in where + ([] if tables.is_ranked(r["claim"]) else [r["claim"]]))


def projected_only(t: Tables) -> pd.DataFrame:
    """The answer rows ranked by projection alone (a single live run's reading ranks nothing: the
    measured answer is the interleaved benchmark's), for the pairs and datasets it has not timed."""
    ans = t.answer
    if ans.empty:
        return ans
    done = {(r.pair, r.dataset) for r in measured.shown(t).itertuples()}
    ans = ans[[(p, d) not in done for p, d in zip(ans.pair, ans.dataset)]]
    ans = ans[ans.bracket.astype(str) != "one budget tried"]  # a grid with one budget brackets nothing: no row
    ans = ans.assign(speed=ans.projected, speed_basis="projected")
    return ans[ans.speed.notna()]


def recommended(t: Tables) -> pd.DataFrame:
    """Per pair (the pair with the most answer rows first) and dataset without a benchmark run: the
    fastest answer row by projection (`projected_only`, `phrases.fastest_per_dataset`: ranked rows
    where any), with its short label and its speed cell."""
    ans, out = projected_only(t), []
    for pair in phrases.widest_first(ans) if len(ans) else []:
        out += phrases.fastest_per_dataset(ans[ans.pair == pair])
    if not out:
        return pd.DataFrame()
    for r in out:
        r["tree"] = label(r, {str(x["shape"]) for x in out if x["pair"] == r["pair"]}) + note(r)
        r["verdict"] = verdict(r)
        r["speed_cell"] = speed_cell(r)
    return pd.DataFrame(out)


def machine(dev: str, envs: dict) -> str:
    """'cuda (NVIDIA H100 80GB HBM3)', or the device alone where its environment is not recorded."""
    gpu = (envs.get(dev) or {}).get("gpu")
    return f"{dev} ({gpu})" if gpu else dev


def repeat_spread(costs: pd.DataFrame | None, dev: str, dtypes: set) -> str:
    """'cost points of 11 repeats each, IQR a median 35% of the median (up to 80%)'."""
    c = costs[costtable.devices(costs).astype(str) == dev] if costs is not None else pd.DataFrame()
    c = c[c.dtype.isin(dtypes)] if dtypes and len(c) else c
    if c.empty or c.seconds_q75.isna().all():  # costs.csv before spreads were recorded (results.optional)
        return "each cost point timed once"
    rel = (c.seconds_q75 - c.seconds_q25) / c.seconds
    return (
        f"cost points of {span(c.repeats, '.0f')} repeats each, IQR a median {rel.median():.0%} of the median "
        f"(up to {rel.max():.0%})"
    )


def hardware_sentence(t: Tables, rec: pd.DataFrame, envs: dict, costs: pd.DataFrame | None = None) -> list[str]:
    """Per other measured machine: its curve against this one's (its repeats' spread), the modelled best
    there, and what a speed benchmark on random weights measured there (``benchcheck.timing_only_sentences``)."""
    out, dtypes = [], set(rec.dtype) if len(rec) else set()  # recommended: answer rows, each with its dtype
    cpu = points(t, dtypes, here=True)
    for dev, g in points(t, dtypes).groupby("device", sort=True):
        here = cpu[cpu.pair.isin(g.pair)].set_index("pair")
        rs = ", ".join(f"{p} {here.r.get(p, float('nan')):.2f} → {r:.2f}" for p, r in zip(g.pair, g.r) if r)
        best: dict[str, list[float]] = {}
        for rr in rec[rec.pair.isin(g.pair) & rec.pair.isin(here.index)].to_dict("records"):
            there = modelled(t, rr, g[g.pair == rr["pair"]].iloc[0].to_dict())
            if there is not None:
                best.setdefault(rr["pair"], []).append(there["modelled"])
        best_s = ", ".join(
            f"{p} {span(v)}×" + (" (plain decoding: speculation loses)" if max(v) <= 1 else "") for p, v in best.items()
        )
        bench = benchcheck.timing_only(t.bench_check)
        bench = bench[bench.device.astype(str) == dev] if len(bench) else bench
        live = benchcheck.timing_only_sentences(bench, t.controls, brief=True)
        out.append(
            f"On {machine(dev, envs)}, {', '.join(sorted(set(g.weights)))} weights, HF eager forwards "
            f"(launch-bound: the harness's), {repeat_spread(costs, dev, dtypes)}: an extra "
            f"verified token costs m = {span(g.m, '.3f')} one-token target forwards (here {span(here.m, '.3f')}) and a "
            f"draft forward r times the target's (here → there: {rs}); the best modelled speedup per pair there "
            f"(how the best budget moves: hardware.md): {best_s}. " + (live[0] if live else "No live run timed it.")
        )
    return out


def projected_sentence(rec: pd.DataFrame) -> str:
    """The pairs and datasets without a benchmark run, by projection alone, in one sentence (answer.md)."""
    if rec.empty:
        return ""
    items = "; ".join(f"{r['pair']}/{r['dataset']} {r['tree']} {r['speed_cell']}" for r in rec.to_dict("records"))
    return f"Not benchmarked, projected: {items} (answer.md)."


def short_stop(rows: pd.DataFrame) -> str:
    """A setting's batch-size verdict (``schedule.stop``) in a few words: 'no gain resolved from B = 4,
    loses from B = 8' (the speed page's in full: ``batch.stop_clause``)."""
    kind, x, _first = schedule.stop(rows)
    if kind in ("gains", "open"):
        return f"pays at every measured B (to {int(rows.batch_size.max())})" if kind == "gains" else "not resolved"
    if kind == "loses":
        return f"loses from B = {x}"
    later = schedule.losing_from(rows[rows.batch_size > x])
    return f"no gain resolved from B = {x}" + (f", loses from B = {int(later.batch_size)}" if later is not None else "")


def section(ctx: Ctx) -> str:
    """The machine first (``machines``), then the study machine's answer per pair and dataset
    (``measured``, brief), then where it moves: batch size (one clause per schedule), the pairs and
    datasets projected only; the rest is a link away."""
    t = ctx.t
    llama = llamacpp.brief(ctx)  # with llama.cpp's table, the words its lead and last bullet say are left out
    rec, meas = recommended(t), measured.section(t, brief=True, short=bool(llama))
    if rec.empty and not meas:
        return "_No greedy configuration has a speed (measured or projected), so there is no answer._"
    bench = t.bench_schedule
    sched = [f"{k[0]}/{k[1]} {short_stop(rows)}" for k, rows in schedule.settings(bench)]
    lines = [f"Batch size: {'; '.join(sched)} (speed.md)."] if sched else []
    lines += [projected_sentence(rec)] if len(rec) else []
    lines += [] if llama else ["Ties, acceptance rates, every run: speed.md; hardware: hardware.md."]
    head = [m for m in [machines.section(t), llama] if m]
    return "\n\n".join(head + meas + ["\n".join(f"- {s}" for s in lines if s)])
