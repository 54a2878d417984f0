#!/usr/bin/env bash
# The tests. Two tiers:
#   bash scripts/test.sh          the whole suite, what CI runs: unit tests, real llama.cpp models and server,
#                                 fresh clones running the main job, and every notebook under nbval (profile
#                                 "ci", results in a temporary directory so the committed results are untouched)
#   bash scripts/test.sh --fast   the unit tests only (no model load, no server, no notebook, no clone): for
#                                 everyday work
# Both run in parallel with pytest-xdist ($KGIR_TEST_WORKERS workers, default 2). Further arguments go to pytest.
# The data first: the default data folder ($KGIR_DATA_DIR, else ../shared/data, else data/samples/, fetched
# here when missing) must hold the verified samples, so no test is skipped for want of them.
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi
bash scripts/setup.sh
.venv/bin/python -m kgir_lib.data_sources ensure
export KGIR_PROFILE=ci
export KGIR_RESULTS_DIR="${KGIR_TEST_RESULTS_DIR:-$(mktemp -d)/results}"
export KGIR_FIGURES_DIR="$KGIR_RESULTS_DIR/../figures"
export MPLBACKEND=Agg
workers=(-n "${KGIR_TEST_WORKERS:-2}" --dist loadgroup)
if [ "$fast" = 1 ]; then
  exec .venv/bin/python -m pytest -p no:cacheprovider "${workers[@]}" -m "not slow and not notebooks" tests -q "$@"
fi
# The ci profile's committed LLM answers: the notebooks replay them instead of running the model again (a request
# the log does not hold is still sent to the model, so a changed prompt costs time, never a failure).
mkdir -p "$KGIR_RESULTS_DIR/ci"
if [ -f results/ci/llm_responses.jsonl.gz ]; then
  cp results/ci/llm_responses.jsonl.gz "$KGIR_RESULTS_DIR/ci/"
fi
echo "test: notebook outputs under $KGIR_RESULTS_DIR"
shopt -s nullglob
notebooks=(notebooks/[0-9][0-9]_*.ipynb)
exec .venv/bin/python -m pytest -p no:cacheprovider "${workers[@]}" tests "${notebooks[@]}" \
  --nbval-lax --nbval-current-env --nbval-cell-timeout=1800 -q "$@"
