"""Layer 7, the report: analysis (every number), paired comparisons, figures and REPORT.md from
results/*.csv (pandas + matplotlib, no torch).  Imports only study.results and core."""
