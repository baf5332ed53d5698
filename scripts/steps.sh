# Shared by run_all.sh and scripts/full_study.sh (sourced, not run): the output folder, each step's
# wall time (step) and the once-only markers (once). The caller has cd'd to the repository root.
START=$(date +%s)
OUT=${SPECBENCH_OUT:-outputs/reference}
mkdir -p "$OUT"
TIMES="$OUT/step_times.csv"   # each step's wall time, every run (a resumed run appends), with its ceiling
[ -f "$TIMES" ] || echo "run,step,seconds" > "$TIMES"    # in results/run_times.csv (study.tools.ceiling)
STEP=""; STEP_T=$START
# every model's forwards and tokens, per step (specbench/core/forwards.py): each step's compute ceiling
SPECBENCH_FORWARDS="$(cd "$OUT" && pwd)/forwards.csv"
[ -f "$SPECBENCH_FORWARDS" ] || echo "run,step,model,forwards,tokens" > "$SPECBENCH_FORWARDS"  # study.tools.ceiling refuses none
export SPECBENCH_FORWARDS SPECBENCH_RUN=$START SPECBENCH_STEP=""
end_step() {  # ends the current step: its wall time to $TIMES
  local now; now=$(date +%s)
  if [ -n "$STEP" ]; then printf '%s,"%s",%s\n' "$START" "$STEP" $(( now - STEP_T )) >> "$TIMES"; fi
  STEP=""; STEP_T=$now; SPECBENCH_STEP=""
}
step() {  # step MESSAGE: ends the previous step (end_step), starts the next
  end_step
  STEP="$*"; SPECBENCH_STEP="$STEP"
  echo; echo "== [run_all $(( STEP_T - START ))s] $*"
}
once() {  # once NAME CMD...: run CMD unless an earlier run_all finished it
  local marker="$OUT/$1.done"; shift
  if [ -f "$marker" ]; then echo "already done ($marker)"; else "$@"; touch "$marker"; fi
}
