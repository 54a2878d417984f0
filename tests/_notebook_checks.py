"""Pytest hook and fixture for ``test_notebook_tables.py`` (imported by ``tests/conftest.py``).

``scripts/test.sh`` runs ``pytest tests notebooks/NN_*.ipynb --nbval-lax`` with ``KGIR_PROFILE=ci``
and a temporary ``KGIR_RESULTS_DIR``. The hook moves the tests of ``test_notebook_tables.py`` after
the notebooks' nbval cells, so they read the tables the notebooks have just written (the notebooks
run once). In a session without the notebooks (``pytest tests``) those tests skip. Under pytest-xdist the
notebooks' cells and those checks form one unit of work, run by one worker in this order (:class:`NotebookScheduling`):
the notebooks share one kernel per notebook and one results directory, and each reads what the one before it wrote.
Every other test module is a unit of work of its own (its imports and module fixtures are paid by one worker, not by
both), but for the tests of :data:`SPLIT` (one unit a test) and of :data:`GROUPS` (one unit for several modules' tests
that load the same libraries in-process); the longest units start first (:data:`FIRST`).
"""
from __future__ import annotations

from pathlib import Path

import pytest

CHECKS_FILE = "test_notebook_tables.py"
# Modules whose tests are each a unit of work: long tests sharing no module fixture, which two workers can run at once
# (the main job on a fresh clone, and notebook 04 alone on another).
SPLIT = ("test_fresh_clone.py",)
# Tests of several modules run as one unit, on one worker: each loads torch and the encoders' libraries in-process
# (about 7 s of CPU to import), and the MiniLM model is loaded once per process (kgir_lib.encoders), so one worker
# pays for them once instead of each worker once.
GROUPS = {"encoder models": ("test_retrieval.py::test_real_minilm_loads_offline_and_embeds",
                             "test_kg2rag_agreement.py::test_committed_report_rescored_against_this_codes_side",
                             "test_flagembedding.py")}
# The longest units of work, longest first, started before all others (the whole suite's CPU seconds of each, from
# pytest's --durations): a long unit started last would end the run late while the other worker idles. The notebooks
# under nbval and the main job on a fresh clone each take most of a worker's time; the book's browser tests build the
# book first; the hosts that never answer are waited out (20 s and 5 s, beside the other worker's work); then the
# units with local servers, model loads, kernels and subprocesses. Each entry names a unit
# ("notebooks", a group of GROUPS), a module's file name (every unit of that module) or file::test. The other units
# follow largest first (xdist's order: by number of tests).
FIRST = ("notebooks",
         "test_fresh_clone.py::test_a_fresh_clone_with_no_data_beside_it_runs_the_main_job_and_reproduces_every_"
         "committed_file", "test_book_browser.py", "encoder models", "test_data_hub_path.py", "test_runner.py",
         "test_fresh_clone.py", "test_paper_script.py", "test_pinned_tables.py", "test_llm_llamacpp.py",
         "test_secrets.py", "test_data_sources.py", "test_api_cache.py", "test_scratch_runs.py",
         "test_reliability_kill.py", "test_benchmarks.py", "test_llm_openai.py", "test_execution.py",
         "test_test_script.py", "test_notebooks_params.py", "test_nullable_settings.py", "test_response_log.py",
         "test_own_composition.py", "test_cache_salvage.py")


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


def _unit_of_work(nodeid: str) -> str:
    """The scope :class:`NotebookScheduling` gives a test: ``notebooks`` for a notebook cell or a table check, the
    group's name for a test of :data:`GROUPS`, the test itself (parameters aside) in a module of :data:`SPLIT`, else
    its module (one worker imports it and builds its module-scoped fixtures, e.g. the rebuilt sample run of
    ``test_pinned_tables.py``, the ``--help`` of every benchmark script)."""
    path, _, test = nodeid.partition("::")
    if path.endswith(".ipynb") or Path(path).name == CHECKS_FILE:
        return "notebooks"
    name, function = Path(path).name, test.partition("[")[0]
    for group, members in GROUPS.items():
        if name in members or f"{name}::{function}" in members:
            return group
    if name in SPLIT and function:
        return f"{path}::{function}"
    return path


def _rank(scope: str) -> int:
    """The place of a unit of work in :data:`FIRST` (its first matching entry), else ``len(FIRST)``."""
    path, _, function = scope.partition("::")
    name = Path(path).name
    keys = {scope, name, f"{name}::{function}"}
    return next((i for i, entry in enumerate(FIRST) if entry in keys), len(FIRST))


def pytest_xdist_make_scheduler(config, log):
    """Keep a notebook's cells, and the notebooks, on one worker and in order; a test module on one worker.

    pytest-xdist's ``loadgroup`` marks a group by a suffix it writes into the test ids, which pytest 9.2 no longer
    lets it write: every cell would go to whichever worker was free, and a cell sent to another worker runs in a
    kernel that never ran the cells before it. Here the unit of work is given by the test id itself
    (:func:`_unit_of_work`), and the units of :data:`FIRST` are handed out before all others, in its order.
    """
    from xdist.scheduler import LoadScopeScheduling

    class NotebookScheduling(LoadScopeScheduling):
        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return _unit_of_work(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self._ordered:  # the queue is complete when the first unit is handed out
                first = sorted((scope for scope in self.workqueue if _rank(scope) < len(FIRST)), key=_rank)
                for scope in reversed(first):
                    self.workqueue.move_to_end(scope, last=False)
                self._ordered = True
            super()._assign_work_unit(node)

    return NotebookScheduling(config, log)


def pytest_collection_modifyitems(session, config, items):
    """Record which notebooks nbval runs in this session; move the table checks after them."""
    notebooks = [it for it in items if _is_nbval(it)]
    config._kgir_notebooks = {Path(str(it.fspath)).stem for it in notebooks}
    if not hasattr(config, "_kgir_failures"):
        config._kgir_failures = _NotebookFailures()
        config.pluginmanager.register(config._kgir_failures, "kgir-notebook-failures")
    checks = [it for it in items if Path(str(it.fspath)).name == CHECKS_FILE]
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
