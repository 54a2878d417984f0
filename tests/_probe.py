"""A one-notebook folder for the tests that run the runner or a script on a notebook of their own: a parameters
cell, then the test's code."""
from __future__ import annotations

from pathlib import Path

import nbformat


def probe_notebook(folder: Path, code: str, parameters: str = "profile = None") -> Path:
    """``folder/00_probe.ipynb`` (``folder`` made when missing): a cell tagged ``parameters`` holding
    ``parameters``, then one cell of ``code``, on the ``python3`` kernel. Returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(code)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(folder / "00_probe.ipynb"))
    return folder
