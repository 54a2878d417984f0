"""One way to show a table in a notebook: :func:`show`.

Every notebook shows its tables through :func:`show`, so that a reader meets the same conventions
everywhere:

* **numbers rounded**: floats to ``digits`` decimals (1 by default; a column can have its own), whole-valued
  float columns (counts that passed through a mean or a NaN) as integers, NaN as an empty cell;
* **no runtime columns**: wall-clock seconds and cache hits (:func:`kgir_lib.report.is_runtime`) describe
  this execution, not the result; a rerun from the cache would change them, so they are never shown (the
  table's saved copy keeps them in the run's git-ignored ``runtime/`` folder);
* **published columns that hold nothing dropped**: a column whose label names a published or paper number
  ("published: ...", "Δ EM (paper, ...)") and is NaN on every row of this table says nothing here;
* **wide tables split, keys in every block**: more than ``max_cols`` columns, or a table too wide for a 1024-px page
  (:func:`least_width_px` against :data:`TABLE_PX`: no column falls off a projected page), are shown in blocks
  of about equal width (by top-level group for grouped columns, so a published group stays together), or
  transposed when the table has few rows. Every block repeats the row keys: the index, or, for a table with a plain
  0, 1, 2, ... index, its leading text columns that tell the rows apart (:func:`key_columns`: ``dataset``,
  ``qid``), which become the row labels. A block after the first leaves out the rows that hold no value in it (a
  published column group has numbers for a few methods only) and says so;
* **long tables cut**: more than ``max_rows`` rows show the first ``max_rows``, with a line saying how many
  there are and where the whole table is saved (``full``: the path :func:`kgir_lib.report.save_table` returned);
* **text readable**: a line break in a cell is a line break; long text wraps between words in a box about ``wrap``
  characters wide (the browser breaks it, narrower when the page is, never inside a word), so no table runs off a
  projected page; a text column keeps a minimum width (:data:`MIN_TEXT_CH` characters), so a question is never
  squeezed into a column one word wide, and the text columns of one table together keep at most
  :data:`TEXT_BUDGET_CH` (each down to :data:`SQUEEZED_CH`), so a table of many text columns still fits beside its
  keys on a 1,400-px page;
* **words, not Python**: a true / false cell reads "yes" / "no" (the saved table keeps the values);
* **terms defined**: ``notes`` (``{column: definition}``, e.g. a module's ``COLUMN_NOTES``) are printed under the
  table for the columns it has, so an abbreviation ("n alone", "McNemar b/c") is never left to guess.

:func:`tidy`, :func:`key_columns`, :func:`blocks` and :func:`cut_rows` are the pure steps (unit-tested);
:func:`show` displays their result as HTML with a plain-text fallback.
"""
from __future__ import annotations

import html
import re
import textwrap
from typing import Mapping, Optional, Union

import numpy as np
import pandas as pd

from ..report import is_runtime, shown

__all__ = ["show", "show_figure", "tidy", "blocks", "key_columns", "cut_rows", "notes_markdown", "is_published",
           "Table", "least_width_px"]

PUBLISHED_MARKERS = ("published", "paper")
MAX_ROWS = 20      # rows a table shows before it is cut (the whole table is saved; its path is printed)
MIN_TEXT_CH = 18   # minimum width of a column of long text, in characters
MAX_KEYS = 3       # leading text columns that can serve as a table's row keys
TEXT_BUDGET_CH = 60  # minimum width (characters) all text columns of a table keep together
SQUEEZED_CH = 10   # a text column squeezed to the budget keeps at least this width (or its longest line)


def is_published(label) -> bool:
    """A column label (a tuple for grouped columns) that names a published or paper number."""
    parts = label if isinstance(label, tuple) else (label,)
    return any(m in str(p).lower() for p in parts for m in PUBLISHED_MARKERS)


def _whole(col: pd.Series) -> bool:
    vals = col.dropna()
    return len(vals) > 0 and bool(np.all(np.isclose(vals, np.round(vals)))) and bool((vals.abs() < 1e15).all())


def _set_decimals(col: pd.Series) -> int:
    """Decimals of a column of set values (a swept threshold 0.95, a drop fraction 0.05: at most 3 decimals
    each), which rounding must not change; 0 for measured values."""
    vals = col.dropna()
    if len(vals) == 0 or not np.allclose(vals, vals.round(3), rtol=0, atol=1e-12):
        return 0
    return next(d for d in range(4) if np.allclose(vals, vals.round(d), rtol=0, atol=1e-12))


def is_p_value(column) -> bool:
    """A p-value column (``p``, ``p (Holm)``, ``p R@2 ...``, ``EM p vs round 1``): shown with two significant
    digits, so a small p does not round to 0."""
    name = str(column[-1] if isinstance(column, tuple) else column)
    return name == "p" or name.startswith(("p ", "p(")) or " p vs " in f" {name}"


def tidy(df: pd.DataFrame, digits: Union[int, Mapping[str, int]] = 1,
         drop_empty_published: bool = True) -> pd.DataFrame:
    """``df`` with floats rounded, runtime columns and empty published columns dropped (module docstring).

    ``digits``: decimals for every float column, or ``{column: decimals}`` with the others at 1. A float
    column whose values are all whole numbers becomes a nullable integer column; a column of set values with
    at most 3 decimals (0.05, 0.95) keeps them. Nothing else changes.
    """
    out = df.drop(columns=[c for c in df.columns if is_runtime(c)])
    if drop_empty_published:
        empty = [c for c in out.columns if is_published(c) and out[c].isna().all()]
        out = out.drop(columns=empty)
    per_col = digits if isinstance(digits, Mapping) else {}
    default = 1 if isinstance(digits, Mapping) else int(digits)
    for c in out.columns:
        col = out[c]
        if not pd.api.types.is_float_dtype(col):
            continue
        if is_p_value(c):
            out[c] = col.map(lambda x: "" if pd.isna(x) else f"{x:.2g}")
            continue
        d = per_col.get(c if not isinstance(c, tuple) else c[-1], per_col.get(c, default))
        out[c] = col.round(0).astype("Int64") if _whole(col) else col.round(max(d, _set_decimals(col)))
    return out


def key_columns(df: pd.DataFrame, max_keys: int = MAX_KEYS) -> list:
    """The columns that tell the rows of ``df`` apart, for a table with a plain 0, 1, 2, ... index: the shortest
    run of leading text (non-numeric) columns whose values are unique per row (``dataset``, ``qid``), else all
    leading text columns up to ``max_keys``; ``[]`` when the index is not plain or the first column is a number."""
    if not isinstance(df.index, pd.RangeIndex) or isinstance(df.columns, pd.MultiIndex) or df.shape[1] < 2:
        return []
    lead = []
    for c in df.columns[:max_keys]:
        col = df[c]
        if pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
            break
        lead.append(c)
        if not df.duplicated(subset=lead).any():
            return lead
    return lead if len(lead) < df.shape[1] else lead[:-1]


def _cuts(n: int, k: int) -> list:
    """``n`` columns cut into ``k`` consecutive blocks of about equal width."""
    size, extra = divmod(n, k)
    cuts, start = [], 0
    for i in range(k):
        end = start + size + (1 if i < extra else 0)
        cuts.append((start, end))
        start = end
    return cuts


def blocks(df: pd.DataFrame, max_cols: int = 10, transpose_rows: int = 3, fits=None) -> list:
    """``df`` as a list of tables no wider than ``max_cols`` columns, each of which ``fits`` (a test of a block:
    shown whole on the page; :func:`show` passes one that lays the block out at its narrowest,
    :func:`least_width_px`, against :data:`TABLE_PX`).

    A table with at most ``transpose_rows`` rows and more columns than fit is transposed (one row a column; the row
    labels become the column headers), if that makes it fit; otherwise columns are cut into consecutive blocks of
    about equal width, the fewest that fit, whole top-level groups together where the columns are grouped. Every
    block keeps the index (set the key columns as the index first: :func:`key_columns`); a block after the first
    drops the rows that hold no value in it. A single column too wide for the page is a block of its own.
    """
    def ok(b: pd.DataFrame) -> bool:
        return b.shape[1] <= max_cols and (fits is None or fits(b))

    n = df.shape[1]
    if ok(df):
        return [df]
    if len(df) <= transpose_rows and len(df) <= max_cols and ok(df.T):
        return [df.T]
    if isinstance(df.columns, pd.MultiIndex):
        groups = [[c for c in df.columns if c[0] == g] for g in dict.fromkeys(df.columns.get_level_values(0))]
        out: list = []
        cur: list = []
        for cols in groups:
            if cur and not ok(df[cur + cols]):
                out.append(df[cur])
                cur = []
            if not ok(df[cols]):  # a group too wide alone: its columns in blocks of their own
                out += [b for b in blocks(df[cols], max_cols, transpose_rows=0, fits=fits)]
                continue
            cur.extend(cols)
        if cur:
            out.append(df[cur])
    else:
        out = []  # (no cut found yet)
        for k in range(-(-n // max_cols), n + 1):
            parts = [df.iloc[:, a:b] for a, b in _cuts(n, k)]
            if all(ok(p) for p in parts):
                out = parts
                break
        out = out or [df.iloc[:, [j]] for j in range(n)]
    return [out[0]] + [b[~b.isna().all(axis=1)] for b in out[1:]]


def cut_rows(df: pd.DataFrame, max_rows: int = MAX_ROWS) -> tuple:
    """``(the first max_rows rows, how many rows there are)``: a long table shows its head."""
    return (df if len(df) <= max_rows else df.head(max_rows)), len(df)


def notes_markdown(df: pd.DataFrame, notes: Optional[Mapping[str, str]]) -> str:
    """The definitions in ``notes`` of the columns (and index names) ``df`` has, as one Markdown line each; a note
    for a label also defines that label followed by a parenthesis (its settings)."""
    if not notes:
        return ""
    labels = [c[-1] if isinstance(c, tuple) else c for c in df.columns]
    labels += [n for n in (df.index.names or []) if n is not None]
    lines = []
    for label in dict.fromkeys(str(c) for c in labels):
        key = label if label in notes else next((k for k in notes if label.startswith(f"{k} (")), None)
        if key is not None:  # a note for "MDE" also defines "MDE (α = 0.05, power 0.8)"
            lines.append(f"*{html.escape(label)}*: {notes[key]}")
    return "  \n".join(lines)


def _given_lines(v) -> list:
    """A cell's text as the lines it was given (its own line breaks only); ``[]`` for a missing value."""
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return []
    if isinstance(v, (bool, np.bool_)):
        return ["yes" if v else "no"]  # a word, not Python's True / False
    if isinstance(v, (float, np.floating)) and float(v).is_integer() and abs(float(v)) < 1e15:
        v = int(v)  # a count in a column of mixed quantities (a transposed table) shows no ".0"
    return str(v).split("\n")


def _lines(v, wrap: int) -> list:
    """A cell's lines as a browser lays them out in a column ``wrap`` characters wide: its own line breaks, then
    breaks between words only (a word longer than ``wrap`` stays whole)."""
    lines = []
    for raw in _given_lines(v):
        lines.extend(textwrap.wrap(raw, wrap, break_on_hyphens=False, break_long_words=False) or [""])
    return lines


def _cell_html(v, wrap: int) -> str:
    """A cell's text escaped, its own line breaks as ``<br>``. Text longer than ``wrap`` characters sits in a box
    at most ``wrap`` characters wide (``max-width: <wrap>ch``), where the browser breaks it between words, as
    narrow as the column is: no break is written into the text, so a phrase is never cut at a fixed width and then
    cut again by a narrower page."""
    lines = _given_lines(v)
    body = "<br>".join(html.escape(line) for line in lines)
    if any(len(line) > wrap for line in lines):
        return f'<div style="max-width: {wrap}ch">{body}</div>'
    return body


def _min_width(col: pd.Series, wrap: int) -> int:
    """The minimum width (characters) a text column keeps: its longest line, at most :data:`MIN_TEXT_CH` or half
    the wrap width, whichever is more."""
    longest = max((len(line) for v in col for line in _lines(v, wrap)), default=0)
    return min(longest, max(MIN_TEXT_CH, wrap // 2))


def _min_widths(df: pd.DataFrame, text: list, wrap: int) -> list:
    """The minimum width of each text column (``None`` for the others): :func:`_min_width`, scaled down together
    when they add up to more than :data:`TEXT_BUDGET_CH`, none below :data:`SQUEEZED_CH` or its longest line."""
    mins = [_min_width(df.iloc[:, j], wrap) if t else None for j, t in enumerate(text)]
    total = sum(m for m in mins if m)
    if total <= TEXT_BUDGET_CH:
        return mins
    return [None if m is None else max(min(m, SQUEEZED_CH), m * TEXT_BUDGET_CH // total) for m in mins]


# How wide a table must be, from its HTML (the page's table font is 13 px; a cell's padding 0.5em each side):
CHAR_PX = 8.3       # a digit, the CSS ``ch``, in the tables' regular font
BOLD_CHAR_PX = 9.0  # a character of a header or a row key (bold)
CELL_PAD_PX = 13.0
# The widest table a 1024-px page shows whole: nbconvert's lab output area is 914 px wide in a 1024-px window
# (benchmarks/notebook_screens.py measures it), less a margin for the estimate's error.
TABLE_PX = 880
_CELL = re.compile(r"<(t[hd])([^>]*)>(.*?)</t[hd]>", re.S)
_ROW = re.compile(r"<tr>(.*?)</tr>", re.S)


def _cell_least_px(tag: str, attrs: str, content: str) -> float:
    """The narrowest a cell can be: its longest unbreakable word (a browser wraps at spaces, hyphens and ``<br>``),
    or its ``min-width``, whichever is wider, plus padding."""
    text = html.unescape(re.sub(r"<(?!br)[^>]+>", "", content))
    # a browser breaks a line at a space, a <br> and after a hyphen
    words = [w for line in re.split(r"<br\s*/?>", text) for w in re.split(r"(?<=-)|\s+", line) if w]
    longest = max((len(w) for w in words), default=0) * (BOLD_CHAR_PX if tag == "th" else CHAR_PX)
    m = re.search(r"min-width:\s*(\d+)ch", attrs)
    return max(longest, int(m.group(1)) * CHAR_PX if m else 0.0) + CELL_PAD_PX


def least_width_px(table_html: str) -> float:
    """The narrowest a table of :class:`Table`'s HTML can be laid out (its min-content width, px): per column, its
    widest cell's :func:`_cell_least_px`, summed. A page narrower than this cuts columns off; the estimate is checked
    against Chromium's layout of every stored table by ``benchmarks/notebook_screens.py``."""
    body = table_html.split("</caption>", 1)[-1]
    widths: list = []
    for row in _ROW.findall(body):
        for j, (tag, attrs, content) in enumerate(_CELL.findall(row)):
            w = _cell_least_px(tag, attrs, content)
            if j < len(widths):
                widths[j] = max(widths[j], w)
            else:
                widths.append(w)
    return float(sum(widths))


def _label_html(label) -> str:
    if isinstance(label, tuple):
        return "<br>".join(html.escape(str(p)) for p in label if str(p) != "")
    return html.escape(str(label))


class Table:
    """A table to display: HTML with wrapped text (``_repr_html_``) and a plain-text fallback (``__repr__``)."""

    def __init__(self, df: pd.DataFrame, caption: Optional[str] = None, wrap: int = 40, index: bool = True) -> None:
        self.df, self.caption, self.wrap, self.index = df, caption, wrap, index

    def _repr_html_(self) -> str:
        df = self.df
        index_names = [n for n in (df.index.names or []) if n is not None]
        head = ("".join(f"<th>{html.escape(str(n))}</th>" for n in index_names) or "<th></th>") if self.index else ""
        text = [not (pd.api.types.is_numeric_dtype(df.iloc[:, j]) or pd.api.types.is_bool_dtype(df.iloc[:, j]))
                for j in range(df.shape[1])]
        head += "".join(f'<th style="text-align: left">{_label_html(c)}</th>' if t else f"<th>{_label_html(c)}</th>"
                        for c, t in zip(df.columns, text))
        style = [f' style="text-align: left; min-width: {m}ch"' if t else ""
                 for m, t in zip(_min_widths(df, text, self.wrap), text)]
        rows = []
        for idx, row in zip(df.index, df.itertuples(index=False)):
            keys = idx if isinstance(idx, tuple) else (idx,)
            cells = "".join(f'<th style="text-align: left">{_cell_html(k, self.wrap)}</th>' for k in keys) \
                if self.index else ""
            cells += "".join(f"<td{st}>{_cell_html(v, self.wrap)}</td>" for v, st in zip(row, style))
            rows.append(f"<tr>{cells}</tr>")
        cap = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return (f'<table class="dataframe">{cap}<thead><tr>{head}</tr></thead>'
                f"<tbody>{''.join(rows)}</tbody></table>")

    def __repr__(self) -> str:
        text = self.df.to_string(na_rep="", index=self.index)
        return f"{self.caption}\n{text}" if self.caption else text


def show(df: Union[pd.DataFrame, pd.Series], caption: Optional[str] = None, *,
         digits: Union[int, Mapping[str, int]] = 1, max_cols: int = 10, wrap: int = 40,
         drop_empty_published: bool = True, index: bool = True, max_rows: int = MAX_ROWS,
         full=None, notes: Optional[Mapping[str, str]] = None, max_px: Optional[float] = None) -> None:
    """Display ``df`` the suite's way (module docstring), with ``caption`` above its first block.

    ``index=False`` leaves out the row labels (a plain 0, 1, 2, ... says nothing); a table split into blocks
    shows its :func:`key_columns` as row labels in every block instead. ``max_rows``: rows shown before the
    table is cut, with ``full`` (the saved table's path) named under it. ``notes``: ``{column: definition}``
    printed under the table for the columns it has. ``max_px``: the widest a block may be laid out (default
    :data:`TABLE_PX`, what a 1024-px page shows whole), so no column falls off a projected page."""
    from IPython.display import Markdown, display

    max_px = TABLE_PX if max_px is None else max_px
    if isinstance(df, pd.Series):
        df = df.to_frame()
    df, total = cut_rows(tidy(df, digits, drop_empty_published), max_rows)
    keys = key_columns(df)
    if keys and (df.shape[1] > max_cols or index):
        df, index = df.set_index(keys), True
    parts = blocks(df, max_cols, fits=lambda b: least_width_px(Table(b, None, wrap, index)._repr_html_()) <= max_px)
    for i, b in enumerate(parts):
        cap = caption if i == 0 else None
        if i and len(b) < len(parts[0]):
            cap = "(continued; rows without a value in these columns left out)"
        display(Table(b, cap, wrap, index))
    lines = []
    if total > len(df):
        where = f"; the whole table: {shown(full)}" if full is not None else ""
        lines.append(f"First {len(df)} of {total} rows{where}.")
    defined = notes_markdown(df, notes)
    if defined:
        lines.append(defined)
    if lines:
        display(Markdown("  \n".join(lines)))


def show_figure(fig, cfg=None, name: Optional[str] = None) -> None:
    """Display ``fig`` as the PNG the suite stores (:func:`kgir_lib.report.figure_png`: its smallest font and dpi
    recorded in the file, so ``tests/test_figures_legible.py`` checks every figure of a stored notebook as it checks
    ``figures/``), saved first as ``figures/<profile>/<name>.png`` when ``name`` is given; the figure is closed."""
    import matplotlib.pyplot as plt
    from IPython.display import Image, display

    from .. import report

    path = report.save_figure(fig, cfg, name) if name else None
    data = path.read_bytes() if path is not None else report.figure_png(fig)
    plt.close(fig)
    display(Image(data=data, format="png"))
