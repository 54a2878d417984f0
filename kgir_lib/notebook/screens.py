"""How tall a stored notebook's teaching core is, estimated from the notebook file alone (no browser).

Notebooks 03-07 put what a lecturer projects first and their audit material under one heading,
:data:`kgir_lib.notebook.narrative.AUDIT_HEADING`. ``benchmarks/notebook_screens.py`` measures the teaching core in
headless Chromium (nbconvert's page at 1280×800); this module estimates the same height from the cells and their
stored outputs, so a fast test can keep the core from growing without a browser: every markdown line wrapped at the
page's width, every line of code, every line of printed text, every table row, every figure at the height it is shown.
The constants are set so the estimate is never below Chromium's measure of the committed notebooks (the benchmark
records both, side by side).
"""
from __future__ import annotations

import base64
import html
import io
import math
import re
import textwrap
from typing import Optional

from .narrative import AUDIT_HEADING

__all__ = ["audit_index", "cell_px", "core_px", "core_screens", "code_px", "core_code_share", "input_hidden",
           "long_code_lines", "HIDE_INPUT", "SCREEN_PX", "MAX_CORE_SCREENS", "MAX_CODE_SHARE", "CODE_CHARS_1024"]

SCREEN_PX = 800          # a 1280×800 projector's page height
MAX_CORE_SCREENS = 12    # what a lecturer projects before the audit, at most
FIGURE_PX = 1170         # the width a figure is shown at on a 1280-px page (kgir_lib.report.FIGURE_FIT_PX)
# px of one line, and characters a line holds, at a 1280-px page (nbconvert's lab template)
MD_LINE, MD_CHARS = 24.0, 140
CODE_LINE, CODE_CHARS = 17.5, 150
OUT_LINE, OUT_CHARS = 17.5, 150
ROW_PX, HEAD_PX = 33.0, 46.0   # a table row (one line of text), a table's header and caption
HEADINGS = {1: (44.0, 58), 2: (40.0, 70), 3: (32.0, 90), 4: (28.0, 110)}  # px a line, characters a line
CELL_PAD, OUTPUT_PAD = 22.0, 10.0
CODE_PAD = 10.0          # px of a code input area besides its lines
# The tag of a code cell whose input teaches nothing (imports, formatting, saving): scripts/build_notebooks.py marks
# its input collapsed for JupyterLab (``jupyter.source_hidden``) and a rendered copy leaves it out
# (benchmarks/notebook_screens.py renders with nbconvert's TagRemovePreprocessor on this tag); its outputs stay.
HIDE_INPUT = "hide-input"
MAX_CODE_SHARE = 0.10    # at most this share of a teaching core's height is code a reader sees
# The estimate of a core is never below Chromium's height; Chromium's is at least this share of it (0.85 to 0.90 on
# the readers' copies of 01, 03, 04, 05 and 07), so the code share divides by this share of the estimate: never
# below the share Chromium measures. The code's own height is estimated line for line (within 2 % of the measure).
CORE_LOW = 0.85
# Characters of code a line holds on a 1024-px page (914-px input area, 7.8 px a character of the 13-px code font,
# less the editor's padding): a longer line runs past the right edge. Measured in Chromium with the benchmark's page:
# a line of 114 characters fits, one of 115 scrolls.
CODE_CHARS_1024 = 114


def audit_index(nb) -> Optional[int]:
    """The index of the markdown cell that opens with the audit heading (``## Audit: ...``), or ``None``."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith(f"## {AUDIT_HEADING}"):
            return i
    return None


def _wrapped(text: str, chars: int) -> int:
    return sum(max(1, math.ceil(len(line) / chars)) for line in text.split("\n"))


def _markdown_px(text: str) -> float:
    px = 0.0
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.split("\n")
        head = re.match(r"(#{1,4})\s", lines[0])
        if head:
            line_px, chars = HEADINGS[len(head.group(1))]
            px += line_px * max(1, math.ceil(len(lines[0]) / chars)) + 20
            lines = lines[1:]
        if lines and lines[0].lstrip().startswith("|"):
            px += HEAD_PX + ROW_PX * sum(_wrapped(re.sub(r"\s+", " ", ln), MD_CHARS) for ln in lines[2:])
        elif lines:
            px += MD_LINE * sum(_wrapped(ln, MD_CHARS) for ln in " ".join(lines).split("  \n")) + 14
    return px


def _table_px(table_html: str) -> float:
    """A :class:`kgir_lib.notebook.display.Table`'s rows, each as tall as its most wrapped cell."""
    px = HEAD_PX
    cap = re.search(r"<caption>(.*?)</caption>", table_html, re.S)
    if cap:
        px += MD_LINE * max(1, math.ceil(len(html.unescape(cap.group(1))) / MD_CHARS))
    head = re.search(r"<thead>(.*?)</thead>", table_html, re.S)
    if head:
        px += 16.0 * max([c.count("<br>") for c in re.findall(r"<th[^>]*>(.*?)</th>", head.group(1), re.S)] or [0])
    for row in re.findall(r"<tr>(.*?)</tr>", table_html.split("</thead>", 1)[-1], re.S):
        lines = max([_cell_lines(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)] or [1])
        px += ROW_PX + 16.0 * (lines - 1)
    return px


def _cell_lines(cell_html: str) -> int:
    """The lines of one table cell: its ``<br>`` breaks, and within a box ``max-width: <n>ch`` (long text, which the
    browser breaks between words) each line's words wrapped at ``n`` characters (a character of text is narrower
    than a ``ch``, so this is never fewer lines than the page shows)."""
    box = re.search(r"max-width:\s*(\d+)ch", cell_html)
    parts = re.split(r"<br\s*/?>", re.sub(r"<(?!br)[^>]+>", "", cell_html))
    if not box:
        return len(parts)
    width = int(box.group(1))
    return sum(len(textwrap.wrap(html.unescape(p), width, break_long_words=False)) or 1 for p in parts)


def _image_px(data: str) -> float:
    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(data))) as im:
        w, h = im.size
    return h * min(1.0, FIGURE_PX / w) + 10


def _output_px(out) -> float:
    if out.get("output_type") == "stream":
        return OUT_LINE * _wrapped(str(out.get("text", "")).rstrip("\n"), OUT_CHARS) + OUTPUT_PAD
    data = out.get("data", {})
    if "image/png" in data:
        return _image_px(data["image/png"])
    if "text/html" in data:
        tables = re.findall(r"<table.*?</table>", str(data["text/html"]), re.S)
        return sum(_table_px(t) for t in tables) + OUTPUT_PAD if tables else OUT_LINE * 3
    if "text/markdown" in data:
        return _markdown_px(str(data["text/markdown"])) + OUTPUT_PAD
    if "text/plain" in data:
        return OUT_LINE * _wrapped(str(data["text/plain"]), OUT_CHARS) + OUTPUT_PAD
    return 0.0


def input_hidden(cell) -> bool:
    """Whether a code cell's input is hidden from the reader: tagged :data:`HIDE_INPUT` (or collapsed in JupyterLab,
    ``jupyter.source_hidden``)."""
    meta = cell.get("metadata", {})
    return HIDE_INPUT in meta.get("tags", []) or bool(meta.get("jupyter", {}).get("source_hidden"))


def code_px(cell) -> float:
    """The estimated height (px) of the code a reader sees in one cell on a 1280-px page: 0 for a markdown cell or
    a hidden input."""
    if cell.cell_type != "code" or input_hidden(cell):
        return 0.0
    return CODE_LINE * _wrapped(textwrap.dedent(cell.source), CODE_CHARS) + CODE_PAD


def cell_px(cell) -> float:
    """The estimated height (px) of one cell and its stored outputs on a 1280-px page (a hidden input counts
    nothing)."""
    if cell.cell_type == "markdown":
        return _markdown_px(cell.source) + CELL_PAD
    return code_px(cell) + CELL_PAD + sum(_output_px(o) for o in cell.get("outputs", []))


def core_px(nb) -> float:
    """The estimated height of the teaching core: every cell before the audit heading (the whole notebook when it has
    none)."""
    end = audit_index(nb)
    return sum(cell_px(c) for c in nb.cells[:end])


def core_code_share(nb) -> float:
    """The share of the teaching core's height that is code a reader sees (:func:`code_px`), the core taken at
    :data:`CORE_LOW` of its estimate, so that the share is never below Chromium's measure."""
    end = audit_index(nb)
    total = CORE_LOW * core_px(nb)
    return sum(code_px(c) for c in nb.cells[:end]) / total if total else 0.0


def long_code_lines(nb, chars: int = CODE_CHARS_1024) -> list:
    """``(cell index, line)`` of every line of code a reader sees in the teaching core that is longer than ``chars``
    characters: past the right edge of a 1024-px page by default."""
    end = audit_index(nb)
    return [(i, line) for i, c in enumerate(nb.cells[:end]) if code_px(c)
            for line in textwrap.dedent(c.source).splitlines() if len(line) > chars]


def core_screens(nb, screen_px: float = SCREEN_PX) -> float:
    """The teaching core's estimated height in 1280×800 screens (a fraction; the benchmark rounds its measure up)."""
    return core_px(nb) / screen_px
