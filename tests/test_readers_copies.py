"""The readers' copies ``notebooks/NN_*.ipynb`` carry the committed outputs of the run the README's headline quotes
(:data:`kgir_lib.report.HEADLINE_PROFILE`, ``local``), and cannot drift from them.

``scripts/build_notebooks.py`` builds each copy from its source and copies in the outputs of
``results/<profile>/notebooks/NN_*.ipynb``, cell by cell (the cell with the same source). Every output of every code
cell of a copy, text and pictures alike, must be that run's output of the same cell; every code cell that run executed
must be in the copy; and the first output of each says whose outputs they are. A rerun of the run, a changed source or
a changed figure that was not carried into the copies fails here: rebuild with ``python scripts/build_notebooks.py``.
"""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from kgir_lib.config import PROJECT_ROOT, load_config
from kgir_lib.report import HEADLINE_PROFILE, whose_outputs

from _scripts import load_script

COPIES = sorted((PROJECT_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
RUN = PROJECT_ROOT / "results" / HEADLINE_PROFILE / "notebooks"


def _code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and "injected-parameters" not in c.metadata.get("tags", [])]


def _outputs(cell) -> str:
    """A cell's outputs as one comparable text: every output's type, name, text and data (pictures as their base64),
    execution counts left out (a copy keeps the run's, but a count says nothing a reader reads)."""
    keep = []
    for o in cell.get("outputs", []):
        d = {k: v for k, v in o.items() if k not in ("execution_count", "metadata")}
        keep.append(d)
    return json.dumps(keep, sort_keys=True, ensure_ascii=False)


def test_there_is_a_run_output_for_every_readers_copy():
    assert len(COPIES) == 7
    assert sorted(p.name for p in RUN.glob("[0-9][0-9]_*.ipynb")) == [p.name for p in COPIES]


@pytest.mark.parametrize("copy", COPIES, ids=lambda p: p.stem)
def test_every_output_of_a_readers_copy_is_the_headline_run_s(copy):
    mine = nbformat.read(copy, as_version=4)
    run = nbformat.read(RUN / copy.name, as_version=4)
    by_source = {}
    for c in _code_cells(run):
        by_source.setdefault(c.source, c)
    problems = []
    for i, c in enumerate(_code_cells(mine)):
        done = by_source.get(c.source)
        if done is None:
            problems.append(f"code cell {i} ({c.source[:50]!r}) is not a cell the {HEADLINE_PROFILE} run executed "
                            f"(the source changed since: regenerate the run, then build the copies)")
        elif _outputs(c) != _outputs(done):
            problems.append(f"code cell {i} ({c.source[:50]!r}): its outputs differ from "
                            f"results/{HEADLINE_PROFILE}/notebooks/{copy.name}")
    missing = [c.source[:50] for c in _code_cells(run) if c.source not in {m.source for m in _code_cells(mine)}]
    problems += [f"the run executed a cell the copy lacks: {s!r}" for s in missing]
    assert not problems, f"notebooks/{copy.name} (rebuild: python scripts/build_notebooks.py):\n" + "\n".join(problems)


@pytest.mark.parametrize("copy", COPIES, ids=lambda p: p.stem)
def test_the_first_output_of_each_copy_says_whose_outputs_they_are(copy):
    nb = nbformat.read(copy, as_version=4)
    first = next(o for c in _code_cells(nb) for o in c.get("outputs", []))
    assert first["output_type"] == "stream"
    assert first["text"].splitlines()[0] == whose_outputs(load_config(HEADLINE_PROFILE))


def test_the_line_says_which_run_the_copies_carry_for_every_profile():
    assert "the run the README's headline quotes" in whose_outputs(load_config(HEADLINE_PROFILE))
    other = whose_outputs(load_config("sample"))
    assert other.startswith("Outputs of the 'sample' run") and f"'{HEADLINE_PROFILE}' run's" in other


def test_the_copies_are_built_from_the_headline_run_by_default():
    build = load_script(PROJECT_ROOT / "scripts" / "build_notebooks.py")
    assert build.build.__defaults__[0] == HEADLINE_PROFILE
    assert HEADLINE_PROFILE == "local"  # the README's headline is the local run's (its tables are results/local/)


def test_the_readme_says_the_copies_show_the_headline_run():
    readme = Path(PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## For readers", 1)[1].split("\n## ", 1)[0]
    assert f"outputs of the committed `{HEADLINE_PROFILE}` run" in section
    assert "outputs of the committed `sample` run" not in section
    assert "results/sample/notebooks/" in section  # where the other run's outputs are
