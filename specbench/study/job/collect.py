"""`python -m specbench.collect [DIRS]`: merge finished job folders into results/.

A finished job is a folder with ``summary.csv`` (one row), the ``steps.csv``
beside it, ``outputs.jsonl`` and, for ``verify.paired_with``, one
``paired/<mode>/`` folder per paired mode, every file of one run (``run_id``).
A job's rows are replaced as a unit: for each config hash the newest run wins,
whatever the order folders are collected in (rows already in ``--out``
included), and its summary, steps and outputs replace every row of that hash.
A paired mode's rows are kept only with their primary's run.  A file that
cannot be read completely (header only, truncated, steps that disagree with
their summary) or a malformed ``acceptance_vector*.csv`` is a one-line error
naming it, and nothing is written.  Every folder that is not collected is
listed with the reason: failed (``error.txt``, even beside a summary),
unfinished (no summary), files of two runs, paired rows without their
primary, or an older run of a configuration collected from a newer one.
Sorted deterministically: running it twice gives identical files.

Derived tables, rebuilt from the merged rows on every collect:
``acceptance_matrix.csv`` (``results.acceptance``) and, where ``--out`` holds
greedy acceptance vectors (``acceptance_vector*.csv``), ``gap_to_optimum.csv``
(``study.job.optimum``).  Every output of one collect is replaced together, or (a
full or read-only disk: one line naming the path, exit status 1) none is.

``--drop HASH,...`` removes rows of ``--out`` by config hash (with their paired rows): a committed row
whose job now has another hash (``study.tools.stale``'s ``new hash`` lines: a Sequoia tree rebuilt from
a recalibrated acceptance vector) is not replaced by its rerun, so the rerun is collected with it dropped.
"""

from __future__ import annotations

import glob
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from ...core import readers
from ...core.args import Parser, check_writable, refuse
from ...core.atomic import atomic_write_many, lock, os_line, recover
from ...results.acceptance import acceptance_lengths, acceptance_matrix
from ...results.files import OUTPUTS_FILE, STEPS_FILE, csv_writer, jsonl_text, read_vector, text_writer
from .jobrows import LEGACY, CollectError, JobRows, other_runs, read_collected, read_job
from .optimum import gap_to_optimum

SUMMARY_ORDER = ["pair", "dataset", "verify", "temperature", "tree", "budget", "engine", "config_hash"]
STEP_ORDER = ["config_hash", "prompt_id", "step"]
JOB_MARKERS = ("summary.csv", "steps.csv", "outputs.jsonl", "error.txt", "resumed.txt", ".hydra")
SKIP_LABELS = {
    "failed": "failed job(s) (see error.txt)",
    "unfinished": "unfinished job folder(s) (no summary.csv: killed, or a full disk)",
    "mixed": "job folder(s) holding files of two runs",
    "orphan": "paired folder(s) without their primary's run",
    "older": "older run(s) of configurations collected from a newer run",
}


@dataclass
class Scan:
    jobs: list[JobRows] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (reason, folder, detail)
    resumed: int = 0


# --------------------------------------------------------------------------
# finding job folders
# --------------------------------------------------------------------------
def job_folders(roots) -> list[str]:
    """Every folder under roots holding a job file (paired/<mode>/ folders included), less the
    collected results folders among them (their steps are in STEPS_FILE)."""
    found = set()
    for root in roots:
        for name in JOB_MARKERS:
            for path in glob.glob(os.path.join(root, "**", name), recursive=True):
                found.add(os.path.dirname(os.path.abspath(path)))
    return sorted(d for d in found if not os.path.exists(os.path.join(d, STEPS_FILE)))


def is_paired(d: str) -> bool:
    return os.path.basename(os.path.dirname(d)) == "paired"


def first_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.readline().strip()
    except OSError:
        return ""


def scan_folder(d: str, scan: Scan) -> None:
    """Read one (primary) job folder with its paired folders, or record why it is skipped."""
    recover(d, clean=False)  # a job killed while publishing its files: finish it (its temps may be a live job's)
    if os.path.exists(os.path.join(d, "error.txt")):
        return scan.skipped.append(("failed", d, first_line(os.path.join(d, "error.txt"))))
    if not os.path.exists(os.path.join(d, "summary.csv")):
        if os.path.exists(os.path.join(d, "resumed.txt")):
            scan.resumed += 1
            return None
        return scan.skipped.append(("unfinished", d, ""))
    job = read_job(d)
    paired = [read_job(os.path.dirname(f)) for f in sorted(glob.glob(os.path.join(d, "paired", "*", "summary.csv")))]
    runs = other_runs(job) | {p.run_id for p in paired if p.run_id != job.run_id}
    runs |= set().union(*(other_runs(p) for p in paired)) if paired else set()
    if runs:
        return scan.skipped.append(("mixed", d, f"summary run {job.run_id}, others {', '.join(sorted(runs))}"))
    scan.jobs += [job, *paired]


def scan(roots) -> Scan:
    out = Scan()
    folders = job_folders(roots)
    for d in folders:
        if not is_paired(d):
            scan_folder(d, out)
        elif not os.path.exists(os.path.join(os.path.dirname(os.path.dirname(d)), "summary.csv")):
            out.skipped.append(("orphan", d, "no summary.csv in its job folder"))
    return out


# --------------------------------------------------------------------------
# merging
# --------------------------------------------------------------------------
def newest(jobs, skipped: list) -> dict[str, JobRows]:
    """The newest run of every config hash; paired rows only beside their primary's run."""
    chosen: dict[str, JobRows] = {}
    for j in sorted(jobs, key=lambda j: j.order):
        old = chosen.get(j.config_hash)
        if old is not None and old.fresh and old.primary is None:
            skipped.append(("older", old.source, f"{j.config_hash}: run {old.run_id} < {j.run_id}"))
        chosen[j.config_hash] = j
    for h, j in list(chosen.items()):
        prim = chosen.get(j.primary) if j.primary else j
        if prim is None or (prim.run_id and j.run_id and prim.run_id != j.run_id):
            del chosen[h]
            if j.fresh:
                skipped.append(("orphan", j.source, f"primary {j.primary} is another run or absent"))
    return chosen


def merge(dirs, existing: Sequence[JobRows] = (), skipped: list | None = None):
    """summary, steps and outputs of the newest run of every config hash (see the docstring);
    ``dirs``: job folders, read as they are."""
    jobs = newest([*existing, *(read_job(d) for d in dirs)], skipped if skipped is not None else [])
    return frames(jobs)


def frames(jobs: dict[str, JobRows]) -> tuple[pd.DataFrame, pd.DataFrame, list[dict]]:
    if not jobs:
        raise CollectError("no finished jobs (summary.csv) found: run `python -m specbench.run` first")
    summary = pd.concat([j.summary for j in jobs.values()], ignore_index=True)
    summary = summary.sort_values([c for c in SUMMARY_ORDER if c in summary]).reset_index(drop=True)
    alpha = sorted((c for c in summary if c.startswith("alpha_")), key=lambda c: int(c[6:]))
    summary = summary[[c for c in summary if not c.startswith("alpha_")] + alpha]
    parts = [j.steps for j in jobs.values() if len(j.steps)]
    steps = (
        pd.concat(parts, ignore_index=True).sort_values(STEP_ORDER).reset_index(drop=True) if parts else pd.DataFrame()
    )
    outputs = sorted(
        (o for j in jobs.values() for o in j.outputs), key=lambda o: (str(o["config_hash"]), str(o["prompt_id"]))
    )
    return summary, steps, outputs


# --------------------------------------------------------------------------
# derived tables and writing
# --------------------------------------------------------------------------
def read_vectors(out: str) -> pd.DataFrame | None:
    """Every acceptance_vector*.csv in ``out``, checked (``results.schemas.VECTOR``: a malformed one is
    a CollectError)."""
    parts = []
    for f in sorted(glob.glob(os.path.join(out, "acceptance_vector*.csv"))):
        try:
            parts.append(read_vector(f))
        except readers.TableError as e:
            raise CollectError(str(e)) from None
    return pd.concat(parts, ignore_index=True) if parts else None


def derived(out: str, summary: pd.DataFrame, steps: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """{file name: table}: acceptance_matrix.csv, acceptance_length.csv, gap_to_optimum.csv (greedy vectors)."""
    tables = {"acceptance_matrix.csv": acceptance_matrix(summary, steps)}
    tables["acceptance_length.csv"] = acceptance_lengths(steps)
    vectors = read_vectors(out)
    if vectors is not None:
        tables["gap_to_optimum.csv"] = gap_to_optimum(summary, vectors)
    return tables


def write_all(out: str, summary, steps, outputs, tables: dict) -> None:
    """Every output together (summary last); a failure replaces none."""
    files = {
        os.path.join(out, STEPS_FILE): csv_writer(steps),
        os.path.join(out, OUTPUTS_FILE): text_writer(jsonl_text(outputs)),
    }
    files.update({os.path.join(out, name): csv_writer(df) for name, df in tables.items()})
    files[os.path.join(out, "summary.csv")] = csv_writer(summary)
    atomic_write_many(files)
    for legacy in LEGACY.values():  # read into these rows (read_collected), so no stale copy stays beside them
        if os.path.exists(os.path.join(out, legacy)):
            os.remove(os.path.join(out, legacy))


def dropped(existing: list[JobRows], drop: str, out: str) -> list[JobRows]:
    """``existing`` without the rows of the config hashes ``drop`` names (comma-separated; their paired
    rows go with them: ``newest``); a hash that names no row of ``out`` is refused before anything is written."""
    hashes = {h.strip() for h in drop.split(",") if h.strip()}
    unknown = sorted(hashes - {j.config_hash for j in existing})
    if unknown:
        raise CollectError(
            f"--drop: {', '.join(unknown)} names no configuration in {out}/summary.csv; give config_hash values of its rows"
        )
    return [j for j in existing if j.config_hash not in hashes]


def report_skipped(s: Scan) -> None:
    groups = defaultdict(list)
    for reason, d, detail in s.skipped:
        groups[reason].append(f"{d} ({detail})" if detail and reason != "failed" else d)
    for reason, label in SKIP_LABELS.items():
        if groups[reason]:
            print(f"specbench: skipped {len(groups[reason])} {label}: {', '.join(groups[reason])}")
    if s.resumed:
        print(f"specbench: {s.resumed} folder(s) of resumed jobs (finished in another folder) hold no rows")


def main(argv=None) -> None:
    ap = Parser(prog="python -m specbench.collect", description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", default=["outputs"], help="folders to search for jobs")
    ap.add_argument("--out", default="results", help="where summary.csv, steps.csv and outputs.jsonl go")
    ap.add_argument("--fresh", action="store_true", help="ignore rows already in --out")
    ap.add_argument(
        "--drop",
        default="",
        metavar="HASH,...",
        help="config hashes of --out's rows to remove (rows a job with a new hash replaces: study.tools.stale)",
    )
    args = ap.parse_args(argv)
    check_writable("--out", args.out, args.out)  # a file, a path under one, a read-only place: one line first
    try:
        with lock(args.out):  # one collect at a time into --out; a killed one's publish finished first
            s = scan(args.dirs)
            existing, orphans = ([], 0) if args.fresh else read_collected(args.out)
            kept = dropped(existing, args.drop, args.out)
            gone, existing = len(existing) - len(kept), kept
            jobs = newest([*existing, *s.jobs], s.skipped)
            report_skipped(s)
            summary, steps, outputs = frames(jobs)
            tables = derived(args.out, summary, steps)
            write_all(args.out, summary, steps, outputs, tables)
    except (CollectError, readers.TableError) as e:  # a bad input: one line, exit 2
        refuse(str(e))
    except OSError as e:
        raise SystemExit(f"specbench: error: {os_line(e, args.out, '--out')} (nothing was replaced)") from None
    if args.drop:
        print(f"specbench: dropped {gone} configurations of {args.out} (--drop)")
    if orphans:
        print(f"specbench: dropped {orphans} step rows of {args.out}/steps.csv that had no summary row")
    print(
        f"specbench: collected {len(summary)} configurations, {len(steps)} steps, {len(outputs)} outputs -> {args.out}/"
    )


if __name__ == "__main__":
    main()
