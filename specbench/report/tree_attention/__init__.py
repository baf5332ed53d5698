"""REPORT.md's tree-attention subsection (the analysis page), in one place: its numbers (`stats`),
its sentences and per-cell table (`text`), its five figures (`figures`) and the subsection itself
(`section`), from results/attention.csv and results/attention_threads1.csv."""
