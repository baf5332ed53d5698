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
# -n auto --dist loadgroup (pytest-xdist): one worker per core; the tests that load the installed models
# share one worker (tests/conftest.py), so each real model is loaded once; -rs: one line per skip reason;
# --durations=15: the slowest tests, last (where the suite's 15 minutes go).  --fast (first argument): the
# edit-test loop's tier, the tests marked `slow` (tests/conftest.py's SLOW), `real` and `slurm` left out.
if [ "${1:-}" = "--fast" ]; then
  shift
  exec .venv/bin/python -m pytest -q -rs --durations=15 -n auto --dist loadgroup -m "not slow and not real and not slurm" "$@"
fi
exec .venv/bin/python -m pytest -q -rs --durations=15 -n auto --dist loadgroup "$@"
