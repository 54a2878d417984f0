"""How the runner executes a notebook: a quiet kernel, and an output notebook that names no machine path.

Two messages used to appear in every run's console output, neither saying anything about the run:

* ``[IPKernelApp] WARNING | Kernel is running over TCP without encryption`` — ipykernel logs it when the kernel
  talks to papermill over TCP sockets without CurveZMQ keys. The kernel here is a child of the runner on the
  same machine, so :class:`QuietKernelManager` connects them through IPC (Unix domain) sockets in a private
  temporary folder instead: nothing listens on a network port, and the warning has no cause left.
* ``ERROR | KeyboardInterrupt caught in kernel`` — at shutdown jupyter_client first sends the kernel SIGINT
  (to stop a cell that is still running), then a shutdown request. After a finished notebook nothing is
  running, so the interrupt only lands in the kernel's idle event loop, which logs it as an error.
  :class:`QuietKernelManager` skips it; a kernel that is still busy (the runner itself interrupted) does not
  answer the shutdown request and is terminated after jupyter_client's shutdown wait (SIGTERM, then SIGKILL).

The kernel also draws figures inline whatever ``MPLBACKEND`` the caller exported (:func:`kernel_env`): a test
harness exports ``Agg`` to draw without a display, and a kernel that inherits it stores every figure of the output
notebook as its text (``<Figure size 1500x850 with 1 Axes>``) instead of the picture.

papermill records the absolute input and output paths in the output notebook's metadata, the start, end and
duration of every cell, and gives the cell it injects a random id; the kernel adds execution timestamps.
:func:`tidy_output_notebook` rewrites the paths as :func:`kgir_lib.report.shown` shows them and drops what
only says when and how fast this execution ran, so a rerun that computes the same thing writes the same file.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import nbformat
from jupyter_client.manager import AsyncKernelManager

__all__ = ["QuietKernelManager", "kernel_env", "tidy_output_notebook", "strip_bar_outputs", "INLINE_BACKEND"]

INLINE_BACKEND = "module://matplotlib_inline.backend_inline"


def kernel_env(env) -> dict:
    """The environment a notebook kernel starts with: ``env`` with matplotlib's inline backend, the one that stores
    a figure in the notebook as a PNG (ipykernel chooses it only when ``MPLBACKEND`` is unset)."""
    return {**env, "MPLBACKEND": INLINE_BACKEND}


class QuietKernelManager(AsyncKernelManager):
    """:class:`AsyncKernelManager` over IPC sockets, without the SIGINT before its shutdown request, its kernel
    drawing figures inline (:func:`kernel_env`).

    The sockets live in a private folder ``$TMPDIR/kgir-kernel-*``, made when the kernel starts and removed with
    the kernel's other resources (:meth:`_async_cleanup_resources`, which every way of shutting down reaches: the
    public ``shutdown_kernel`` of :class:`AsyncKernelManager` is the base class's coroutine itself, so an override
    of ``_async_shutdown_kernel`` would never run), or at once when the start fails."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.transport = "ipc"
        self._ipc_dir: Path | None = None

    async def _async_pre_start_kernel(self, **kw):
        kw["env"] = kernel_env(kw.get("env") or os.environ)
        if self._ipc_dir is None:
            self._ipc_dir = Path(tempfile.mkdtemp(prefix="kgir-kernel-"))
            self.ip = str(self._ipc_dir / "kernel")
        try:
            return await super()._async_pre_start_kernel(**kw)
        except BaseException:
            self._remove_ipc_dir()
            raise

    async def _async_start_kernel(self, **kw) -> None:
        try:
            await super()._async_start_kernel(**kw)
        except BaseException:  # a kernel that never started is never shut down
            self._remove_ipc_dir()
            raise

    async def _async_interrupt_kernel(self) -> None:
        if self.shutting_down:
            return  # at shutdown the interrupt would only be logged as an error by an idle kernel
        await super()._async_interrupt_kernel()

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        try:
            await super()._async_cleanup_resources(restart=restart)
        finally:
            if not restart:
                self._remove_ipc_dir()

    def _remove_ipc_dir(self) -> None:
        if self._ipc_dir is not None:
            shutil.rmtree(self._ipc_dir, ignore_errors=True)
            self._ipc_dir = None

    start_kernel = _async_start_kernel  # (the base class binds these names to its own coroutines)
    cleanup_resources = _async_cleanup_resources


TIMING_KEYS = ("start_time", "end_time", "duration")
INJECTED_ID = "injected-parameters"


def tidy_output_notebook(path: Path) -> None:
    """Rewrite the executed notebook at ``path`` (module docstring): papermill's ``input_path`` /
    ``output_path`` as shown paths; no cell timing (``metadata.papermill`` times, ``metadata.execution``); the
    injected parameters cell under a fixed id; no empty display outputs (a finished progress bar clears its
    display, :mod:`kgir_lib.progress`) and no progress-bar text (:func:`strip_bar_outputs`: an output stored by
    an older run, or a bar that printed to a stream); consecutive outputs of one stream as one
    (:func:`merge_streams`). Written only when something changed."""
    from .report import shown

    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    meta = nb.metadata.get("papermill", {})
    for key in ("input_path", "output_path"):
        if meta.get(key):
            meta[key] = shown(meta[key])
    for key in TIMING_KEYS:
        meta.pop(key, None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        for key in TIMING_KEYS:
            cell.metadata.get("papermill", {}).pop(key, None)
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell["id"] = INJECTED_ID
        if cell.cell_type == "code":
            cell.outputs = merge_streams([o for o in strip_bar_outputs(cell.outputs) if not _empty_display(o)])
    if nbformat.writes(nb) != before:
        nbformat.write(nb, path)


def merge_streams(outputs: list) -> list:
    """``outputs`` with each run of consecutive stream outputs of one stream (stdout, stderr) as one output: how the
    kernel splits printed text into messages depends on timing (two prints may arrive as one message or two), so
    only the merged text is the same in every run."""
    out: list = []
    for o in outputs:
        prev = out[-1] if out else None
        if (o.get("output_type") == "stream" and prev is not None and prev.get("output_type") == "stream"
                and prev.get("name") == o.get("name")):
            prev["text"] = str(prev.get("text", "")) + str(o.get("text", ""))
            continue
        out.append(o)
    return out


def strip_bar_outputs(outputs: list) -> list:
    """``outputs`` without progress-bar text (:func:`kgir_lib.progress.is_bar_text`): a display whose text is a bar
    is dropped, a stream keeps its other lines (a bar's carriage-return updates included in the bar's line)."""
    from .progress import is_bar_text

    out = []
    for o in outputs:
        kind = o.get("output_type")
        if kind in ("display_data", "update_display_data") and set(o.get("data", {})) <= {"text/plain"} \
                and is_bar_text(o.get("data", {}).get("text/plain", "")):
            continue
        if kind == "stream" and is_bar_text(o.get("text", "")):
            kept = [line for line in str(o.get("text", "")).split("\n") if not is_bar_text(line)]
            if not "".join(kept).strip():
                continue
            o["text"] = "\n".join(kept)
        out.append(o)
    return out


def _empty_display(output) -> bool:
    """A display output showing nothing (only empty ``text/plain``)."""
    if output.get("output_type") not in ("display_data", "update_display_data"):
        return False
    data = output.get("data", {})
    return set(data) <= {"text/plain"} and not str(data.get("text/plain", "")).strip()
