#!/usr/bin/env bash
# The main job: set up, then execute every notebook in order with papermill on the profile
# ($KGIR_PROFILE, default sample). Outputs go to results/<profile>/, never over notebooks/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m kgir_lib.runner --profile "${KGIR_PROFILE:-sample}" "$@"
