"""Notebooks 03-07 teach first, then audit: what a lecturer projects comes before one heading, "Audit: every number
behind this notebook", and stays within 12 screens at 1280×800.

``benchmarks/notebook_screens.py`` measures the screens in headless Chromium and records them, with the command, in
``results/benchmarks/notebooks.md``; this fast test keeps the teaching core from growing without a browser, by
:func:`kgir_lib.notebook.screens.core_screens`, an estimate from the stored notebook (every line of markdown, code and
printed text, every table row, every figure at its shown height) that the benchmark records beside its measure and that
is never below it. It also reads the record itself: every teaching core within 12 screens, and no table losing a
column at 1024 px.
"""
from __future__ import annotations

import re

import nbformat
import pytest

from kgir_lib.config import PROJECT_ROOT
from kgir_lib.notebook import screens
from kgir_lib.notebook.narrative import AUDIT_HEADING

TEACHING = sorted(p for p in (PROJECT_ROOT / "notebooks").glob("0[3-7]_*.ipynb"))
RECORD = PROJECT_ROOT / "results" / "benchmarks" / "notebooks.md"


def test_the_teaching_notebooks_are_03_to_07():
    assert [p.stem[:2] for p in TEACHING] == ["03", "04", "05", "06", "07"]


@pytest.mark.parametrize("path", TEACHING, ids=lambda p: p.stem)
def test_one_audit_heading_after_the_teaching_core(path):
    nb = nbformat.read(path, as_version=4)
    headings = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
                for line in c.source.splitlines() if line.startswith("#") and AUDIT_HEADING in line]
    assert len(headings) == 1 and headings[0] == screens.audit_index(nb)
    assert nb.cells[headings[0]].source.startswith(f"## {AUDIT_HEADING}")
    later = [c.source.splitlines()[0] for c in nb.cells[headings[0] + 1:] if c.cell_type == "markdown"
             and c.source.startswith("## ")]
    assert not later, f"{path.name}: a section after the audit heading is not under it: {later}"


@pytest.mark.parametrize("path", TEACHING, ids=lambda p: p.stem)
def test_the_teaching_core_fits_in_twelve_screens(path):
    nb = nbformat.read(path, as_version=4)
    n = screens.core_screens(nb)
    assert n <= screens.MAX_CORE_SCREENS, (f"{path.name}: the teaching core is about {n:.1f} screens at 1280×800 "
                                           f"(at most {screens.MAX_CORE_SCREENS}): move material under the audit "
                                           f"heading, then measure with benchmarks/notebook_screens.py --write")


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def test_the_estimate_counts_lines_rows_and_figures():
    """Known answers: a heading and a paragraph; code and its printed lines; a table's rows; a figure shrunk to the
    page; nothing after the audit heading counts."""
    import base64
    import io

    from PIL import Image

    md = nbformat.v4.new_markdown_cell("## A heading\n\nOne short line.")
    assert screens.cell_px(md) == pytest.approx(40 + 20 + 24 + 14 + 22)
    code = nbformat.v4.new_code_cell("a = 1\nprint(a)")
    code.outputs = [nbformat.v4.new_output("stream", text="1\n2\n")]
    assert screens.cell_px(code) == pytest.approx(2 * 17.5 + 22 + 2 * 17.5 + 10)
    table = nbformat.v4.new_code_cell("show(df)")
    table.outputs = [nbformat.v4.new_output("display_data", data={"text/html": (
        '<table class="dataframe"><thead><tr><th>a</th></tr></thead><tbody><tr><td>1</td></tr>'
        '<tr><td>x<br>y</td></tr></tbody></table>'), "text/plain": "t"})]
    assert screens.cell_px(table) == pytest.approx(17.5 + 22 + 46 + 33 + 33 + 16 + 10)
    buf = io.BytesIO()
    Image.new("RGB", (2340, 1000), "white").save(buf, format="PNG")
    fig = nbformat.v4.new_code_cell("show_figure(fig)")
    fig.outputs = [nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(buf.getvalue()).decode(),
                                                               "text/plain": "<Image>"})]
    assert screens.cell_px(fig) == pytest.approx(17.5 + 22 + 500 + 10)  # shrunk to 1170 px: half its height
    audit = nbformat.v4.new_markdown_cell(f"## {AUDIT_HEADING}\n\nEverything else.")
    nb = _nb(md, code, audit, table, fig)
    assert screens.audit_index(nb) == 2
    assert screens.core_px(nb) == pytest.approx(screens.cell_px(md) + screens.cell_px(code))
    assert screens.core_screens(nb) == pytest.approx(screens.core_px(nb) / 800)


def _record_rows() -> list:
    text = RECORD.read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 8 and re.fullmatch(r"0\d_\w+", cells[0]):
            rows.append(cells)
    return rows


def test_the_record_measures_every_teaching_core_within_twelve_screens_and_no_table_cut():
    text = RECORD.read_text(encoding="utf-8")
    assert "benchmarks/notebook_screens.py --write" in text
    header = next(line for line in text.splitlines() if line.startswith("| notebook |"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    rows = [dict(zip(cols, r)) for r in _record_rows()]
    now = [r for r in rows if r["copy"] == "now"]
    assert {r["notebook"][:2] for r in now} >= {"03", "04", "05", "06", "07"}
    for r in now:
        if r["notebook"][:2] in {"03", "04", "05", "06", "07"}:
            assert r["audit heading"] == "yes"
            if r["window"] == "1280×800":
                assert int(r["core screens"]) <= screens.MAX_CORE_SCREENS, r
                assert float(r["proxy screens"]) >= int(r["core screens"]) - 1, r  # the estimate is not below
        assert r["tables cut (core + audit)"] == "0 + 0", r  # every column on the page, at 1024 px too
