"""specbench: a speculative-decoding draft-tree benchmark.

Kept import-light on purpose (no torch here): ``python -m specbench.report``
must run without torch.
"""
__version__ = "0.1.0"
