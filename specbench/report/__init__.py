"""Layer 8, the report: analysis (every number), paired comparisons, figures and REPORT.md from
results/*.csv (pandas, matplotlib and jinja2; no torch).  Imports core, results (the row schema, the
files' readers and writers, the metrics, the cost curves, the derived tables, the reference plan
with its floors, the acceptance check's verdict, the lossless check's power, the ranking and the
batch-size schedule: what the measuring commands share with it) and attention (attention.heatmap:
the speed-up heatmap the benchmark draws too; no torch)."""
