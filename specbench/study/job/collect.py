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
from ...core.args import Parser, refuse
from ...core.atomic import atomic_write_many, incomplete, lock, os_line, recover
from ...results.acceptance import acceptance_lengths, acceptance_matrix
from ...results.files import OUTPUTS_FILE, STEPS_FILE, csv_writer, jsonl_text, output_rows, read_csv, text_writer
from .describe import complete
from .optimum import gap_to_optimum

SUMMARY_ORDER = ["pair", "dataset", "verify", "temperature", "tree", "budget", "engine", "config_hash"]
STEP_ORDER = ["config_hash", "prompt_id", "step"]
FIX = "rerun the job or delete its folder"
OUT_FIX = "git checkout the committed results/, or collect with --fresh to rebuild --out from the job folders"
JOB_MARKERS = ("summary.csv", "steps.csv", "outputs.jsonl", "error.txt", "resumed.txt", ".hydra")
SKIP_LABELS = {
    "failed": "failed job(s) (see error.txt)",
    "unfinished": "unfinished job folder(s) (no summary.csv: killed, or a full disk)",
    "mixed": "job folder(s) holding files of two runs",
    "orphan": "paired folder(s) without their primary's run",
    "older": "older run(s) of configurations collected from a newer run",
}


class CollectError(ValueError):
    """A job file collect cannot trust: one line naming the file."""


@dataclass
class JobRows:
    summary: pd.DataFrame  # exactly one row
    steps: pd.DataFrame
    outputs: list[dict] = field(default_factory=list)
    source: str = ""
    fresh: bool = True  # from a job folder (not rows already in --out)

    def key(self, col: str) -> str:
        value = self.summary[col].iloc[0] if col in self.summary else ""
        return str(value) if isinstance(value, str) else ""

    @property
    def config_hash(self) -> str:
        return str(self.summary.config_hash.iloc[0])

    @property
    def run_id(self) -> str:
        return self.key("run_id")

    @property
    def primary(self) -> str | None:
        """The config hash of the decode a paired mode's rows belong to (None: a primary)."""
        return self.key("pair_key") if self.key("pair_role") == "paired" else None

    @property
    def order(self) -> tuple:  # newest run wins; a job folder over --out; then by folder
        return (self.run_id, self.fresh, self.source)


@dataclass
class Scan:
    jobs: list[JobRows] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (reason, folder, detail)
    resumed: int = 0


# --------------------------------------------------------------------------
# reading files
# --------------------------------------------------------------------------
def _complete(path: str, fix: str = FIX) -> None:
    why = incomplete(path)
    if why:
        raise CollectError(f"{path} {why}: {fix}")


def _csv(path: str, fix: str = FIX, cells: bool = True) -> pd.DataFrame:
    """A job's (or --out's) CSV, whole, parsed and keyed by config_hash, its counts checked cell by
    cell (not with ``cells=False``: --out's large steps table), or a one-line CollectError."""
    if not os.path.exists(path):
        raise CollectError(f"{path} is missing: {fix}")
    _complete(path, fix)
    try:
        df = read_csv(path)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError, OSError) as e:
        raise CollectError(f"{path} cannot be read ({str(e).splitlines()[0]}): {fix}") from None
    if "config_hash" not in df.columns:
        raise CollectError(f"{path} lacks the column config_hash (a garbled or foreign file): {fix}")
    declared = readers.SUMMARY_COUNTS if os.path.basename(path).startswith("summary") else readers.STEP_COUNTS
    readers.check_cells(df, declared if cells else {}, path, fix)  # a TableError: one line, as a CollectError
    return df


def _jsonl(path: str, fix: str = FIX) -> list[dict]:
    """A job's (or --out's) outputs rows, whole (``results.output_rows``), or a one-line CollectError."""
    if not os.path.exists(path):
        return []
    _complete(path, fix)
    try:
        return [row for _, row in output_rows(path, fix)]
    except ValueError as e:
        raise CollectError(str(e)) from None


def check_job(summary: pd.DataFrame, steps: pd.DataFrame, where: str) -> None:
    """One summary row whose n_steps / new_tokens match its steps exactly."""
    if len(summary) != 1 or not {"config_hash", "n_steps", "new_tokens"} <= set(summary):
        raise CollectError(
            f"{where}/summary.csv has {len(summary)} rows (a job has exactly one, with "
            f"config_hash, n_steps, new_tokens): {FIX}"
        )
    s = summary.iloc[0]
    if (
        len(steps) != int(s.n_steps)
        or (len(steps) and set(steps.config_hash) != {s.config_hash})
        or int(steps.emitted.sum() if len(steps) else 0) != int(s.new_tokens)
    ):
        raise CollectError(
            f"{where}/steps.csv has {len(steps)} rows for {s.config_hash} but its summary "
            f"says {int(s.n_steps)} steps and {int(s.new_tokens)} tokens: {FIX}"
        )


def read_job(d: str) -> JobRows:
    summary = complete(_csv(os.path.join(d, "summary.csv")), d)  # older rows: described columns by name
    steps = _csv(os.path.join(d, "steps.csv"))
    check_job(summary, steps, d)
    h = str(summary.config_hash.iloc[0])
    outputs = [{"config_hash": h, **o} for o in _jsonl(os.path.join(d, "outputs.jsonl"))]
    return JobRows(summary, steps, outputs, d)


def other_runs(job: JobRows) -> set[str]:
    """Run ids in a job's steps and outputs other than its summary's."""
    runs = set(job.steps.run_id.astype(str)) if "run_id" in job.steps and len(job.steps) else set()
    runs |= {str(o["run_id"]) for o in job.outputs if o.get("run_id")}
    return runs - {job.run_id} if job.run_id else set()


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
LEGACY = {STEPS_FILE: "steps.csv", OUTPUTS_FILE: "outputs.jsonl"}  # results/ names before the gzip


def _collected(out: str, name: str) -> str:
    """The collected file ``name`` in ``out``, or its name from before the gzip where only that exists."""
    old = os.path.join(out, LEGACY[name])
    return old if os.path.exists(old) and not os.path.exists(os.path.join(out, name)) else os.path.join(out, name)


def read_collected(out: str) -> tuple[list[JobRows], int]:
    """The jobs already in --out, and how many step rows had no summary (dropped)."""
    spath = os.path.join(out, "summary.csv")
    if not os.path.exists(spath):
        return [], 0
    summary = complete(_csv(spath, OUT_FIX), None)
    stpath, opath = _collected(out, STEPS_FILE), _collected(out, OUTPUTS_FILE)
    steps = _csv(stpath, OUT_FIX, cells=False) if os.path.exists(stpath) else pd.DataFrame(columns=["config_hash"])
    outputs = _jsonl(opath, OUT_FIX)
    by_hash = dict(tuple(steps.groupby("config_hash", sort=False))) if len(steps) else {}
    jobs = []
    for i in range(len(summary)):
        row = summary.iloc[[i]].reset_index(drop=True)
        h = str(row.config_hash.iloc[0])
        st = by_hash.pop(h, steps.iloc[:0]).reset_index(drop=True)
        jobs.append(JobRows(row, st, [o for o in outputs if o.get("config_hash") == h], out, fresh=False))
    return jobs, sum(len(g) for g in by_hash.values())


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
    """Every acceptance_vector*.csv in ``out``, checked (``core.readers.VECTOR``: a malformed one is
    a CollectError)."""
    parts = []
    for f in sorted(glob.glob(os.path.join(out, "acceptance_vector*.csv"))):
        try:
            readers.check(f, readers.VECTOR)
        except readers.TableError as e:
            raise CollectError(str(e)) from None
        parts.append(read_csv(f))
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
