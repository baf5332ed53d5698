"""Layer 1, the results: what the study writes and the report reads, torch-free.  The row schema
(``columns``: the key and described columns, the text columns), one reader and one writer per
results file (``files``: the specbench CSV, the outputs file) with each file's optional columns decided
once (``optional``), a job's metrics and the paired
bootstrap (``metrics``), the forward-cost curves by named rules (``costcurve``) and the derived
tables the study and the report both read (``acceptance``, ``schedule``, ``speedstats``), the
reference study's plan with its size floors (``plan``), the acceptance-sample check's verdict
(``acceptcheck``) and the lossless check's power (``power``).  pandas, numpy and scipy; no torch.
Imports core."""
