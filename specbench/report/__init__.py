"""Layer 7, the report: analysis (every number), paired comparisons, figures and REPORT.md from
results/*.csv (pandas + matplotlib, no torch).  Imports core and three torch-free study modules:
study.results (the CSV readers and writer), study.declared (registry declarations as data) and
study.lossless_power (the lossless check's power)."""
