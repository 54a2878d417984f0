"""The runner's kernel: no TCP warning, no KeyboardInterrupt at shutdown, no machine path in papermill metadata,
nothing left in ``$TMPDIR``."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from kgir_lib.config import PROJECT_ROOT, default_data_dir
from kgir_lib.execution import tidy_output_notebook


def test_papermill_paths_are_rewritten_relative_to_the_project(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"input_path": str(PROJECT_ROOT / "notebooks" / "03_subgraph_mst.ipynb"),
                                "output_path": str(PROJECT_ROOT / "results" / "sample" / "notebooks" / "03.ipynb"),
                                "duration": 1.0}
    path = tmp_path / "out.ipynb"
    nbformat.write(nb, path)
    tidy_output_notebook(path)
    meta = nbformat.read(path, as_version=4).metadata["papermill"]
    assert meta == {"input_path": "notebooks/03_subgraph_mst.ipynb",
                    "output_path": "results/sample/notebooks/03.ipynb"}


def test_an_output_notebook_keeps_no_trace_of_when_or_how_fast_it_ran(tmp_path):
    """Two executions that compute the same thing write the same file: no timing, no random cell id, no
    empty display left by a finished progress bar; the outputs themselves are kept."""
    def executed(start: str, cell_id: str) -> nbformat.NotebookNode:
        nb = nbformat.v4.new_notebook()
        nb.metadata["papermill"] = {"start_time": start, "end_time": start, "duration": 3.2, "exception": False}
        injected = nbformat.v4.new_code_cell("profile = 'sample'")
        injected.metadata.update(tags=["injected-parameters"], papermill={"duration": 0.1, "start_time": start,
                                                                            "status": "completed"},
                                 execution={"iopub.status.busy": start})
        injected["id"] = cell_id
        work = nbformat.v4.new_code_cell("run()")
        work["id"] = "work"  # (a source cell keeps its id in every run)
        work.outputs = [nbformat.v4.new_output("display_data", data={"text/plain": ""}),
                        nbformat.v4.new_output("stream", name="stdout", text="EM 40.0\n")]
        nb.cells = [injected, work]
        return nb

    paths = []
    for i, (start, cell_id) in enumerate([("2026-12-01T10:00:00", "3638b562"), ("2026-12-03T11:56:06", "71299e5b")]):
        paths.append(tmp_path / f"run{i}.ipynb")
        nbformat.write(executed(start, cell_id), paths[-1])
        tidy_output_notebook(paths[-1])
    assert paths[0].read_bytes() == paths[1].read_bytes()
    nb = nbformat.read(paths[0], as_version=4)
    assert nb.metadata["papermill"] == {"exception": False}
    assert nb.cells[0]["id"] == "injected-parameters" and nb.cells[0].metadata["papermill"] == {"status": "completed"}
    assert "execution" not in nb.cells[0].metadata
    assert [o["output_type"] for o in nb.cells[1].outputs] == ["stream"]


def test_printed_text_split_into_several_stream_messages_is_stored_as_one(tmp_path):
    """The kernel may send two prints as one stream message or as two, depending on timing: the stored
    notebook is the same either way; stdout and stderr stay apart, and a display between them keeps its place."""
    def executed(texts: list) -> Path:
        nb = nbformat.v4.new_notebook()
        cell = nbformat.v4.new_code_cell("for d in data: print(d)")
        cell["id"] = "c"
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in texts]
        cell.outputs += [nbformat.v4.new_output("stream", name="stderr", text="warning\n"),
                         nbformat.v4.new_output("display_data", data={"text/plain": "table"}),
                         nbformat.v4.new_output("stream", name="stdout", text="after\n")]
        nb.cells = [cell]
        path = tmp_path / f"{len(texts)}.ipynb"
        nbformat.write(nb, path)
        tidy_output_notebook(path)
        return path

    one, two = executed(["musique_train: 100\nhotpotqa: 84\n"]), executed(["musique_train: 100\n", "hotpotqa: 84\n"])
    assert one.read_bytes() == two.read_bytes()
    outputs = nbformat.read(two, as_version=4).cells[0].outputs
    assert [(o["output_type"], o.get("name")) for o in outputs] == [("stream", "stdout"), ("stream", "stderr"),
                                                                   ("display_data", None), ("stream", "stdout")]
    assert outputs[0]["text"] == "musique_train: 100\nhotpotqa: 84\n"


@pytest.mark.slow  # starts notebook kernels or loads a model: the whole suite's
def test_a_run_prints_neither_kernel_warning_and_stores_no_absolute_output_path(tmp_path):
    """Also: a figure is stored as a picture although the caller exported a non-inline backend (a test's Agg), and
    the run leaves no file and no folder in its $TMPDIR (the kernel's socket folder is removed at shutdown)."""
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("profile = None")
    params.metadata["tags"] = ["parameters"]
    figure = ("import matplotlib.pyplot as plt\nfrom IPython.display import display\n"
              "fig, ax = plt.subplots()\ndisplay(fig)\nplt.close(fig)")
    nb.cells = [params, nbformat.v4.new_code_cell(figure), nbformat.v4.new_code_cell("print('ran')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (kgir)", "language": "python"}
    nbformat.write(nb, nbs / "00_probe.ipynb")
    (tmp_path / "data").symlink_to(default_data_dir().resolve())
    private_tmp = tmp_path / "tmp"  # the run's own $TMPDIR: whatever it leaves there is found below
    (private_tmp / "before").mkdir(parents=True)
    (private_tmp / "before.txt").write_text("there before the run")
    before = sorted(p.relative_to(private_tmp) for p in private_tmp.rglob("*"))
    env = {**os.environ, "KGIR_RESULTS_DIR": str(tmp_path / "results"), "KGIR_DATA_DIR": str(tmp_path / "data"),
           "PYTHONPATH": str(PROJECT_ROOT), "MPLBACKEND": "Agg", "TMPDIR": str(private_tmp)}
    out = subprocess.run([sys.executable, "-m", "kgir_lib.runner", "--profile", "ci", "--notebooks-dir", str(nbs)],
                         cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr
    after = sorted(p.relative_to(private_tmp) for p in private_tmp.rglob("*"))
    assert after == before, f"the run left in $TMPDIR: {sorted(set(after) - set(before))}"  # folders and files
    console = out.stdout + out.stderr
    assert "without encryption" not in console and "KeyboardInterrupt" not in console, console
    done = nbformat.read(tmp_path / "results" / "ci" / "notebooks" / "00_probe.ipynb", as_version=4)
    assert done.cells[-1].outputs[0]["text"] == "ran\n"
    assert [sorted(o.get("data", {})) for o in done.cells[-2].outputs] == [["image/png", "text/plain"]]
    assert done.metadata["papermill"]["output_path"] == "$KGIR_RESULTS_DIR/ci/notebooks/00_probe.ipynb"
    assert not list(Path(tmp_path).glob("nbs/kernel-*"))  # no IPC socket left beside the notebooks
