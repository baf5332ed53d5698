"""Layer 7, the report: analysis (every number), paired comparisons, figures and REPORT.md from
results/*.csv (pandas, matplotlib and jinja2; no torch).  Imports core, torch-free study modules
(study.results and study.columns: the CSV readers, writer and row schema; study.describe: the
columns in which rows describe their registry entries, computed from the registries only when
called; study.lossless_power, study.plan, study.schedule, study.speedstats and study.recheck: the
derived tables the study commands share) and attention (attention.heatmap: the speed-up heatmap
the benchmark draws too; no torch)."""
