"""The row schema: the key columns every summary row carries, in their order (``KEY_COLUMNS``),
the described ones among them (``DESCRIBED``), the identifier columns read as text
(``TEXT_COLUMNS``), the configuration columns a derived table's row starts with (``CONFIG_COLUMNS``) THE reader of a row's tree parameters (``tree_params``), what they say about its size rule (``cost_aware``) and the name a merged drafter's tree is shown and timed by (``tree_label``).

``study.job.jobfiles`` writes rows in this order, ``study.job.describe`` computes the described columns and
fills them into older rows, ``results.files`` reads them and the report reads the rows.  Imports
the standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

# Where a derived table's row comes from: its pair, dataset and dtype, and the configuration (acceptance.COLUMNS,
# study.job.optimum.COLUMNS)
CONFIG_COLUMNS = ["pair", "dataset", "dtype", "config_hash", "tree", "tree_params", "budget"]

# What a row's registry entries declare, so the report reads data only (study.job.describe).
DESCRIBED = ("tree_resolved", "mode_family", "baseline_of", "token_level_on", "frontier_rule")

KEY_COLUMNS = [
    "config_hash",
    "run_id",
    "pair",
    "pair_id",
    "draft",
    "target",
    "tree",
    "tree_params",
    "budget",
    "verify",
    "lossless",
    "temperature",
    "draft_temperature",
    "top_p",
    "dataset",
    "seed",
    "max_new_tokens",
    "dtype",
    "device",
    "engine",
    "batch_size",
    "pair_key",
    "pair_role",
    "child_rule",
    "sibling_order",
    *DESCRIBED,
]
# pair_key: the config_hash of the decode whose drafted trees (and target rows) the row verified;
# pair_role: "decode" (the mode the decode followed) or "paired" (a verify.paired_with mode on
# those trees).  Rows sharing a pair_key were verified on the same trees.
# child_rule, sibling_order: how the row's mode drafts and tries siblings (verify.modespec.row_tags).


# identifier columns stay text: a hash like 3726142e8142 would otherwise be read as a float.  The key
# columns that are not numbers or flags, and the step rows' own text columns.
NOT_TEXT = {
    *("budget", "lossless", "temperature", "draft_temperature", "top_p", "seed", "max_new_tokens", "batch_size"),
    *("dtype", "device"),  # text, but never read as numbers: left to pandas as before
}
TEXT_COLUMNS = {
    c: str
    for c in [
        *(k for k in KEY_COLUMNS if k not in NOT_TEXT),
        *("prompt_id", "accept_path", "role", "path_children", "scored"),
        *("machine_id", "host"),  # hex digests: an all-digit one would lose its zeros, 12e45... read as a float
    ]
}


def cost_aware(tree, params) -> bool:
    """Whether a row's tree is Sequoia's hardware-aware size (``tree.costs`` given): its budget is an
    upper bound, the tree it builds is what the DP picked on the cost curves (``trees.sequoia``)."""
    return str(tree) == "sequoia" and bool(tree_params(params).get("costs"))


def tree_params(params, strict: bool = False) -> dict:
    """THE reader of a row's ``tree_params`` (JSON text, as every summary row writes it, or a mapping): a dict, {}
    where it is empty or missing (NaN).  Text that is not a JSON object is {} (lenient: what a row's labels read)
    or, with ``strict`` (what a row's tree is rebuilt from), a ValueError naming it."""
    if isinstance(params, Mapping):
        return dict(params)
    if not isinstance(params, str) or not params:
        return {}
    try:
        p = json.loads(params)
    except json.JSONDecodeError:
        if strict:
            raise ValueError(f"tree_params={params!r} is not JSON") from None
        return {}
    if not isinstance(p, dict):
        if strict:
            raise ValueError(f"tree_params={params!r} is not a JSON object")
        return {}
    return p


def tree_label(tree, params) -> str:
    """'merged:<shape>' for the merged drafter (tree_params {"shape": "binary", ...} -> 'merged:binary'; the
    default inner shape, chain, where none is given), as the report shows it and ``study.job.launch.compose_tree``
    reads it; any other tree as it is."""
    return f"merged:{tree_params(params).get('shape', 'chain')}" if str(tree) == "merged" else str(tree)
