"""`python -m specbench.report`: rebuild results/figures/ and REPORT.md (specbench.report.build)."""

from specbench.report.build import main

raise SystemExit(main())
