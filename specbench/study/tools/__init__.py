"""The study's measurement tools and plan, each a command over jobs: forward costs, calibration, the
lossless check and its power, divergence margins, compute ceilings, the live validation and the
interleaved speed benchmark with its batch-size schedule, the acceptance-sample recheck, the study
plan, its time estimate and the default run's budget.  Imports core, results, trees, verify,
drafting, engine, inputs and the job.  The serving bridge sits above the tools: they never import it."""
