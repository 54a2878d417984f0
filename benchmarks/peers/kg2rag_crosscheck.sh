#!/usr/bin/env bash
# Cross-check of the suite's two KG²RAGs against the authors' code (GitHub nju-websoft/KG2RAG at the commit pinned
# in setup.sh) on the local profile's questions (all 100 musique_train and 84 hotpotqa), with the same inputs on
# both sides: each question's seed chunks with their scores, the triples of every chunk, the page titles as the
# entity set and the same reranker scores (the suite's: bge-reranker-large cannot be downloaded here). No LLM call:
# the suite's graph and NER are read cache only from the committed response log; upstream's reader is not run.
#   1. benchmarks/peers/setup.sh kg2rag     the peer environment (benchmarks/peers/.venv-kg2rag, the authors' code
#                                           checked out in it: from GitHub, or from KG2RAG_CHECKOUT)
#   2. kg2rag_compare.py suite              the shared inputs, kg2rag and kg2rag_code stage by stage, the score
#                                           table, the weighted graphs of the spanning-tree check
#   3. embed_server.py on 127.0.0.1         the suite's encoder, for any text the suite never scored
#   4. kg2rag_upstream.py run               the authors' three post-processors with the hash order taken out
#                                           (--order insertion) and with one source of it taken out at a time
#                                           (--order sets / views, SOURCE_SEEDS seeds); kg2rag_upstream.py mst:
#                                           networkx's trees; then untouched, once per hash seed (PYTHONHASHSEED =
#                                           0 .. HASH_SEEDS-1), seed by seed over the datasets. Each run is kept
#                                           with a stamp of its inputs, so a stopped cross-check started again runs
#                                           only what is missing (with a smaller HASH_SEEDS: the seeds it finished)
#   5. kg2rag_compare.py report             results/benchmarks/peers_kg2rag.md and .csv
# Usage: bash benchmarks/peers/kg2rag_crosscheck.sh [--uncleaned] [--help | --dry-run | --rescore]
#   --help     print this header and exit
#   --uncleaned  both sides read the triples as extracted (the self-loops and repeats up to case the suite's loader
#              drops kept): steps 2 to 5 in their own work folder (default benchmarks/peers/.work/kg2rag-uncleaned),
#              upstream untouched once (HASH_SEEDS default 1, SOURCE_SEEDS default 0) and in insertion order, no
#              spanning trees; the cleaned run's run directory (CLEANED_WORK, default benchmarks/peers/.work/kg2rag)
#              is copied in first when the folder has none, so both runs score the seed chunks with the same vectors;
#              writes results/benchmarks/peers_kg2rag_uncleaned.csv and .json, which the report
#              renders beside the run on the cleaned triples (re-render: kg2rag_compare.py rescore, or the rebuild)
#   --rescore  steps 2 and a re-scored report only: this code's side against upstream's per-question lists in the
#              committed results/benchmarks/peers_kg2rag.csv; no peer environment, no server, no LLM call (the
#              spanning trees are compared with the main environment's networkx, and the report says so)
#   --dry-run  print the steps with the knobs' values and check their inputs; start nothing, write nothing
# Knobs (environment): KGIR_DATA_DIR (default: the suite's, ../shared/data or data/samples/), PEERS_WORK (default
# benchmarks/peers/.work/kg2rag), PROFILE (default local), HASH_SEEDS (untouched upstream runs, default 5),
# SOURCE_SEEDS (runs with only the module's sets, or only networkx's views, in insertion order; default 3),
# KG2RAG_CHECKOUT (a local clone of the authors' repository for step 1, when GitHub cannot be reached).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${KGIR_PYTHON:-$ROOT/.venv/bin/python}"
source "$ROOT/benchmarks/peers/crosscheck_lib.sh"
UNCLEANED=()  # the suite and report steps' flag: empty, or --uncleaned
if [ "${1:-}" = "--uncleaned" ]; then UNCLEANED=(--uncleaned); shift; fi
crosscheck_mode "$@"
cd "$ROOT"
VENV="$ROOT/benchmarks/peers/.venv-kg2rag"
PEER_PY="$VENV/bin/python"
CHECKOUT="$VENV/src/KG2RAG"
PROFILE="${PROFILE:-local}"
if [ ${#UNCLEANED[@]} -gt 0 ]; then
    [ "$MODE" = rescore ] && { echo "crosscheck: --uncleaned and --rescore do not go together" >&2; exit 2; }
    WORK="${PEERS_WORK:-$ROOT/benchmarks/peers/.work/kg2rag-uncleaned}"
    CLEANED_WORK="${CLEANED_WORK:-$ROOT/benchmarks/peers/.work/kg2rag}"
    HASH_SEEDS="${HASH_SEEDS:-1}"
    SOURCE_SEEDS="${SOURCE_SEEDS:-0}"
else
    WORK="${PEERS_WORK:-$ROOT/benchmarks/peers/.work/kg2rag}"
    HASH_SEEDS="${HASH_SEEDS:-5}"
    SOURCE_SEEDS="${SOURCE_SEEDS:-3}"
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if [ "$MODE" = dry ]; then
    say() { printf 'crosscheck (dry run): %s\n' "$*"; }
    missing=0
    need() { if [ -e "$2" ]; then say "  ok      $1: $2"; else say "  MISSING $1: $2"; missing=1; fi; }
    say "work folder $WORK; profile $PROFILE; HASH_SEEDS=$HASH_SEEDS SOURCE_SEEDS=$SOURCE_SEEDS;" \
        "KG2RAG_CHECKOUT=${KG2RAG_CHECKOUT:-none (GitHub)}"
    need "main Python" "$PY"
    need "committed response log" "$ROOT/results/$PROFILE/llm_responses.jsonl.gz"
    for f in setup.sh kg2rag-requirements.txt kg2rag_compare.py kg2rag_report.py kg2rag_upstream.py embed_server.py \
             json_endpoint.py peer_run.py records.py; do
        need "script" "$ROOT/benchmarks/peers/$f"
    done
    if [ -x "$PEER_PY" ] && [ -d "$CHECKOUT/code" ]; then say "  ok      peer environment: $PEER_PY, code: $CHECKOUT"
    else say "  absent  peer environment: $VENV (step 1 would build it: bash benchmarks/peers/setup.sh kg2rag)"; fi
    say "steps: 1 setup.sh kg2rag; 2 kg2rag_compare.py suite; 3 embed_server.py; 4 kg2rag_upstream.py run" \
        "(PYTHONHASHSEED 0..$((HASH_SEEDS - 1)), then --order insertion) + mst; 5 kg2rag_compare.py report" \
        "-> results/benchmarks/peers_kg2rag.md"
    exit "$missing"
fi
"$PY" -m kgir_lib.data_sources ensure >/dev/null  # the samples (fetched into data/samples/ when missing), verified
export KGIR_DATA_DIR="${KGIR_DATA_DIR:-$("$PY" -c "from kgir_lib.config import default_data_dir; print(default_data_dir())")}"
mkdir -p "$WORK/logs"
if [ "$MODE" = rescore ]; then
    echo "crosscheck (re-score): this code's side against upstream's lists in the committed CSV"
    "$PY" benchmarks/peers/kg2rag_compare.py suite --work "$WORK" --profile "$PROFILE"
    "$PY" benchmarks/peers/kg2rag_compare.py rescore --work "$WORK" --profile "$PROFILE" \
        --command "bash benchmarks/peers/kg2rag_crosscheck.sh --rescore"
    exit 0
fi

bash benchmarks/peers/setup.sh kg2rag
echo "crosscheck: the suite's side (cache only)${UNCLEANED[*]:+, on the uncleaned triples}"
if [ ${#UNCLEANED[@]} -gt 0 ]; then
    # The cleaned run's run directory (its encoder cache) copied in first, when this folder has none: the seed chunks'
    # scores are then the cleaned run's to the last bit, so the two runs differ in the triples alone.
    seed_run_dir "$CLEANED_WORK" "$WORK"
    "$PY" benchmarks/peers/kg2rag_compare.py suite --work "$WORK" --profile "$PROFILE" --uncleaned --no-mst
else
    "$PY" benchmarks/peers/kg2rag_compare.py suite --work "$WORK" --profile "$PROFILE"
fi

free_port EPORT
"$PY" benchmarks/peers/embed_server.py --port "$EPORT" --profile "$PROFILE" >"$WORK/logs/embed_server.log" 2>&1 &
PIDS+=($!)
wait_up "${PIDS[0]}" "http://127.0.0.1:$EPORT/v1/models" "$WORK/logs/embed_server.log"

DATASETS=$("$PY" -c "from kgir_lib.config import load_config; print(' '.join(load_config('$PROFILE').datasets))")
# upstream_once ORDER HASH_SEED DATASET OUT: one run of the authors' code, its stderr without the libraries' noise.
upstream_once() {
    PYTHONHASHSEED="$2" "$PEER_PY" benchmarks/peers/kg2rag_upstream.py run --checkout "$CHECKOUT" \
        --inputs "$WORK/$3/inputs.json.gz" --scores "$WORK/$3/scores.jsonl.gz" \
        --embed-url "http://127.0.0.1:$EPORT/v1" --order "$1" --out "$4" 2> >(grep -v "nltk_data\|UnsupportedFieldAttributeWarning\|warnings.warn" >&2)
}
# run_upstream OUT ORDER HASH_SEED DATASET: that run written to OUT.part and renamed when it ends, beside a stamp of
# its inputs (OUT.inputs: their content's checksums, the order and the seed). A run whose OUT and stamp are there
# from an earlier start on the same inputs is kept, not run again: a cross-check stopped part-way resumes
# (crosscheck_lib.sh: inputs_stamp, resumable; tests/test_crosscheck_resume.py runs them with stub runs).
run_upstream() {
    local out="$1" order="$2" seed="${3:-0}" dataset="$4" stamp
    stamp="$(inputs_stamp "$WORK/$dataset" "$order" "$seed")"
    resumable "$out" "$stamp" upstream_once "$order" "$seed" "$dataset"
}
# The ordered runs and the spanning trees first (the report needs them whatever the seed count).
for dataset in $DATASETS; do
    for seed in $(seq 0 $((SOURCE_SEEDS - 1))); do  # one source of hash order at a time
        run_upstream "$WORK/$dataset/upstream_sets$seed.jsonl" sets "$seed" "$dataset"
        run_upstream "$WORK/$dataset/upstream_views$seed.jsonl" views "$seed" "$dataset"
    done
    run_upstream "$WORK/$dataset/upstream_insertion.jsonl" insertion 0 "$dataset"
    [ ${#UNCLEANED[@]} -gt 0 ] && continue  # no spanning-tree graphs on the uncleaned triples
    "$PEER_PY" benchmarks/peers/kg2rag_upstream.py mst --graphs "$WORK/$dataset/mst_graphs.jsonl.gz" \
        --out "$WORK/$dataset/upstream_mst.jsonl"
done
# Then the untouched runs seed by seed, each seed on every dataset before the next: a run stopped part-way leaves
# whole seeds, and a start with a smaller HASH_SEEDS keeps them all and goes on to the report (--hash-seeds).
for seed in $(seq 0 $((HASH_SEEDS - 1))); do
    for dataset in $DATASETS; do
        run_upstream "$WORK/$dataset/upstream_seed$seed.jsonl" as-is "$seed" "$dataset"
    done
done
stop_servers

cmd="bash benchmarks/peers/setup.sh kg2rag && bash benchmarks/peers/kg2rag_crosscheck.sh${UNCLEANED[*]:+ --uncleaned}"
[ -n "${KG2RAG_CHECKOUT:-}" ] && cmd="KG2RAG_CHECKOUT=<a local clone> $cmd"
if [ ${#UNCLEANED[@]} -gt 0 ]; then
    [ "$HASH_SEEDS" != 1 ] && cmd="HASH_SEEDS=$HASH_SEEDS $cmd"
    [ "$SOURCE_SEEDS" != 0 ] && cmd="SOURCE_SEEDS=$SOURCE_SEEDS $cmd"
else
    [ "$HASH_SEEDS" != 5 ] && cmd="HASH_SEEDS=$HASH_SEEDS $cmd"
    [ "$SOURCE_SEEDS" != 3 ] && cmd="SOURCE_SEEDS=$SOURCE_SEEDS $cmd"
fi
"$PY" benchmarks/peers/kg2rag_compare.py report --work "$WORK" --profile "$PROFILE" --command "$cmd" \
    --hash-seeds "$HASH_SEEDS" "${UNCLEANED[@]}"
