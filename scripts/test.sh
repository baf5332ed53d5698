#!/usr/bin/env bash
# Run the test suite: set up the env (not the models), the static checks (scripts/check.sh: ruff lint,
# ruff format --check, mypy; the first failure stops here), then pytest with passthrough args.
# Tests marked `real` skip unless the embedded models are installed (bash scripts/setup.sh).
# The test marked `slurm` starts a one-node SLURM cluster with scripts/slurm_local.sh (root: apt-get
# installs slurm-wlm + munge, ~15 s) and stops it by PID; where that fails it is skipped with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --no-models
bash scripts/check.sh
if ! .venv/bin/python -m specbench.inputs.embedded status; then
  echo "[test] embedded models not installed: tests marked 'real' will be skipped"
fi
exec .venv/bin/python -m pytest -q -rs "$@"     # -rs: one line per skip reason
