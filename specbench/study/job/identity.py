"""A job's identity: the normalised config plus the content of what it reads.

* ``model_fingerprint(spec, dtype)``: sha256 over a model folder's files (weights,
  config, tokenizer); each file's digest is cached beside it in
  ``.specbench-sha256.json`` and recomputed when its size or mtime changes.
  A ``.safetensors`` file whose header promises more bytes than it holds is a
  one-line error naming the config key (before any model loads).  A hub model
  not on disk is identified by its id only (``hub:<id>``).
* ``dataset_fingerprint(dataset)``: sha256 of the prompts the job reads (ids
  and texts, after ``dataset.limit``), so an edited jsonl is a new job.
* ``config_hash(job, ident)``: 12 hex digits over both; resume and collect key
  jobs by it.  ``pair_id(ident, drafter, params)``: 12 hex digits over the draft and
  target fingerprints and the drafter (with its pair keys, e.g. ``layers``): the identity
  of a pair, whatever its name.
* ``bind(job, ident)`` (``bound(job)``: with ``job_identity`` first and ``config_hash`` after): the job with ``tree.calib_pair_id=auto`` (Sequoia's
  calibrated vector) replaced by its pair_id (for a merged drafter, its model part's:
  ``Drafter.vector_drafter``), so a vector measured on one pair is never read for another
  that shares its config name; and the identity with
  what the tree policy reads (``tree_reads``): for a static shape built from a
  file (Sequoia's acceptance vector) the rank paths it built, for any other
  file parameter the file's sha256.  So a recalibrated vector is a new job.
* ``dataset_label(dataset)``: the row label of a dataset; one read from a file
  (``dataset.path``) is labelled by the file, e.g. ``jsonl:prompts.jsonl@1a2b3c4d``,
  so two files are never one dataset in the report.
* ``check_hub_models(job)``: a hub model not in the local Hugging Face cache
  while the hub cannot be reached (or ``HF_HUB_OFFLINE=1``) is a one-line error
  naming the key, before any load; a cached one while offline then loads from
  the cache without retries.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast
from urllib.parse import urlparse

from huggingface_hub import constants, try_to_load_from_cache

from ... import CONF_DIR
from ...core.atomic import atomic_write
from ...drafting.drafters import DRAFTERS
from ...inputs.data import DATASETS, check_rows
from ...inputs.models import model_folder
from ...trees.policies import PathsPolicy, make_policy, policy_spec
from .errors import ConfigError
from .jobspec import DatasetSpec, JobSpec, ModelSpec

CACHE_NAME = ".specbench-sha256.json"
CHUNK = 1 << 22


@dataclass(frozen=True)
class Identity:
    draft: str | None  # model fingerprints (None: no draft model)
    target: str
    dataset: str
    dataset_label: str = ""  # the rows' `dataset` (see dataset_label)
    reads: dict = field(default_factory=dict)  # what the tree policy read (see tree_reads)

    def as_dict(self) -> dict:
        out = {"draft": self.draft, "target": self.target, "dataset": self.dataset}
        return {**out, "reads": self.reads} if self.reads else out


# --------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------
def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def check_safetensors(path: Path, key: str) -> None:
    """A one-line ConfigError if the file is shorter than its header says."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        try:
            header = json.loads(fh.read(n)) if 0 < n <= size - 8 else None
        except (ValueError, UnicodeDecodeError):
            header = None
    ends = [
        v["data_offsets"][1]
        for k, v in (header or {}).items()
        if k != "__metadata__" and isinstance(v, dict) and "data_offsets" in v
    ]
    want = 8 + n + max(ends, default=0)
    if header is None or size < want:
        raise ConfigError(
            f"{key}: {path} is truncated or not a safetensors file ({size} of "
            f"{max(want, size + 1)} bytes): re-save or re-download the model"
        )


def folder_digests(folder: Path, key: str) -> dict[str, str]:
    """{file name: sha256} of a model folder's regular files, cached beside them."""
    cache_path = folder / CACHE_NAME
    try:
        cache = json.loads(cache_path.read_text())
    except (OSError, ValueError):
        cache = {}
    out, changed = {}, False
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        if path.suffix == ".safetensors":
            check_safetensors(path, key)
        st = path.stat()
        hit = cache.get(path.name)
        if not (isinstance(hit, list) and hit[:2] == [st.st_size, st.st_mtime_ns]):
            hit, changed = [st.st_size, st.st_mtime_ns, file_sha256(path)], True
            cache[path.name] = hit
        out[path.name] = hit[2]
    if changed:
        try:
            atomic_write(cache_path, lambda tmp: Path(tmp).write_text(json.dumps(cache, indent=1)))
        except OSError:
            pass  # a read-only folder: recompute next time
    return out


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub answers a TCP connect (no retries), unless offline mode is set."""
    if constants.HF_HUB_OFFLINE:
        return False
    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def check_hub(spec: ModelSpec) -> None:
    """A hub model must be in the local cache or the hub reachable (one line naming the key);
    cached and offline: later loads use the cache without retrying the network."""
    cached = isinstance(try_to_load_from_cache(spec.ref, "config.json"), str)
    if hub_reachable():
        return
    if not cached:
        raise ConfigError(
            f"{spec.key}.id={spec.ref}: not in the local Hugging Face cache and the hub "
            f"({constants.ENDPOINT}) cannot be reached: download it first (`hf download "
            f"{spec.ref}`) or use a local folder ({spec.key}.source=local {spec.key}.path=DIR)"
        )
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants.HF_HUB_OFFLINE = True


def check_hub_models(job: JobSpec) -> None:
    """``check_hub`` for each hub model of the job's pair (run before any load)."""
    for spec in (job.pair.draft, job.pair.target):
        if spec is not None and spec.source == "hub":
            check_hub(spec)


def model_fingerprint(spec: ModelSpec, dtype: str) -> str:
    """The content identity of one model (see the module docstring)."""
    folder = model_folder(spec.source, spec.ref, dtype, spec.key)
    if folder is None:
        return f"hub:{spec.ref}"
    digests = folder_digests(Path(folder), f"{spec.key}.{'path' if spec.source == 'local' else 'id'}")
    return hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()


def dataset_fingerprint(dataset: DatasetSpec) -> str:
    """sha256 of the (id, text, task) rows the job will read; a bad file or an empty
    prompt is a one-line error (no model needed)."""
    rows = DATASETS.get(dataset.name)(dataset.loader_spec())
    if dataset.limit is not None:
        rows = rows[: dataset.limit]
    check_rows(dataset.name, rows, dataset.limit)
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def dataset_label(dataset: DatasetSpec) -> str:
    """``name``, or ``name:<file name>@<sha256[:8] of the file>`` for a dataset read from ``dataset.path``."""
    path = dataset.config.get("path")
    if not path:
        return dataset.name
    path = Path(os.path.expanduser(str(path)))
    return f"{dataset.name}:{path.name}@{file_sha256(path)[:8]}"


def job_identity(job: JobSpec) -> Identity:
    draft = model_fingerprint(job.pair.draft, job.dtype) if job.pair.draft else None
    return Identity(
        draft,
        model_fingerprint(job.pair.target, job.dtype),
        dataset_fingerprint(job.dataset),
        dataset_label(job.dataset),
    )


def _file_param(value) -> Path | None:
    """A tree parameter naming an existing file (relative: the repo root, as Sequoia reads it)."""
    if not isinstance(value, str) or not value:
        return None

    p = Path(os.path.expanduser(value))
    p = p if p.is_absolute() else Path(CONF_DIR).parent / p
    return p if p.is_file() else None


def tree_reads(job: JobSpec) -> dict:
    """What the tree policy reads from files: a static shape's rank paths, else the files' sha256."""
    files = {k: p for k, v in sorted(job.tree.params.items()) if (p := _file_param(v)) is not None}
    if not files:
        return {}

    if policy_spec(job.tree.name).rank_replayable:
        policy = cast(PathsPolicy, make_policy(job.tree.name, job.tree.budget, job.tree.params))
        return {"tree_paths": [list(p) for p in policy.paths()]}
    return {"tree_files": {k: file_sha256(p) for k, p in files.items()}}


# --------------------------------------------------------------------------
# hashes
# --------------------------------------------------------------------------
def short_hash(obj) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def config_hash(job: JobSpec, ident: Identity) -> str:
    return short_hash({"config": job.to_dict(identity_only=True), "content": ident.as_dict()})


def paired_hash(decode_hash: str, mode: str) -> str:
    """The config hash of a ``verify.paired_with`` mode's rows in the job ``decode_hash``."""
    return short_hash({"paired_on": decode_hash, "verify": mode})


def pair_id(ident: Identity, drafter: str, drafter_params: dict | None = None) -> str:
    """The identity of a pair: its draft and target content, the drafter kind and the
    drafter's own pair keys where it has any (e.g. a layer-skip drafter's ``layers``)."""
    key = {"draft": ident.draft, "target": ident.target, "drafter": drafter}
    return short_hash({**key, "params": drafter_params} if drafter_params else key)


def bind(job: JobSpec, ident: Identity) -> tuple[JobSpec, Identity]:
    """(``job`` with ``tree.calib_pair_id=auto`` set to the job's own pair_id, ``ident`` with
    what its tree reads): see the module docstring."""
    if job.tree.params.get("calib_pair_id") == "auto":
        drafter = DRAFTERS.get(job.pair.drafter).vector_drafter or job.pair.drafter
        params = {**job.tree.params, "calib_pair_id": pair_id(ident, drafter, job.pair.drafter_params)}
        job = replace(job, tree=replace(job.tree, params=params))
    return job, replace(ident, reads=tree_reads(job))


def bound(job: JobSpec) -> tuple[JobSpec, Identity, str]:
    """(``job`` bound, its identity, its config hash): what ``specbench.run`` keys the job by."""
    job, ident = bind(job, job_identity(job))
    return job, ident, config_hash(job, ident)
