#!/usr/bin/env bash
# Paper scale in one command (README "Paper scale, step by step", steps 2-4):
#   1. check the data: the profile's questions must be present (runner --validate-only); if they are not,
#      download HippoRAG 2's full sets (kgir_lib.data_sources.download_hipporag2) into data/<name>/ and use
#      them (the samples the runner fetches by itself live apart, in data/samples/);
#   2. start `vllm serve <llm_model> --tensor-parallel-size <llm_tensor_parallel_size>` on a free port, unless
#      a running server is given (KGIR_LLM_URLS), and wait until it answers /v1/models;
#   3. run the main job (kgir_lib.runner) against it, writing results/<profile>/;
#   4. stop the server it started (also on failure or Ctrl-C).
# Usage:   bash scripts/paper.sh [runner arguments, e.g. --only 01 02 or -p NAME VALUE]
# Environment:
#   KGIR_PROFILE           the profile (default paper; paper_llama3 for Table 5)
#   KGIR_LLM_URLS          base URL(s) of running servers, comma-separated (e.g. http://gpu1:8000/v1): none started
#   KGIR_TENSOR_PARALLEL   vllm --tensor-parallel-size (default: the profile's llm_tensor_parallel_size)
#   KGIR_KG_LLM_URLS       for a profile that extracts with a second model (kg_llm_model, paper_llama3): its
#                          running server(s); else KGIR_KG_TENSOR_PARALLEL must be set to start it here (both
#                          servers must then fit this machine's GPUs)
#   KGIR_SERVER            vllm (default), or llamacpp: `python -m llama_cpp.server` with the embedded GGUF of
#                          llm_model, a CPU stand-in for vLLM (the rehearsal profile; the test suite uses it)
#   KGIR_SERVER_THREADS, KGIR_SERVER_CTX   llamacpp only (default 2 threads, 16384 tokens of context)
#   KGIR_SERVER_TIMEOUT_S  how long to wait for a server to load its model (default 3600: a 72B model loads for minutes)
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
finish() {  # on exit: stop the servers this script started, then remove its log folder (kept on failure if a
            # server wrote a log into it, and said where)
    local rc=$? s
    for s in "${!SPID[@]}"; do
        [ -n "${SPID[$s]}" ] && say "stopping server $s (pid ${SPID[$s]})" && stop_server "$s"
    done
    if [ -d "$LOGS" ]; then
        if [ "$rc" != 0 ] && [ -n "$(ls -A "$LOGS")" ]; then say "server logs kept in $LOGS"; else rm -rf "$LOGS"; fi
    fi
    return "$rc"
}
trap finish EXIT
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
from kgir_lib.data_sources import download_hipporag2
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
read -r BACKEND MODEL TP KG_MODEL < <("$PY" -c "import sys; from kgir_lib.config import load_config; \
c = load_config(sys.argv[1]); print(c.llm_backend, c.llm_model, c.llm_tensor_parallel_size, c.kg_llm_model or '-')" \
    "$PROFILE") || exit 2

serve() {  # name model tensor-parallel-size: start a server on a free port, wait for it; sets SERVED_URL
    local port url
    port="$(free_port)"; url="http://127.0.0.1:$port/v1"
    case "${KGIR_SERVER:-vllm}" in
        vllm) say "starting vllm serve $2 --tensor-parallel-size $3 on port $port (log $LOGS/$1.log)"
              start_vllm "$1" "$port" "$LOGS/$1.log" "$2" "$3" || return 2 ;;
        llamacpp) say "starting python -m llama_cpp.server ($2, embedded GGUF) on port $port (log $LOGS/$1.log)"
                  start_llamacpp "$1" "$port" "$LOGS/$1.log" "$2" "${KGIR_SERVER_THREADS:-2}" \
                      "${KGIR_SERVER_CTX:-16384}" || return 2 ;;
        *) say "KGIR_SERVER must be vllm or llamacpp, got ${KGIR_SERVER}"; return 2 ;;
    esac
    local t0; t0=$(date +%s)
    wait_for_server "$1" "$url" "$LOGS/$1.log" "${KGIR_SERVER_TIMEOUT_S:-3600}" || return 2
    say "server up: pid ${SPID[$1]}, $url, $(($(date +%s) - t0)) s"
    SERVED_URL="$url"
}

URL_ARGS=()
if [ "$BACKEND" != openai ]; then
    say "profile $PROFILE uses the $BACKEND backend: no server to start"
else
    if [ "$KG_MODEL" != - ] && [ -z "${KGIR_KG_LLM_URLS:-}" ] && [ -z "${KGIR_KG_TENSOR_PARALLEL:-}" ]; then
        say "profile $PROFILE extracts triples with a second model ($KG_MODEL): give its running server in"
        say "KGIR_KG_LLM_URLS, or set KGIR_KG_TENSOR_PARALLEL to start it here (both servers must fit the GPUs)"
        exit 2
    fi
    if [ -n "${KGIR_LLM_URLS:-}" ]; then
        URL_ARGS+=(-p llm_base_urls "[${KGIR_LLM_URLS}]")
        say "using the running server(s) $("$PY" -m kgir_lib.redact "$KGIR_LLM_URLS")"  # user:password@ masked
    else
        serve main "$MODEL" "${KGIR_TENSOR_PARALLEL:-$TP}" || exit 2
        URL_ARGS+=(-p llm_base_urls "[$SERVED_URL]")
    fi
    if [ "$KG_MODEL" != - ] && [ -n "${KGIR_KG_LLM_URLS:-}" ]; then
        URL_ARGS+=(-p kg_llm_base_urls "[${KGIR_KG_LLM_URLS}]")
    elif [ "$KG_MODEL" != - ]; then
        serve kg "$KG_MODEL" "$KGIR_KG_TENSOR_PARALLEL" || exit 2
        URL_ARGS+=(-p kg_llm_base_urls "[$SERVED_URL]")
    fi
fi

# ---- 3. the main job (the runner checks that the server lists the model before the first notebook) -----------
"$PY" -m kgir_lib.runner --profile "$PROFILE" "${URL_ARGS[@]}" "$@"
rc=$?
say "main job exit code $rc"
exit "$rc"
