"""The runner's kernel: no TCP warning, no KeyboardInterrupt at shutdown, no machine path in papermill metadata."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat

from kgir_lib.config import PROJECT_ROOT, default_data_dir
from kgir_lib.execution import relative_papermill_paths


def test_papermill_paths_are_rewritten_relative_to_the_project(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"input_path": str(PROJECT_ROOT / "notebooks" / "03_subgraph_mst.ipynb"),
                                "output_path": str(PROJECT_ROOT / "results" / "sample" / "notebooks" / "03.ipynb"),
                                "duration": 1.0}
    path = tmp_path / "out.ipynb"
    nbformat.write(nb, path)
    relative_papermill_paths(path)
    meta = nbformat.read(path, as_version=4).metadata["papermill"]
    assert meta == {"input_path": "notebooks/03_subgraph_mst.ipynb",
                    "output_path": "results/sample/notebooks/03.ipynb", "duration": 1.0}


def test_a_run_prints_neither_kernel_warning_and_stores_no_absolute_output_path(tmp_path):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("profile = None")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("print('ran')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (kgir)", "language": "python"}
    nbformat.write(nb, nbs / "00_probe.ipynb")
    (tmp_path / "data").symlink_to(default_data_dir().resolve())
    env = {**os.environ, "KGIR_RESULTS_DIR": str(tmp_path / "results"), "KGIR_DATA_DIR": str(tmp_path / "data"),
           "PYTHONPATH": str(PROJECT_ROOT)}
    out = subprocess.run([sys.executable, "-m", "kgir_lib.runner", "--profile", "ci", "--notebooks-dir", str(nbs)],
                         cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr
    console = out.stdout + out.stderr
    assert "without encryption" not in console and "KeyboardInterrupt" not in console, console
    done = nbformat.read(tmp_path / "results" / "ci" / "notebooks" / "00_probe.ipynb", as_version=4)
    assert done.cells[-1].outputs[0]["text"] == "ran\n"
    assert done.metadata["papermill"]["output_path"] == "$KGIR_RESULTS_DIR/ci/notebooks/00_probe.ipynb"
    assert not list(Path(tmp_path).glob("nbs/kernel-*"))  # no IPC socket left beside the notebooks
