"""The running notebook's partial copy is written at the start, at most every SAVE_EVERY_S seconds while cells run,
and always at a failed cell and at the end (kgir_lib.partial_output)."""
import datetime

import nbformat
import papermill.engines
import pytest

from kgir_lib import partial_output
from kgir_lib.partial_output import SAVE_EVERY_S, ThrottledSaves


@pytest.fixture
def manager(tmp_path, monkeypatch):
    """A manager on a three-cell notebook, its clock in our hand, every write counted."""
    writes: list = []
    monkeypatch.setattr(papermill.engines, "write_ipynb", lambda nb, path: writes.append(path))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"x = {i}") for i in range(3)])
    for cell in nb.cells:  # (papermill's parameterize step gives every cell its metadata)
        cell.metadata.papermill = {}
    nb.metadata.papermill = {}
    man = ThrottledSaves(nb, output_path=str(tmp_path / "00_a.partial.ipynb"), progress_bar=False)
    clock = [datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)]
    monkeypatch.setattr(man, "now", lambda: clock[0])
    man.writes, man.clock = writes, clock
    return man


def _tick(man, seconds):
    man.clock[0] += datetime.timedelta(seconds=seconds)


def test_the_start_always_writes_then_cells_write_once_the_last_write_is_old_enough(manager):
    manager.notebook_start()
    assert len(manager.writes) == 1  # the partial copy exists from the start
    for i, cell in enumerate(manager.nb.cells):
        manager.cell_start(cell, i)
        _tick(manager, SAVE_EVERY_S / 4)
        manager.cell_complete(cell, i)
    assert len(manager.writes) == 1  # three quick cells: no write
    _tick(manager, SAVE_EVERY_S)
    manager.cell_start(manager.nb.cells[0], 0)
    assert len(manager.writes) == 2  # a write is due again
    manager.notebook_complete()
    assert len(manager.writes) == 3  # the end always writes


def test_a_failed_cell_writes_at_once_and_so_does_every_later_step(manager):
    manager.notebook_start()
    cell = manager.nb.cells[0]
    manager.cell_start(cell, 0)
    manager.cell_exception(cell, 0, exception=RuntimeError("boom"))
    manager.cell_complete(cell, 0)  # (papermill calls it after the exception: the error is written)
    assert len(manager.writes) == 2
    manager.notebook_complete()
    assert len(manager.writes) == 3


def test_the_runner_executes_every_notebook_with_the_throttled_engine(tmp_path, monkeypatch):
    """``runner`` hands papermill :data:`ENGINE`, registered as :class:`ThrottledEngine` (papermill itself is
    stood in for: what it runs is tested above and, through the runner, in tests/test_runner.py)."""
    import shutil

    import papermill

    from kgir_lib import runner

    assert papermill.engines.papermill_engines.get_engine(partial_output.ENGINE) is partial_output.ThrottledEngine
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), str(nbs / "00_a.ipynb"))
    engines: list = []

    def execute(src, out, **kwargs):
        engines.append(kwargs.get("engine_name"))
        shutil.copy(src, out)

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    monkeypatch.setenv("KGIR_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("KGIR_FIGURES_DIR", str(tmp_path / "figs"))
    assert runner.main(["--profile", "ci", "--notebooks-dir", str(nbs)]) == 0
    assert engines == [partial_output.ENGINE]


def test_the_operations_guide_states_the_interval_the_engine_uses():
    from kgir_lib.config import PROJECT_ROOT

    guide = " ".join((PROJECT_ROOT / "docs" / "operations.md").read_text(encoding="utf-8").split())
    assert f"after a cell when the last write is {SAVE_EVERY_S:g} seconds old" in guide
