"""The cross-check scripts' shared shell functions (benchmarks/peers/crosscheck_lib.sh), run in bash."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "benchmarks" / "peers" / "crosscheck_lib.sh"


def _bash(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f'set -euo pipefail; PY="{sys.executable}"; source "{LIB}"; {script}',
                           "crosscheck", *args], capture_output=True, text=True, timeout=60)


def test_the_mode_is_read_from_the_argument_and_a_bad_one_is_named():
    assert _bash('crosscheck_mode "$@"; echo "$MODE"').stdout.strip() == "run"
    assert _bash('crosscheck_mode "$@"; echo "$MODE"', "--rescore").stdout.strip() == "rescore"
    assert _bash('crosscheck_mode "$@"; echo "$MODE"', "--dry-run").stdout.strip() == "dry"
    bad = _bash('crosscheck_mode "$@"', "--fast")
    assert bad.returncode == 2 and "unknown argument '--fast'" in bad.stderr


def test_ports_differ_a_server_is_waited_for_and_stopped_at_exit(tmp_path):
    pidfile = tmp_path / "pid"
    out = _bash(f'''
free_port A; free_port B; free_port C
[ "$A" != "$B" ] && [ "$B" != "$C" ] && [ "$A" != "$C" ] && echo distinct
"$PY" -m http.server "$A" --bind 127.0.0.1 >/dev/null 2>&1 &
PIDS+=($!); echo "$!" > "{pidfile}"
wait_up "${{PIDS[0]}}" "http://127.0.0.1:$A/" /dev/null && echo up
''')
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["distinct", "up"]
    pid = int(pidfile.read_text())
    assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0  # stopped on exit


def test_waiting_for_a_server_that_died_fails_naming_its_log():
    out = _bash('free_port A; true & PIDS+=($!); sleep 0.2; wait_up "${PIDS[0]}" "http://127.0.0.1:$A/" srv.log')
    assert out.returncode == 1 and "did not come up" in out.stderr and "srv.log" in out.stderr
