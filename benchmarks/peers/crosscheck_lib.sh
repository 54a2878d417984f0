# What the cross-check scripts share (sourced, not run): their one argument, the servers they start on 127.0.0.1
# (free ports, waiting for a server to answer, stopping every server however the script ends) and runs that resume
# (each kept beside a stamp of its inputs). The caller sets ROOT and PY (the main environment's Python) first.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then  # run, not sourced (as with --help): say what it is
    sed -n '1,3p' "$0" | sed 's/^# \{0,1\}//'
    echo "The scripts: bash benchmarks/peers/{hipporag2,kg2rag,flashrag}_crosscheck.sh --help"
    [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]
    exit $?
fi

# Reads the script's argument into MODE (run, dry or rescore); --help prints the script's header and exits.
crosscheck_mode() {
    local script="${BASH_SOURCE[1]:-$0}"
    MODE=run
    case "${1:-}" in
        -h|--help) sed -n '2,/^set -euo/p' "$script" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        --dry-run) MODE=dry ;;
        --rescore) MODE=rescore ;;
        "") ;;
        *) echo "crosscheck: unknown argument '$1' (--help, --dry-run, --rescore)" >&2; exit 2 ;;
    esac
}

# free_port NAME: sets the variable NAME to a free port on 127.0.0.1, none handed out before by this script.
PORTS_GIVEN=" "
free_port() {
    local port
    while :; do
        port=$("$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
        [[ "$PORTS_GIVEN" == *" $port "* ]] || break
    done
    PORTS_GIVEN+="$port "
    printf -v "$1" '%s' "$port"
}

# wait_up PID URL LOG: until URL answers; fails when the server exits or takes more than 300 s.
wait_up() {
    local t0 n=0; t0=$(date +%s)
    until curl -sf "$2" >/dev/null; do
        if ! kill -0 "$1" 2>/dev/null || [ $(($(date +%s) - t0)) -gt 300 ]; then
            echo "crosscheck: server did not come up at $2 (log: $3)" >&2; return 1
        fi
        # every 0.1 s for the first second (a small server is up within it), then every second (a model loading)
        if [ "$n" -lt 10 ]; then sleep 0.1; else sleep 1; fi
        n=$((n + 1))
    done
}

# The servers started (PIDS+=($!) after each); stop_servers stops them, and runs on every exit.
PIDS=()
stop_servers() {
    for p in "${PIDS[@]}"; do { kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; } || true; done
    PIDS=()
    return 0
}
trap stop_servers EXIT
trap 'exit 130' INT TERM

# A run that resumes: its output is written to OUT.part and renamed OUT when the command ends well, then a stamp of
# its inputs is written to OUT.inputs; a start that finds OUT with the same stamp keeps it and runs nothing.

# inputs_stamp DIR ORDER SEED: prints the stamp of a run over DIR/inputs.json.gz and DIR/scores.jsonl.gz: the
# sha256 of each file's content (not of the gzip file, whose header carries a time), then ORDER and SEED, as
# "<inputs> <scores> ORDER SEED". Fails naming a missing input.
inputs_stamp() {
    local f sums=""
    for f in inputs.json.gz scores.jsonl.gz; do
        [ -f "$1/$f" ] || { echo "crosscheck: missing input $1/$f" >&2; return 1; }
        sums+="$(gzip -dc "$1/$f" | sha256sum | cut -d' ' -f1) " || return 1
    done
    printf '%s%s %s' "$sums" "$2" "$3"
}

# run_kept OUT STAMP: true when OUT was finished by an earlier start on the same inputs (OUT.inputs holds STAMP).
run_kept() {
    [ -f "$1" ] && [ -f "$1.inputs" ] && [ "$(cat "$1.inputs")" = "$2" ]
}

# resumable OUT STAMP CMD...: kept (a line says so) when run_kept OUT STAMP; else runs CMD with OUT.part as its last
# argument and, when it succeeds, renames OUT.part to OUT and writes STAMP to OUT.inputs. The earlier stamp is removed
# just before the rename, so a start stopped between the rename and the new stamp leaves OUT without one (run again
# next time), and a failed command leaves an earlier OUT and its stamp as they were (the failure's status returned).
resumable() {
    local out="$1" stamp="$2"
    shift 2
    if run_kept "$out" "$stamp"; then
        echo "crosscheck: kept $(basename "$out") of $(basename "$(dirname "$out")") (same inputs)"
        return 0
    fi
    rm -f "$out.part"
    "$@" "$out.part" || return
    [ -f "$out.part" ] || { echo "crosscheck: $* wrote no $out.part" >&2; return 1; }
    rm -f "$out.inputs"
    mv "$out.part" "$out"
    printf '%s' "$stamp" > "$out.inputs"
}

# seed_run_dir FROM TO: copies FROM/results (a run directory with its encoder cache) to TO/results when TO has none
# and FROM has one, and says so; otherwise leaves TO as it is. A second run whose inputs should be scored with the
# first run's vectors (the same to the last bit) starts from that copy.
seed_run_dir() {
    [ -d "$2/results" ] && return 0
    [ -d "$1/results" ] || return 0
    mkdir -p "$2" && cp -a "$1/results" "$2/results"
    echo "crosscheck: the run directory (encoder cache) of $1 copied to $2"
}
