"""The serving bridge: a configuration as a serving engine's settings (``export``, ``engines``,
``engine_rules``) and a server's measurements back into results/ (``import_metrics``).  Imports core,
results, trees, drafting, inputs and the job (the batch-size schedule is ``results.schedule``'s)."""
