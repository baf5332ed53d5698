"""Per-job files: row keys from the job spec, the metrics, steps/summary/outputs writers.

Metric definitions (also in docs/metrics.md and REPORT.md):
  acceptance_rate   = sum(accepted) / sum(tree_size)       (verified / drafted; NaN when nothing
                                                          was drafted, e.g. tree=none)
  acceptance_length = mean accepted per step               (bonus token NOT counted)
  tokens_per_step   = mean emitted per step                (bonus token counted; Spec-Bench's tau)
  alpha_d           = P(accepted >= d | accepted >= d-1 and tree_depth >= d)   (EAGLE)
CIs are 95% percentile bootstraps over prompts (``scipy.stats.bootstrap``, paired over each
prompt's sums; seeded, 1000 resamples).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from omegaconf import OmegaConf
from scipy import stats

from ..core.atomic import atomic_write, atomic_write_many, gzip_bytes, gzipped, open_text, recover
from ..core.jsonl import json_objects
from ..core.readers import COLLECT_FIX
from .columns import DESCRIBED
from .describe import job_columns

if TYPE_CHECKING:  # the report reads CSVs through this module: no torch import here
    from .identity import Identity
    from .jobspec import JobSpec

N_BOOT = 1000


def new_run_id() -> str:
    """Sortable by finish time, unique: collect keeps a config's newest run."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{uuid.uuid4().hex[:8]}"


def row_keys(job: JobSpec, ident: Identity, names: tuple[str, str], lossless: bool, engine: str, run_id: str) -> dict:
    """The configuration columns every row carries; ``names`` = (draft, target) labels."""
    from .identity import config_hash, pair_id

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
    """The mode's row tags and every described column (torch: imported only when rows are written)."""
    from ..verify.modes import get_mode
    from ..verify.modespec import row_tags

    spec = get_mode(job.verify.name)
    tags = row_tags(spec, spec.params(job.verify.params))
    return {**tags, **job_columns(job, tags["child_rule"])}


def steps_frame(keys: dict, records: Sequence) -> pd.DataFrame:
    """A job's steps.csv: its key columns (the described ones are its summary row's alone) and records."""
    keys = {k: v for k, v in keys.items() if k not in DESCRIBED}
    rows = [{**keys, **asdict(r)} for r in records]
    return pd.DataFrame(rows)


def _metrics(df: pd.DataFrame) -> dict:
    drafted = df.tree_size.sum()
    return {
        "acceptance_rate": df.accepted.sum() / drafted if drafted > 0 else float("nan"),
        "acceptance_length": df.accepted.mean(),
        "tokens_per_step": df.emitted.mean(),
    }


def paired_bootstrap(samples: tuple, statistic, n_resamples: int, seed: int = 0):
    """``scipy.stats.bootstrap`` over prompts, the one way the study and the report resample: paired
    (a prompt's arrays move together), vectorised, 95% percentile interval, seeded."""
    return stats.bootstrap(
        samples,
        statistic,
        paired=True,
        vectorized=True,
        n_resamples=n_resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
    )


def _ratio(num, den, axis=-1):
    with np.errstate(invalid="ignore", divide="ignore"):
        return num.sum(axis) / den.sum(axis)


def _ratio_ci(num: np.ndarray, den: np.ndarray, seed: int) -> tuple[float, float]:
    """95% percentile interval of Σ num / Σ den over prompts resampled with replacement."""
    if den.sum() <= 0:
        return float("nan"), float("nan")
    if len(num) < 2:  # one prompt: every resample is the prompt itself
        return float(num.sum() / den.sum()), float(num.sum() / den.sum())
    with warnings.catch_warnings():  # a resample with nothing drafted has no rate (NaN), dropped below
        warnings.simplefilter("ignore")
        res = paired_bootstrap((num, den), _ratio, N_BOOT, seed)
    v = np.asarray(res.bootstrap_distribution, float)
    v = v[np.isfinite(v)]
    lo, hi = np.percentile(v, [2.5, 97.5])
    return float(lo), float(hi)


def bootstrap(df: pd.DataFrame, seed: int = 0) -> dict:
    """95% percentile CIs of the job metrics, resampling prompts."""
    groups = [g for _, g in df.groupby("prompt_id", sort=True)]
    rows = [[g.accepted.sum(), g.tree_size.sum(), g.emitted.sum(), len(g)] for g in groups]
    sums = np.array(rows, float).reshape(-1, 4)
    parts = {"acceptance_rate": (0, 1), "acceptance_length": (0, 3), "tokens_per_step": (2, 3)}
    out = {}
    for k, (num, den) in parts.items():
        out[f"{k}_lo"], out[f"{k}_hi"] = _ratio_ci(sums[:, num], sums[:, den], seed)
    return out


def alphas(df: pd.DataFrame) -> dict:
    out = {}
    for d in range(1, (int(df.tree_depth.max()) if len(df) else 0) + 1):
        at_risk = df[(df.accepted >= d - 1) & (df.tree_depth >= d)]
        out[f"alpha_{d}"] = (at_risk.accepted >= d).mean() if len(at_risk) else float("nan")
    return out


def summarize(keys: dict, steps: pd.DataFrame, wall_s: float, hist: list[int]) -> pd.DataFrame:
    row = dict(keys)
    row.update(n_prompts=steps.prompt_id.nunique(), n_steps=len(steps), new_tokens=int(steps.emitted.sum()))
    row.update(_metrics(steps))
    row.update(bootstrap(steps, seed=int(keys["seed"])))
    row.update(
        first_token_tv=steps.first_token_tv.mean(),
        expected_accepted=steps.expected_accepted.mean(),
        draft_s=steps.draft_s.sum(),
        verify_s=steps.verify_s.sum(),
        wall_s=wall_s,
        tokens_per_s=(steps.emitted.sum() / wall_s) if wall_s > 0 else float("nan"),
        accept_hist=json.dumps(hist),
    )
    row.update(alphas(steps))
    return pd.DataFrame([row])


# identifier columns stay text: a hash like 3726142e8142 would otherwise be read as a float
TEXT_COLUMNS = {
    c: str
    for c in (
        "config_hash",
        "run_id",
        "pair",
        "pair_id",
        "draft",
        "target",
        "tree",
        "tree_params",
        "verify",
        "dataset",
        "engine",
        "prompt_id",
        "accept_path",
        "role",
        "path_children",
        "scored",
        "pair_key",
        "pair_role",
        "sibling_order",
        "child_rule",
        *DESCRIBED,
    )
}


def read_csv(path: str) -> pd.DataFrame:
    """A specbench CSV (summary, steps, calibration) with identifier columns kept as text."""
    return pd.read_csv(path, dtype=TEXT_COLUMNS, keep_default_na=False, na_values=[""])


def csv_writer(df: pd.DataFrame):
    """A writer of ``df`` as specbench CSV (`text_writer`: gzip where the target's name ends in .gz)."""
    return lambda tmp: text_writer(df.to_csv(index=False, float_format="%.6g"))(tmp)


def write_csv(df: pd.DataFrame, path: str) -> None:
    atomic_write(path, csv_writer(df))


def text_writer(text: str):
    """A writer of ``text`` as utf-8, gzipped (`core.atomic.gzipped`) where the temp file's name ends
    in .gz, as `core.atomic.write_temp` names it after the target."""

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(gzip_bytes(text) if gzipped(tmp) else text.encode("utf-8"))

    return write


def jsonl_text(rows: Sequence[dict]) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


# the collected results/ folder keeps its two large tables gzipped (`csv_writer`, `open_text`)
STEPS_FILE = "steps.csv.gz"
OUTPUTS_FILE = "outputs.jsonl.gz"
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


OUTPUT_LIKE = '{"config_hash": "...", "prompt_id": "...", "token_ids": [1, 2]}'


def output_rows(path: str, fix: str = COLLECT_FIX) -> Iterator[tuple[int, dict]]:
    """(line number, object) of every line of an outputs file (a job's outputs.jsonl, whose rows
    collect keys by config_hash, or results/outputs.jsonl.gz), nothing when it is absent: THE reader
    of this file kind, one parse (``core.jsonl``).  A binary or corrupt file, or a line that is not a
    JSON object: a ValueError naming the file (and line) and ``fix``."""
    if not os.path.isfile(path):
        return
    try:
        with open_text(path) as fh:
            yield from json_objects(fh, path, fix, OUTPUT_LIKE)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte {e.start}: a binary file?); {fix}") from None
    except (EOFError, OSError) as e:  # a gzip stream cut short, or no gzip stream
        raise ValueError(f"{path}: the file is truncated or corrupt ({e}); {fix}") from None


def read_outputs(path: str, fix: str = COLLECT_FIX) -> dict[tuple[str, str], list[int]]:
    """results/outputs.jsonl.gz -> {(config_hash, prompt_id): token_ids}; {} if absent.  A line
    without them: a ValueError naming the file, the line and ``fix`` (else as ``output_rows``)."""
    out = {}
    for lineno, row in output_rows(path, fix):
        try:
            out[(str(row["config_hash"]), str(row["prompt_id"]))] = [int(t) for t in row["token_ids"]]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}:{lineno}: expected {OUTPUT_LIKE}; {fix}") from None
    return out


def first_divergence(x: list[int], y: list[int]) -> int | None:
    """The first position where two token sequences differ (a length difference counts); None if equal."""
    for i, (u, v) in enumerate(zip(x, y)):
        if u != v:
            return i
    return None if len(x) == len(y) else min(len(x), len(y))
