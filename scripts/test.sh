#!/usr/bin/env bash
# The whole test suite: unit tests, the real llama.cpp server test, and every notebook under nbval
# (profile "ci", results in a temporary directory so the committed results are untouched).
# The data first: the default data folder ($KGIR_DATA_DIR, else ../shared/data, else data/samples/, fetched
# here when missing) must hold the verified samples, so no test is skipped for want of them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m kgir_lib.data_sources ensure
export KGIR_PROFILE=ci
export KGIR_RESULTS_DIR="${KGIR_TEST_RESULTS_DIR:-$(mktemp -d)/results}"
export KGIR_FIGURES_DIR="$KGIR_RESULTS_DIR/../figures"
export MPLBACKEND=Agg
echo "test: notebook outputs under $KGIR_RESULTS_DIR"
shopt -s nullglob
notebooks=(notebooks/[0-9][0-9]_*.ipynb)
exec .venv/bin/python -m pytest -p no:cacheprovider tests "${notebooks[@]}" \
  --nbval-lax --nbval-current-env --nbval-cell-timeout=1800 -q "$@"
