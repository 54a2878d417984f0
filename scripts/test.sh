#!/usr/bin/env bash
# The tests. Two tiers:
#   bash scripts/test.sh          the whole suite, what CI runs: unit tests, real llama.cpp models and server,
#                                 fresh clones running the main job, and every notebook under nbval (profile
#                                 "ci", results in a temporary directory so the committed results are untouched)
#   bash scripts/test.sh --fast   the unit tests only (no model load, no server, no notebook, no clone): for
#                                 everyday work
# Both tiers lint and type-check the library first (ruff, then mypy: rules and strictness in pyproject.toml), and a
# finding fails the run before any test; test paths among the arguments (a rerun of one file) skip that.
# Both run in parallel with pytest-xdist ($KGIR_TEST_WORKERS workers; default one more than the cores, at most 8).
# Further arguments go to pytest.
# Results and temporary files go to a scratch folder removed at the end; KGIR_TEST_RESULTS_DIR=DIR writes the
# results to DIR and keeps them.
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
# A scratch folder removed when the tests end, however they end. The tests' results (the notebooks' tables,
# figures, traces, caches) go there unless KGIR_TEST_RESULTS_DIR keeps them elsewhere; so do, always, pytest's
# tmp_path folders (--basetemp: otherwise pytest keeps its last runs' under $TMPDIR/pytest-of-<user>/), and every other
# temporary file a test or a process it starts makes ($TMPDIR is the scratch folder's tmp/ while the tests run: what
# one of them forgets to remove, torch's $TMPDIR/torchinductor_<user>/ among them, goes with the folder instead of
# staying in the user's; a notebook kernel keeps torch's in its own folder). The compiled modules of what ran from the
# scratch folder (the fresh clones' library) go too: the cache prefix below mirrors each source's absolute path, so
# they sit under $PYTHONPYCACHEPREFIX$scratch, beside the environment, and would pile up there run after run.
scratch=$(mktemp -d -t kgir-test-XXXXXX)
trap 'rm -rf "$scratch"; case "${PYTHONPYCACHEPREFIX:-}" in /*) rm -rf "$PYTHONPYCACHEPREFIX$scratch" ;; esac' EXIT
trap 'exit 130' INT TERM
if [ -n "${KGIR_TEST_RESULTS_DIR:-}" ]; then
  export KGIR_RESULTS_DIR="$KGIR_TEST_RESULTS_DIR"
  kept=1
else
  export KGIR_RESULTS_DIR="$scratch/results"
  kept=0
fi
basetemp=(--basetemp "$scratch/pytest")
mkdir "$scratch/tmp"
export TMPDIR="$scratch/tmp"
export KGIR_FIGURES_DIR="$KGIR_RESULTS_DIR/../figures"
export MPLBACKEND=Agg
# Compiled modules are kept (in .venv/pycache, outside the checkout) even when PYTHONDONTWRITEBYTECODE is set: without
# them every pytest worker, notebook kernel and subprocess compiles the library and rewrites the tests' asserts again,
# about 4 s of CPU a process.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-$PWD/.venv/pycache}"
# mypy's incremental cache and ruff's, beside the environment too, not in the checkout: a fresh clone whose .venv is
# this environment starts warm (mypy checks a module whose path changed by its content hash). A cold mypy cache costs
# about 12 s of CPU (numpy's stubs and the standard library's; torch and transformers are not followed:
# pyproject.toml), a warm one about a second.
export MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-$PWD/.venv/cache/mypy}" RUFF_CACHE_DIR="${RUFF_CACHE_DIR:-$PWD/.venv/cache/ruff}"
# One worker more than the cores: part of the tests' time is spent waiting (on a local server, a timeout, a child
# process; results/benchmarks/tests.md gives the share), and a spare worker runs another test meanwhile. At most 8:
# every worker collects the whole suite and imports what its tests need, and beyond that the few long units decide
# the wall time anyway.
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
n_workers="${KGIR_TEST_WORKERS:-$(( cores + 1 > 8 ? 8 : cores + 1 ))}"
workers=(-n "$n_workers" --dist loadgroup -p no:anyio)  # (no test uses anyio's plugin: a quarter second of every
                                                        # pytest process)
# Test paths among the arguments (a file, a folder, file::test) replace the default selection (tests/, and the
# notebooks in the whole suite): `bash scripts/test.sh --fast tests/test_data.py` collects that file alone.
selection=(tests)
only_notebooks=1
for arg in "$@"; do
  if [ -e "${arg%%::*}" ]; then
    selection=()
    case "${arg%%::*}" in *.ipynb) ;; *) only_notebooks=0 ;; esac
  fi
done
# Notebooks alone: tests/conftest.py, whose scheduler keeps a notebook's cells on one worker (they share a kernel),
# is not loaded, so they run in one process.
if [ ${#selection[@]} -eq 0 ] && [ "$only_notebooks" = 1 ]; then
  workers=(-p no:xdist -p no:anyio)
fi
if [ "${workers[0]}" = "-n" ]; then
  echo "test: ${workers[1]} pytest-xdist workers"
fi
# The default selection (no test path given): the library's lint and type check first, in both tiers.
if [ ${#selection[@]} -gt 0 ]; then
  .venv/bin/python -m ruff check kgir_lib
  .venv/bin/python -m mypy kgir_lib
fi
if [ "$fast" = 1 ]; then
  .venv/bin/python -m pytest -p no:cacheprovider -p no:nbval "${workers[@]}" "${basetemp[@]}" \
    -m "not slow and not notebooks" ${selection[@]+"${selection[@]}"} -q "$@"
  exit $?
fi
# The ci profile's committed LLM answers: the notebooks replay them instead of running the model again (a request
# the log does not hold is still sent to the model, so a changed prompt costs time, never a failure).
mkdir -p "$KGIR_RESULTS_DIR/ci"
if [ -f results/ci/llm_responses.jsonl.gz ]; then
  cp results/ci/llm_responses.jsonl.gz "$KGIR_RESULTS_DIR/ci/"
fi
if [ "$kept" = 1 ]; then
  echo "test: notebook outputs under $KGIR_RESULTS_DIR (kept)"
fi
shopt -s nullglob
if [ ${#selection[@]} -gt 0 ]; then
  selection+=(notebooks/[0-9][0-9]_*.ipynb)
fi
.venv/bin/python -m pytest -p no:cacheprovider "${workers[@]}" "${basetemp[@]}" ${selection[@]+"${selection[@]}"} \
  --nbval-lax --nbval-current-env --nbval-cell-timeout=1800 -q "$@"
