"""Layer 7, the study: typed job spec (the config read once, validated before any model loads), run,
calibrate, costs, identity, launch, collect, lossless check, divergence margins, export.  Imports every
layer below (core, results, trees, verify, drafting, engine, inputs).  Imported by report (its torch-free
modules), attention (``argv``) and the top-level entry points (``specbench.api``, ``specbench.run`` ...)."""

from . import resolvers  # noqa: E402,F401  (conf/config.yaml's folder resolvers)
