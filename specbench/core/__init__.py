"""Layer 0, core: the draft tree (parent pointers, static rank-path shapes, the ONE tree mask and
position ids), KV forwards over a tree, sampling arithmetic, the registry, atomic writes and the
content-addressed disk cache, and a registry entry's config option (``options``: Hydra's
ConfigStore).  Imports nothing from specbench but ``CONF_DIR`` (``options``)."""
