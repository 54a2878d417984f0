"""One progress bar for the library's long loops: ``progress(iterable, desc=..., total=...)``.

In a terminal it is a plain ``tqdm`` bar on stderr. In a Jupyter kernel (interactive or papermill)
the bar is **one display output updated in place** (``display(..., display_id=True)`` then
``update_display``): a live notebook shows it moving, and an executed notebook stores only the
bar's last state, one line per bar — not one stream line per update, which is what a text bar
leaves in a papermill notebook. No ipywidgets needed.

The returned object is a ``tqdm`` instance (``update``, ``set_postfix``, ``close``, context manager).
"""
from __future__ import annotations

import sys
from typing import Any, Iterable, Optional

from tqdm.std import tqdm as _tqdm

__all__ = ["progress", "in_notebook"]


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
        self._handle = None
        self._text = ""
        self._shown = None

    def write(self, s: str) -> int:
        for part in s.replace("\n", "\r").split("\r"):
            if part.strip():
                self._text = part.rstrip()
        return len(s)

    def flush(self) -> None:
        if not self._text or self._text == self._shown:
            return
        from IPython.display import display

        bundle = {"text/plain": self._text}
        if self._handle is None:
            self._handle = display(bundle, raw=True, display_id=True)
        else:
            self._handle.update(bundle, raw=True)
        self._shown = self._text


class _NotebookBar(_tqdm):
    """tqdm drawing into one in-place display output (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["file"] = _DisplayFile()
        kwargs["leave"] = True  # the stored notebook keeps each bar's final state, one line
        kwargs.setdefault("mininterval", 0.5)
        kwargs.setdefault("ncols", 90)
        super().__init__(*args, **kwargs)

    def close(self) -> None:
        if self.disable:
            return
        super().close()
        self.fp.flush()


def progress(iterable: Optional[Iterable] = None, desc: Optional[str] = None, total: Optional[int] = None,
             disable: bool = False, **kwargs: Any) -> _tqdm:
    """A progress bar over ``iterable`` (or a manual one with ``total``); see the module docstring."""
    cls = _NotebookBar if in_notebook() else _tqdm
    return cls(iterable, desc=desc, total=total, disable=disable, **kwargs)
