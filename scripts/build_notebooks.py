"""Build ``notebooks/NN_name.ipynb`` from its diffable source ``notebooks/src/NN_name.py`` with jupytext.

The sources are jupytext percent scripts (``# %%`` code cells, ``# %% [markdown]`` cells,
``# %% tags=["parameters"]``), paired with the notebooks (``formats: ipynb,src//py:percent`` in each
notebook's metadata and in ``[tool.jupytext]`` of pyproject.toml, so ``jupytext --sync`` and Jupyter's
jupytext extension keep the pair in step). jupytext does the conversion; this script only adds what jupytext does not:

* the outputs of the run the README's headline quotes (:data:`kgir_lib.report.HEADLINE_PROFILE`, ``local``): if
  the main job has executed the notebook (``results/<profile>/notebooks/NN_name.ipynb``), each code cell gets the
  outputs of the executed cell with the same source, so the readers' copy shows that run without running anything
  (``tests/test_readers_copies.py`` checks every output against the run's);
* stable cell ids (``NN-000``, ...) so rebuilding changes no line that did not change;
* a code cell tagged ``hide-input`` (:data:`kgir_lib.notebook.screens.HIDE_INPUT`: imports, formatting, saving, code
  that teaches nothing) gets ``jupyter.source_hidden``, so JupyterLab opens it collapsed; a rendered copy leaves its
  input out (nbconvert's ``TagRemovePreprocessor.remove_input_tags``, as ``benchmarks/notebook_screens.py`` renders
  it). Its outputs, and the cells a student should read, stay as they are.

Usage: ``python scripts/build_notebooks.py [NN_name ...] [--profile local] [--no-outputs]``
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kgir_lib.notebook.screens import HIDE_INPUT  # noqa: E402
from kgir_lib.report import HEADLINE_PROFILE  # noqa: E402
SRC = ROOT / "notebooks" / "src"
OUT = ROOT / "notebooks"
FORMATS = "ipynb,src//py:percent"
# The pairing, and filters that keep the sources free of a metadata header (``jupytext --sync`` leaves them as they are).
JUPYTEXT = {"formats": FORMATS, "notebook_metadata_filter": "-all", "cell_metadata_filter": "tags,-all"}
# The kernel scripts/setup.sh installs into .venv (name and display name), so JupyterLab opens a notebook on it
# without changing its metadata; language_info is the executed notebook's (what that kernel reports).
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (kgir)", "language": "python"}
METADATA = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}, "jupytext": JUPYTEXT}


def read_source(name: str) -> nbformat.NotebookNode:
    """The notebook jupytext reads from ``notebooks/src/<name>.py`` (cells only, our metadata; a cell tagged
    ``hide-input`` collapsed)."""
    nb = jupytext.read(SRC / f"{name}.py", fmt="py:percent")
    nb.metadata = nbformat.from_dict(METADATA)
    for c in nb.cells:
        if c.cell_type == "code" and HIDE_INPUT in c.metadata.get("tags", []):
            c.metadata["jupyter"] = {"source_hidden": True}
    return nb


def copy_outputs(nb: nbformat.NotebookNode, executed: Path) -> int:
    """Give each code cell of ``nb`` the outputs of the cell of ``executed`` with the same source, and ``nb``
    the ``language_info`` the executing kernel reported; count the cells."""
    done = nbformat.read(executed, as_version=4)
    if done.metadata.get("language_info"):
        nb.metadata["language_info"] = done.metadata["language_info"]
    by_source = {}
    for c in done.cells:
        if c.cell_type == "code" and "injected-parameters" not in c.metadata.get("tags", []):
            by_source.setdefault(c.source, c)
    n = 0
    for c in nb.cells:
        if c.cell_type == "code" and c.source in by_source:
            c.outputs = by_source[c.source].get("outputs", [])
            c.execution_count = by_source[c.source].get("execution_count")
            n += 1
    return n


def build(name: str, profile: str = HEADLINE_PROFILE, with_outputs: bool = True) -> Path:
    nb = read_source(name)
    executed = ROOT / "results" / profile / "notebooks" / f"{name}.ipynb"
    if with_outputs and executed.exists():
        copy_outputs(nb, executed)
    for i, c in enumerate(nb.cells):
        c["id"] = f"{name[:2]}-{i:03d}"
    path = OUT / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--profile", default=HEADLINE_PROFILE, help="whose committed outputs the copies carry")
    ap.add_argument("--no-outputs", action="store_true")
    args = ap.parse_args(argv)
    names = args.names or sorted(p.stem for p in SRC.glob("[0-9][0-9]_*.py"))
    for name in names:
        print(build(name, args.profile, not args.no_outputs).relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
