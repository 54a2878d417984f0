"""scripts/test.sh itself: it leaves no temporary results behind, and its summary names the tests that skipped for
want of the peer environment (``bash benchmarks/peers/setup.sh``)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import PEER_SETUP, peer_skips

ROOT = Path(__file__).resolve().parents[1]
PEER_PY = ROOT / "benchmarks" / "peers" / ".venv-hipporag" / "bin" / "python"


def test_peer_skips_are_the_tests_skipped_for_the_peer_environment():
    reports = [SimpleNamespace(nodeid="tests/a.py::t1", longrepr=("a.py", 3, f"Skipped: peer environment absent "
                                                                            f"({PEER_SETUP})")),
               SimpleNamespace(nodeid="tests/b.py::t2", longrepr=("b.py", 9, "Skipped: no samples")),
               SimpleNamespace(nodeid="tests/a.py::t1", longrepr=("a.py", 3, f"Skipped: ({PEER_SETUP})")),
               SimpleNamespace(nodeid="tests/c.py::t3", longrepr=("c.py", 5, f"Skipped: peer environment absent "
                                                                            f"({PEER_SETUP} kg2rag)"))]
    assert peer_skips(reports) == {PEER_SETUP: ["tests/a.py::t1"], f"{PEER_SETUP} kg2rag": ["tests/c.py::t3"]}
    assert peer_skips([]) == {}


@pytest.mark.slow
def test_the_test_script_removes_its_results_and_names_the_peer_skips(tmp_path):
    """``bash scripts/test.sh`` on the peer-agreement tests (whole-suite tests: they run the peer's interpreter; a
    path argument collects that file alone), with a private ``$TMPDIR``: its temporary results folder is gone
    afterwards, and the summary names the tests the peer environment would run."""
    private = tmp_path / "tmp"
    private.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("KGIR_TEST_RESULTS_DIR", "PYTEST_XDIST_WORKER")}
    env.update(TMPDIR=str(private), KGIR_TEST_WORKERS="0")  # (one process: no worker to start)
    out = subprocess.run(["bash", "scripts/test.sh", "tests/test_peer_agreement.py", "-k", "peer_env"],
                         cwd=ROOT, env=env, text=True, capture_output=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert not list(private.glob("kgir-test-*")), "scripts/test.sh left its results folder"
    summary = [line for line in out.stdout.splitlines() if line.startswith("peer environment absent")]
    if PEER_PY.exists():
        assert summary == []
    else:
        assert len(summary) == 1 and f"`{PEER_SETUP} hipporag`" in summary[0] and "2 test(s) skipped" in summary[0]
        assert "test_ppr_matches_upstreams_igraph_prpack_in_the_peer_env" in summary[0]
