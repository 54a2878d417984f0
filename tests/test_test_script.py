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
    afterwards, and so is everything else it put there (pytest's tmp_path folders, torch's compiled kernels: the
    entries are those before it), and the summary names the tests the peer environment would run."""
    private = tmp_path / "tmp"
    private.mkdir()
    (private / "mine.txt").write_text("the user's own")
    env = {k: v for k, v in os.environ.items() if k not in ("KGIR_TEST_RESULTS_DIR", "PYTEST_XDIST_WORKER")}
    env.update(TMPDIR=str(private), KGIR_TEST_WORKERS="0")  # (one process: no worker to start)
    out = subprocess.run(["bash", "scripts/test.sh", "tests/test_peer_agreement.py", "-k", "peer_env"],
                         cwd=ROOT, env=env, text=True, capture_output=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert not list(private.glob("kgir-test-*")), "scripts/test.sh left its results folder"
    assert sorted(os.listdir(private)) == ["mine.txt"], "scripts/test.sh left files in $TMPDIR"
    summary = [line for line in out.stdout.splitlines() if line.startswith("peer environment absent")]
    if PEER_PY.exists():
        assert summary == []
    else:
        assert len(summary) == 1 and f"`{PEER_SETUP} hipporag`" in summary[0] and "2 test(s) skipped" in summary[0]
        assert "test_ppr_matches_upstreams_igraph_prpack_in_the_peer_env" in summary[0]


@pytest.mark.slow
def test_the_fast_tier_leaves_tmpdir_with_the_entries_it_had(tmp_path):
    """``bash scripts/test.sh --fast`` on one file whose tests use tmp_path, with a private ``$TMPDIR``: no
    ``pytest-of-<user>/`` or any other entry stays behind."""
    private = tmp_path / "tmp"
    private.mkdir()
    (private / "mine.txt").write_text("the user's own")
    env = {k: v for k, v in os.environ.items() if k not in ("KGIR_TEST_RESULTS_DIR", "PYTEST_XDIST_WORKER")}
    env.update(TMPDIR=str(private), KGIR_TEST_WORKERS="0")
    out = subprocess.run(["bash", "scripts/test.sh", "--fast", "tests/test_torch_wheel.py"], cwd=ROOT, env=env,
                         text=True, capture_output=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert sorted(os.listdir(private)) == ["mine.txt"], "scripts/test.sh --fast left files in $TMPDIR"


def test_set_up_installs_the_kernel_spec_leaving_no_temporary_folder(tmp_path):
    """``ipykernel install`` writes the spec into ``tempfile.mkdtemp(suffix="_kernels")/python3`` and removes only
    ``python3``: run bare, it leaves an empty ``tmp*_kernels/`` in ``$TMPDIR``. scripts/setup.sh runs it in a folder
    of its own that it removes; its lines, run here into a scratch prefix, leave ``$TMPDIR`` as it was."""
    import sys

    text = (ROOT / "scripts" / "setup.sh").read_text()
    end = 'rm -rf "$kernels_tmp"'
    block = text[text.index("kernels_tmp=$(mktemp -d)"):text.index(end) + len(end)]
    assert "--sys-prefix" in block
    private = tmp_path / "tmp"
    private.mkdir()
    env = {**os.environ, "TMPDIR": str(private), "VENV": str(Path(sys.executable).parents[1])}
    bare = subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(tmp_path / "bare"),
                           "--name", "probe"], env=env, capture_output=True, text=True, timeout=120)
    assert bare.returncode == 0, bare.stderr
    left = [p.name for p in private.iterdir()]
    assert len(left) == 1 and left[0].endswith("_kernels")  # the cause (if ipykernel fixes it, this says so)
    (private / left[0]).rmdir()
    ours = block.replace("--sys-prefix", f"--prefix {tmp_path / 'ours'}").replace('"$VENV/bin/python"',
                                                                                 f'"{sys.executable}"')
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", ours], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "ours" / "share" / "jupyter" / "kernels" / "python3" / "kernel.json").is_file()
    assert list(private.iterdir()) == []
