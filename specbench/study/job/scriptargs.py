"""The command-line options the benchmark scripts (scripts/bench_*.py) share: which pair, which dataset.

``--pair`` names a conf/pair/*.yaml (``qwen_coder``, ``local``, ...) or a pair yaml path, and
``--pair-override KEY=VALUE`` (repeatable) sets one of its keys as the study's ``pair.KEY=VALUE``
does (a leading ``pair.`` is optional).  Two local Hugging Face folders, as the tests run them::

    scripts/bench_live.py --pair local --pair-override draft.path=DIR --pair-override target.path=DIR

``--dataset`` names a dataset option (``humaneval``; ``smoke`` is four short prompts: ``inputs.data``).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from omegaconf import OmegaConf

from ...inputs import models
from .launch import pair_config


def add_pair_args(ap: argparse.ArgumentParser, default: str = "qwen_coder") -> None:
    ap.add_argument("--pair", default=default, help="a conf/pair name (qwen_coder, local, ...) or a pair yaml path")
    ap.add_argument(
        "--pair-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set pair.KEY (repeatable), e.g. --pair local --pair-override draft.path=DIR --pair-override target.path=DIR",
    )


def add_dataset_arg(ap: argparse.ArgumentParser, default: str = "humaneval") -> None:
    ap.add_argument("--dataset", default=default, help="a dataset name (humaneval; smoke: 4 short prompts)")


def _keys(overrides) -> list[tuple[str, str]]:
    """(key below pair, value) of each KEY=VALUE; a ValueError for anything else."""
    out = []
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip().removeprefix("pair.")
        if not sep or not key:
            raise ValueError(f"--pair-override {item!r}: use KEY=VALUE, e.g. target.path=DIR")
        out.append((key, value))
    return out


def _missing(node, prefix: str = "") -> list[str]:
    """The dotted keys still unset: ``???`` (OmegaConf's mandatory marker), or the id or path a
    model spec's source needs (pair=local's paths; the job spec checks the same)."""
    if isinstance(node, dict):
        need = models.ref_key(node["source"]) if node.get("source") in models.SOURCES else None
        own = [f"{prefix}{need}"] if need and node.get(need) is None else []
        return own + [k for key, v in node.items() for k in _missing(v, f"{prefix}{key}.")]
    return [prefix.rstrip(".")] if node == "???" else []


def pair_spec(pair: str, overrides=()) -> dict:
    """The pair config ``--pair`` names with ``--pair-override``s applied and interpolations resolved
    (pair=local's label reads its paths); a one-line ValueError for a bad name, file or override, or a
    key left unset (``???``)."""
    if pair.endswith((".yaml", ".yml")):
        if not os.path.isfile(pair):
            raise ValueError(f"--pair {pair}: no such file; give a conf/pair name or a pair yaml path")
        config = OmegaConf.load(pair)
    else:
        config = OmegaConf.create(pair_config(pair))
    dotlist = [f"pair.{key}={value}" for key, value in _keys(overrides)]
    root = OmegaConf.merge({"pair": config}, OmegaConf.from_dotlist(dotlist))
    missing = _missing(OmegaConf.to_container(root, resolve=False))
    if missing:
        sets = " ".join(f"--pair-override {k.removeprefix('pair.')}=..." for k in missing)
        raise ValueError(f"pair {pair}: {', '.join(missing)} not set; add {sets}")
    resolved: Any = OmegaConf.to_container(root, resolve=True)
    return dict(resolved["pair"])


def load_pair(args: argparse.Namespace, dtype: str, device: str = "cpu") -> models.Pair:
    """The pair of ``args.pair`` / ``args.pair_override`` (`add_pair_args`), loaded."""
    return models.load_pair(pair_spec(args.pair, args.pair_override), dtype, device)


def hydra_pair_overrides(args: argparse.Namespace) -> list[str]:
    """``args.pair`` / ``args.pair_override`` as the study's Hydra overrides (``pair=NAME ++pair.KEY=VALUE``:
    set, whether or not the pair's yaml has the key, as ``pair_spec`` does)."""
    if args.pair.endswith((".yaml", ".yml")):
        raise ValueError(f"--pair {args.pair}: the study takes a conf/pair name here, not a yaml path")
    return [f"pair={args.pair}", *(f"++pair.{k}={v}" for k, v in _keys(args.pair_override))]
