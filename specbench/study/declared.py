"""Registry declarations the report reads, as torch-free data.

The report imports no torch (tests/test_report.py) and only report, study and core
(tests/test_layers.py), while the registries that declare these (``trees``, ``drafting``)
load torch.  So the few declarations the report needs are copied here, and
tests/test_registries.py checks each copy equals what its registry declares: a policy
registered with a new declaration fails that test until it is copied here.
"""

from __future__ import annotations

# static tree policy -> the defaults of its shape-defining parameters (``Params`` fields that a
# report label shows: not None, not the Sequoia vector or calibration keys), as JSON values; a
# merged tree records only the ``tree.*`` keys given to its model part, the rest are these
SHAPE_DEFAULTS: dict[str, dict] = {
    "eagle2": {"width": 10, "depth": 6},
    "kary": {"width": 3},
    "specinfer": {"expansion": [1, 1, 3, 1, 1, 1, 1, 1]},
    "topk_wide": {"width": 4},
}


def shape_defaults(tree: str) -> dict:
    """The default shape-defining ``tree.*`` parameters of tree policy ``tree`` (may be empty)."""
    return dict(SHAPE_DEFAULTS.get(str(tree), {}))
