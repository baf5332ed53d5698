"""The row schema: the key columns every summary row carries, in their order (``KEY_COLUMNS``),
and the described ones among them (``DESCRIBED``).

Plain names, no computation: ``study.results`` writes rows in this order, ``study.describe``
computes the described columns and fills them into older rows, and the report reads them.
Imports nothing.
"""

# What a row's registry entries declare, so the report reads data only (study.describe).
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
