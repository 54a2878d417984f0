#!/usr/bin/env bash
# The whole test suite: unit tests, the real llama.cpp server test, and every notebook under nbval
# (profile "ci", results in a temporary directory so the committed results are untouched).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export KGIR_PROFILE=ci
export KGIR_RESULTS_DIR="${KGIR_TEST_RESULTS_DIR:-$(mktemp -d)/results}"
export KGIR_FIGURES_DIR="$KGIR_RESULTS_DIR/../figures"
export MPLBACKEND=Agg
echo "test: notebook outputs under $KGIR_RESULTS_DIR"
shopt -s nullglob
notebooks=(notebooks/[0-9][0-9]_*.ipynb)
exec .venv/bin/python -m pytest -p no:cacheprovider tests "${notebooks[@]}" \
  --nbval-lax --nbval-current-env --nbval-cell-timeout=1800 -q "$@"
