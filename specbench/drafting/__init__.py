"""Layer 4, drafters: the reset / draft / commit protocol and its model, n-gram, merged,
cross-vocabulary (tli) and layer-skip drafters; each grows the tree-policy kinds it supports.
Imports core, trees."""

from . import crossvocab, drafters, layerskip, merged, ngram  # noqa: E402,F401  (each registers itself in drafters.DRAFTERS)
