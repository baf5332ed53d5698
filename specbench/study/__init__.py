"""Layer 6, the study: typed job spec (the config read once, validated before any model loads), run,
calibrate, costs, identity, launch, collect, lossless check, divergence margins.  Imports every layer
below; nothing imports it but report."""

from . import resolvers  # noqa: E402,F401  (conf/config.yaml's folder resolvers)
