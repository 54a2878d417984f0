"""Pytest hook and fixture for ``test_notebook_tables.py`` (imported by ``tests/conftest.py``).

``scripts/test.sh`` runs ``pytest tests notebooks/NN_*.ipynb --nbval-lax`` with ``KGIR_PROFILE=ci``
and a temporary ``KGIR_RESULTS_DIR``. The hook moves the tests of ``test_notebook_tables.py`` after
the notebooks' nbval cells, so they read the tables the notebooks have just written (the notebooks
run once). In a session without the notebooks (``pytest tests``) those tests skip. Under pytest-xdist
(``--dist loadgroup``) the notebooks' cells and those checks form one group, run by one worker in this order:
the notebooks share one results directory, and each reads what the one before it wrote.
"""
from __future__ import annotations

from pathlib import Path

import pytest

CHECKS_FILE = "test_notebook_tables.py"


def _is_nbval(item) -> bool:
    return type(item).__name__ == "IPyNbCell" or str(getattr(item, "fspath", "")).endswith(".ipynb")


class _NotebookFailures:
    """A plugin seeing every report (a conftest here only sees its own folder's): notebooks that failed."""

    def __init__(self) -> None:
        self.failed = set()

    def pytest_runtest_logreport(self, report):
        path = str(report.nodeid).split("::")[0]
        if report.failed and path.endswith(".ipynb"):
            self.failed.add(Path(path).stem)


def pytest_collection_modifyitems(session, config, items):
    """Record which notebooks nbval runs in this session; move the table checks after them."""
    notebooks = [it for it in items if _is_nbval(it)]
    config._kgir_notebooks = {Path(str(it.fspath)).stem for it in notebooks}
    if not hasattr(config, "_kgir_failures"):
        config._kgir_failures = _NotebookFailures()
        config.pluginmanager.register(config._kgir_failures, "kgir-notebook-failures")
    checks = [it for it in items if Path(str(it.fspath)).name == CHECKS_FILE]
    for it in notebooks + checks:
        it.add_marker(pytest.mark.xdist_group("notebooks"))
    ids = {id(it) for it in checks}
    items[:] = [it for it in items if id(it) not in ids] + checks


@pytest.fixture(scope="session")
def executed(request):
    """``executed("05_eval")`` -> the config the notebooks ran with; skips if that notebook did not run here."""
    from kgir_lib.config import load_config

    def get(name: str):
        ran = getattr(request.config, "_kgir_notebooks", set())
        if name not in ran:
            pytest.skip(f"notebook {name} was not executed in this session (bash scripts/test.sh runs them all)")
        if name in request.config._kgir_failures.failed:
            pytest.skip(f"notebook {name} failed under nbval (see its failure above)")
        return load_config(None)

    return get
