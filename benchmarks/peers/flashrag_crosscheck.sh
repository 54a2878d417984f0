#!/usr/bin/env bash
# Cross-check of the suite's IRCoT and ITER-RETGEN against FlashRAG's own pipelines (PyPI flashrag-dev 0.1.2:
# IRCOTPipeline, IterativePipeline) on musique_train, with the suite's retriever and LLM injected: the suite's
# dense index (all-MiniLM-L6-v2, whole corpus, the local profile's top_k) behind search_server.py, and the local
# profile's Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF behind python -m llama_cpp.server (greedy, repeat penalty 1.0)
# through FlashRAG's OpenAI generator and a caching proxy (llm_cache_proxy.py).
#   1. benchmarks/peers/setup.sh flashrag   the peer environment (benchmarks/peers/.venv-flashrag)
#   2. flashrag_compare.py questions        the local profile's questions (qid, question; no gold)
#   3. flashrag_compare.py suite            the suite's IRCoT and ITER-RETGEN, cache only from results/local's
#                                           response log: no LLM call (a missing request is an error)
#   4. servers on 127.0.0.1                 search_server.py (main env), llama_cpp.server (--n_threads N_THREADS),
#                                           llm_cache_proxy.py (cache in the work folder: a rerun after a kill
#                                           repeats no finished call)
#   5. flashrag_pipelines.py                FlashRAG's IRCoT and ITER-RETGEN, question chunk by chunk (peer env)
#   6. flashrag_compare.py reading          ITER-RETGEN's last round read again over whole passages (one LLM call
#                                           a question, in process; none when the committed answers are complete)
#   7. flashrag_compare.py report           results/benchmarks/peers_flashrag.md (+ .csv; FlashRAG's records as
#                                           peers_flashrag_outputs.jsonl.gz; its LLM answers by request hash as
#                                           peers_flashrag_llm_cache.jsonl.gz, which step 4 seeds the proxy's cache
#                                           with when the work folder has none, so a fresh clone resumes the run;
#                                           the suite side's dense searches as peers_flashrag_suite_searches.jsonl.gz)
# IRCOT_THOUGHTS=kept: the second FlashRAG IRCoT row instead, FlashRAG's IRCoT with its earlier thoughts kept
# through the OpenAI client (flashrag_pipelines.py --ircot-thoughts kept, a shim; README.md): steps 1-4 (the proxy's
# cache is PEERS_WORK/ircot_kept/llm_cache.jsonl, seeded from peers_flashrag_ircot_kept_llm_cache.jsonl.gz when
# empty, and answering from the as-run answers too, which it never writes: a first thought's prompt is the same),
# step 5 for IRCoT only into PEERS_WORK/ircot_kept, no step 6, and flashrag_compare.py report-kept: the row's files
# beside the report (peers_flashrag_ircot_kept*) and the report rendered again; the as-run files are not touched.
# Usage: bash benchmarks/peers/flashrag_crosscheck.sh [--help | --dry-run | --rescore]
#   --help     print this header and exit
#   --rescore  steps 2, 3 and a re-scored report only: the suite's side of this code (cache only) against
#              FlashRAG's committed records (results/benchmarks/peers_flashrag_outputs.jsonl.gz); no peer
#              environment, no server, no LLM call (the shim's row too, when its records are committed)
#   --dry-run  print the steps with the knobs' values and check their inputs; start nothing, write nothing
# Knobs (environment): KGIR_DATA_DIR (default: the suite's), PEERS_WORK (default benchmarks/peers/.work/flashrag),
# N_THREADS (llama.cpp threads, default 1), N_CTX (default 8192), MODEL (embedded GGUF name, default the local
# profile's), QA_N (FlashRAG answers only the first QA_N questions, e.g. 3 for a smoke run; default all), CHUNK
# (questions a chunk, default 10), IRCOT_THOUGHTS (dropped: FlashRAG's OpenAI path as published, the default; kept:
# the shim's row, above).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${KGIR_PYTHON:-$ROOT/.venv/bin/python}"
source "$ROOT/benchmarks/peers/crosscheck_lib.sh"
crosscheck_mode "$@"
cd "$ROOT"
PEER_VENV="$ROOT/benchmarks/peers/.venv-flashrag"
PEER_PY="$PEER_VENV/bin/python"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -m kgir_lib.data_sources ensure >/dev/null  # the samples (fetched into data/samples/ when missing), verified
export KGIR_DATA_DIR="${KGIR_DATA_DIR:-$("$PY" -c "from kgir_lib.config import default_data_dir; print(default_data_dir())")}"
WORK="${PEERS_WORK:-$ROOT/benchmarks/peers/.work/flashrag}"
MODEL="${MODEL:-$("$PY" -c "from kgir_lib.config import load_config; print(load_config('local').llm_model)")}"
N_THREADS="${N_THREADS:-1}"
N_CTX="${N_CTX:-8192}"
QA_N="${QA_N:-}"
CHUNK="${CHUNK:-10}"
IRCOT_THOUGHTS="${IRCOT_THOUGHTS:-dropped}"
case "$IRCOT_THOUGHTS" in
    dropped|kept) ;;
    *) echo "crosscheck: IRCOT_THOUGHTS='$IRCOT_THOUGHTS': expected dropped or kept" >&2; exit 2 ;;
esac
KEPT_WORK="$WORK/ircot_kept"
COMMITTED_CACHE="$ROOT/results/benchmarks/peers_flashrag_llm_cache.jsonl.gz"
COMMITTED_KEPT_CACHE="$ROOT/results/benchmarks/peers_flashrag_ircot_kept_llm_cache.jsonl.gz"
# the local profile's settings FlashRAG is run with: retrieval depth, loop lengths, generation budgets
read -r TOPK STEPS ROUNDS TOK_IRCOT TOK_READER < <("$PY" -c "
from kgir_lib.config import load_config
c = load_config('local')
print(c.top_k, c.ircot_max_steps, c.iter_retgen_rounds, c.max_tokens('ircot'), c.max_tokens('reader'))")
if [ "$MODE" = dry ]; then
    say() { printf 'crosscheck (dry run): %s\n' "$*"; }
    missing=0
    need() { if [ -e "$2" ]; then say "  ok      $1: $2"; else say "  MISSING $1: $2"; missing=1; fi; }
    say "work folder $WORK; model $MODEL; N_THREADS=$N_THREADS N_CTX=$N_CTX QA_N=${QA_N:-all} CHUNK=$CHUNK" \
        "IRCOT_THOUGHTS=$IRCOT_THOUGHTS"
    if [ "$IRCOT_THOUGHTS" = kept ]; then
        say "the second FlashRAG IRCoT row (earlier thoughts kept, a shim): IRCoT only, into $KEPT_WORK; its proxy" \
            "cache $KEPT_WORK/llm_cache.jsonl, seeded with the as-run answers (read only)"
        need "committed as-run LLM answers (the shim's seed)" "$COMMITTED_CACHE"
    fi
    say "FlashRAG settings from the local profile: top-k $TOPK, IRCoT max_iter $STEPS (thought budget $TOK_IRCOT" \
        "tokens), ITER-RETGEN iter_num $ROUNDS (generation budget $TOK_READER tokens)"
    need "main Python" "$PY"
    need "shared data" "$KGIR_DATA_DIR/musique_train"
    need "committed response log" "$ROOT/results/local/llm_responses.jsonl.gz"
    for f in setup.sh flashrag_compare.py flashrag_report.py flashrag_pipelines.py search_server.py json_endpoint.py llm_cache_proxy.py \
             peer_run.py records.py; do
        need "script" "$ROOT/benchmarks/peers/$f"
    done
    need "committed FlashRAG records (for --rescore)" "$ROOT/results/benchmarks/peers_flashrag_outputs.jsonl.gz"
    if [ -x "$PEER_PY" ]; then say "  ok      peer environment: $PEER_PY"
    else say "  absent  peer environment: $PEER_PY (step 1 would build it: bash benchmarks/peers/setup.sh flashrag)"; fi
    if [ "$IRCOT_THOUGHTS" = kept ]; then
        say "steps: 1 setup.sh flashrag; 2 flashrag_compare.py questions; 3 flashrag_compare.py suite (cache only);" \
            "4 search_server.py + llama_cpp.server + llm_cache_proxy.py; 5 flashrag_pipelines.py --ircot-thoughts" \
            "kept; 7 flashrag_compare.py report-kept -> results/benchmarks/peers_flashrag.md"
    else
        say "steps: 1 setup.sh flashrag; 2 flashrag_compare.py questions; 3 flashrag_compare.py suite (cache only);" \
            "4 search_server.py + llama_cpp.server + llm_cache_proxy.py; 5 flashrag_pipelines.py;" \
            "6 flashrag_compare.py reading; 7 flashrag_compare.py report -> results/benchmarks/peers_flashrag.md"
    fi
    exit "$missing"
fi
mkdir -p "$WORK/logs"
if [ "$MODE" = rescore ]; then
    echo "crosscheck (re-score): the suite's IRCoT and ITER-RETGEN (cache only) against FlashRAG's committed records"
    "$PY" benchmarks/peers/flashrag_compare.py questions --work "$WORK"
    "$PY" benchmarks/peers/flashrag_compare.py suite --work "$WORK"
    "$PY" benchmarks/peers/flashrag_compare.py rescore --work "$WORK" \
        --command "bash benchmarks/peers/flashrag_crosscheck.sh --rescore"
    exit 0
fi

bash benchmarks/peers/setup.sh flashrag
"$PY" benchmarks/peers/flashrag_compare.py questions --work "$WORK"
echo "crosscheck: the suite's IRCoT and ITER-RETGEN (cache only)"
"$PY" benchmarks/peers/flashrag_compare.py suite --work "$WORK"

free_port SPORT
"$PY" benchmarks/peers/search_server.py --port "$SPORT" --profile local --dataset musique_train \
    --results-dir "$WORK/results" >"$WORK/logs/search_server.log" 2>&1 &
PIDS+=($!)
GGUF="$("$PY" -c "from kgir_lib.llm.embedded import locate; print(locate('$MODEL'))")"
free_port LPORT
"$PY" -m llama_cpp.server --model "$GGUF" --model_alias "$MODEL" --host 127.0.0.1 --port "$LPORT" \
    --n_threads "$N_THREADS" --n_threads_batch "$N_THREADS" --n_ctx "$N_CTX" --verbose false \
    >"$WORK/logs/llama_server.log" 2>&1 &
PIDS+=($!)
free_port PPORT
wait_up "${PIDS[0]}" "http://127.0.0.1:$SPORT/health" "$WORK/logs/search_server.log"
wait_up "${PIDS[1]}" "http://127.0.0.1:$LPORT/v1/models" "$WORK/logs/llama_server.log"
if [ "$IRCOT_THOUGHTS" = kept ]; then
    # the shim's own cache holds only its new calls; the as-run answers (the work folder's, else the committed ones)
    # answer the rest and are never written
    mkdir -p "$KEPT_WORK"
    if [ ! -s "$KEPT_WORK/llm_cache.jsonl" ] && [ -f "$COMMITTED_KEPT_CACHE" ]; then
        gzip -dc "$COMMITTED_KEPT_CACHE" > "$KEPT_WORK/llm_cache.jsonl"
    fi
    SEEDS=("$COMMITTED_CACHE")
    [ -s "$WORK/llm_cache.jsonl" ] && SEEDS+=("$WORK/llm_cache.jsonl")
    "$PY" benchmarks/peers/llm_cache_proxy.py --port "$PPORT" --upstream "http://127.0.0.1:$LPORT" \
        --cache "$KEPT_WORK/llm_cache.jsonl" --seed "${SEEDS[@]}" >"$WORK/logs/proxy_kept.log" 2>&1 &
    PIDS+=($!)
    wait_up "${PIDS[2]}" "http://127.0.0.1:$PPORT/v1/models" "$WORK/logs/proxy_kept.log"
    echo "crosscheck: FlashRAG's IRCoT with its earlier thoughts kept (the shim; new LLM calls through the caching" \
         "proxy: $KEPT_WORK/llm_cache.jsonl)"
    TIKTOKEN_CACHE_DIR="$PEER_VENV/tiktoken_cache" "$PEER_PY" benchmarks/peers/flashrag_pipelines.py \
        --questions "$WORK/questions.jsonl" --search-url "http://127.0.0.1:$SPORT" \
        --llm-base-url "http://127.0.0.1:$PPORT/v1" --model "$MODEL" --out-dir "$KEPT_WORK" --dataset musique_train \
        --topk "$TOPK" --ircot-max-iter "$STEPS" --iter-num "$ROUNDS" --max-tokens-ircot "$TOK_IRCOT" \
        --max-tokens-iter-retgen "$TOK_READER" --max-input-len "$N_CTX" --chunk "$CHUNK" ${QA_N:+--n "$QA_N"} \
        --ircot-thoughts kept
    stop_servers
    cmd="IRCOT_THOUGHTS=kept CHUNK=$CHUNK N_THREADS=$N_THREADS bash benchmarks/peers/flashrag_crosscheck.sh"
    [ -n "$QA_N" ] && cmd="QA_N=$QA_N $cmd"
    "$PY" benchmarks/peers/flashrag_compare.py report-kept --work "$WORK" --kept "$KEPT_WORK" --command "$cmd"
    exit 0
fi
if [ ! -s "$WORK/llm_cache.jsonl" ] && [ -f "$COMMITTED_CACHE" ]; then  # resume from the committed answers
    gzip -dc "$COMMITTED_CACHE" > "$WORK/llm_cache.jsonl"
fi
"$PY" benchmarks/peers/llm_cache_proxy.py --port "$PPORT" --upstream "http://127.0.0.1:$LPORT" \
    --cache "$WORK/llm_cache.jsonl" >"$WORK/logs/proxy.log" 2>&1 &
PIDS+=($!)
wait_up "${PIDS[2]}" "http://127.0.0.1:$PPORT/v1/models" "$WORK/logs/proxy.log"

echo "crosscheck: FlashRAG's IRCoT and ITER-RETGEN (LLM calls through the caching proxy: $WORK/llm_cache.jsonl)"
TIKTOKEN_CACHE_DIR="$PEER_VENV/tiktoken_cache" "$PEER_PY" benchmarks/peers/flashrag_pipelines.py \
    --questions "$WORK/questions.jsonl" --search-url "http://127.0.0.1:$SPORT" \
    --llm-base-url "http://127.0.0.1:$PPORT/v1" --model "$MODEL" --out-dir "$WORK" --dataset musique_train \
    --topk "$TOPK" --ircot-max-iter "$STEPS" --iter-num "$ROUNDS" --max-tokens-ircot "$TOK_IRCOT" \
    --max-tokens-iter-retgen "$TOK_READER" --max-input-len "$N_CTX" --chunk "$CHUNK" ${QA_N:+--n "$QA_N"}
stop_servers

echo "crosscheck: ITER-RETGEN's last round read again over whole passages (LLM calls unless committed)"
"$PY" benchmarks/peers/flashrag_compare.py reading --work "$WORK"
cmd="CHUNK=$CHUNK N_THREADS=$N_THREADS bash benchmarks/peers/flashrag_crosscheck.sh"
[ -n "$QA_N" ] && cmd="QA_N=$QA_N $cmd"
"$PY" benchmarks/peers/flashrag_compare.py report --work "$WORK" --llm-log "$WORK/llm_cache.jsonl" --command "$cmd"
