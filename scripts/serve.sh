# Starting and stopping OpenAI-compatible LLM servers for the scripts (sourced, not run):
# scripts/paper.sh (vLLM, or llama.cpp's server as a CPU stand-in) and scripts/rehearsal.sh (llama.cpp
# server replicas). Needs $PY (the Python of the suite). Each started server's pid is kept in SPID[name].
#   free_port                                   a free TCP port on 127.0.0.1
#   start_llamacpp NAME PORT LOG MODEL THREADS CTX   python -m llama_cpp.server with the embedded GGUF of MODEL
#   start_vllm NAME PORT LOG MODEL TP            vllm serve MODEL --tensor-parallel-size TP
#   wait_for_server NAME URL LOG TIMEOUT_S       until GET URL/models answers 200 (the model is loaded)
#   stop_server NAME                             SIGTERM, then SIGKILL after 30 s
declare -A SPID=()

free_port() { "$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }

start_llamacpp() {  # name port log model threads ctx
    local gguf
    gguf="$("$PY" -c "import sys; from kgir_lib.llm.embedded import locate; print(locate(sys.argv[1]))" "$4")" \
        || { echo "model $4: no embedded GGUF (see kgir_lib/llm/embedded.py)" >&2; return 2; }
    "$PY" -m llama_cpp.server --model "$gguf" --model_alias "$4" --host 127.0.0.1 --port "$2" \
        --n_threads "$5" --n_threads_batch "$5" --n_ctx "$6" --verbose false >"$3" 2>&1 &
    SPID[$1]=$!
}

start_vllm() {  # name port log model tensor-parallel-size
    command -v vllm >/dev/null || { echo "vllm is not installed (conda env create -f environment.yml)" >&2; return 2; }
    vllm serve "$4" --tensor-parallel-size "$5" --host 127.0.0.1 --port "$2" >"$3" 2>&1 &
    SPID[$1]=$!
}

wait_for_server() {  # name url log timeout_s: 0 once GET url/models answers 200; 1 if the server died or timed out
    local t0 pid="${SPID[$1]:-}"
    t0=$(date +%s)
    until "$PY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/models', timeout=5)" "$2" 2>/dev/null; do
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
            echo "server $1 exited before answering $2/models; its log ($3) ends:" >&2; tail -n 20 "$3" >&2; return 1
        fi
        if [ $(($(date +%s) - t0)) -gt "$4" ]; then
            echo "server $1 did not answer $2/models within $4 s (log: $3)" >&2; return 1
        fi
        sleep 2
    done
}

stop_server() {  # name
    local p="${SPID[$1]:-}" i
    [ -z "$p" ] && return 0
    kill "$p" 2>/dev/null
    for i in $(seq 1 30); do kill -0 "$p" 2>/dev/null || break; sleep 1; done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
    SPID[$1]=""
}
