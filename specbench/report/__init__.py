"""Layer 8, the report: analysis (every number), paired comparisons, figures and REPORT.md from
results/*.csv (pandas, matplotlib and jinja2; no torch).  Imports core, results (the row schema,
the files' readers and writers, the metrics, the cost curves and the derived tables), torch-free
study modules (study.tools.lossless_power, study.tools.plan, study.tools.speedsched and study.tools.recheck: what the study
commands share with it) and attention (attention.heatmap: the speed-up heatmap the benchmark draws
too; no torch)."""
