#!/usr/bin/env bash
# Reproduce results/ and REPORT.md from real runs of the embedded models.
#   bash run_all.sh                         # this machine's answer (default)
#   SPECBENCH_STUDY=full bash run_all.sh    # the full study: regenerates every committed result
set -euo pipefail
cd "$(dirname "$0")"
if [ "${SPECBENCH_STUDY:-}" = full ]; then exec bash scripts/full_study.sh "$@"; fi
exec bash scripts/full_study.sh "$@"   # placeholder: the default part (#52 item 2) replaces this line
