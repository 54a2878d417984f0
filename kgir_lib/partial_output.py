"""The running notebook's partial copy: where it is written, how often, and what a failure's error names.

The runner executes ``NN_name.ipynb`` into ``NN_name.partial.ipynb`` beside the last complete output
(:func:`partial_path`) and renames it over that output once the notebook has finished, so a failure keeps the last
complete output and leaves the partial copy, with its error, beside it; the error names both files
(:func:`failure_paths`).

papermill writes the whole output notebook at the start and at the end of every cell: about 70 writes of a
megabyte for notebook 03, a twentieth of a one-notebook rerun. Its engine here (:data:`ENGINE`,
:class:`ThrottledSaves`) writes at a cell's start or end only when the last write is :data:`SAVE_EVERY_S` seconds
old, so the partial copy of a long run still shows its progress; a failed cell and the end of the notebook
(finished, failed, interrupted, or its kernel dead) always write, so the partial copy holds every output the
notebook produced.
"""
from __future__ import annotations

from pathlib import Path

from papermill.engines import NBClientEngine, NotebookExecutionManager, papermill_engines

__all__ = ["partial_path", "failure_paths", "ThrottledSaves", "ThrottledEngine", "ENGINE", "SAVE_EVERY_S"]

SAVE_EVERY_S = 5.0  # seconds between two writes of a running notebook's partial copy


class ThrottledSaves(NotebookExecutionManager):
    """papermill's execution manager, writing the running notebook at most every :data:`SAVE_EVERY_S` seconds
    (module docstring), and always at the notebook's start, a failed cell and the notebook's end."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._written = False  # the first write (at the notebook's start) is never skipped
        self._force = False    # from a failed cell or the notebook's end on, every write happens

    def save(self, **kwargs) -> None:
        if self._force or not self._written or (self.now() - self.last_save_time).total_seconds() >= SAVE_EVERY_S:
            super().save(**kwargs)
            self._written = True

    def cell_exception(self, cell, cell_index=None, **kwargs) -> None:
        self._force = True  # (papermill's cell_complete, which follows, writes the error)
        super().cell_exception(cell, cell_index, **kwargs)

    def notebook_complete(self, **kwargs) -> None:
        self._force = True
        super().notebook_complete(**kwargs)


class ThrottledEngine(NBClientEngine):
    """papermill's nbclient engine with :class:`ThrottledSaves` (the runner's ``engine_name`` :data:`ENGINE`)."""

    @classmethod
    def execute_notebook(cls, nb, kernel_name, output_path=None, progress_bar=True, log_output=False,
                         autosave_cell_every=30, **kwargs):
        nb_man = ThrottledSaves(nb, output_path=output_path, progress_bar=progress_bar, log_output=log_output,
                                autosave_cell_every=autosave_cell_every)
        nb_man.notebook_start()
        try:
            cls.execute_managed_notebook(nb_man, kernel_name, log_output=log_output, **kwargs)
        finally:
            nb_man.cleanup_pbar()
            nb_man.notebook_complete()
        return nb_man.nb


ENGINE = "kgir-throttled"
papermill_engines.register(ENGINE, ThrottledEngine)


def partial_path(out: Path) -> Path:
    """Where the notebook whose finished output is ``out`` executes: ``NN_name.partial.ipynb`` beside it
    (git-ignored), renamed to ``out`` once the notebook has finished, kept with its error when it fails."""
    return out.with_name(f"{out.stem}.partial{out.suffix}")


def failure_paths(out: Path, partial: Path) -> str:
    """The two files a failed notebook leaves, as the error names them."""
    shown = [partial if partial.exists() else None, out if out.exists() else None]
    return ((f"partial output: {partial}" if shown[0] else f"partial output: none ({partial} was not written)")
            + "\n" + (f"last complete output, unchanged: {out}" if shown[1]
                      else f"last complete output: none yet ({out})"))
