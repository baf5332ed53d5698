#!/usr/bin/env bash
# Reproduce results/ and REPORT.md from real runs of the embedded Qwen pair.
#   bash run_all.sh            # set-up, reference study, attention benchmark, collect, report
# Idempotent and resumable: finished sweep jobs (same config hash) are skipped on a rerun, other
# finished steps leave a marker in $OUT, and the replay engine's target continuations are cached
# on disk ($SPECBENCH_CACHE, default ~/.cache/specbench).  Start over: rm -r outputs/reference
set -euo pipefail
cd "$(dirname "$0")"
START=$(date +%s)
OUT=${SPECBENCH_OUT:-outputs/reference}
mkdir -p "$OUT"
step() { echo; echo "== [run_all $(( $(date +%s) - START ))s] $*"; }
once() {  # once NAME CMD...: run CMD unless an earlier run_all finished it
  local marker="$OUT/$1.done"; shift
  if [ -f "$marker" ]; then echo "already done ($marker)"; else "$@"; touch "$marker"; fi
}

step "set-up (environment + embedded models)"
bash scripts/setup.sh
PY=.venv/bin/python

step "forward costs per pair and dtype, and the environment (results/costs.csv, results/environment.json)"
# one process: a model shared by pairs (the 1.5B target) is measured once per dtype
once costs $PY -m specbench.study.costs pair=qwen_coder +costs_repeats=3 \
  '+costs_pairs=[ngram_qwen,merged_qwen,smollm_qwen,gemma_qwen,qwen_skip,qwen_coder]' \
  '+costs_dtypes=[bfloat16,float32]' hydra.run.dir="$OUT/costs"

step "Sequoia acceptance vectors (results/acceptance_vector.csv): qwen_coder per dataset, the other pairs on humaneval"
# on each dataset's LAST 4 prompts (disjoint from the scored first ones), bf16 (the study's dtype by
# measurement, README "Engines"), the 4 prompts' continuations in one batch
for ds in humaneval stdlib_code mt_bench; do
  once "calibrate_$ds" $PY -m specbench.study.calibrate pair=qwen_coder verify=greedy dtype=bfloat16 dataset=$ds \
    dataset.limit=4 max_new_tokens=64 batch_size=4 out_root="$OUT"
done
for pair in smollm_qwen gemma_qwen qwen_skip; do            # the other drafters: a star-tree drafted replay
  once "calibrate_${pair}_humaneval" $PY -m specbench.study.calibrate pair=$pair verify=greedy dtype=bfloat16 \
    dataset=humaneval dataset.limit=4 max_new_tokens=64 batch_size=4 out_root="$OUT"
done

for sweep in reference reference_live reference_modes reference_modes_chain reference_modes_tree reference_modes_noreplace \
             reference_pairs \
             reference_merged reference_xpairs; do
  step "study: sweep=$sweep"
  $PY -m specbench.run -m sweep=$sweep out_root="$OUT" hydra.sweep.dir="$OUT/$sweep"
done

step "study: measured speed (live bf16: plain-decoding baselines, chain/4, binary/16; smollm_qwen chain/4)"
$PY -m specbench.run -m sweep=reference_speed pair=qwen_coder,smollm_qwen tree=none out_root="$OUT" \
  hydra.sweep.dir="$OUT/speed_baseline"
$PY -m specbench.run -m sweep=reference_speed pair=smollm_qwen tree=chain tree.budget=4 out_root="$OUT" \
  hydra.sweep.dir="$OUT/speed_smollm"
$PY -m specbench.run -m sweep=reference_speed tree=chain,binary tree.budget=4,16 out_root="$OUT" \
  hydra.sweep.dir="$OUT/speed"

step "losslessness on the real pair: first emitted token of each lossless sampling mode vs the target (results/lossless_check.csv)"
once lossless $PY -m specbench.study.lossless --draws 600 pair=qwen_coder dataset=humaneval dataset.limit=3 dtype=float32

step "tree-attention benchmark + real 1.5B model view (results/attention.csv)"
once attention $PY -m specbench.attention_bench model_view=true merge=false

step "collect, the logit margin at each greedy divergence (results/divergence_margins.csv), report"
$PY -m specbench.collect "$OUT" --out results --fresh
$PY -m specbench.study.margins --results results || echo "[run_all] margins failed (see above): REPORT.md says so" >&2
$PY -m specbench.report
step "done in $(( $(date +%s) - START ))s: see REPORT.md"
