#!/usr/bin/env bash
# The full study (SPECBENCH_STUDY=full bash run_all.sh): regenerates every committed result.
# Idempotent and resumable: finished sweep jobs (same config hash) are skipped on a rerun, other
# finished steps leave a marker in $OUT, and the replay engine's target continuations are cached
# on disk ($SPECBENCH_CACHE, default ~/.cache/specbench).  Start over: rm -r outputs/reference
# Its arguments set the launcher of every sweep of the plan (scripts/sweeps.sh, docs/cluster.md):
#   SPECBENCH_STUDY=full SPECBENCH_LAUNCHER=slurm bash run_all.sh hydra.launcher.partition=cpu
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sweeps.sh   # first: an unknown launcher or argument stops before anything runs or is written
launcher_only "$@"
source scripts/steps.sh
# every committed result: the hour and the extended part (SPECBENCH_EXTENDED= , set empty, runs the hour alone)
SPECBENCH_EXTENDED=${SPECBENCH_EXTENDED-1}

PHASES=hour${SPECBENCH_EXTENDED:+,extended}${SPECBENCH_POWER90:+,power90}
print_plan() {  # each step, its jobs and its expected time from the recorded run times, and the total
  [ -n "${PLANNED:-}" ] && return
  PLANNED=1
  $PY -m specbench.study.tools.eta --phases "$PHASES" --times results/run_times.csv --out "$OUT"
}
# before anything runs where the environment is set up; on a fresh clone right after set-up
if [ -x "$PY" ]; then print_plan; fi
step "set-up (environment + embedded models)"
bash scripts/setup.sh
PY=.venv/bin/python
print_plan

step "forward costs per pair (bf16, the study's dtype) and the environment (results/costs.csv, results/environment.json)"
# the machine first (its identity names every step's row in results/run_times.csv; study.tools.ceiling reads its
# cost rows alone); then one process: a model shared by pairs (the 1.5B target) is measured once
once machine $PY -m specbench.inputs.machine --out "$OUT/machine.json"
# 7 repeats of every forward shape, interleaved across shapes, at KV lengths 128 and 512
once costs $PY -m specbench.study.tools.costs pair=qwen_coder +costs_repeats=7 \
  '+costs_pairs=[ngram_qwen,merged_qwen,smollm_qwen,gemma_qwen,qwen_skip,qwen_coder,smollm_qwen05,gemma_qwen05,ngram_qwen05,qwen05_skip]' \
  '+costs_dtypes=[bfloat16]' hydra.run.dir="$OUT/costs"

step "Sequoia acceptance vectors (results/acceptance_vector.csv) on each dataset's LAST 16 prompts"
# disjoint from the scored first ones; bf16 (the study's dtype by measurement, docs/engines.md),
# the prompts' continuations in batches of 4
calibrate() {  # calibrate PAIR DATASET
  once "calibrate_$1_$2" $PY -m specbench.study.tools.calibrate pair=$1 verify=greedy dtype=bfloat16 dataset=$2 \
    dataset.limit=16 max_new_tokens=64 batch_size=4 out_root="$OUT"
}
for ds in humaneval stdlib_code mt_bench; do calibrate qwen_coder $ds; done
for ds in humaneval mt_bench; do calibrate qwen_skip $ds; done
# the cross-vocabulary pairs (their grids replay by ranks now) and the second target's pairs (#34 item 8)
for p in smollm_qwen gemma_qwen smollm_qwen05 gemma_qwen05 ngram_qwen05 qwen05_skip; do
  for ds in humaneval mt_bench; do calibrate $p $ds; done
done

# The hour, in the issue's priority order (#23; REPORT.md's limitations price every floor left out):
# greedy (bf16, 128 new tokens, replayed against each prompt's cached target continuation) for qwen_coder's
# 8 static shapes x budgets 1..64 on 3 datasets (1), Sequoia sized for this machine, EAGLE-2 (1b), the
# n-gram (1c) and merged (1d) drafters, the layer-skip (2) and cross-vocabulary (2b) pairs, the second
# target; live speed at batch 8 (4) and the batch-size schedule (plain and chain N=1..6 at B=1..16)
plan_runs hour "$@"

# The speed answer (#34): the cost model checked against live timing at batch 1 on this machine, with
# the costs measured above. A projection of the study so far (its own collect and report under
# $OUT/projected) picks, per pair and dataset, each static shape at its projected best budget and the
# overall top three (specbench.study.tools.validate); each runs live beside plain decoding on the same prompts.
step "study: projection of the replayed grids (\$OUT/projected/speedup.csv)"
rm -rf "$OUT/projected"; mkdir -p "$OUT/projected"; cp -r results/. "$OUT/projected/"   # committed + this run's
$PY -m specbench.collect "$OUT" --out "$OUT/projected"
$PY -m specbench.report --results "$OUT/projected" --out "$OUT/projected/REPORT.md"
step "study: live check of the projection at batch 1 (sweep=reference_validate: 8 prompts x 64 tokens)"
# about 47 jobs, 65 min: qwen_coder's shapes on HumanEval and MT-bench (and its top 2), the small and
# n-gram drafters' and the second target's four pairs' on HumanEval (and their top 1); each job is
# skipped once done (resumable)
if [ ! -f "$OUT/validate_jobs.txt" ]; then
  { $PY -m specbench.study.tools.validate --speedup "$OUT/projected/speedup.csv" --pairs qwen_coder \
      --datasets humaneval,mt_bench --top 2
    $PY -m specbench.study.tools.validate --speedup "$OUT/projected/speedup.csv" --pairs smollm_qwen,ngram_qwen \
      --datasets humaneval --top 1
    # the second target's pairs (#34 item 8): each shape at its projected best and the top 1, HumanEval
    $PY -m specbench.study.tools.validate --speedup "$OUT/projected/speedup.csv" \
      --pairs smollm_qwen05,gemma_qwen05,ngram_qwen05,qwen05_skip --datasets humaneval --top 1
  } > "$OUT/validate_jobs.tmp" && mv "$OUT/validate_jobs.tmp" "$OUT/validate_jobs.txt"
fi
i=0
while read -r job; do
  i=$((i + 1))
  # shellcheck disable=SC2086  # one job's overrides, word-split on purpose
  once "validate_$i" $PY -m specbench.run sweep=reference_validate $job out_root="$OUT" \
    hydra.run.dir="$OUT/validate/$i" < /dev/null
done < "$OUT/validate_jobs.txt"

# The batch-size schedule (#51 item 6), timed as the answer is: per pair (qwen_coder, then the
# cross-vocabulary smollm_qwen) and B = 1, 2, 4, 8, 16 one interleaved benchmark of plain decoding, its A/A
# copy, the batch-1 answer's tree (the benchmark's, else the projected top; twinned), chain N = 1, 2, 3, 4, 6
# and one binary tree on HumanEval, 64 tokens, 16 prompts at B = 1 and 2, 32, 48 and 96 at B = 4, 8 and 16 (6 units
# or more each), appended to results/speed.csv
# (specbench.study.tools.plan schedule lists them); each benchmark is skipped once done (resumable)
step "study: the batch-size schedule, interleaved (specbench.study.tools.speed +speed_candidates=schedule per pair and batch size)"
while IFS=$'\t' read -r mark pair ds b n tok; do
  once "$mark" $PY -m specbench.study.tools.speed pair="$pair" dataset="$ds" dataset.limit="$n" max_new_tokens="$tok" \
    dtype=bfloat16 batch_size="$b" +speed_candidates=schedule +speed_rounds=1 +results_dir=results \
    hydra.run.dir="$OUT/schedule/$mark" < /dev/null
done <<< "$($PY -m specbench.study.tools.plan schedule)"

# outside the hour (SPECBENCH_EXTENDED=1 bash run_all.sh), the floors left out, in the same order, and
# the lossless check at 1200 draws; SPECBENCH_POWER90=1 adds the check at 90% power (--draws auto, about 80 min)
if [ -n "${SPECBENCH_EXTENDED:-}" ]; then
  TAG="extended: "
  step "extended: Sequoia acceptance vectors of the n-gram pair (results/acceptance_vector.csv)"
  for p in ngram_qwen; do   # merged: its model part reads qwen_coder's
    for ds in humaneval mt_bench; do calibrate $p $ds; done
  done
  # 2b's n-gram pair and 2c (merged shapes) at budgets 1..32, the sampling rules at T = 1 (3-3d) and at
  # T = 0.3 / 0.7 (3e, 3f), live speed at batch 1 (4b): the plan's extended sweeps
  plan_runs extended "$@"
  step "extended: losslessness on the real pair: first emitted token of each lossless sampling mode vs the target, modes that draft alike on the same trees (results/lossless_check.csv)"
  once lossless_grouped $PY -m specbench.study.tools.lossless --draws 1200 pair=qwen_coder dataset=humaneval \
    dataset.limit=1 dtype=bfloat16
  if [ -n "${SPECBENCH_POWER90:-}" ]; then  # about 80 min more: its own opt-in
    step "extended: losslessness at 90% power against a first-token TV of 0.02 (--draws auto)"
    once lossless_power90 $PY -m specbench.study.tools.lossless --draws auto pair=qwen_coder dataset=humaneval \
      dataset.limit=1 dtype=bfloat16
  fi
  TAG=""
fi

step "tree-attention benchmark + real 1.5B model view (results/attention.csv)"
# re-measured on this machine (its default grid, about 10 min here), merged by cell: a cell that fails now
# keeps its committed row; SPECBENCH_ATTENTION=keep keeps the committed file as it is
if [ -s results/attention.csv ] && [ "${SPECBENCH_ATTENTION:-}" = keep ]; then
  echo "kept results/attention.csv (SPECBENCH_ATTENTION=keep)"
else
  once attention $PY -m specbench.attention_bench model_view=true merge=true
fi

step "collect, the logit margin at each greedy divergence (results/divergence_margins.csv), report"
# merged into the committed results (a job's rows replaced as a unit, by config hash): a run that
# holds only part of the study (no SPECBENCH_EXTENDED) keeps the committed rows of the other parts
$PY -m specbench.collect "$OUT" --out results
# each step's wall time beside its compute ceiling (its forwards' tokens at each model's measured rate), on this machine
CEILING=($PY -m specbench.study.tools.ceiling --times "$TIMES" --forwards "$SPECBENCH_FORWARDS" --costs results/costs.csv
  --out results/run_times.csv --machine "$OUT/machine.json" --dtype bfloat16)
"${CEILING[@]}"
$PY -m specbench.study.tools.margins --results results || echo "[run_all] margins failed (see above): REPORT.md says so" >&2
$PY -m specbench.report
end_step   # this last step's own time, recorded after the report (the next report and plan read it)
"${CEILING[@]}"
echo; echo "== [run_all $(( $(date +%s) - START ))s] done: see REPORT.md"
