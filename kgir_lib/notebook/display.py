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
* **wide tables split**: more than ``max_cols`` columns are shown in blocks of columns, each with the row
  labels (by top-level group for grouped columns, so a published group stays together), or transposed when
  the table has few rows;
* **text readable**: a line break in a cell is a line break, and long text wraps at about ``wrap`` characters
  into lines that do not break further, so a question is never squeezed into a column one word wide.

:func:`tidy` and :func:`blocks` are the pure steps (unit-tested); :func:`show` displays their result as HTML
with a plain-text fallback.
"""
from __future__ import annotations

import html
import textwrap
from typing import Mapping, Optional, Union

import numpy as np
import pandas as pd

from ..report import is_runtime

__all__ = ["show", "tidy", "blocks", "is_published", "Table"]

PUBLISHED_MARKERS = ("published", "paper")


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


def tidy(df: pd.DataFrame, digits: Union[int, Mapping[str, int]] = 1, drop_empty_published: bool = True) -> pd.DataFrame:
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


def blocks(df: pd.DataFrame, max_cols: int = 10, transpose_rows: int = 3) -> list:
    """``df`` as a list of tables no wider than ``max_cols`` columns.

    A table with at most ``transpose_rows`` rows and more columns than ``max_cols`` is transposed (one row a
    column), if that makes it fit; otherwise columns are cut into consecutive blocks, whole top-level groups
    together where the columns are grouped.
    """
    n = df.shape[1]
    if n <= max_cols:
        return [df]
    if len(df) <= transpose_rows and len(df) <= max_cols:
        return [df.T]
    if isinstance(df.columns, pd.MultiIndex):
        groups = list(dict.fromkeys(df.columns.get_level_values(0)))
        out, cur = [], []
        for g in groups:
            cols = [c for c in df.columns if c[0] == g]
            if cur and len(cur) + len(cols) > max_cols:
                out.append(df[cur])
                cur = []
            cur.extend(cols)
        out.append(df[cur])
        return out
    return [df.iloc[:, i:i + max_cols] for i in range(0, n, max_cols)]


def _cell_html(v, wrap: int) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return ""
    if isinstance(v, (float, np.floating)) and float(v).is_integer() and abs(v) < 1e15:
        v = int(v)  # a count in a column of mixed quantities (a transposed table) shows no ".0"
    text = str(v)
    lines = []
    for raw in text.split("\n"):
        lines.extend(textwrap.wrap(raw, wrap, break_on_hyphens=False) or [""])
    return "<br>".join(html.escape(line).replace(" ", "&nbsp;") for line in lines)


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
        head += "".join(f"<th>{_label_html(c)}</th>" for c in df.columns)
        text = [not (pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c])) for c in df.columns]
        rows = []
        for idx, row in zip(df.index, df.itertuples(index=False)):
            keys = idx if isinstance(idx, tuple) else (idx,)
            cells = "".join(f'<th style="text-align: left">{_cell_html(k, self.wrap)}</th>' for k in keys) \
                if self.index else ""
            cells += "".join(f'<td style="text-align: left">{_cell_html(v, self.wrap)}</td>' if t else
                             f"<td>{_cell_html(v, self.wrap)}</td>" for v, t in zip(row, text))
            rows.append(f"<tr>{cells}</tr>")
        cap = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return (f'<table class="dataframe">{cap}<thead><tr>{head}</tr></thead>'
                f"<tbody>{''.join(rows)}</tbody></table>")

    def __repr__(self) -> str:
        text = self.df.to_string(na_rep="", index=self.index)
        return f"{self.caption}\n{text}" if self.caption else text


def show(df: Union[pd.DataFrame, pd.Series], caption: Optional[str] = None, *,
         digits: Union[int, Mapping[str, int]] = 1, max_cols: int = 10, wrap: int = 40,
         drop_empty_published: bool = True, index: bool = True) -> None:
    """Display ``df`` the suite's way (module docstring), with ``caption`` above its first block;
    ``index=False`` leaves out the row labels (a plain 0, 1, 2, ... says nothing)."""
    from IPython.display import display

    if isinstance(df, pd.Series):
        df = df.to_frame()
    parts = [Table(b, caption if i == 0 else None, wrap, index)
             for i, b in enumerate(blocks(tidy(df, digits, drop_empty_published), max_cols))]
    for p in parts:
        display(p)
