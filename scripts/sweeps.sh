# Shared by scripts/full_study.sh and scripts/run_plan.sh (sourced, not run; the caller has cd'd to the
# repository root): the launcher every sweep of the study plan goes through, and plan_runs. Source it
# BEFORE scripts/steps.sh: an unknown launcher stops here, before anything runs or is written.
#   SPECBENCH_LAUNCHER=joblib   local worker processes (hydra/launcher=joblib; hydra.launcher.n_jobs=N)
#   SPECBENCH_LAUNCHER=slurm    a SLURM array per sweep (hydra/launcher=slurm: conf/hydra/launcher/slurm.yaml,
#                               submitit); docs/cluster.md
#   unset                       Hydra's basic launcher: one job after another in the sweep's own process
PY=${PY:-.venv/bin/python}
case "${SPECBENCH_LAUNCHER:-}" in
  "") LAUNCH=() ;;
  joblib) LAUNCH=(hydra/launcher=joblib) ;;
  slurm) LAUNCH=(hydra/launcher=slurm) ;;
  *)
    echo "specbench: error: SPECBENCH_LAUNCHER=${SPECBENCH_LAUNCHER}: no such launcher; use joblib or slurm (unset: one job after another here)" >&2
    exit 2
    ;;
esac

launcher_only() {  # launcher_only ARGS...: the study's own arguments may only set the launcher (else exit 2)
  local a
  for a in "$@"; do
    case "$a" in
      hydra/launcher=*)
        if [ -n "${SPECBENCH_LAUNCHER:-}" ]; then
          echo "specbench: error: $a: SPECBENCH_LAUNCHER=$SPECBENCH_LAUNCHER already picks the launcher; give one of the two" >&2
          exit 2
        fi ;;
      hydra.launcher.*=*) ;;
      *)
        echo "specbench: error: $a: the study's arguments set its sweeps' launcher only (hydra/launcher=NAME, hydra.launcher.KEY=VALUE); docs/cluster.md" >&2
        exit 2 ;;
    esac
  done
}

plan_runs() {  # plan_runs PHASE [OVERRIDES...]: every sweep of the study plan's PHASE (specbench/study/tools/plan.py),
  # in its order, through the launcher above, each with one progress bar (study.job.progress); OVERRIDES go to
  # every sweep. Resumable: a finished job (same config hash) is skipped.
  local runs part folder preset r phase=$1
  shift
  runs=$($PY -m specbench.study.tools.plan runs --phase "$phase")   # one line per sweep: part, folder, preset, overrides
  while IFS=$'\t' read -r -a r; do
    part=${r[0]}; folder=${r[1]}; preset=${r[2]}
    step "${TAG:-}study: part $part: sweep=$preset ${r[*]:3}"
    $PY -m specbench.run -m sweep="$preset" out_root="$OUT" hydra.sweep.dir="$OUT/$folder" "${r[@]:3}" \
      hydra.callbacks.progress.bar=true ${LAUNCH[@]+"${LAUNCH[@]}"} "$@" < /dev/null
  done <<< "$runs"
}
