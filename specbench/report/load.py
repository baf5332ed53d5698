"""Read results/ for the report, refusing truncated or inconsistent inputs before anything is written.

Every refusal is an `InputError`: one line that names the file and the fix.  Checks:
- every CSV: a complete last line (a file cut mid-write ends without a newline) and the
  header's number of fields on every row;
- summary.csv: the key columns, no empty key cell;
- steps.csv.gz (optional): its configurations are in summary.csv and each one's step count
  equals summary.csv's ``n_steps`` (a half-copied or stale steps.csv is refused);
- outputs.jsonl.gz (optional): every line a JSON object with config_hash, prompt_id and token_ids
  (read once, by ``results.files.read_outputs``).
A missing optional file is no error: the sections that need it say so.  A missing optional column is
decided here, once (``results.optional.filled``: NaN or its documented default), so no section asks
whether a column exists.
"""

from __future__ import annotations

import glob
import json
import os

import pandas as pd

from ..core import readers
from ..core.atomic import recover
from ..results import costcurve, costtable
from ..results import files as result_files
from ..results.files import OUTPUTS_FILE, STEPS_FILE, read_csv
from ..results.optional import filled
from . import analysis
from .context import Inputs

COLLECT = "regenerate it with `python -m specbench.collect`"
OPTIONAL_CSV = {
    "lossless_check": "lossless_check.csv",
    "lossless_control": "lossless_control.csv",
    "attention": "attention.csv",
    "costs": "costs.csv",
    "gap": "gap_to_optimum.csv",
    "divergence": "continuation_divergence.csv",
    "margins": "divergence_margins.csv",
    "attention_recheck": "attention_threads1.csv",
    "bf16_replay": "bf16_replay_divergence.csv",
    "run_times": "run_times.csv",
    "served": "served.csv",  # what a server measured (python -m specbench.import_metrics)
    "bench": "speed.csv",  # the interleaved speed benchmark (python -m specbench.study.tools.speed)
    "bench_steps": "speed_steps.csv.gz",  # its timed decodes' step rows
    "acceptance_check": "acceptance_check.csv",  # the default run's acceptance-sample check (study.tools.recheck)
    "accept_llamacpp": "acceptance_llamacpp.csv",  # llama.cpp's acceptance beside specbench's replay (#84)
}


WRITER = {  # file -> the command that writes it: what a refusal of that file tells the user to rerun
    "lossless_check.csv": "python -m specbench.study.tools.lossless",
    "lossless_control.csv": "python -m specbench.study.tools.lossless",
    "attention.csv": "python -m specbench.attention_bench",
    "attention_threads1.csv": "python -m specbench.attention_bench threads=1 out_csv=results/attention_threads1.csv",
    "costs.csv": "python -m specbench.study.tools.costs",
    "continuation_divergence.csv": "python scripts/bench_batch.py",
    "divergence_margins.csv": "python -m specbench.study.tools.margins",
    "bf16_replay_divergence.csv": "python scripts/bench_bf16_replay.py",
    "run_times.csv": "bash run_all.sh (its steps' times and python -m specbench.study.tools.ceiling)",
    "served.csv": "python -m specbench.import_metrics",
    "speed.csv": "python -m specbench.study.tools.speed",
    "speed_steps.csv.gz": "python -m specbench.study.tools.speed",
    "acceptance_check.csv": "python -m specbench.study.tools.recheck",
    "acceptance_llamacpp.csv": "python -m specbench.study.tools.accept_llamacpp",
    "acceptance_vector.csv": "python -m specbench.study.tools.calibrate",
}


def fix_for(path: str) -> str:
    """The fix a refusal of ``path`` names: rerun the command that writes that file (collect by default)."""
    name = os.path.basename(path)
    command = WRITER.get(name) or WRITER.get("acceptance_vector.csv" if name.startswith("acceptance_vector") else "")
    return f"regenerate it with `{command}` (or git checkout it)" if command else COLLECT


class InputError(ValueError):
    """An input the report refuses to read (one line: the file and the fix)."""


def check_complete(path: str) -> None:
    """Refuse a binary, non-UTF-8 or cut CSV, or one whose rows have the wrong number of fields
    (``core.readers.check_text``)."""
    try:
        readers.check_text(path, fix_for(path))
    except readers.TableError as e:
        raise InputError(str(e)) from None


def read_checked(path: str, reader=read_csv) -> pd.DataFrame | None:
    """The file at ``path`` (None where absent), checked whole, with the optional columns it lacks filled
    (``results.optional``: each decided here, once)."""
    if not os.path.isfile(path):
        return None
    check_complete(path)
    return filled(reader(path), path)


def check_summary(path: str, summary: pd.DataFrame) -> None:
    """The key columns, no empty key cell, numbers in range, no configuration twice (``results.files``:
    the checks collect reads its ``--out`` with)."""
    try:
        result_files.check_summary(path, summary, COLLECT)
    except readers.TableError as e:
        raise InputError(str(e)) from None


def check_steps(path: str, steps: pd.DataFrame, summary: pd.DataFrame) -> None:
    """Each configuration's steps: in summary.csv, as many as its ``n_steps`` (``results.files``)."""
    try:
        result_files.check_steps(path, steps, summary, COLLECT)
    except readers.TableError as e:
        raise InputError(str(e)) from None


def read_outputs(path: str) -> dict:
    """outputs.jsonl.gz's token ids by (config_hash, prompt_id) (``results.files.read_outputs``: its
    one reader); {} when absent; a line that is not whole JSON with those keys: an InputError."""
    try:
        return result_files.read_outputs(path, COLLECT)
    except ValueError as e:
        raise InputError(str(e)) from None


def _vectors(results: str) -> pd.DataFrame | None:
    files = sorted(glob.glob(os.path.join(results, "acceptance_vector*.csv")))
    frames = [read_checked(f) for f in files]
    return pd.concat(frames, ignore_index=True) if frames else None


def _environments(results: str) -> dict:
    """device -> its environment (environment.json: the study's machine; environment-cuda.json ...)."""
    envs = {}
    for env_path in sorted(glob.glob(os.path.join(results, "environment*.json"))):
        try:
            env = json.load(open(env_path, encoding="utf-8"))
        except json.JSONDecodeError:
            raise InputError(f"{env_path} is not complete JSON; rerun `bash run_all.sh` or delete it") from None
        envs[os.path.basename(env_path)[len("environment-") : -len(".json")] or "cpu"] = env
    return envs


def read_default_run(results: str) -> dict | None:
    """The last default run's record, None where absent (or not yet finished: no ``covered``); a file that is
    there but unreadable is refused in one line naming it and the fix (never reported as absent)."""
    path = os.path.join(results, "default_run.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            rec = json.load(f)
    except (OSError, ValueError) as e:
        rec = e
    if not isinstance(rec, dict):
        why = f"{type(rec).__name__}: {str(rec)[:80]}" if isinstance(rec, Exception) else "not a JSON object"
        raise ValueError(
            f"{path}: unreadable ({why}); rerun `bash run_all.sh` (its last step writes it) or `git checkout {path}`"
        )
    return rec if rec.get("covered") else None


def load(results: str) -> Inputs:
    """Every input of the report, validated, with pairs labelled (`analysis.pair_labels`)."""
    recover(results, clean=False)  # a collect killed while publishing: its files all new (study.job.collect)
    path = os.path.join(results, "summary.csv")
    if not os.path.isfile(path):
        raise InputError(f"{path} not found; run `python -m specbench.collect` first (or pass --results DIR)")
    check_complete(path)
    summary = result_files.read_summary(path, strict=False)  # parsed, then checked as collect's --out is
    check_summary(path, summary)
    summary = filled(summary, path)  # checked as written, then its optional columns decided (results.optional)
    steps_path = os.path.join(results, STEPS_FILE)
    steps = read_checked(steps_path)
    if steps is not None:
        check_steps(steps_path, steps, summary)
    envs = _environments(results)
    labels = analysis.pair_labels(summary)
    summary = analysis.relabel_pairs(summary, labels)
    by_hash = dict(zip(summary.config_hash.astype(str), summary.pair))
    by_definition = {"costs": costtable.read}  # costs.csv by its definition (results.costtable)
    data = {k: read_checked(os.path.join(results, f), by_definition.get(k, read_csv)) for k, f in OPTIONAL_CSV.items()}
    for key in ("lossless_check", "lossless_control", "bench", "bench_steps"):
        data[key] = analysis.relabel_pairs(data[key], labels)
    costs = data.pop("costs")
    own = None if costs is None else costcurve.of_engine(costs)  # specbench's forwards: llama.cpp's apart
    return Inputs(
        **data,
        costs=costcurve.one_per_curve(own),  # the study's curves: one machine's per pair and dtype
        costs_all=own,  # every machine's: each live run is set against its own machine's curve
        costs_llamacpp=None if costs is None else costcurve.of_engine(costs, "llamacpp"),  # llama.cpp's (#84)
        summary=summary,
        steps=analysis.relabel_pairs(steps, labels, by_hash),
        outputs=read_outputs(os.path.join(results, OUTPUTS_FILE)),
        vector=analysis.relabel_pairs(_vectors(results), labels),
        env=envs.get("cpu"),
        envs=envs,
        default_run=read_default_run(results),
        results=results,
    )
