"""Layer 1, tree policies: what tree to draft each step (static shapes, adaptive chain, Sequoia DP,
EAGLE-2, n-gram trie, merged, none), in ONE registry.  Imports only core."""
