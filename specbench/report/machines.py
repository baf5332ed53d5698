"""The TL;DR's first table: the answer per machine class and engine (CPU model with its vector capability,
or GPU; dtype; engine), from every benchmark key measured there at batch 1 (``t.measured``:
``results.speedstats.answers``).  Where no tree is resolved faster than plain decoding on a machine, its
answer is plain decoding, with its best tree's interval; keys whose controls failed, or with too few
prompts for an interval, are counted apart and never stand in for keys whose controls hold."""

from __future__ import annotations

import pandas as pd

from ..results import ranking, speedstats
from .context import Tables
from .markdown import table

DTYPE = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16"}
ENGINE = "specbench"  # speed.csv rows from before the ``engine`` column: specbench's own loop


def machine_class(machine: str) -> str:
    """'AMD EPYC (AVX512)': the machine's model and vector capability, its first field (cores, threads and
    torch follow it); a CPU recorded without its capability says so."""
    name = str(machine).split(",")[0].strip()
    cpu = not name.upper().startswith("NVIDIA")
    return f"{name} (capability unrecorded)" if cpu and "(" not in name else name


def fastest(g: pd.DataFrame) -> pd.Series:
    """A key's fastest candidate with an interval (``ranked``'s first row), else its first."""
    has = g[g["interval"]]  # speedstats.answers' rows: whether each has an interval
    return (has if len(has) else g).iloc[0]


def keys(measured: pd.DataFrame | None, with_random: bool = False) -> pd.DataFrame:
    """Each batch-1 benchmark key's fastest row (``fastest``; a key is one ``answers`` run id) with its machine
    class, engine and weights: the answer runs of the pretrained pairs (``answer_first``), and the random-weight
    runs too where ``with_random``."""
    if measured is None or measured.empty:
        return pd.DataFrame()
    m = speedstats.answer_first(measured)
    m = pd.concat([m, measured[speedstats.random_weights(measured)]]) if with_random else m
    m = m[m.batch_size.astype(int) == 1]
    if m.empty:
        return pd.DataFrame()
    best = pd.DataFrame([fastest(g) for _r, g in m.groupby("run_id", sort=True)])
    return best.assign(
        cls=best.machine.map(machine_class),
        engine=best["engine"].fillna(ENGINE),  # speedstats.answers' rows name both
        weights=best["weights"].fillna("pretrained"),
    )


def classes(measured: pd.DataFrame) -> pd.DataFrame:
    """Per machine class, dtype, engine and weights: the batch-1 keys (pair × dataset) measured there,
    how many rank (controls hold, interval claimed), pay (the fastest's interval above 1×), and the
    best ranked tree (by the lower end of its interval) with its key."""
    k = keys(measured, with_random=True)
    out = []
    for (cls, dtype, engine, weights), best in (
        k.groupby(["cls", "dtype", "engine", "weights"], sort=True) if len(k) else []
    ):
        ok = best[best.controls_hold & best.lo.notna()]
        top = ranking.surest(best)
        out.append(dict(
            machine=cls, dtype=dtype, engine=engine, weights=weights, keys=len(best), ranked=len(ok),
            pays=int(ok.pays.sum()), failed=int((~best.controls_hold & best.lo.notna()).sum()),
            too_few=int(best.lo.isna().sum()), top=top,
        ))  # fmt: skip
    return pd.DataFrame(out)


def refuted(measured: pd.DataFrame) -> set[tuple]:
    """(machine class, dtype, pair, dataset) where the benchmark at batch 1 ranked a key (controls hold, an
    interval) and its fastest tree is not resolved faster than plain decoding: a modelled win there is refuted."""
    k = keys(measured)
    if k.empty:
        return set()
    k = k[k.controls_hold.astype(bool) & k.lo.notna() & ~k.pays.astype(bool)]
    return set(zip(k.cls, k["dtype"], k.pair, k.dataset))


def key_cell(r: dict) -> str:
    return f"{r['pair']}/{r['dataset']} {r['candidate']} {r['speedup']:.2f}× [{r['lo']:.2f}, {r['hi']:.2f}]"


def answer(c) -> str:
    """A class's answer in words (``classes`` row)."""
    if c.weights == "random":
        return "none (random weights)"
    if not isinstance(c.top, dict):
        return "none ranked yet"
    if c.pays:
        return f"a tree ({c.pays} of {c.ranked} pay)"
    return "**plain decoding**"


def evidence(c) -> str:
    """What the answer rests on: the best ranked tree, then the keys counted apart."""
    best = [key_cell(c.top)] if isinstance(c.top, dict) and c.weights != "random" else []
    apart = [f"{c.failed} failed a control"] * bool(c.failed)
    apart += [f"{c.too_few} under {speedstats.MIN_UNITS} prompts"] * bool(c.too_few)
    return "; ".join(best + ([f"unranked: {', '.join(apart)}"] if apart else []))


COLUMNS = [
    ("machine, engine, dtype", lambda c: f"{c.machine}, {c.engine}, {DTYPE.get(c.dtype, c.dtype)}"),
    ("answer", answer),
    ("best tree (highest lower bound) [95% CI]", evidence),
]


def section(t: Tables) -> str:
    """The machine-first table with its one-line lead, or '' without benchmark runs."""
    c = classes(t.measured)
    if c.empty:
        return ""
    lead = (
        "**The answer depends on the machine** (speed benchmark, greedy, batch 1): a tree where its 95% interval "
        "is above 1×, else plain decoding."
    )
    return lead + "\n\n" + table(list(c.itertuples()), COLUMNS)
