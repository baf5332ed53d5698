"""The report's typed context, built once: ``Inputs`` (what ``load.load`` read from results/), ``Tables``
(what ``build.compute`` derived from them) and ``Ctx`` (what a section's ``section(ctx)`` is given).

Frozen dataclasses, one typed field per table.  An optional input file that is absent is ``None`` in
``Inputs`` (a section that needs it says so), and one that is there has every optional column the report
reads (``results.optional``: filled by ``load``); a table that has no rows is an empty frame in ``Tables``
(the interleaved benchmark's ``measured``, ``controls``, ``pooled_controls`` and ``spreads`` where no
benchmark ran), so a section asks ``.empty`` and never whether a key exists.  Every field has a default,
so a test builds the part of a context its section reads.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from .costmodel import StepCounts


def _frame() -> pd.DataFrame:
    return pd.DataFrame()


def once(f: Callable[..., pd.DataFrame]) -> Callable[..., pd.DataFrame]:
    """``f`` (a pure function of frames) remembering its last arguments, by identity, and its result: a
    table that several sections derive from the same inputs is computed once; each caller gets a copy."""
    last: list = []

    @functools.wraps(f)
    def remembered(*args):
        if not (last and len(last[0]) == len(args) and all(a is b for a, b in zip(last[0], args))):
            last[:] = [args, f(*args)]
        return last[1].copy()

    return remembered


@dataclass(frozen=True)
class Inputs:
    """results/ as read and checked by ``load.load``: optional files are None where absent."""

    summary: pd.DataFrame = field(default_factory=_frame)
    steps: pd.DataFrame | None = None
    outputs: dict = field(default_factory=dict)  # (config_hash, prompt_id) -> token ids
    vector: pd.DataFrame | None = None  # acceptance_vector*.csv, concatenated
    costs: pd.DataFrame | None = None  # the study's cost curves: one machine's per pair and dtype
    costs_all: pd.DataFrame | None = None  # every machine's specbench curves
    costs_llamacpp: pd.DataFrame | None = None  # llama.cpp's curves (#84)
    env: dict | None = None  # environment.json: the study's machine
    envs: dict = field(default_factory=dict)  # device -> its environment*.json
    default_run: dict | None = None  # default_run.json, where the run finished
    results: str = "results"  # the folder read
    lossless_check: pd.DataFrame | None = None
    lossless_control: pd.DataFrame | None = None
    attention: pd.DataFrame | None = None
    gap: pd.DataFrame | None = None
    divergence: pd.DataFrame | None = None
    margins: pd.DataFrame | None = None
    attention_recheck: pd.DataFrame | None = None
    bf16_replay: pd.DataFrame | None = None
    run_times: pd.DataFrame | None = None
    served: pd.DataFrame | None = None
    bench: pd.DataFrame | None = None  # speed.csv: the interleaved benchmark
    bench_steps: pd.DataFrame | None = None
    acceptance_check: pd.DataFrame | None = None
    accept_llamacpp: pd.DataFrame | None = None


@dataclass(frozen=True)
class Tables:
    """Every table of the report: ``tables.compute``'s (the shared ones), then ``build.compute``'s
    (the sections' own: hardware, losslessness, bookkeeping, the benchmark check, the comparisons,
    the gap and the findings) and, last, the rendered ``pages``."""

    df: pd.DataFrame = field(default_factory=_frame)  # summary prepared, with the trees built
    rows: pd.DataFrame = field(default_factory=_frame)  # df annotated: speed, cut, calibration, claim
    counted: StepCounts | None = None  # the steps counted once: the projection, the phase diagram, one run
    sums: pd.DataFrame = field(default_factory=_frame)  # per (config_hash, prompt_id) sums
    speed: pd.DataFrame = field(default_factory=_frame)  # results/speedup.csv's rows
    calib: pd.DataFrame = field(default_factory=_frame)
    idents: pd.DataFrame = field(default_factory=_frame)
    answer: pd.DataFrame = field(default_factory=_frame)
    cross: pd.DataFrame = field(default_factory=_frame)
    modes: pd.DataFrame = field(default_factory=_frame)
    live: pd.DataFrame = field(default_factory=_frame)
    setup: pd.DataFrame = field(default_factory=_frame)
    chain_diffs: pd.DataFrame = field(default_factory=_frame)
    schedule: pd.DataFrame = field(default_factory=_frame)
    pair: str | None = None  # the main pair
    measured: pd.DataFrame = field(default_factory=_frame)  # the benchmark's answers (empty: no benchmark)
    controls: pd.DataFrame = field(default_factory=_frame)
    pooled_controls: pd.DataFrame = field(default_factory=_frame)
    spreads: pd.DataFrame = field(default_factory=_frame)
    bench_schedule: pd.DataFrame = field(default_factory=_frame)
    cost_machines: dict = field(default_factory=dict)  # (pair, device, dtype) -> machine ids with a curve
    cost_hosts: dict = field(default_factory=dict)
    cost_study: dict = field(default_factory=dict)  # the machine whose curves the projections read
    phase: pd.DataFrame = field(default_factory=_frame)
    points: pd.DataFrame = field(default_factory=_frame)
    other_points: pd.DataFrame = field(default_factory=_frame)
    per_width: pd.DataFrame = field(default_factory=_frame)
    lossless: pd.DataFrame = field(default_factory=_frame)
    least: dict | None = None
    bench_check: pd.DataFrame = field(default_factory=_frame)
    comparisons: pd.DataFrame = field(default_factory=_frame)
    gap: pd.DataFrame = field(default_factory=_frame)
    findings: pd.DataFrame = field(default_factory=_frame)
    pages: dict[str, str] = field(default_factory=dict)  # the linked pages' markdown, once rendered


@dataclass(frozen=True)
class Ctx:
    """What a section renders from: the tables, the inputs, the made figures by name and the link to one."""

    t: Tables = field(default_factory=Tables)
    data: Inputs = field(default_factory=Inputs)
    figs: dict = field(default_factory=dict)
    link: Callable[[str], str] = str
