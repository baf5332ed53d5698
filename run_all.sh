#!/usr/bin/env bash
# Reproduce results/ and REPORT.md from real runs of the embedded models.
#   bash run_all.sh                         # this machine's answer within SPECBENCH_MINUTES (default 45)
#   bash run_all.sh --plan-only             # measure the machine, print that plan with its ETAs, run nothing
#   SPECBENCH_STUDY=full bash run_all.sh    # the full study: regenerates every committed result
set -euo pipefail
cd "$(dirname "$0")"
if [ "${SPECBENCH_STUDY:-}" = full ]; then exec bash scripts/full_study.sh "$@"; fi
exec bash scripts/default_run.sh "$@"   # the default (scripts/default_run.sh: its steps and options)
