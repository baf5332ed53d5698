#!/usr/bin/env bash
# Static checks, fail-fast: ruff lint, ruff format --check, mypy on specbench/ (config: pyproject.toml).
# Installs the pinned tools (requirements-dev.txt) into .venv when they are missing or of another version.
#   bash scripts/check.sh            # needs .venv (bash scripts/setup.sh --no-models)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
stamp=.venv/.specbench-dev.sha256
want="$( { cat requirements-dev.txt; "$PY" -V; } | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ] || [ ! -x .venv/bin/ruff ] || [ ! -x .venv/bin/mypy ]; then
  echo "[check] installing requirements-dev.txt into .venv"
  "$PY" -m pip install --quiet -r requirements-dev.txt
  echo "$want" > "$stamp"
fi
echo "[check] ruff check";          .venv/bin/ruff check specbench tests scripts
echo "[check] ruff format --check"; .venv/bin/ruff format --check specbench tests scripts
echo "[check] mypy specbench";      .venv/bin/mypy
