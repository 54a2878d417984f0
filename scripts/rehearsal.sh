#!/usr/bin/env bash
# Dress rehearsal of the paper profile: profile `rehearsal` (kgir_lib/profiles/rehearsal.yaml)
# through the openai backend against two `python -m llama_cpp.server` replicas of Qwen2.5-Coder-1.5B-Instruct
# on 127.0.0.1, with two recovery tests:
#   phase 1  notebook 01 (musique_train OpenIE import + LLM extraction of a few HotpotQA passages); as soon as
#            the first completion is served, replica B is SIGKILLed: the run must go on with replica A or stop
#            with a clear error. B is restarted on the same port after notebook 01.
#   phase 2  notebooks 02-05; once notebook 04 has cached KILL_AFTER_ROWS new LLM answers, the whole job (runner
#            and its papermill kernel) is SIGKILLed: a crash.
#   phase 3  notebooks 02-05 again (the restart): it must resume from the LLM cache and repeat no finished call
#            (cache rows / usage `calls` vs `cache_hits` / server-side completion counts before and after).
#   phase 4  (REGENERATE=1, default) notebooks 01-05 with --regenerate and both servers stopped: every call
#            must come from the cache.
# Usage:   bash scripts/rehearsal.sh [OUT_DIR]      (default OUT_DIR: a new kgir_rehearsal.XXXX in $TMPDIR)
# Results, caches, server logs and a measurements file (OUT_DIR/measurements.md) go to OUT_DIR
# (KGIR_RESULTS_DIR / KGIR_FIGURES_DIR point there): the committed results are untouched.
# Knobs (environment): REHEARSAL_TIMEOUT_S (hard wall-clock bound of the whole job, default 3600),
# N_THREADS (threads per server, default 1), N_CTX (default 16384), KILL_AFTER_ROWS (default 2),
# REGENERATE (1/0), MODEL (embedded GGUF name, default Qwen2.5-Coder-1.5B-Instruct-Q4_K_M).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
OUT="${1:-$(mktemp -d "${TMPDIR:-/tmp}/kgir_rehearsal.XXXX")}"
mkdir -p "$OUT/logs"
OUT="$(cd "$OUT" && pwd)"
MODEL="${MODEL:-Qwen2.5-Coder-1.5B-Instruct-Q4_K_M}"
N_THREADS="${N_THREADS:-1}"
N_CTX="${N_CTX:-16384}"
KILL_AFTER_ROWS="${KILL_AFTER_ROWS:-2}"
REGENERATE="${REGENERATE:-1}"
TOTAL_S="${REHEARSAL_TIMEOUT_S:-3600}"
export KGIR_RESULTS_DIR="$OUT/results" KGIR_FIGURES_DIR="$OUT/figures"
RUN="$KGIR_RESULTS_DIR/rehearsal"
CACHE="$RUN/cache/llm.sqlite"
EVENTS="$OUT/events.tsv"
T_START=$(date +%s)
DEADLINE=$((T_START + TOTAL_S))
cd "$ROOT"

source "$ROOT/scripts/serve.sh"  # free_port, start_llamacpp, wait_for_server, stop_server (shared with paper.sh)
log() { local now; now=$(date +%s); printf '%s\t%d\t%s\n' "$(date -u +%H:%M:%S)" $((now - T_START)) "$*" | tee -a "$EVENTS"; }
left() { local l=$((DEADLINE - $(date +%s))); [ "$l" -gt 5 ] && echo "$l" || echo 5; }
rows() { [ -f "$CACHE" ] && "$PY" -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from calls').fetchone()[0])" "$CACHE" 2>/dev/null || echo 0; }
served() { cat "$@" 2>/dev/null | grep -c 'POST /v1/chat/completions HTTP/1.1" 200' || true; }
descendants() { local p; for p in $(ps -o pid= --ppid "$1" 2>/dev/null); do descendants "$p"; echo "$p"; done; }

GGUF="$("$PY" -c "from kgir_lib.llm.embedded import locate; print(locate('$MODEL'))")" || { echo "model $MODEL not found" >&2; exit 2; }
PORT_A=$(free_port); PORT_B=$(free_port)
while [ "$PORT_B" = "$PORT_A" ]; do PORT_B=$(free_port); done
URLS="[http://127.0.0.1:$PORT_A/v1, http://127.0.0.1:$PORT_B/v1]"
RUNNER_PID=""

start_server() {  # name port logfile
    local t0; t0=$(date +%s)
    start_llamacpp "$1" "$2" "$3" "$MODEL" "$N_THREADS" "$N_CTX" || return 1
    if ! wait_for_server "$1" "http://127.0.0.1:$2/v1" "$3" 180; then
        log "server $1 did not come up on port $2 (see $3)"; return 1
    fi
    log "server $1 up: pid ${SPID[$1]}, 127.0.0.1:$2, $(($(date +%s) - t0)) s, $N_THREADS thread(s), n_ctx $N_CTX"
}
kill_job() {  # SIGKILL a runner and every process below it (its papermill kernel runs in a new session)
    local p="$1" all; all="$(descendants "$p") $p"
    kill -9 $all 2>/dev/null; wait "$p" 2>/dev/null
}
cleanup() {
    [ -n "$RUNNER_PID" ] && kill_job "$RUNNER_PID"
    for s in "${!SPID[@]}"; do stop_server "$s"; done
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

runner() {  # logfile, runner arguments... ; runs in the background, sets RUNNER_PID
    local lf="$1"; shift
    : >"$lf"
    # --write-reference: every phase (notebook 01 with other datasets included) writes one run directory,
    # $RUN under the temporary KGIR_RESULTS_DIR, instead of a scratch directory per set of parameters
    timeout "$(left)" "$PY" -m kgir_lib.runner --profile rehearsal --write-reference -p llm_base_urls "$URLS" "$@" >"$lf" 2>&1 &
    RUNNER_PID=$!
}
wait_runner() { wait "$RUNNER_PID"; local rc=$?; RUNNER_PID=""; return $rc; }

snapshot() {  # label: cache rows and server-side completions so far
    log "snapshot $1: cache rows $(rows); completions served A=$(served "$OUT"/logs/server_A.log) B=$(served "$OUT"/logs/server_B*.log)"
}

log "rehearsal in $OUT; model $GGUF; deadline ${TOTAL_S} s"
log "command: bash scripts/rehearsal.sh $OUT (REHEARSAL_TIMEOUT_S=$TOTAL_S N_THREADS=$N_THREADS N_CTX=$N_CTX KILL_AFTER_ROWS=$KILL_AFTER_ROWS)"
start_server A "$PORT_A" "$OUT/logs/server_A.log" || exit 1
start_server B "$PORT_B" "$OUT/logs/server_B1.log" || exit 1

# ---- phase 1: notebook 01, replica B killed at the first served completion -----------------------------
log "phase 1: runner --only 01 (datasets musique_train + hotpotqa)"
runner "$OUT/logs/phase1_runner.log" --only 01 -p datasets "[musique_train, hotpotqa]"
killed_b=0
while kill -0 "$RUNNER_PID" 2>/dev/null; do
    if [ "$killed_b" = 0 ] && [ "$(served "$OUT"/logs/server_A.log "$OUT"/logs/server_B1.log)" -ge 1 ]; then
        kill -9 "${SPID[B]}"; wait "${SPID[B]}" 2>/dev/null; SPID[B]=""; killed_b=1
        log "KILLED replica B (SIGKILL) after the first served completion; cache rows $(rows)"
    fi
    sleep 2
done
wait_runner; rc1=$?
log "phase 1 runner exit code $rc1 (replica B killed: $killed_b)"
snapshot "after phase 1"
grep -E "error|Error|unreachable" "$OUT/logs/phase1_runner.log" | head -20 >"$OUT/phase1_errors.txt"
[ "$killed_b" = 1 ] && start_server B "$PORT_B" "$OUT/logs/server_B2.log"
if [ "$rc1" != 0 ]; then
    log "phase 1 failed: rerunning notebook 01 with both replicas (resume from the cache)"
    runner "$OUT/logs/phase1b_runner.log" --only 01 -p datasets "[musique_train, hotpotqa]"
    wait_runner; log "phase 1b runner exit code $?"
fi
cp -r "$RUN/usage" "$OUT/usage_phase1" 2>/dev/null; cp "$RUN/runtime/timings.tsv" "$OUT/timings_phase1.tsv" 2>/dev/null

# ---- phase 2: notebooks 02-05, the whole job killed in notebook 04 -----------------------------------
log "phase 2: runner --only 02 03 04 05"
runner "$OUT/logs/phase2_runner.log" --only 02 03 04 05
rows04=""; killed_job=0
while kill -0 "$RUNNER_PID" 2>/dev/null; do
    if [ -z "$rows04" ] && grep -q "==> 04_" "$OUT/logs/phase2_runner.log"; then
        rows04=$(rows); log "notebook 04 started; cache rows $rows04"
    fi
    if [ -n "$rows04" ] && [ "$killed_job" = 0 ] && [ "$(rows)" -ge $((rows04 + KILL_AFTER_ROWS)) ]; then
        snapshot "just before the crash"
        kill_job "$RUNNER_PID"; RUNNER_PID=""; killed_job=1
        log "KILLED the job (runner + kernel, SIGKILL) during $(grep '==> ' "$OUT/logs/phase2_runner.log" | tail -1 | cut -c5-30); cache rows $(rows)"
        break
    fi
    sleep 2
done
if [ "$killed_job" = 0 ]; then wait_runner; log "phase 2 runner exit code $? (job not killed)"; fi
ROWS_BEFORE=$(rows)
cp -r "$RUN/usage" "$OUT/usage_phase2" 2>/dev/null
sleep 5  # let the servers finish (or drop) the answers that were in flight at the crash
snapshot "after phase 2 (crash)"

# ---- phase 3: the restart ---------------------------------------------------------------------------
log "phase 3: restart, runner --only 02 03 04 05"
runner "$OUT/logs/phase3_runner.log" --only 02 03 04 05
wait_runner; rc3=$?
log "phase 3 runner exit code $rc3"
snapshot "after phase 3 (restart); rows before the restart $ROWS_BEFORE"
cp -r "$RUN/usage" "$OUT/usage_phase3" 2>/dev/null; cp "$RUN/runtime/timings.tsv" "$OUT/timings_phase3.tsv" 2>/dev/null

# ---- phase 4: regenerate from the cache with no server ------------------------------------------------
for s in A B; do stop_server "$s"; done
log "servers stopped; completions served in total A=$(served "$OUT"/logs/server_A.log) B=$(served "$OUT"/logs/server_B*.log)"
if [ "$REGENERATE" = 1 ] && [ "$rc3" = 0 ]; then
    log "phase 4: runner --regenerate --only 01 (musique_train + hotpotqa), then --only 02 03 04 05 (servers stopped)"
    runner "$OUT/logs/phase4a_runner.log" --regenerate --only 01 -p datasets "[musique_train, hotpotqa]"
    wait_runner; rc4=$?
    if [ "$rc4" = 0 ]; then runner "$OUT/logs/phase4b_runner.log" --regenerate --only 02 03 04 05; wait_runner; rc4=$?; fi
    log "phase 4 runner exit code $rc4 (cache rows $(rows))"
fi

# ---- measurements -------------------------------------------------------------------------------------
"$PY" - "$OUT" <<'EOF'
import json, sqlite3, sys
from pathlib import Path
import pandas as pd
from kgir_lib.report import to_markdown

out = Path(sys.argv[1]); run = out / "results" / "rehearsal"
lines = [f"# Rehearsal measurements ({out})", ""]
for phase in ("usage_phase1", "usage_phase2", "usage_phase3"):
    for csv in sorted((out / phase).glob("*.csv")):
        lines += [f"## {phase}/{csv.name}", "", to_markdown(pd.read_csv(csv)), ""]
stages = []  # per method and stage, from the trace metadata of notebooks 04-05 (the last run of each method)
for meta in sorted(run.glob("traces/*/*.trace.meta.json")):
    m = json.loads(meta.read_text())
    for stage, u in (m.get("stages") or {}).items():
        stages.append({"method": m.get("method"), "dataset": m.get("dataset"), "questions": len(m.get("qids", [])),
                       "stage": stage, **u, "method wall s": m.get("wall_seconds")})
if stages:
    lines += ["## per method and stage (traces/*/*.trace.meta.json)", "", to_markdown(pd.DataFrame(stages)), ""]
for name in ("05_cost_per_question.csv", "05_indexing_cost.csv"):
    p = run / "tables" / name
    if p.exists():
        lines += [f"## tables/{name}", "", to_markdown(pd.read_csv(p)), ""]
db = run / "cache" / "llm.sqlite"
if db.exists():
    con = sqlite3.connect(db)
    n, pt, ct, s = con.execute("select count(*), sum(prompt_tokens), sum(completion_tokens), sum(seconds) from calls").fetchone()
    lines += [f"cache: {n} rows, {pt} prompt + {ct} completion tokens, {s:.0f} s of server time", ""]
for t in sorted(out.glob("timings_phase*.tsv")) + sorted(run.glob("runtime/timings_regenerate.tsv")):
    lines += [f"## {t.name}", "", "```", t.read_text(), "```", ""]
lines += ["## events", "", "```", (out / "events.tsv").read_text(), "```"]
(out / "measurements.md").write_text("\n".join(lines))
print(f"measurements: {out / 'measurements.md'}")
EOF
[ -f "$RUN/tables/05_cost_per_question.csv" ] && "$PY" -m kgir_lib.eval.cost "$OUT/paper_cost" --profile rehearsal --extract-dataset hotpotqa
log "done in $(($(date +%s) - T_START)) s"
