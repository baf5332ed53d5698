"""What every row says about its registry entries, so the report (no torch) reads data only.

Rows describe themselves: beside its names (``tree``, ``verify``, ``pair``) and the parameters
it was given (``tree_params``), every summary row carries (steps rows do not: they are keyed
by their summary row's config hash)

* ``tree_resolved``: the tree policy's parameters with its defaults filled in, as JSON
  (``trees.policies.resolved_params``; merged: its model part's under ``model``);
* ``mode_family``, ``baseline_of``, ``token_level_on``: its mode's declared role
  (``verify.modespec.role_tags``: lossless or lossy, and the baselines it is);
* ``frontier_rule``: the child rule by which its drafter filled every frontier of the trees it
  verified (``Drafter.child_rule`` for the policy's kind and the mode's rule: topk, sample,
  sample_noreplace or fixed).

``job_columns`` computes them when a job's rows are written (``results.row_keys``), from the
registries, so a plugin's entries describe themselves as a built-in's do.  Rows written before
these columns existed get them from the registries by name when collect reads them
(``complete``): a job folder's drafter from its config.yaml, a collected row's from its pair's
preset.  None of these columns enters the config hash (``identity.config_hash`` hashes the job
spec, not its rows).  The column names themselves are ``results.columns``'s.  Imports: pandas, yaml,
results.columns and study.job.plugins; the registries (trees, verify, drafting: torch) only when called,
so collect loads torch only for rows from before these columns.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import pandas as pd
import yaml

from ...results.columns import DESCRIBED, KEY_COLUMNS, tree_params
from .plugins import option_file


def tree_resolved(tree: str, params: Mapping | None) -> str:
    """``tree_resolved`` of a row: the resolved parameters as sorted JSON."""
    from ...trees.policies import resolved_params  # heavy: torch, only for an older row (collect imports this)

    return json.dumps(resolved_params(tree, params), sort_keys=True, default=list)


def mode_columns(verify: str) -> dict:
    """``mode_family``, ``baseline_of``, ``token_level_on`` of mode ``verify`` (its declared role)."""
    from ...verify.modes import get_mode  # heavy: torch (the registries), as tree_resolved's
    from ...verify.modespec import role_tags  # heavy: torch (the registries), as tree_resolved's

    return role_tags(get_mode(verify))


def frontier_rule(drafter: str, tree: str, mode_rule: str) -> str:
    """The child rule of the trees ``drafter`` grows for policy ``tree`` when a mode asks ``mode_rule``."""
    from ...drafting.drafters import DRAFTERS  # heavy: torch (the registries), as tree_resolved's
    from ...trees.policies import policy_spec  # heavy: torch (the registries), as tree_resolved's

    return DRAFTERS.get(drafter).child_rule(policy_spec(tree).kind, mode_rule)


def job_columns(job, mode_rule: str) -> dict:
    """Every described column of a job's decode row (``mode_rule``: its mode's child rule)."""
    return {
        "tree_resolved": tree_resolved(job.tree.name, job.tree.params),
        **mode_columns(job.verify.name),
        "frontier_rule": frontier_rule(job.pair.drafter, job.tree.name, mode_rule),
    }


def _text(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"not a name: {value!r}")
    return value


def _row(r: Mapping, drafter: str | None) -> dict:
    """The described columns of one older row, by name ("" where a name is not registered: a plugin
    not imported here, or an entry since removed)."""
    out = dict.fromkeys(DESCRIBED, "")
    for fill in (
        lambda: {"tree_resolved": tree_resolved(r["tree"], tree_params(r["tree_params"], strict=True))},
        lambda: mode_columns(r["verify"]),
        lambda: {"frontier_rule": frontier_rule(str(drafter), r["tree"], _text(r["child_rule"]))},
    ):
        try:
            out.update(fill())
        except (KeyError, ValueError, TypeError):
            pass  # not registered here (or the row lacks the names): left empty
    return out


def pair_drafter(folder: str | None, pair: str) -> str | None:
    """The drafter of a row's pair: from its job folder's config.yaml (a paired mode's folder: its
    job's), else (no folder: a collected row) from conf/pair/<pair>.yaml; None when neither says."""
    job = [folder, os.path.join(folder, "..", "..")] if folder else []
    for path in (os.path.join(d, "config.yaml") for d in job):
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                return ((yaml.safe_load(fh) or {}).get("pair") or {}).get("drafter")
    preset = option_file("pair", str(pair))
    if preset is None:
        return None
    with open(preset, encoding="utf-8") as fh:
        return (yaml.safe_load(fh) or {}).get("drafter")


def complete(summary: pd.DataFrame, folder: str | None) -> pd.DataFrame:
    """``summary`` (one file's rows: a job ``folder``'s, or, None, collected ones) with every described column it lacks
    filled from the registries by name (``_row``); the key columns in ``columns.KEY_COLUMNS``'s
    order.  A file that has them all is returned as it is."""
    lacking = [c for c in DESCRIBED if c not in summary]
    if not lacking or summary.empty:
        return summary
    drafters: dict[str, str | None] = {}
    rows = []
    for r in summary.to_dict("records"):
        pair = str(r.get("pair", ""))
        if pair not in drafters:
            drafters[pair] = pair_drafter(folder, pair)
        rows.append(_row(r, drafters[pair]))
    out = summary.assign(**{c: [row[c] for row in rows] for c in lacking})
    return out[[c for c in KEY_COLUMNS if c in out] + [c for c in out if c not in KEY_COLUMNS]]
