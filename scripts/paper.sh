#!/usr/bin/env bash
# Paper scale in one command (README "Paper scale, step by step", steps 2-4):
#   1. check the data: the profile's questions must be present (runner --validate-only); if they are not,
#      download HippoRAG 2's full sets (kgir_lib.data.download_hipporag2) and use them;
#   2. start `vllm serve <llm_model> --tensor-parallel-size <llm_tensor_parallel_size>` on a free port, unless
#      a running server is given (KGIR_LLM_URLS), and wait until it answers /v1/models;
#   3. run the main job (kgir_lib.runner) against it, writing results/<profile>/;
#   4. stop the server it started (also on failure or Ctrl-C).
# Usage:   bash scripts/paper.sh [runner arguments, e.g. --only 01 02 or -p NAME VALUE]
# Environment:
#   KGIR_PROFILE           the profile (default paper; paper_llama3 for Table 5)
#   KGIR_LLM_URLS          base URL(s) of running servers, comma-separated (e.g. http://gpu1:8000/v1): none started
#   KGIR_TENSOR_PARALLEL   vllm --tensor-parallel-size (default: the profile's llm_tensor_parallel_size)
#   KGIR_SERVER            vllm (default), or llamacpp: `python -m llama_cpp.server` with the embedded GGUF of
#                          llm_model, a CPU stand-in for vLLM (the rehearsal profile; the test suite uses it)
#   KGIR_SERVER_THREADS, KGIR_SERVER_CTX   llamacpp only (default 2 threads, 16384 tokens of context)
#   KGIR_SERVER_TIMEOUT_S  how long to wait for the server to load the model (default 3600: a 72B model loads for minutes)
#   KGIR_DATA_DIR          the data; missing questions are downloaded to KGIR_DOWNLOAD_DIR (default ./data)
#   KGIR_NO_DOWNLOAD=1     stop instead of downloading
#   KGIR_PYTHON            the Python of the suite (default .venv/bin/python, else python: the conda env)
# Exit code: the runner's (0 done, 1 a notebook failed, 2 bad profile or server, 3 too few questions).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${KGIR_PYTHON:-}"
if [ -z "$PY" ]; then if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python; fi; fi
PROFILE="${KGIR_PROFILE:-paper}"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/kgir_paper.XXXX")"
source "$ROOT/scripts/serve.sh"
say() { printf 'paper.sh: %s\n' "$*"; }
trap 'for s in "${!SPID[@]}"; do [ -n "${SPID[$s]}" ] && say "stopping server $s (pid ${SPID[$s]})" && stop_server "$s"; done' EXIT
trap 'exit 130' INT TERM

# ---- 1. the data ---------------------------------------------------------------------------------------
"$PY" -m kgir_lib.runner --profile "$PROFILE" --validate-only --no-server-check "$@"
rc=$?
if [ "$rc" = 3 ]; then
    [ "${KGIR_NO_DOWNLOAD:-0}" = 1 ] && { say "the data lacks questions and KGIR_NO_DOWNLOAD=1: stopping"; exit 3; }
    target="${KGIR_DOWNLOAD_DIR:-$ROOT/data}"
    say "downloading HippoRAG 2's full question sets to $target"
    "$PY" - "$PROFILE" "$target" <<'PYEOF' || exit 3
import sys
from pathlib import Path
from kgir_lib.config import load_config
from kgir_lib.data import download_hipporag2
cfg = load_config(sys.argv[1])
names = sorted({*cfg.datasets, *cfg.ablation_datasets, *cfg.study_datasets, *cfg.extract_datasets})
for path in download_hipporag2(names, Path(sys.argv[2])):
    print(f"  {path}")
PYEOF
    export KGIR_DATA_DIR="$target"
    "$PY" -m kgir_lib.runner --profile "$PROFILE" --validate-only --no-server-check "$@" || exit $?
elif [ "$rc" != 0 ]; then
    exit "$rc"
fi

# ---- 2. the server -------------------------------------------------------------------------------------
read -r BACKEND MODEL TP < <("$PY" -c "import sys; from kgir_lib.config import load_config; c = load_config(sys.argv[1]); \
print(c.llm_backend, c.llm_model, c.llm_tensor_parallel_size)" "$PROFILE") || exit 2
URL_ARGS=()
if [ "$BACKEND" != openai ]; then
    say "profile $PROFILE uses the $BACKEND backend: no server to start"
elif [ -n "${KGIR_LLM_URLS:-}" ]; then
    URL_ARGS=(-p llm_base_urls "[${KGIR_LLM_URLS}]")
    say "using the running server(s) $KGIR_LLM_URLS"
else
    PORT="${KGIR_SERVER_PORT:-$(free_port)}"
    URL="http://127.0.0.1:$PORT/v1"
    case "${KGIR_SERVER:-vllm}" in
        vllm) TP="${KGIR_TENSOR_PARALLEL:-$TP}"
              say "starting vllm serve $MODEL --tensor-parallel-size $TP on port $PORT (log $LOGS/server.log)"
              start_vllm main "$PORT" "$LOGS/server.log" "$MODEL" "$TP" || exit 2 ;;
        llamacpp) say "starting python -m llama_cpp.server ($MODEL, embedded GGUF) on port $PORT (log $LOGS/server.log)"
                  start_llamacpp main "$PORT" "$LOGS/server.log" "$MODEL" "${KGIR_SERVER_THREADS:-2}" \
                      "${KGIR_SERVER_CTX:-16384}" || exit 2 ;;
        *) say "KGIR_SERVER must be vllm or llamacpp, got ${KGIR_SERVER}"; exit 2 ;;
    esac
    t0=$(date +%s)
    wait_for_server main "$URL" "$LOGS/server.log" "${KGIR_SERVER_TIMEOUT_S:-3600}" || exit 2
    say "server up: pid ${SPID[main]}, $URL, $(($(date +%s) - t0)) s"
    URL_ARGS=(-p llm_base_urls "[$URL]")
fi

# ---- 3. the main job (the runner checks that the server lists the model before the first notebook) -----------
"$PY" -m kgir_lib.runner --profile "$PROFILE" "${URL_ARGS[@]}" "$@"
rc=$?
say "main job exit code $rc"
exit "$rc"
