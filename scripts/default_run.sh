#!/usr/bin/env bash
# The default run (bash run_all.sh): this machine's answer within a time budget.
#   bash run_all.sh                          # SPECBENCH_MINUTES (default 45) on this machine
#   bash run_all.sh --plan-only              # measure the machine, print the plan, run nothing
#   SPECBENCH_DTYPE=float32 bash run_all.sh  # the costs and speed steps in this dtype, not the measured one
#   SPECBENCH_PROFILE=tiny SPECBENCH_TINY_PAIR=DRAFT_DIR:TARGET_DIR bash run_all.sh
#                                            # every step on a tiny local pair (tests/test_run_all.py);
#                                            # SPECBENCH_TINY_GGUF=DRAFT.gguf:TARGET.gguf: llama.cpp's step on them too
# Set-up; the machine measured (dtype=auto and its rates: specbench/inputs/machine.py); the plan
# (specbench/study/tools/budget.py: which pairs, candidates, prompts and attention grid fit the minutes
# left, each step's ETA, into $OUT/plan.json); this machine's forward costs for the plan's pairs; the
# acceptance-sample check (specbench/study/tools/recheck.py: a fixed stratified sample of the committed
# greedy configurations re-derived in their dtype at their committed batch, on the prompts of their
# run, as many as the plan fits; compared step by step: one PASS/FAIL line, acceptance_check.csv); the
# tree-attention grid the plan sized; the interleaved speed benchmark for the plan's pairs x datasets,
# each stopping at the plan's deadline (so an earlier step's overrun costs prompts, not minutes);
# llama.cpp's benchmark for the main pair with its cost curve, where the plan fits it and llama.cpp is built
# (specbench/study/tools/llamaplan.py; else one line saying why), stopping at its deadline too;
# the run's record; each step's time beside its ceiling; report (its own time recorded after it).  No collect: no step writes a job folder
# (each writes its own results/ file), and every committed row is kept as it is.
# Every committed row this run does not re-measure is kept.  Resumable: a finished step leaves a
# marker in $OUT and is skipped by the next run (start over: rm -r outputs/default).
set -euo pipefail
cd "$(dirname "$0")/.."
PLAN_ONLY=${SPECBENCH_PLAN_ONLY:-}
for a in "$@"; do
  case "$a" in
    --plan-only) PLAN_ONLY=1 ;;
    *) echo "run_all.sh: unknown option '$a' (valid: --plan-only)" >&2; exit 2 ;;
  esac
done
PROFILE=${SPECBENCH_PROFILE:-real}
MINUTES=${SPECBENCH_MINUTES:-45}
if ! [[ "$MINUTES" =~ ^[0-9]+([.][0-9]+)?$ ]] || [ "$(echo "$MINUTES" | tr -d 0.)" = "" ]; then
  echo "run_all.sh: SPECBENCH_MINUTES=$MINUTES: must be a number of minutes > 0 (e.g. SPECBENCH_MINUTES=45)" >&2; exit 2
fi
case "$PROFILE" in
  real) export SPECBENCH_OUT=${SPECBENCH_OUT:-outputs/default}; RESULTS=results; REPORT=REPORT.md
        PAIR=(); DTYPE_ARG=(${SPECBENCH_DTYPE:+--dtype "$SPECBENCH_DTYPE"}); ATTN=(); LLAMA_MODELS=() ;;
  tiny) export SPECBENCH_OUT=${SPECBENCH_OUT:-outputs/tiny}; RESULTS=$SPECBENCH_OUT/results; REPORT=$SPECBENCH_OUT/REPORT.md
        if [[ "${SPECBENCH_TINY_PAIR:-}" != *:* ]]; then
          echo "run_all.sh: SPECBENCH_PROFILE=tiny needs SPECBENCH_TINY_PAIR=DRAFT_DIR:TARGET_DIR (two local model folders)" >&2; exit 2
        fi
        PAIR=(pair=local "pair.draft.path=${SPECBENCH_TINY_PAIR%%:*}" "pair.target.path=${SPECBENCH_TINY_PAIR#*:}" device=cpu)
        DTYPE_ARG=(--dtype float32); ATTN=(repeats=2 min_repeats=1 warmup=1 max_seconds=0.05 check=false bandwidth_mb=16 matmul_n=256)
        DTYPE_ARG+=(${SPECBENCH_TINY_GGUF:+--gguf "$SPECBENCH_TINY_GGUF"})  # the plan's llama.cpp stage: its files
        GGUF=${SPECBENCH_TINY_GGUF:-}; LLAMA_MODELS=("${GGUF%%:*}" "${GGUF#*:}") ;;
  *) echo "run_all.sh: SPECBENCH_PROFILE=$PROFILE: must be real or tiny (e.g. SPECBENCH_PROFILE=tiny)" >&2; exit 2 ;;
esac
case "${SPECBENCH_DTYPE:-}" in
  ""|float32) ;;
  bfloat16) if [ "$PROFILE" = tiny ]; then
              echo "run_all.sh: SPECBENCH_DTYPE=bfloat16: the tiny profile runs float32; unset it or give float32" >&2; exit 2
            fi ;;
  *) echo "run_all.sh: SPECBENCH_DTYPE=$SPECBENCH_DTYPE: must be bfloat16 or float32 (the dtypes the machine step measures)" >&2; exit 2 ;;
esac
case "$SPECBENCH_OUT" in  # Hydra's overrides carry no whitespace: refused now, not after the models load
  *[[:space:]]*) echo "run_all.sh: SPECBENCH_OUT='$SPECBENCH_OUT': a path with a space; give a folder without one" >&2; exit 2 ;;
esac
SPECBENCH_OUT=$(realpath -m -- "$SPECBENCH_OUT")  # one absolute folder, whatever folder a step runs in ('..' resolved)
export SPECBENCH_OUT
where=$SPECBENCH_OUT; while [ ! -e "$where" ]; do where=$(dirname "$where"); done  # a file made where it will be
if [ ! -d "$where" ] || ! probe=$(mktemp -p "$where" .specbench-probe.XXXXXX 2>/dev/null); then
  echo "run_all.sh: SPECBENCH_OUT=$SPECBENCH_OUT: $where is not a folder a file can be written in; give a writable folder" >&2; exit 2
fi
rm -f "$probe"
if [ "$PROFILE" = tiny ]; then RESULTS=$SPECBENCH_OUT/results; REPORT=$SPECBENCH_OUT/REPORT.md; fi
# a run to resume was planned for its own minutes and dtype: another budget is a new run (start over)
if [ -z "$PLAN_ONLY" ] && [ -f "$SPECBENCH_OUT/plan.json" ]; then
  python3 - "$SPECBENCH_OUT" "$MINUTES" "${SPECBENCH_DTYPE:-}" <<'PY' || exit 2
import json, sys
out, minutes, dtype = sys.argv[1:]
try:
    kept = json.load(open(f"{out}/plan.json"))
    was, was_dtype = float(kept["minutes"]), str(kept["dtype"])
except (OSError, ValueError, KeyError, TypeError) as e:
    sys.exit(f"run_all.sh: {out}/plan.json: not a plan ({type(e).__name__}); start over: rm -r {out}")
if was != float(minutes) or (dtype and dtype != was_dtype):
    key, now, then = ("SPECBENCH_MINUTES", minutes, f"{was:g}") if was != float(minutes) else ("SPECBENCH_DTYPE", dtype, was_dtype)
    sys.exit(f"run_all.sh: {key}={now}: {out} holds a run planned with {key}={then}; resume it with {key}={then}, "
             f"or start over: rm -r {out}")
PY
fi
source scripts/steps.sh
[ -n "$PLAN_ONLY" ] && TIMES=/dev/null   # a preview times no step: a later run's record starts with its own
PY=.venv/bin/python
mkdir -p "$RESULTS"

if [ -z "$PLAN_ONLY" ]; then
  step "set-up (environment + embedded models)"
  if [ "$PROFILE" = tiny ]; then bash scripts/setup.sh --no-models; else bash scripts/setup.sh; fi
elif [ ! -x "$PY" ]; then  # the plan needs the environment (torch measures the machine), not the models
  step "set-up (environment only: --plan-only)"
  bash scripts/setup.sh --no-models
fi

step "the machine measured (dtype=auto and its rates, \$OUT/machine.json)"
$PY -m specbench.inputs.machine --out "$OUT/machine.json"

if [ "$PROFILE" = tiny ]; then  # the tiny pair's own "committed" rows: what its acceptance sample re-derives
  step "tiny: the reference rows of the tiny pair (\$OUT/results)"
  once tiny_seed $PY -m specbench.run -m "${PAIR[@]}" dtype=float32 dataset=smoke dataset.limit=2 batch_size=2 \
    max_new_tokens=8 engine=replay verify=greedy tree=binary tree.budget=2 progress=false out_root="$OUT/seed" \
    hydra.sweep.dir="$OUT/seed/multirun" < /dev/null
  once tiny_seed_collect $PY -m specbench.collect "$OUT/seed" --out "$RESULTS"
fi

step "the plan: what fits ${MINUTES} min here (\$OUT/plan.json)"
PLAN="$OUT/plan.json"
[ -n "$PLAN_ONLY" ] && PLAN="$OUT/plan.preview.json"
if [ -f "$PLAN" ] && [ -z "$PLAN_ONLY" ]; then
  echo "kept the plan of an earlier run ($PLAN; start over: rm -r $OUT)"
else
  $PY -m specbench.study.tools.budget plan --machine "$OUT/machine.json" --minutes "$MINUTES" \
    --spent $(( $(date +%s) - START )) --profile "$PROFILE" --results "$RESULTS" "${DTYPE_ARG[@]}" --out "$PLAN"
fi
[ -n "$PLAN_ONLY" ] && exit 0
get() { $PY -m specbench.study.tools.budget get "$PLAN" "$1"; }
DTYPE=$(get dtype)

step "forward costs of the plan's pairs on this machine (costs.csv)"
if [ "$PROFILE" = tiny ]; then COSTS_PAIRS=(); else COSTS_PAIRS=("+costs_pairs=$(get costs_pairs)"); fi
once costs $PY -m specbench.study.tools.costs "${PAIR[@]}" dtype="$DTYPE" "+costs_repeats=$(get costs_repeats)" \
  "${COSTS_PAIRS[@]}" "+costs_dtypes=[$DTYPE]" "+costs_kv_lens=$(get kv_lens)" "+costs_max_tokens=$(get costs_max_tokens)" "+results_dir=$RESULTS" \
  hydra.run.dir="$OUT/costs"

step "the acceptance-sample check: committed configurations re-derived (acceptance_check.csv)"
if [ ! -f "$OUT/recheck_jobs.txt" ]; then  # the plan's configurations, each in its committed run
  $PY -m specbench.study.tools.recheck jobs --results "$RESULTS" --only "$(get recheck_configs)" \
    --cache "$OUT/replay_cache" --pair-overrides "${PAIR[*]}" > "$OUT/recheck_jobs.tmp" \
    && mv "$OUT/recheck_jobs.tmp" "$OUT/recheck_jobs.txt"
fi
i=0
while read -r job; do
  i=$((i + 1))
  # shellcheck disable=SC2086  # one job's overrides, word-split on purpose
  once "recheck_$i" $PY -m specbench.run $job out_root="$OUT/recheck" hydra.run.dir="$OUT/recheck/$i" < /dev/null
done < "$OUT/recheck_jobs.txt"
once recheck_compare $PY -m specbench.study.tools.recheck compare --results "$RESULTS" --runs "$OUT/recheck" \
  --out "$RESULTS/acceptance_check.csv" --machine "$OUT/machine.json"

GRID=$(get grid)
step "tree-attention benchmark, grid=$GRID (attention.csv)"
VIEW=false; [ "$GRID" = default ] && VIEW=true   # the real 1.5B model's view with the full grid only
if [ "$GRID" != none ]; then
  once attention $PY -m specbench.attention_bench grid="$GRID" model_view=$VIEW merge=true \
    out_csv="$RESULTS/attention.csv" fig_dir="$OUT/attention_figures" progress=false "${ATTN[@]}"
fi

step "the speed benchmark: the plan's candidates, interleaved with plain decoding (speed.csv)"
while IFS=$'\t' read -r pair ds n tok cands after; do
  [ -n "$pair" ] || continue
  # it takes no prompt it cannot end before the budget's end less the steps after it (the plan's after_s)
  UNTIL=$(awk -v s="$START" -v m="$MINUTES" -v a="$after" 'BEGIN { printf "%d", s + m * 60 - a }')
  if [ "$PROFILE" = tiny ]; then P=("${PAIR[@]}"); else P=("pair=$pair"); fi
  once "speed_${pair}_${ds}" $PY -m specbench.study.tools.speed "${P[@]}" dataset="$ds" dataset.limit="$n" \
    max_new_tokens="$tok" dtype="$DTYPE" batch_size=1 "+speed_candidates=$cands" +speed_rounds=1 "+speed_until=$UNTIL" \
    "+results_dir=$RESULTS" hydra.run.dir="$OUT/speed/${pair}_${ds}" < /dev/null
done <<< "$(get speed)"

LLAMA=$(get llamacpp)
step "llama.cpp's benchmark for the main pair and its cost curve (speed.csv, costs.csv: engine=llamacpp)"
if [ -z "$LLAMA" ]; then
  get llamacpp_why
else
  IFS=$'\t' read -r pair ds n tok cands after <<< "$LLAMA"
  UNTIL=$(awk -v s="$START" -v m="$MINUTES" -v a="$after" 'BEGIN { printf "%d", s + m * 60 - a }')
  if [ "$PROFILE" = tiny ]; then  # the tiny GGUF files, prompted as text (their vocabulary is not the pair's)
    P=("${PAIR[@]}" "+llamacpp_draft=${LLAMA_MODELS[0]}" "+llamacpp_target=${LLAMA_MODELS[1]}" +llamacpp_prompts=text +llamacpp_ctx=256)
    C=(--draft "${LLAMA_MODELS[0]}" --target "${LLAMA_MODELS[1]}")
  else P=("pair=$pair"); C=(); fi
  # shellcheck disable=SC2046  # the plan's costs_llamacpp options, word-split on purpose
  once llamacpp_costs $PY -m specbench.study.tools.costs_llamacpp $(get llamacpp_costs) "${C[@]}" --results "$RESULTS"
  once llamacpp_speed $PY -m specbench.study.tools.speed_llamacpp "${P[@]}" dataset="$ds" dataset.limit="$n" \
    max_new_tokens="$tok" "+llamacpp_candidates=$cands" +speed_rounds=1 "+speed_until=$UNTIL" "+results_dir=$RESULTS" \
    hydra.run.dir="$OUT/llamacpp" < /dev/null
fi

step "the run's record (default_run.json)"
once record $PY -m specbench.study.tools.budget record "$PLAN" --check "$RESULTS/acceptance_check.csv" \
  --speed "$RESULTS/speed.csv" --out "$RESULTS/default_run.json"
CEILING=($PY -m specbench.study.tools.ceiling --times "$TIMES" --forwards "$SPECBENCH_FORWARDS"
  --costs "$RESULTS/costs.csv" --out "$RESULTS/run_times.csv" --machine "$OUT/machine.json" --dtype "$DTYPE")
step "each step's ceiling (run_times.csv)"
once ceiling "${CEILING[@]}"
step "the report ($REPORT; its own time into run_times.csv after it)"
once report $PY -m specbench.report --results "$RESULTS" --out "$REPORT"
end_step   # the report's seconds: what the next plan on this machine sizes its report by (study.tools.budget)
once report_time "${CEILING[@]}"
echo; echo "== [run_all $(( $(date +%s) - START ))s] done: see $REPORT"
