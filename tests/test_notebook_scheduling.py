"""The notebooks' cells and their table checks stay on one worker, in order, under pytest-xdist.

A cell run by another worker would run in a kernel that never ran the cells before it (a ``NameError`` on the
first import the notebook made), and a notebook on another worker would read a results directory the notebook
before it has not yet written.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from _notebook_checks import CHECKS_FILE, _unit_of_work

TESTS = Path(__file__).resolve().parent


def test_a_notebook_cell_and_a_table_check_share_one_unit_of_work_and_other_tests_their_modules():
    assert _unit_of_work("notebooks/05_eval.ipynb::Cell 4") == "notebooks"
    assert _unit_of_work("notebooks/01_extract_kg.ipynb::Cell 0") == "notebooks"
    assert _unit_of_work(f"tests/{CHECKS_FILE}::test_notebook_tables[05_eval]") == "notebooks"
    assert _unit_of_work("tests/test_claims.py::test_holm") == "tests/test_claims.py"
    assert _unit_of_work("tests/test_x.py::test_y[a]") == "tests/test_x.py"


def test_under_two_workers_every_check_runs_on_one_worker_in_collection_order(tmp_path):
    """Twelve checks in a file named like the table checks, twelve other tests and a module named like the
    fresh-clone test, on two workers: the checks all run on one worker, in the order they were collected; the
    other module on one worker too; the checks and the fresh clone start first, one on each worker."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from _notebook_checks import pytest_xdist_make_scheduler  # noqa: F401
    """))
    log = tmp_path / "ran.txt"
    body = textwrap.dedent(f"""
        import os, time
        import pytest

        @pytest.mark.parametrize("i", range(12))
        def test_it(i):
            time.sleep(0.05)
            with open({str(log)!r}, "a") as f:
                f.write(f"{{__name__}} {{i}} {{os.environ['PYTEST_XDIST_WORKER']}}\\n")
    """)
    (tmp_path / "test_other.py").write_text(body)  # collected first, and as many tests as the checks
    (tmp_path / CHECKS_FILE).write_text(body)
    (tmp_path / "test_fresh_clone.py").write_text(body.replace("range(12)", "range(1)"))
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # xdist alone: the other plugins cost a second a process
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "xdist", "-n", "2", "-q",
                           "--basetemp", str(tmp_path / "basetemp"), str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True)  # (its temporary folders in this test's, not in $TMPDIR)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [line.split() for line in log.read_text().splitlines()]
    checks = [(int(i), worker) for module, i, worker in rows if module == Path(CHECKS_FILE).stem]
    assert [i for i, _ in checks] == list(range(12))
    assert len({worker for _, worker in checks}) == 1
    assert len({worker for module, _, worker in rows if module == "test_other"}) == 1
    assert len(rows) == 25
    first = {}
    for module, _, worker in rows:
        first.setdefault(worker, module)
    assert sorted(first.values()) == sorted([Path(CHECKS_FILE).stem, "test_fresh_clone"])
