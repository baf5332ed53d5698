"""`python -m specbench.report`: results/*.csv -> results/speedup.csv, results/comparisons.csv,
results/figures/*.png + REPORT.md.

pandas, matplotlib and jinja2 only (never torch).  A pipeline: inputs (`load`, which refuses truncated
or inconsistent files in one line before anything is written) -> tables (`tables.compute`)
-> figures (`make_figures`) -> the sections (`sections.render`: one
Jinja2 template, templates/report.md.j2, filled by each section's computed markdown) -> written
together: the figures go to a fresh folder beside the old one, REPORT.md to a temporary
file, then both are swapped in, so a failed run leaves the previous report and figures as
they were and no stale figure survives.  Deterministic: the same inputs give a byte-identical
REPORT.md and PNGs.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import pandas as pd

from ..core.args import Parser, check_out, check_writable, refuse
from ..core.atomic import lock, os_line, replace_together, write_file
from ..results.files import csv_writer
from . import (
    acceptance,
    answer,
    batch,
    benchcheck,
    figures,
    findings,
    fixed,
    fixed_page,
    gap,
    hardware,
    hardware_page,
    llamaagree,
    llamacpp,
    lossless,
    onerun,
    pairs,
    sections,
    speed,
    speedup,
    tables,
    verification,
)
from .context import Ctx, Inputs, Tables
from .load import InputError, load  # noqa: F401  (InputError, load: the notebook's entry point)
from .markdown import figure_link
from .tree_attention import figures as attention_figures


def make_figures(t: Tables, data: Inputs) -> list[figures.Fig]:
    made = [
        acceptance.fig_acceptance_vs_budget(t.rows, t.sums, t.pair),
        answer.fig_projected(t.rows, t.sums, t),
        answer.fig_gain_vs_chain(t.chain_diffs, t.pair),
        pairs.fig_accept_hist(t.cross, t.rows),
        verification.fig_mode_gains(t.modes),
        verification.fig_lossy(t.modes),
        speed.fig_measured_vs_projected(t.live),
        llamacpp.fig_acceptance(t, data),
        llamaagree.fig_agreement(data),
        hardware_page.fig_phase(t.phase, t.points, t.other_points),
        batch.fig_schedule(t.schedule),
        batch.fig_bench_schedule(t.bench_schedule),
        acceptance.fig_alpha(t.rows, t.sums, data.steps, t.pair),
        acceptance.fig_acceptance_vector(data.vector, data.summary),
        gap.fig_gap(t.gap),
        *attention_figures.make(data.attention),
    ]
    return [f for f in made if f is not None]


def compute(data: Inputs) -> Tables:
    """The shared tables (`tables.compute`), then the sections' own: the hardware page's, the
    losslessness table, one run's least time, the benchmark check, the comparisons fixed in advance,
    the gap to the DP and, last, the findings table (`findings.frame`: every computed claim)."""
    t = tables.compute(data)
    t = replace(
        t,
        phase=hardware.aggregates(t.rows, data.steps, data.costs, t.counted),
        points=hardware.machine_points(data.costs),
        other_points=hardware.other_points(data.costs_all, data.costs),
        per_width=hardware.per_width(t.rows, t.counted, data.costs_all),
        lossless=lossless.lossless_table(t.df, data.summary, data.outputs),
        least=onerun.least(data.summary, t.counted, data.costs),
        bench_check=benchcheck.table(t.measured, data.bench, data.bench_steps, data.costs_all, t.speed),
        comparisons=fixed.comparisons(t.df, t.sums),
        gap=gap.main_rows(data.gap, t.df, t.sums),
    )
    return replace(t, findings=findings.frame(t, data))


PAGE_FIGS = "../figures"  # a page (results/tables/<page>.md) sees the figures beside its folder


def build(data: Inputs, rel: str, tables_rel: str = "results/tables") -> tuple[str, list[figures.Fig], Tables]:
    """REPORT.md's text, its figures (not yet written) and the tables they were made from
    (``t.pages``: the linked pages' markdown, ``sections.render``)."""
    t = compute(data)
    figs = make_figures(t, data)
    by_name = {f.name: f for f in figs}
    linked: set[str] = set()

    def link_for(page: str | None):
        def link(name: str) -> str:
            linked.add(name)
            return figure_link(by_name[name], rel if page is None else PAGE_FIGS)

        return link

    text, pages = sections.render(Ctx(t=t, data=data, figs=by_name), link_for, tables_rel)
    unlinked = sorted(set(by_name) - linked)
    if unlinked:
        raise RuntimeError(f"internal: figure(s) {', '.join(unlinked)} made but not linked by any section")
    return text, figs, replace(t, pages=pages)


def publish(
    text: str,
    figs: list[figures.Fig],
    out: str,
    fig_dir: str,
    pages: dict[str, str] | None = None,
    csvs: dict[str, pd.DataFrame] | None = None,
) -> None:
    """The figures, the linked pages (a tables folder beside the figures), REPORT.md and the
    tables it derives (``csvs``: speedup.csv, comparisons.csv) replaced together
    (``core.atomic.replace_together``: one journalled unit, a kill leaves all old or all new)."""

    def fill_pages(folder: str) -> None:
        for name, page in (pages or {}).items():
            write_file(os.path.join(folder, f"{name}.md"), page)

    more = {os.path.join(os.path.dirname(os.path.abspath(fig_dir)), "tables"): fill_pages} if pages else {}
    files = {path: csv_writer(df) for path, df in (csvs or {}).items()}
    replace_together(fig_dir, lambda folder: figures.save_all(figs, folder), out, text, more, files)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m specbench.report", description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results", help="folder with summary.csv etc. (default results)")
    ap.add_argument("--out", default="REPORT.md", help="report path (default REPORT.md)")
    ap.add_argument("--figures", default=None, help="figure folder (default RESULTS/figures)")
    args = ap.parse_args(argv)
    fig_dir = args.figures or os.path.join(args.results, "figures")
    if os.path.exists(args.results) and not os.path.isdir(args.results):
        refuse(f"--results={args.results}: is a file; give the folder that holds summary.csv (e.g. --results results)")
    check_out(args.out, "--out")  # where it writes, checked before minutes of building (one line, exit 2)
    check_writable("--figures", fig_dir, fig_dir)
    here = os.path.dirname(os.path.abspath(args.out))
    try:
        data = load(args.results)
        rel = os.path.relpath(os.path.abspath(fig_dir), here).replace(os.sep, "/")
        tables_dir = os.path.join(os.path.dirname(os.path.abspath(fig_dir)), "tables")
        text, figs, t = build(data, rel, os.path.relpath(tables_dir, here).replace(os.sep, "/"))
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    csvs = {
        os.path.join(args.results, "speedup.csv"): speedup.speedup_csv(t.speed),
        os.path.join(args.results, "comparisons.csv"): fixed_page.frame(t.comparisons),
    }
    try:  # one report at a time; everything it writes replaced as one unit
        with lock(*{os.path.dirname(os.path.abspath(p)) for p in (args.out, fig_dir, *csvs)}):
            publish(text, figs, args.out, fig_dir, t.pages, csvs)
    except OSError as exc:  # a full or read-only disk: one line, nothing replaced
        print(
            f"error: {os_line(exc, args.out, '--out / --figures')} (REPORT.md and {fig_dir}/ were left as they were)",
            file=sys.stderr,
        )
        return 1
    print(
        f"wrote {args.results}/speedup.csv, {args.results}/comparisons.csv, {args.out} and {fig_dir}/ ({len(figs)} figures)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
