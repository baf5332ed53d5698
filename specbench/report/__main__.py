"""`python -m specbench.report`: rebuild results/figures/ and REPORT.md (specbench.report.build)."""
import sys

from specbench.report.build import main

sys.exit(main())
