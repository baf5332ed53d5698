"""specbench: a speculative-decoding draft-tree benchmark.

Kept import-light on purpose (no torch here): ``python -m specbench.report``
must run without torch.
"""

__version__ = "0.1.0"

import os as _os

# conf/ beside the package: every Hydra app (run, costs, attention_bench) and launch.py read it from here,
# so `python -m specbench.run` finds it from any working directory.
CONF_DIR = _os.path.join(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))), "conf")
