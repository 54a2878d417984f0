"""The notebooks and their jupytext sources agree, and every notebook opens the same way."""
from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import nbformat
import pytest

from kgir_lib.config import Config

from _scripts import load_script

jupytext = pytest.importorskip("jupytext")

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted((REPO / "notebooks" / "src").glob("[0-9][0-9]_*.py"))
FIELDS = {f.name for f in fields(Config)}


def _cells(nb) -> list:
    return [(c.cell_type, c.source, list(c.metadata.get("tags", []))) for c in nb.cells]


def test_every_source_has_a_notebook():
    assert len(SOURCES) == 7
    assert sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")) == [p.stem for p in SOURCES]


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_source_and_notebook_agree(src):
    """Same cells, types, sources and tags: rebuild with ``python scripts/build_notebooks.py`` if this fails."""
    text = jupytext.read(src, fmt="py:percent")
    nb = nbformat.read(REPO / "notebooks" / f"{src.stem}.ipynb", as_version=4)
    assert _cells(nb) == _cells(text), f"notebooks/{src.stem}.ipynb is stale: python scripts/build_notebooks.py"
    assert nb.metadata.get("jupytext", {}).get("formats") == "ipynb,src//py:percent"


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_a_cell_tagged_hide_input_opens_collapsed_and_only_such_a_cell(src):
    """``hide-input`` (code that teaches nothing) becomes JupyterLab's ``jupyter.source_hidden`` in the readers' copy;
    a cell the source does not tag keeps its input open, and a markdown cell is never tagged."""
    nb = nbformat.read(REPO / "notebooks" / f"{src.stem}.ipynb", as_version=4)
    for c in nb.cells:
        tagged = "hide-input" in c.metadata.get("tags", [])
        assert tagged == bool(c.metadata.get("jupyter", {}).get("source_hidden")), c.source[:60]
        assert not (tagged and c.cell_type != "code"), c.source[:60]


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_one_parameters_cell_then_open_notebook(src):
    cells = jupytext.read(src, fmt="py:percent").cells
    tagged = [i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    params = cells[tagged[0]]
    values = {}
    exec(compile(params.source, str(src), "exec"), {}, values)  # literals only
    assert values.get("profile", "missing") is None
    assert values.get("config_overrides") == {}
    for name, value in values.items():
        if name in FIELDS:
            assert value is None, f"Config field {name!r} must default to None (keep the profile's value)"
    opener = next(c for c in cells[tagged[0] + 1:] if c.cell_type == "code")
    assert f'open_notebook("{src.stem}", globals()' in opener.source
    tree = ast.parse(opener.source)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not called & {"load_config", "start_run", "build_llm"}, "the opener is one call: open_notebook"


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_no_hard_coded_model_caveat(src):
    text = src.read_text()
    assert "SMOLLM_NOTE" not in text
    assert 'llm_backend == "llamacpp"' not in text, "the caveat follows the configured model: report.model_note"


def test_build_copies_the_outputs_of_cells_with_the_same_source(tmp_path):
    build = load_script(REPO / "scripts" / "build_notebooks.py")
    nb = build.read_source("02_index")
    assert nb.metadata["jupytext"]["formats"] == "ipynb,src//py:percent"
    code = [c for c in nb.cells if c.cell_type == "code"]
    done = nbformat.v4.new_notebook()
    injected = nbformat.v4.new_code_cell(code[0].source)
    injected.metadata["tags"] = ["injected-parameters"]
    injected.outputs = [nbformat.v4.new_output("stream", text="injected\n")]
    ran = nbformat.v4.new_code_cell(code[1].source, execution_count=3)
    ran.outputs = [nbformat.v4.new_output("stream", text="02_index - profile 'sample'\n")]
    done.cells = [injected, ran, nbformat.v4.new_code_cell("print('a cell the source no longer has')")]
    nbformat.write(done, tmp_path / "02_index.ipynb")
    assert build.copy_outputs(nb, tmp_path / "02_index.ipynb") == 1
    assert code[1].outputs[0]["text"].startswith("02_index") and code[1].execution_count == 3
    assert not code[0].get("outputs")  # the injected-parameters cell lends nothing


def test_05_answers_in_words_before_the_scoreboard():
    """05's first output screen answers "does KGIR-RAG beat the baselines here, and how sure are we?": the sentence
    comes before the 14-row scoreboard, not a screen and a half below it."""
    src = next(c.source for c in jupytext.read(REPO / "notebooks" / "src" / "05_eval.py", fmt="py:percent").cells
               if "scoreboard_sentence" in c.source)
    assert src.index("scoreboard_sentence(") < src.index("show(board")
