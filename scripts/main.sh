#!/usr/bin/env bash
# The main job: set up, then execute every notebook in order with papermill on the profile
# ($KGIR_PROFILE, default sample). Outputs go to results/<profile>/, never over notebooks/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Compiled modules are kept beside the environment (.venv/pycache, outside the checkout) even where
# PYTHONDONTWRITEBYTECODE is set: otherwise the runner and every notebook kernel compile the library again, about a
# third of a second of a one-notebook rerun. scripts/test.sh does the same.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-$PWD/.venv/pycache}"
exec .venv/bin/python -m kgir_lib.runner --profile "${KGIR_PROFILE:-sample}" "$@"
