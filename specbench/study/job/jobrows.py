"""Reading collect's inputs: a job folder's files (``read_job``: whole, parsed, its steps agreeing with
its summary) and the rows already in ``--out`` (``read_collected``), read as strictly as the report
reads results/ (``results.files.check_summary``, ``check_steps``): a destination that fails is refused
in one line (a ``CollectError`` or ``core.readers.TableError``) before anything is written.

Imports: pandas, ``core``, ``results.files`` and ``study.job.describe``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pandas as pd

from ...core import readers
from ...core.atomic import incomplete
from ...results import schemas
from ...results.files import (
    OUTPUTS_FILE,
    STEP_REQUIRED,
    STEPS_FILE,
    check_steps,
    check_summary,
    output_rows,
    read_csv,
)
from .describe import complete

FIX = "rerun the job or delete its folder"
OUT_FIX = "git checkout the committed results/, or collect with --fresh to rebuild --out from the job folders"


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


# --------------------------------------------------------------------------
# reading files
# --------------------------------------------------------------------------
def _complete(path: str, fix: str = FIX) -> None:
    why = incomplete(path)
    if why:
        raise CollectError(f"{path} {why}: {fix}")


def _csv(path: str, fix: str = FIX, cells: bool = True) -> pd.DataFrame:
    """A job's (or --out's) CSV, whole, parsed and keyed by config_hash, its rows each with the header's fields
    and its cells checked (``results.schemas.SUMMARY_CELLS``, ``STEP_COUNTS``) as the report checks results/ (not
    with ``cells=False``: --out's large steps table, whose parse and step counts are checked), or a one-line
    CollectError (a ``TableError``)."""
    if not os.path.exists(path):
        raise CollectError(f"{path} is missing: {fix}")
    _complete(path, fix)
    if cells:
        readers.check_text(path, fix)  # every row its header's fields (a row cut short would parse as blanks)
    try:
        df = read_csv(path)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError, OSError) as e:
        raise CollectError(f"{path} cannot be read ({str(e).splitlines()[0]}): {fix}") from None
    if "config_hash" not in df.columns:
        raise CollectError(f"{path} lacks the column config_hash (a garbled or foreign file): {fix}")
    declared = schemas.SUMMARY_CELLS if os.path.basename(path).startswith("summary") else schemas.STEP_COUNTS
    readers.check_cells(df, declared if cells else {}, path, fix)  # a TableError: one line, as a CollectError
    return df


def _jsonl(path: str, fix: str = FIX) -> list[dict]:
    """A job's (or --out's) outputs rows, whole (``results.output_rows``), each with a prompt_id (once per
    configuration) and token ids that are integers >= 0, or a one-line CollectError."""
    if not os.path.exists(path):
        return []
    _complete(path, fix)
    rows: list[dict] = []
    seen: dict[tuple[str, str], int] = {}
    try:
        for n, row in output_rows(path, fix):
            ids, key = row.get("token_ids"), (str(row.get("config_hash", "")), str(row.get("prompt_id", "")))
            if not isinstance(ids, list) or not all(
                isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids
            ):
                raise CollectError(f"{path}:{n}: token_ids={ids!r} is not a list of integer token ids >= 0: {fix}")
            if "prompt_id" not in row or key in seen:
                what = "has no prompt_id" if "prompt_id" not in row else f"repeats line {seen[key]} (prompt {key[1]})"
                raise CollectError(f"{path}:{n}: {what}: {fix}")
            seen[key] = n
            rows.append(row)
    except ValueError as e:
        raise CollectError(str(e)) from None
    return rows


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
    lacking = [c for c in STEP_REQUIRED if c not in steps]
    if lacking:  # a renamed or dropped column would merge as a new one, its cells blank
        raise CollectError(
            f"{d}/steps.csv lacks the column(s) {', '.join(lacking)} (renamed, or a foreign file): {FIX}"
        )
    check_job(summary, steps, d)
    h = str(summary.config_hash.iloc[0])
    outputs = [{"config_hash": h, **o} for o in _jsonl(os.path.join(d, "outputs.jsonl"))]
    job = JobRows(summary, steps, outputs, d)
    check_prompts(job, d)
    return job


def check_prompts(job: JobRows, d: str) -> None:
    """A job's run id is set (the newest run of a configuration wins by it), each (prompt, step) is in
    steps.csv once, and a decode's outputs.jsonl, where it has one, holds the prompts of its steps, no other
    (a paired mode's rows have no outputs)."""
    if "run_id" in job.summary and not job.run_id.strip():
        raise CollectError(f"{d}/summary.csv: run_id is empty (the newest run of a configuration wins by it): {FIX}")
    steps = job.steps
    if not {"prompt_id", "step"} <= set(steps):
        return
    twice = steps.duplicated(["prompt_id", "step"])
    if twice.any():
        i = int(twice.to_numpy().argmax())
        raise CollectError(
            f"{d}/steps.csv: line {i + 2} repeats step {steps.step.iloc[i]} of prompt {steps.prompt_id.iloc[i]}: {FIX}"
        )
    stepped, given = set(steps.prompt_id.astype(str)), {str(o.get("prompt_id")) for o in job.outputs}
    if job.primary is None and stepped != given and os.path.exists(os.path.join(d, "outputs.jsonl")):
        odd = sorted(stepped ^ given)[0]
        what = "has steps and no output" if odd in stepped else "has an output and no steps"
        raise CollectError(f"{d}/outputs.jsonl: prompt {odd} {what}: {FIX}")


def other_runs(job: JobRows) -> set[str]:
    """Run ids in a job's steps and outputs other than its summary's."""
    runs = set(job.steps.run_id.astype(str)) if "run_id" in job.steps and len(job.steps) else set()
    runs |= {str(o["run_id"]) for o in job.outputs if o.get("run_id")}
    return runs - {job.run_id} if job.run_id else set()


# --------------------------------------------------------------------------
# the rows already in --out
# --------------------------------------------------------------------------
LEGACY = {STEPS_FILE: "steps.csv", OUTPUTS_FILE: "outputs.jsonl"}  # results/ names before the gzip


def _collected(out: str, name: str) -> str:
    """The collected file ``name`` in ``out``, or its name from before the gzip where only that exists."""
    old = os.path.join(out, LEGACY[name])
    return old if os.path.exists(old) and not os.path.exists(os.path.join(out, name)) else os.path.join(out, name)


def read_collected(out: str) -> tuple[list[JobRows], int]:
    """The jobs already in --out, read as strictly as the report reads them (``results.files``: no
    configuration twice, numbers in range, each one's steps as many as its ``n_steps``), and how many
    step rows had no summary (dropped).  A summary whose steps or outputs file is missing or lacks a
    configuration's rows is refused (a merge would drop them); an older summary without ``n_steps`` or
    ``new_tokens`` has them counted from its steps."""
    spath = os.path.join(out, "summary.csv")
    if not os.path.exists(spath):
        return [], 0
    summary = complete(_csv(spath, OUT_FIX), None)
    check_summary(spath, summary, OUT_FIX, required=("config_hash",))
    stpath, opath = _collected(out, STEPS_FILE), _collected(out, OUTPUTS_FILE)
    n_steps = summary["n_steps"] if "n_steps" in summary else pd.Series(1, index=summary.index)
    stepped = summary[pd.to_numeric(n_steps, errors="coerce").fillna(1) > 0]  # blank: an older row, counted below
    if len(stepped) and not os.path.exists(stpath):
        raise CollectError(
            f"{stpath} is missing while {spath} holds {len(stepped)} configurations with steps: {OUT_FIX}"
        )
    steps = _csv(stpath, OUT_FIX, cells=False) if os.path.exists(stpath) else pd.DataFrame(columns=["config_hash"])
    summary = counted(summary, steps, spath)
    if len(steps):
        check_steps(stpath, steps, summary, OUT_FIX, strays=True, need=("config_hash", "emitted"))
    outputs = _jsonl(opath, OUT_FIX)
    check_outputs(opath, outputs, stepped)
    by_hash = dict(tuple(steps.groupby("config_hash", sort=False))) if len(steps) else {}
    jobs = []
    for i in range(len(summary)):
        row = summary.iloc[[i]].reset_index(drop=True)
        h = str(row.config_hash.iloc[0])
        st = by_hash.pop(h, steps.iloc[:0]).reset_index(drop=True)
        jobs.append(JobRows(row, st, [o for o in outputs if o.get("config_hash") == h], out, fresh=False))
    return jobs, sum(len(g) for g in by_hash.values())


def counted(summary: pd.DataFrame, steps: pd.DataFrame, path: str) -> pd.DataFrame:
    """``summary`` with ``n_steps`` and ``new_tokens`` counted from ``steps`` where (an older summary) it
    lacks them; a row with neither is a CollectError."""
    lacking = [c for c in ("n_steps", "new_tokens") if c not in summary or summary[c].isna().any()]
    if not lacking:
        return summary
    by = steps.groupby("config_hash") if len(steps) and "emitted" in steps else None
    counts = {"n_steps": by.size() if by is not None else {}, "new_tokens": by.emitted.sum() if by is not None else {}}
    out = summary.copy()
    for c in lacking:
        have = out[c] if c in out else pd.Series(float("nan"), index=out.index)
        out[c] = have.fillna(out.config_hash.astype(str).map(counts[c]))
    blank = out[out[lacking].isna().any(axis=1)]
    if len(blank):
        raise CollectError(
            f"{path}: configuration {blank.config_hash.iloc[0]} has no {lacking[0]} and no steps to count it from: {OUT_FIX}"
        )
    return out


def check_outputs(path: str, outputs: list[dict], stepped: pd.DataFrame) -> None:
    """Every decode (not a paired mode's rows, which have none) with steps has outputs in ``path``."""
    primary = stepped[stepped.get("pair_role", pd.Series("", index=stepped.index)).astype(str) != "paired"]
    have = {str(o.get("config_hash")) for o in outputs}
    lacking = [str(h) for h in primary.config_hash if str(h) not in have]
    if lacking:
        what = "is missing" if not os.path.exists(path) else f"has no outputs of configuration {lacking[0]}"
        raise CollectError(f"{path} {what}, while summary.csv holds {len(lacking)} decodes with steps: {OUT_FIX}")
