#!/usr/bin/env bash
# Mutation testing of the modules behind the committed numbers (claims, statistics, the mechanism tables, the loop,
# entity matching, redaction; mutmut: its settings, the scope and the fast tests it runs are [tool.mutmut] in pyproject.toml).
#
#   bash benchmarks/mutation.sh            # a fresh run (removes mutants/ first), then the report
#   bash benchmarks/mutation.sh --resume   # go on with the mutants not yet tested in mutants/
#   bash benchmarks/mutation.sh --survivors [GLOB...]  # run the surviving mutants of mutants/ again (after tests
#                                          # were added), or those whose names match a GLOB ('kgir_lib.eval.stats.*')
#   bash benchmarks/mutation.sh --report   # only the report of the last run
#
# Environment: PYTHON (default .venv/bin/python; mutmut must be installed beside it: the dev extra),
# MAX_CHILDREN (parallel mutants, default: the CPU count), KGIR_DATA_DIR (default: the suite's data folder).
# The report (counts and score per module and in all, labelled partial when mutants are left unchecked; every
# surviving mutant with its diff and whether tests/test_pinned_tables.py runs it) is printed and written to
# mutants/report.md; the survivors grouped by a rule on their diff (benchmarks/mutation_groups.py) go to
# mutants/groups.md. results/benchmarks/mutation.md records a run. mutants/ is mutmut's working folder (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
case "$mode" in
  -h|--help) sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  ""|--resume|--survivors|--report) ;;
  *) echo "mutation.sh: unknown option '$mode' (--resume, --survivors, --report or --help)" >&2; exit 2 ;;
esac
PY="${PYTHON:-.venv/bin/python}"
MUTMUT="$(dirname "$PY")/mutmut"
[ -x "$MUTMUT" ] || { echo "mutation.sh: no mutmut beside $PY (pip install mutmut==3.8.1, the dev extra)" >&2; exit 1; }

# The tests run inside mutants/, so every location they read must not be relative to the package there.
export KGIR_DATA_DIR="${KGIR_DATA_DIR:-$("$PY" -c 'from kgir_lib.config import default_data_dir; print(default_data_dir().resolve())')}"
export KGIR_PROFILE=ci MPLBACKEND=Agg
export KGIR_RESULTS_DIR="$(mktemp -d)/results" KGIR_FIGURES_DIR="$(mktemp -d)/figures"
unset PYTHONPATH  # only mutants/kgir_lib may be importable while mutants run

if [ "$mode" != "--report" ]; then
  names=()
  if [ "$mode" = "--survivors" ]; then
    mapfile -t names < <("$MUTMUT" results | sed -n 's/^ *\([^ :]*\): survived$/\1/p' | "$PY" -c '
import fnmatch, sys
globs = sys.argv[1:] or ["*"]
print("".join(n for n in sys.stdin if any(fnmatch.fnmatch(n.strip(), g) for g in globs)), end="")' "${@:2}")
    echo "${#names[@]} surviving mutants to run again"
  elif [ "$mode" != "--resume" ]; then
    rm -rf mutants
  fi
  echo "start $(date -u +%FT%TZ); load average $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
  start=$(date +%s)
  TIMEFORMAT="mutmut run: %R s wall, %U s user + %S s system CPU (its processes)"
  log="$(mktemp -t mutmut-run.XXXXXX.log)"
  echo "mutmut's whole output: $log"
  time ("$MUTMUT" run --max-children "${MAX_CHILDREN:-$(nproc)}" "${names[@]}" | tr '\r' '\n' | grep -v '^\s*$' > "$log") || status=$?
  tail -n 5 "$log"
  [ "${status:-0}" = 0 ] || { echo "mutation.sh: mutmut run failed (rc $status); its whole output: $log" >&2; exit "$status"; }
  echo "end $(date -u +%FT%TZ); $(( $(date +%s) - start )) s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
fi

"$MUTMUT" export-cicd-stats >/dev/null
"$PY" - "$MUTMUT" <<'EOF'
"""The report: the counts per mutated module and in all (mutmut's verdict of each mutant, as its results list
them), the score, then every surviving mutant with its diff.

score = (killed + timeout) / tested, where tested = every mutant with a verdict (killed, timeout, survived, no
tests, suspicious, segfault); a run stopped before every mutant was checked is labelled partial."""
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

mutmut = sys.argv[1]
COLUMNS = ["killed", "timeout", "survived", "no tests", "suspicious", "segfault", "skipped", "not checked"]
per_module = {}
for meta in sorted(Path("mutants").glob("kgir_lib/**/*.py.meta")):
    codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
    if codes:
        c = Counter(status_by_exit_code[v] for v in codes.values())
        c["total"] = len(codes)
        per_module[str(meta.relative_to("mutants"))[:-len(".meta")]] = c
assert all(set(c) <= {*COLUMNS, "total"} for c in per_module.values()), per_module


def score(c: Counter) -> tuple:
    tested = c["total"] - c["skipped"] - c["not checked"]
    return tested, (100 * (c["killed"] + c["timeout"]) / tested if tested else float("nan"))


total = sum(per_module.values(), Counter())
stats = json.loads(Path("mutants/mutmut-cicd-stats.json").read_text())
assert stats["total"] == total["total"] and stats["killed"] == total["killed"], (stats, dict(total))
tested, pct = score(total)
partial = total["not checked"] > 0
head = ["module", "total", *COLUMNS, "tested", "score %"]
rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
for name, c in [*per_module.items(), ("all", total)]:
    n, s = score(c)
    rows.append("| " + " | ".join([f"`{name}`" if name != "all" else "**all**", str(c["total"]),
                                   *(str(c[k]) for k in COLUMNS), str(n), f"{s:.1f}" if n else "–"]) + " |")
label = (f"partial: {tested} of {total['total']} mutants tested, {total['not checked']} not checked" if partial
         else f"complete: all {total['total']} mutants checked")
lines = ["# mutmut report", "", *rows, "",
         f"score (killed + timeout) / tested: {pct:.1f} % ({label})", ""]
survivors = [l.split(":")[0].strip() for l in subprocess.run([mutmut, "results"], capture_output=True,
             text=True).stdout.splitlines() if l.strip().endswith(": survived")]
for name in survivors:
    diff = subprocess.run([mutmut, "show", name], capture_output=True, text=True).stdout.strip()
    tests = subprocess.run([mutmut, "tests-for-mutant", name], capture_output=True, text=True).stdout.split()
    pinned = sum("test_pinned_tables.py" in t for t in tests)
    lines += [f"## {name}", "", f"tests run: {len(tests)}, of them pinning tests: {pinned}", "", "```diff", diff,
              "```", ""]
Path("mutants/report.md").write_text("\n".join(lines))
print("\n".join(lines[:len(rows) + 4]))
print(f"{len(survivors)} surviving mutants; diffs in mutants/report.md")
EOF
"$PY" benchmarks/mutation_groups.py mutants/report.md > mutants/groups.md
echo "survivors grouped: mutants/groups.md"
