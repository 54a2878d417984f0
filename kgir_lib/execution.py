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

papermill records the absolute input and output paths in the output notebook's metadata;
:func:`relative_papermill_paths` rewrites them as :func:`kgir_lib.report.shown` shows paths.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import nbformat
from jupyter_client.manager import AsyncKernelManager

__all__ = ["QuietKernelManager", "relative_papermill_paths"]


class QuietKernelManager(AsyncKernelManager):
    """:class:`AsyncKernelManager` over IPC sockets, without the SIGINT before its shutdown request."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._ipc_dir = Path(tempfile.mkdtemp(prefix="kgir-kernel-"))
        self.transport = "ipc"
        self.ip = str(self._ipc_dir / "kernel")

    async def _async_interrupt_kernel(self) -> None:
        if self.shutting_down:
            return  # at shutdown the interrupt would only be logged as an error by an idle kernel
        await super()._async_interrupt_kernel()

    async def _async_shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        try:
            await super()._async_shutdown_kernel(now=now, restart=restart)
        finally:
            if not restart:
                shutil.rmtree(self._ipc_dir, ignore_errors=True)


def relative_papermill_paths(path: Path) -> None:
    """Rewrite ``metadata.papermill.input_path`` / ``output_path`` of the notebook at ``path`` as shown paths."""
    from .report import shown

    nb = nbformat.read(path, as_version=4)
    meta = nb.metadata.get("papermill", {})
    changed = False
    for key in ("input_path", "output_path"):
        if meta.get(key):
            new = shown(meta[key])
            changed |= new != meta[key]
            meta[key] = new
    if changed:
        nbformat.write(nb, path)
