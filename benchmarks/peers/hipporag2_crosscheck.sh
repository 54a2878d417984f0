#!/usr/bin/env bash
# Cross-check of the suite's HippoRAG 2 against upstream's (PyPI hipporag 2.0.0a4) on musique_train, with
# the suite's inputs: the same corpus and published GPT-3.5 OpenIE file, the same encoder (the suite's
# all-MiniLM-L6-v2 behind an OpenAI-compatible endpoint, embed_server.py) and the same LLM (the local
# profile's Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF behind python -m llama_cpp.server, greedy).
#   1. benchmarks/peers/setup.sh            the peer environment (benchmarks/peers/.venv-hipporag)
#   2. hipporag2_compare.py suite           the suite's HippoRAG 2, cache only from results/local's response log
#                                           (or read from a run's trace file: SUITE_TRACE)
#   3. servers on 127.0.0.1                 embeddings (main env) and llama_cpp.server (--n_threads 1)
#   4. hipporag2_upstream.py                upstream index + retrieve + qa; then its PPR seeded with the
#                                           suite's kept facts. Its LLM cache stays in the work folder, so a
#                                           rerun makes no LLM call.
#   5. hipporag2_compare.py seeded          the suite's graph + PPR seeded with upstream's kept facts (no LLM)
#   6. hipporag2_compare.py report          results/benchmarks/peers_hipporag2.md
# Usage: bash benchmarks/peers/hipporag2_crosscheck.sh [--help | --dry-run | --rescore]
#   --help     print this header and exit
#   --rescore  steps 2 and a re-scored report only: the suite's side of this code (cache only) against
#              upstream's per-question scores in the committed results/benchmarks/peers_hipporag2.csv; no peer
#              environment, no server, no LLM call (what needs upstream's records is carried, labelled)
#   --dry-run  print the steps with the knobs' values and check their inputs (scripts, data, response log,
#              peer environment); start nothing, write nothing
# Knobs (environment): KGIR_DATA_DIR (default: the suite's, ../shared/data or data/samples/), PEERS_WORK (default
# benchmarks/peers/.work/hipporag2), N_THREADS (llama.cpp threads, default 1), N_CTX (default 8192),
# MAX_NEW_TOKENS (upstream QA reader budget, default 256), SYNONYMY (1: also compare rankings with synonymy
# edges on both sides, retrieval only, both seeded with upstream's kept facts; default 0), MODEL (embedded GGUF name), QA_N (upstream answers only
# the first QA_N questions; default all), SUITE_TRACE (the suite's answers from this trace file, e.g.
# results/local/traces/hipporag2/musique_train.trace.jsonl of a run made before a change to the method's
# LLM requests; default: run the suite's HippoRAG 2 cache only).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${KGIR_PYTHON:-$ROOT/.venv/bin/python}"
source "$ROOT/benchmarks/peers/crosscheck_lib.sh"
crosscheck_mode "$@"
cd "$ROOT"
PEER_PY="$ROOT/benchmarks/peers/.venv-hipporag/bin/python"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -m kgir_lib.data_sources ensure >/dev/null  # the samples (fetched into data/samples/ when missing), verified
export KGIR_DATA_DIR="${KGIR_DATA_DIR:-$("$PY" -c "from kgir_lib.config import default_data_dir; print(default_data_dir())")}"
WORK="${PEERS_WORK:-$ROOT/benchmarks/peers/.work/hipporag2}"
MODEL="${MODEL:-Qwen2.5-Coder-1.5B-Instruct-Q4_K_M}"
N_THREADS="${N_THREADS:-1}"
N_CTX="${N_CTX:-8192}"
MAX_NEW_TOKENS="${MAX_NEW_TOKENS:-256}"
SYNONYMY="${SYNONYMY:-0}"
QA_N="${QA_N:-}"
SUITE_TRACE="${SUITE_TRACE:-}"
if [ "$MODE" = dry ]; then
    say_step() { printf 'crosscheck (dry run): %s\n' "$*"; }
    missing=0
    need() {  # what path
        if [ -e "$2" ]; then say_step "  ok      $1: $2"; else say_step "  MISSING $1: $2"; missing=1; fi
    }
    say_step "work folder $WORK; model $MODEL; N_THREADS=$N_THREADS N_CTX=$N_CTX MAX_NEW_TOKENS=$MAX_NEW_TOKENS" \
             "SYNONYMY=$SYNONYMY QA_N=${QA_N:-all} SUITE_TRACE=${SUITE_TRACE:-none}"
    need "main Python" "$PY"
    need "shared data" "$KGIR_DATA_DIR/musique_train"
    need "committed response log" "$ROOT/results/local/llm_responses.jsonl.gz"
    for f in setup.sh hipporag2_compare.py hipporag2_report.py hipporag2_upstream.py embed_server.py \
             json_endpoint.py peer_run.py records.py; do
        need "script" "$ROOT/benchmarks/peers/$f"
    done
    [ -n "$SUITE_TRACE" ] && need "suite trace" "$SUITE_TRACE"
    if [ -x "$PEER_PY" ]; then say_step "  ok      peer environment: $PEER_PY"
    else say_step "  absent  peer environment: $PEER_PY (step 1 would build it: bash benchmarks/peers/setup.sh)"; fi
    say_step "steps: 1 setup.sh hipporag; 2 hipporag2_compare.py suite; 3 embed_server.py + llama_cpp.server;" \
             "4 hipporag2_upstream.py (+ --inject the suite's kept facts); 5 hipporag2_compare.py seeded;" \
             "6 hipporag2_compare.py report -> results/benchmarks/peers_hipporag2.md"
    exit "$missing"
fi
mkdir -p "$WORK/logs"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if [ "$MODE" = rescore ]; then
    echo "crosscheck (re-score): the suite's HippoRAG 2 (cache only) against the committed upstream scores"
    "$PY" benchmarks/peers/hipporag2_compare.py suite --work "$WORK"
    "$PY" benchmarks/peers/hipporag2_compare.py rescore --work "$WORK" \
        --command "bash benchmarks/peers/hipporag2_crosscheck.sh --rescore"
    exit 0
fi

bash benchmarks/peers/setup.sh hipporag

syn_flag=""; [ "$SYNONYMY" = 1 ] && syn_flag="--synonymy"
echo "crosscheck: the suite's HippoRAG 2 (cache only)"
"$PY" benchmarks/peers/hipporag2_compare.py suite --work "$WORK" ${SUITE_TRACE:+--trace "$SUITE_TRACE"}

free_port EPORT
"$PY" benchmarks/peers/embed_server.py --port "$EPORT" --profile local >"$WORK/logs/embed_server.log" 2>&1 &
PIDS+=($!)
GGUF="$("$PY" -c "from kgir_lib.llm.embedded import locate; print(locate('$MODEL'))")"
free_port LPORT
"$PY" -m llama_cpp.server --model "$GGUF" --model_alias "$MODEL" --host 127.0.0.1 --port "$LPORT" \
    --n_threads "$N_THREADS" --n_threads_batch "$N_THREADS" --n_ctx "$N_CTX" --verbose false \
    >"$WORK/logs/llama_server.log" 2>&1 &
PIDS+=($!)
wait_up "${PIDS[0]}" "http://127.0.0.1:$EPORT/v1/models" "$WORK/logs/embed_server.log"
wait_up "${PIDS[1]}" "http://127.0.0.1:$LPORT/v1/models" "$WORK/logs/llama_server.log"

run_upstream() {  # out synonymy-threshold [extra args]
    local out="$1" thr="$2"; shift 2
    PYTHONHASHSEED=0 "$PEER_PY" benchmarks/peers/hipporag2_upstream.py --data-dir "$KGIR_DATA_DIR" \
        --dataset musique_train --save-dir "$WORK/upstream" --llm-base-url "http://127.0.0.1:$LPORT/v1" \
        --llm-name "$MODEL" --embed-base-url "http://127.0.0.1:$EPORT/v1" --max-new-tokens "$MAX_NEW_TOKENS" \
        --synonymy-threshold "$thr" --out "$out" "$@"
}
# upstream has no switch for synonymy edges; a threshold above any cosine (1.01) builds none, as the local
# profile's HippoRAG 2 (hipporag2_synonymy null: off on CPU backends)
echo "crosscheck: upstream HippoRAG 2 (LLM calls: recognition filter + QA reader a question, cached)"
run_upstream "$WORK/upstream.jsonl" 1.01 --inject "$WORK/inject.jsonl" ${QA_N:+--qa-n "$QA_N"}
if [ "$SYNONYMY" = 1 ]; then
    echo "crosscheck: upstream with synonymy edges (retrieval only; the same filter requests: cache hits)"
    run_upstream "$WORK/upstream_synonymy.jsonl" 0.8 --no-qa
fi
stop_servers

"$PY" benchmarks/peers/hipporag2_compare.py seeded --work "$WORK" $syn_flag
cmd="bash benchmarks/peers/hipporag2_crosscheck.sh"
[ -n "$QA_N" ] && cmd="QA_N=$QA_N $cmd"
[ -n "$SUITE_TRACE" ] && cmd="SUITE_TRACE=$SUITE_TRACE $cmd"
[ "$SYNONYMY" = 1 ] && cmd="SYNONYMY=1 $cmd"
"$PY" benchmarks/peers/hipporag2_compare.py report --work "$WORK" --command "$cmd"
