#!/usr/bin/env bash
# One phase of the study plan alone, end to end: its sweeps (specbench/study/tools/plan.py), each through the
# launcher of SPECBENCH_LAUNCHER (joblib | slurm, scripts/sweeps.sh) with one progress bar, then collect
# into $OUT/results (SPECBENCH_OUT, default outputs/reference). OVERRIDES go to every sweep.
#   bash scripts/run_plan.sh PHASE [OVERRIDES...]            # PHASE: hour, extended or tiny
#   SPECBENCH_LAUNCHER=slurm bash scripts/run_plan.sh extended hydra.launcher.partition=cpu
#   SPECBENCH_OUT=/tmp/tiny SPECBENCH_LAUNCHER=joblib bash scripts/run_plan.sh tiny \
#       pair=local pair.draft.path=DRAFT_DIR pair.target.path=TARGET_DIR    # the tiny plan, any small pair
# The hour's and extended sweeps read what scripts/full_study.sh's earlier steps made (the Sequoia
# acceptance vectors); the full study runs them itself. Resumable: rerun the same command.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sweeps.sh   # first: an unknown launcher stops before anything is written
if [ $# -lt 1 ]; then
  echo "usage: bash scripts/run_plan.sh PHASE [OVERRIDES...]   (PHASE: hour, extended or tiny)" >&2
  exit 2
fi
phase=$1
shift
case "$phase" in
  hour | extended | tiny) ;;
  *) echo "specbench: error: PHASE=$phase: no such phase of the plan; use hour, extended or tiny" >&2; exit 2 ;;
esac
source scripts/steps.sh
$PY -m specbench.study.tools.eta --phases "$phase" --sweeps --out "$OUT" "$@"
plan_runs "$phase" "$@"
step "collect ($OUT/results)"
$PY -m specbench.collect "$OUT" --out "$OUT/results"
step "done in $(( $(date +%s) - START ))s: see $OUT/results"
