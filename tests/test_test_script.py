"""scripts/test.sh itself: it lints and type-checks the library before the tests, it leaves no temporary results
behind, and its summary names the tests that skipped for want of the peer environment
(``bash benchmarks/peers/setup.sh``)."""
from __future__ import annotations

import os
import shutil
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


FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
case "$*" in *"-m pytest"*) echo "$TMPDIR" > "$CALLS.tmpdir"; touch "$TMPDIR/left-by-a-test" ;; esac
case "$*" in *"$FAIL_ON"*) exit 1 ;; esac
"""


def run_test_script(tmp_path: Path, *args: str, fail_on: str = "no such call", cores: int | None = None,
                    **extra_env: str) -> tuple[int, list[str]]:
    """scripts/test.sh in a copy of the checkout's layout whose set-up does nothing and whose ``.venv/bin/python``
    records its arguments (and fails when they hold ``fail_on``): its exit code and the calls, in order. ``cores``:
    what ``getconf _NPROCESSORS_ONLN`` answers (a stand-in first on the ``PATH``)."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "test.sh", root / "scripts" / "test.sh")
    (root / "scripts" / "setup.sh").write_text("exit 0\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_one.py").write_text("")
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    calls = tmp_path / "calls.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGIR_", "PYTEST_"))}
    env.update(CALLS=str(calls), FAIL_ON=fail_on, TMPDIR=str(tmp_path), **extra_env)
    if cores is not None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "getconf").write_text(f"#!/usr/bin/env bash\necho {cores}\n")
        (bin_dir / "getconf").chmod(0o755)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    out = subprocess.run(["bash", "scripts/test.sh", *args], cwd=root, env=env, text=True, capture_output=True,
                         timeout=60)
    return out.returncode, calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.parametrize("tier", [["--fast"], []])
def test_both_tiers_lint_and_type_check_the_library_before_the_tests(tmp_path, tier):
    code, calls = run_test_script(tmp_path, *tier)
    assert code == 0
    assert calls[:3] == ["-m kgir_lib.data_sources ensure", "-m ruff check kgir_lib", "-m mypy kgir_lib"]
    assert calls[3].startswith("-m pytest ") and len(calls) == 4


@pytest.mark.parametrize("failing", ["ruff check", "mypy"])
def test_a_lint_or_type_finding_fails_the_run_before_any_test(tmp_path, failing):
    code, calls = run_test_script(tmp_path, "--fast", fail_on=failing)
    assert code != 0
    assert calls[-1].startswith(f"-m {failing}") and not any("pytest" in c for c in calls)


@pytest.mark.parametrize(("cores", "setting", "expected"), [(1, None, "2"), (2, None, "3"), (7, None, "8"),
                                                            (32, None, "8"), (2, "5", "5"), (2, "0", "0")])
def test_the_workers_are_one_more_than_the_cores_at_most_eight_unless_set(tmp_path, cores, setting, expected):
    extra = {} if setting is None else {"KGIR_TEST_WORKERS": setting}
    code, calls = run_test_script(tmp_path, "--fast", cores=cores, **extra)
    assert code == 0
    args = calls[-1].split()
    assert args[args.index("-n") + 1] == expected


@pytest.mark.parametrize("tier", [["--fast"], []])
def test_the_tests_temporary_files_go_to_the_scratch_folder_and_with_it(tmp_path, tier):
    """pytest (here a stand-in that leaves a file in its ``$TMPDIR``, as a test or a process it starts might) runs with
    ``$TMPDIR`` inside the scratch folder, so what it leaves goes when the folder does: the user's ``$TMPDIR`` (here
    ``tmp_path``) ends with the entries it had."""
    before = set(os.listdir(tmp_path))
    code, calls = run_test_script(tmp_path, *tier)
    assert code == 0 and calls[-1].startswith("-m pytest ")
    seen = Path((tmp_path / "calls.txt.tmpdir").read_text().strip())
    assert seen.parent.parent == tmp_path and seen.parent.name.startswith("kgir-test-") and seen.name == "tmp"
    assert set(os.listdir(tmp_path)) - before == {"checkout", "calls.txt", "calls.txt.tmpdir"}


def test_a_test_path_runs_that_file_alone_without_the_lint(tmp_path):
    code, calls = run_test_script(tmp_path, "--fast", "tests/test_one.py")
    assert code == 0
    assert calls[0] == "-m kgir_lib.data_sources ensure" and len(calls) == 2
    assert calls[1].startswith("-m pytest ") and calls[1].endswith("tests/test_one.py")


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
