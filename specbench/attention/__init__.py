"""The tree-attention benchmark (beside the study): fused / sequential / flex attention over one tree
mask across batch, KV length and draft length.  Imports core, results (``upsert``: the merge rule; ``files``: the checked read of its CSV), trees, inputs and study (``study.job.argv``:
the command-line checks, the top-level keys and the one-line Hydra errors ``run`` uses too; ``study.job.errors``:
an integer option read as the study reads one)."""
