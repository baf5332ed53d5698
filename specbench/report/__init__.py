"""Layer 7, the report: analysis (every number), paired comparisons, figures and REPORT.md from
results/*.csv (pandas, matplotlib and jinja2; no torch).  Imports core and three torch-free study modules:
study.results (the CSV readers and writer), study.describe (the names of the columns in which
rows describe their registry entries; it imports the registries only when it computes them) and
study.lossless_power (the lossless check's power)."""
