"""Layer 2, tree policies: what tree to draft each step (static shapes, adaptive chain, Sequoia DP,
EAGLE-2, n-gram trie, merged, none), in ONE registry.  Imports core and results
(``results.costcurve``: Sequoia's hardware-aware size reads its forward-cost curves; ``results.files``:
the acceptance vector's checked read)."""
