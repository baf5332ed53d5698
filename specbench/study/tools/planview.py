"""The default run's plan as the user and the shell see it (``study.tools.budget``'s views): the printout
with each step's ETA, one value for the shell (``get``), and the run's record for the report
(results/default_run.json, ``record``).  torch-free."""

from __future__ import annotations

import math
import os
import time

from ...core.args import refuse
from ...results.plan import plural
from . import llamaplan

GRIDS = ("none", "tiny", "key", "default")  # the tree-attention grids, smallest first


def mmss(seconds: float) -> str:
    s = int(math.ceil(seconds))
    return f"{s // 60}:{s % 60:02d}"


def covered(p: dict) -> tuple[int, int, int, int, int]:
    """(speed units, speed prompts, speed candidates, attention grid rank, sample configurations): what a plan
    covers."""
    by = {s["step"]: s for s in p["steps"]}
    units = by["speed"]["units"]
    n = by["recheck"]["configurations"]
    cands = sum(len(u["candidates"]) for u in units)
    return len(units), sum(u["prompts"] for u in units), cands, GRIDS.index(by["attention"]["grid"]), n


def candidates(u: dict) -> str:
    """A speed unit's candidates: their count, and those the budget dropped (the projected top is kept)."""
    k, dropped = len(u["candidates"]), u.get("dropped", [])
    return (
        f"{k} of {k + len(dropped)} candidates ({', '.join(dropped)} dropped to fit)" if dropped else f"{k} candidates"
    )


def sentence(p: dict) -> str:
    """What the plan covers, in one sentence (the report's and the printout's)."""
    by = {s["step"]: s for s in p["steps"]}
    units = by["speed"]["units"]
    sp = "; ".join(
        f"{u['pair']} on {u['dataset']} ({candidates(u)}, {plural(u['prompts'], 'prompt')} x {u['tokens']} tokens)"
        for u in units
    )
    rc = by["recheck"]
    return (
        f"forward costs of {', '.join(by['costs']['pairs']) or 'no pair'} ({by['costs']['repeats']} repeats"
        f"{widths(by['costs'])}); "
        f"the acceptance sample ({rc['configurations']} of {rc['sampled']} configurations, {plural(rc['prompts'], 'prompt')}, "
        f"each at its committed batch {'/'.join(map(str, rc['batches'])) or '-'}); "
        f"the speed benchmark for {sp or 'no pair (the budget left none)'}; "
        f"the tree-attention grid '{by['attention']['grid']}'" + _llama_clause(by.get("llamacpp"))
    )


def _llama_clause(s: dict | None) -> str:
    """The sentence's clause for llama.cpp's stage (``study.tools.llamaplan``; '' where the plan has none)."""
    if not s:
        return ""
    if s["skipped"]:
        return f"; llama.cpp's benchmark not run: {s['skipped']}"
    return (
        f"; llama.cpp's benchmark for {s['pair']} on {s['dataset']} ({candidates(s)}, "
        f"{plural(s['prompts'], 'prompt')} x {s['tokens']} tokens) and its cost curve"
    )


def _llama_line(s: dict) -> str:
    """The printout's line for llama.cpp's stage."""
    if s["skipped"]:
        return f"skipped: {s['skipped']}"
    return (
        f"{s['pair']}/{s['dataset']}: {candidates(s)} x {plural(s['prompts'], 'prompt')} x {s['tokens']} tokens, "
        f"its cost curve {s['costs_repeats']} repeats ({mmss(s['costs_eta_s'])} of it; rates by {s['rate_by']})"
    )


def widths(costs: dict) -> str:
    """', forwards of 1-17 tokens' where the costs step measures a narrow curve, else ''."""
    most = costs.get("max_tokens")
    why = costs.get("narrow_why", "the whole grid left the speed benchmark less")
    return f", forwards of 1-{most} tokens: {why}" if most else ""


def printout(p: dict, spent: float) -> str:
    lines = [f"plan ({p['profile']} profile, dtype {p['dtype']}, {p['machine']['machine']}):"]
    lines.append(f"  already spent (set-up, machine): {mmss(spent)}")
    for s in p["steps"]:
        what = {
            "costs": f"pairs {','.join(s.get('pairs', []))}, {s.get('repeats')} repeats{widths(s)}",
            "recheck": _recheck(s) if s["step"] == "recheck" else "",
            "speed": "; ".join(
                f"{u['pair']}/{u['dataset']}: {candidates(u)} x {plural(u['prompts'], 'prompt')} x {u['tokens']} tokens ({mmss(u['eta_s'])}; no prompt it cannot end {mmss(u.get('after_s', 0))} before the budget ends)"
                for u in s.get("units", [])
            )
            or "none fits",
            "attention": f"grid {s.get('grid')}",
            "llamacpp": _llama_line(s) if s["step"] == "llamacpp" else "",
        }.get(s["step"], "")
        lines.append(f"  {s['step']:<10} ETA {mmss(s['eta_s']):>7}  {what}")
    if p.get("fixed_by"):
        lines.append(f"  (record, ceiling and report sized by {p['fixed_by']})")
    total = spent + p["planned_s"]
    lines.append(
        f"  total ETA {mmss(total)} of the {mmss(p['minutes'] * 60)} budget (SPECBENCH_MINUTES={p['minutes']:g})"
    )
    if p["over_budget"]:
        lines.append("  OVER BUDGET: the mandatory steps alone exceed it (raise SPECBENCH_MINUTES)")
    return "\n".join(lines)


def _recheck(s: dict) -> str:
    """The sample's line: what it re-derives, and what the budget dropped (the strata it no longer covers)."""
    out = (
        f"{s['configurations']} of {s['sampled']} sampled configurations, {plural(s['prompts'], 'prompt')}, each at its "
        f"committed batch ({'/'.join(map(str, s['batches']))})"
    )
    if s["dropped"]:
        out += "; dropped to fit: " + ", ".join(f"{d['name']} {mmss(d['eta_s'])}" for d in s["dropped"])
        out += f" (no longer represented: {', '.join(s['unrepresented']) or 'none'})"
    return out


def get(p: dict, key: str) -> str:
    """One plan value as the shell reads it (lists in Hydra's [a,b] form)."""
    by = {s["step"]: s for s in p["steps"]}
    values = {
        "dtype": p["dtype"],
        "costs_pairs": "[" + ",".join(by["costs"]["pairs"]) + "]",
        "costs_repeats": str(by["costs"]["repeats"]),
        "kv_lens": "[" + ",".join(map(str, by["costs"]["kv_lens"])) + "]",
        "costs_max_tokens": str(by["costs"].get("max_tokens") or "null"),
        "recheck_configs": ",".join(by["recheck"]["configs"]),
        "grid": by["attention"]["grid"],
        "speed": "\n".join(
            f"{u['pair']}\t{u['dataset']}\t{u['prompts']}\t{u['tokens']}\t[{','.join(u['candidates'])}]\t{int(u['after_s'])}"
            for u in by["speed"]["units"]
        ),
    }
    values.update(llamaplan.values(by.get("llamacpp")))
    if key not in values:
        refuse(f"get: unknown key {key!r} (valid: {', '.join(values)})")
    return values[key]


def ran(p: dict, speed: str, since: float) -> str:
    """What the speed benchmark ran of the plan's units: each unit's prompts among this machine's rows of
    ``speed`` (speed.csv) whose run began after ``since`` (the plan's time; run ids are UTC stamps), since a
    unit takes no prompt it cannot end before its deadline.  '' where the plan has no speed unit."""
    from ...results.files import read_speed  # start-up: as record's

    units = next(s for s in p["steps"] if s["step"] == "speed")["units"]
    if not units:
        return ""
    rows = read_speed(speed, strict=False) if os.path.isfile(speed) else None  # lenient: no schema check
    need = {"run_id", "machine_id", "pair", "dataset", "prompt_ids"}
    if rows is not None and need <= set(rows.columns):
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(since))
        rows = rows[(rows.machine_id.astype(str) == str(p["machine"].get("machine_id"))) & (rows.run_id >= stamp)]
        if "engine" in rows:  # specbench's units: llama.cpp's rows of the same pair x dataset are its own step's
            rows = rows[rows.engine.astype(str) != "llamacpp"]
    else:
        rows = None
    done = [
        0 if rows is None else rows[(rows.pair == u["pair"]) & (rows.dataset == u["dataset"])].prompt_ids.nunique()
        for u in units
    ]
    if all(n == u["prompts"] for n, u in zip(done, units)):
        return "; every planned prompt of the speed benchmark ran"
    return (
        "; of these the speed benchmark ran "
        + "; ".join(
            f"{u['pair']} on {u['dataset']}: {n} of {plural(u['prompts'], 'prompt')}" for n, u in zip(done, units)
        )
        + " (a prompt it could not end before its deadline is not run)"
    )


def record(p: dict, check: str, speed: str = "", since: float = 0.0) -> dict:
    """results/default_run.json: what the default run covered, on which machine (the report's sentence): the
    plan's steps, and what its speed benchmark ran of them (``ran``)."""
    from ...results import acceptcheck  # start-up: pandas, scipy; budget imports this module, `get` runs often

    m = p["machine"]
    costs = next(s for s in p["steps"] if s["step"] == "costs")
    found = os.path.isfile(check)  # lenient read: no schema check
    rows = acceptcheck.mine(acceptcheck.read(check, strict=False), m.get("machine_id")) if found else None
    line = acceptcheck.verdict(rows) if rows is not None and len(rows) else "acceptance-sample check: not run"
    keep = (
        "machine",
        "machine_id",
        "cpu",
        "capability",
        "gpu",
        "cores",
        "torch_threads",
        "torch",
        "rates_gflops",
        "python_s",
    )
    return {
        "profile": p["profile"],
        "minutes": p["minutes"],
        "planned_s": round(p["spent_s"] + p["planned_s"]),
        "dtype": p["dtype"],
        "dtype_auto": m.get("dtype"),
        **{k: m.get(k) for k in keep},
        "covered": sentence(p) + ran(p, speed, since),
        "costs_pairs": costs["pairs"],
        "costs_repeats": costs["repeats"],
        "acceptance_check": line,
    }
