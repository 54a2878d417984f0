"""One progress bar for the library's long loops: ``progress(iterable, desc=..., total=...)``.

In a terminal it is a plain ``tqdm`` bar on stderr. In a Jupyter kernel (interactive or papermill)
the bar is **one display output updated in place** (``display(..., display_id=True)`` then
``update_display``): a live notebook shows it moving, and when the bar closes its display is cleared,
so an executed notebook stores no bar at all — its rate and elapsed time would change with every run
(and a text bar would leave one stream line per update). What the loop produced is printed by the
notebook itself. No ipywidgets needed.

The returned object is a ``tqdm`` instance (``update``, ``set_postfix``, ``close``, context manager).
"""
from __future__ import annotations

import re
import sys
from typing import Any, Iterable, Optional

from tqdm.std import tqdm as _tqdm

__all__ = ["progress", "in_notebook", "BAR_TEXT", "is_bar_text"]

# What a tqdm bar prints: "desc: 40%|####  | 2/5 [00:01<00:02, 1.5it/s]" or, without a total, "12it [00:01, ...]".
BAR_TEXT = re.compile(r"\d{1,3}%\|[^|\n]*\|\s*[\d.]+[kMG]?/[\d.]+[kMG]?\s*\[[\d:]+|\b\d+(?:it|B) \[[\d:]+")


def is_bar_text(text: str) -> bool:
    """Whether ``text`` holds a progress bar's line (:data:`BAR_TEXT`), which a stored notebook must not keep."""
    return bool(BAR_TEXT.search(str(text)))


def in_notebook() -> bool:
    """True inside a Jupyter kernel (ipykernel), where stderr lines would pile up in the stored output."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class _DisplayFile:
    """A file-like target for tqdm that keeps one display output per bar and rewrites it."""

    def __init__(self) -> None:
        self._handle: Any = None  # IPython's DisplayHandle of the bar, once shown
        self._text = ""
        self._shown: Optional[str] = None

    def write(self, s: str) -> int:
        if s.strip("\n") == "":
            return len(s)  # the newline after a bar that stays
        last = s.replace("\n", "\r").split("\r")[-1]
        if last.strip():
            self._text = last.rstrip()
        elif s.startswith("\r"):
            self._text = ""  # tqdm clearing a bar with leave=False
        return len(s)

    def flush(self) -> None:
        if self._text == self._shown or (self._handle is None and not self._text):
            return
        from IPython.display import display

        bundle = {"text/plain": self._text}
        if self._handle is None:
            self._handle = display(bundle, raw=True, display_id=True)
        else:
            self._handle.update(bundle, raw=True)
        self._shown = self._text

    def clear(self) -> None:
        """Empty the bar's display (an executed notebook keeps no bar; see the module docstring)."""
        self._text = ""
        self.flush()


class _NotebookBar(_tqdm):
    """tqdm drawing into one in-place display output (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["file"] = _DisplayFile()
        kwargs.setdefault("mininterval", 0.5)
        kwargs.setdefault("ncols", 90)
        super().__init__(*args, **kwargs)

    def close(self) -> None:
        if self.disable:
            return
        super().close()
        self.fp.clear()


def progress(iterable: Optional[Iterable] = None, desc: Optional[str] = None, total: Optional[int] = None,
             disable: bool = False, **kwargs: Any) -> _tqdm:
    """A progress bar over ``iterable`` (or a manual one with ``total``); see the module docstring."""
    cls = _NotebookBar if in_notebook() else _tqdm
    return cls(iterable, desc=desc, total=total, disable=disable, **kwargs)
