"""A job's files in its Hydra folder: its rows' key columns from the job spec (``row_keys``), its
steps frame, and steps.csv, outputs.jsonl, config.yaml and summary.csv written as one unit
(``write_job``); a finished job found by its config hash (``find_finished``), a resumed one marked.

The metrics of its summary row are ``results.metrics``'s; the files are written with
``results.files``'s writers.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict

import pandas as pd
from omegaconf import OmegaConf

from ...core.atomic import atomic_write, atomic_write_many, recover
from ...results.columns import DESCRIBED
from ...results.files import csv_writer, jsonl_text, text_writer
from ...verify.modes import get_mode
from ...verify.modespec import row_tags
from .describe import job_columns
from .identity import Identity, config_hash, pair_id
from .jobspec import JobSpec


def new_run_id() -> str:
    """Sortable by finish time, unique: collect keeps a config's newest run."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{uuid.uuid4().hex[:8]}"


def row_keys(job: JobSpec, ident: Identity, names: tuple[str, str], lossless: bool, engine: str, run_id: str) -> dict:
    """The configuration columns every row carries; ``names`` = (draft, target) labels."""
    v = job.verify
    return {
        "config_hash": config_hash(job, ident),
        "run_id": run_id,
        "pair": job.pair.name,
        "pair_id": pair_id(ident, job.pair.drafter, job.pair.drafter_params),
        "draft": names[0],
        "target": names[1],
        "tree": job.tree.name,
        "tree_params": json.dumps(job.tree.params, sort_keys=True),
        "budget": job.tree.budget,
        "verify": v.name,
        "lossless": bool(lossless),
        "temperature": v.temperature,
        "draft_temperature": v.draft_temperature,
        "top_p": v.top_p,
        "dataset": ident.dataset_label or job.dataset.name,
        "seed": job.seed,
        "max_new_tokens": job.max_new_tokens,
        "dtype": job.dtype,
        "device": job.device,
        "engine": engine,
        "batch_size": job.batch_size,
        "pair_key": config_hash(job, ident),
        "pair_role": "decode",
        **_described(job),
    }


def _described(job: JobSpec) -> dict:
    """The mode's row tags and every described column."""
    spec = get_mode(job.verify.name)
    tags = row_tags(spec, spec.params(job.verify.params))
    return {**tags, **job_columns(job, tags["child_rule"])}


def steps_frame(keys: dict, records: Sequence) -> pd.DataFrame:
    """A job's steps.csv: its key columns (the described ones are its summary row's alone) and records."""
    keys = {k: v for k, v in keys.items() if k not in DESCRIBED}
    rows = [{**keys, **asdict(r)} for r in records]
    return pd.DataFrame(rows)


PAIRED_DIR = "paired"
RESUMED_FILE = "resumed.txt"


def mark_resumed(out_dir: str, done: str) -> None:
    """A resumed job's folder says where the job finished (collect counts such folders)."""
    try:
        atomic_write(os.path.join(out_dir, RESUMED_FILE), text_writer(f"{done}\n"))
    except OSError:
        pass  # the skip stands; the folder then reads as unfinished


def write_job(
    out_dir: str,
    job: JobSpec,
    ident: Identity,
    steps: pd.DataFrame,
    summary: pd.DataFrame,
    outputs: Sequence[dict],
    paired: dict | None = None,
) -> None:
    """Every file of a job, all or none (a full disk leaves none): each paired mode's
    steps and summary under ``paired/<mode>/`` (``paired``: {mode: (steps, summary)}),
    then steps.csv, outputs.jsonl, config.yaml, and summary.csv last: a summary marks a
    finished job (collect reads nothing else without it).  Outputs carry the run id."""
    run_id = str(summary.run_id.iloc[0])
    config = {**job.to_dict(), "identity": ident.as_dict()}
    files = {}
    for name, (psteps, psummary) in (paired or {}).items():
        files[os.path.join(out_dir, PAIRED_DIR, name, "steps.csv")] = csv_writer(psteps)
        files[os.path.join(out_dir, PAIRED_DIR, name, "summary.csv")] = csv_writer(psummary)
    files[os.path.join(out_dir, "steps.csv")] = csv_writer(steps)
    files[os.path.join(out_dir, "outputs.jsonl")] = text_writer(jsonl_text([{**o, "run_id": run_id} for o in outputs]))
    files[os.path.join(out_dir, "config.yaml")] = text_writer(OmegaConf.to_yaml(OmegaConf.create(config)))
    files[os.path.join(out_dir, "summary.csv")] = csv_writer(summary)
    recover(out_dir)  # what a killed earlier run of this job left here
    atomic_write_many(files)  # one unit (core.atomic.publish): the old run's files until the new ones are all in
    old = os.path.join(out_dir, PAIRED_DIR)  # paired modes of an earlier run that this one has not: gone
    for name in sorted(os.listdir(old)) if os.path.isdir(old) else []:
        if name not in (paired or {}):
            shutil.rmtree(os.path.join(old, name))


def find_finished(root: str, chash: str) -> str | None:
    """The folder of a finished job with this config hash under root, if any (a folder
    holding error.txt beside its summary is not finished)."""
    for path in sorted(glob.glob(os.path.join(root, "**", "summary.csv"), recursive=True)):
        if os.path.exists(os.path.join(os.path.dirname(path), "error.txt")):
            continue
        try:
            head = pd.read_csv(path, usecols=["config_hash"], dtype=str)
        except (ValueError, pd.errors.EmptyDataError, pd.errors.ParserError):
            continue
        if chash in set(head.config_hash):
            return os.path.dirname(path)
    return None
