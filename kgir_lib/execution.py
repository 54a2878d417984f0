"""How the runner executes a notebook: a quiet kernel, and an output notebook that names no machine path.

Two messages used to appear in every run's console output, neither saying anything about the run:

* ``[IPKernelApp] WARNING | Kernel is running over TCP without encryption`` — ipykernel logs it when the kernel
  talks to papermill over TCP sockets without CurveZMQ keys. The kernel here is a child of the runner on the
  same machine, so :class:`QuietKernelManager` connects them through IPC (Unix domain) sockets in a private
  temporary folder instead: nothing listens on a network port, and the warning has no cause left. A socket's path
  holds at most :data:`SOCKET_PATH_MAX` characters (the operating system's limit), which a long ``$TMPDIR`` (a long
  user name in a home-based one is enough) exceeds: the folder then goes to the first of ``$XDG_RUNTIME_DIR`` and
  ``/tmp`` where the path fits, and where none fits or can be written the kernel talks over TCP on the loopback
  address (127.0.0.1) instead (:func:`kernel_folder`), encrypted with CurveZMQ keys jupyter_client provisions
  where pyzmq supports them (the kernel's spec declares it does), so the warning has no cause there either.
* ``ERROR | KeyboardInterrupt caught in kernel`` — at shutdown jupyter_client first sends the kernel SIGINT
  (to stop a cell that is still running), then a shutdown request. After a finished notebook nothing is
  running, so the interrupt only lands in the kernel's idle event loop, which logs it as an error.
  :class:`QuietKernelManager` skips it; a kernel that is still busy (the runner itself interrupted) does not
  answer the shutdown request and is terminated after jupyter_client's shutdown wait (SIGTERM, then SIGKILL).

The kernel also draws figures inline whatever ``MPLBACKEND`` the caller exported (:func:`kernel_env`): a test
harness exports ``Agg`` to draw without a display, and a kernel that inherits it stores every figure of the output
notebook as its text (``<Figure size 1500x850 with 1 Axes>``) instead of the picture.

A run stopped by SIGTERM or SIGKILL leaves its kernel's folder: the connection file (which holds the key that signs
every message to the kernel) and the sockets. The next run removes those of dead runs before it starts
(:func:`sweep_stale_kernel_files`), and the connection files an older version left in ``$TMPDIR`` (``tmp*.json``)
whose kernel no longer answers.

papermill records the absolute input and output paths in the output notebook's metadata, the start, end and
duration of every cell, and gives the cell it injects a random id; the kernel adds execution timestamps.
:func:`tidy_output_notebook` rewrites the paths as :func:`kgir_lib.report.shown` shows them and drops what
only says when and how fast this execution ran, so a rerun that computes the same thing writes the same file.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client.manager import AsyncKernelManager
from traitlets import TraitError

__all__ = ["QuietKernelManager", "kernel_folder", "sweep_stale_kernel_files", "kernel_env",
           "tidy_output_notebook", "strip_bar_outputs", "INLINE_BACKEND"]

INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
TORCH_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


def kernel_env(env, folder: Path | None = None) -> dict:
    """The environment a notebook kernel starts with: ``env`` with matplotlib's inline backend, the one that stores
    a figure in the notebook as a PNG (ipykernel chooses it only when ``MPLBACKEND`` is unset), and, given the
    kernel's private ``folder``, torch's compile cache inside it (``TORCHINDUCTOR_CACHE_DIR``, unless ``env`` sets
    one): importing ``torch._dynamo``, as loading the encoder does, makes that folder, by default
    ``$TMPDIR/torchinductor_<user>``, which nothing would remove; in the kernel's folder it goes with the kernel."""
    out = {**env, "MPLBACKEND": INLINE_BACKEND}
    if folder is not None and not env.get(TORCH_CACHE_ENV):
        out[TORCH_CACHE_ENV] = str(folder / "torchinductor")
    return out


# The longest path a Unix domain socket may have (sun_path: 108 bytes on Linux, 104 on macOS, each with its
# terminating NUL); a longer one fails in ZMQ with "File name too long".
SOCKET_PATH_MAX = 103 if sys.platform == "darwin" else 107
FOLDER_PREFIX = "kgir-kernel-"
_FOLDER_RANDOM = 8  # the characters tempfile.mkdtemp adds after the prefix
# A kernel's socket is ``<folder>/kernel-<N>``, N from 1 (jupyter_client numbers the five sockets in a fresh
# folder 1 to 5); room for three digits is kept.
_SOCKET_TAIL = len("/kernel-999")
LOOPBACK = "127.0.0.1"
STALE_AFTER_S = 60.0  # a kernel file without an owner's id is left alone this long (its kernel may be starting)


def socket_parents() -> list:
    """Where a kernel's private folder may go, in this order: ``$TMPDIR`` (:func:`tempfile.gettempdir`),
    ``$XDG_RUNTIME_DIR``, ``/tmp``; each once."""
    found: list = []
    for place in (tempfile.gettempdir(), os.environ.get("XDG_RUNTIME_DIR"), "/tmp"):
        if place and Path(place) not in found:
            found.append(Path(place))
    return found


def kernel_folder(parents: list | None = None, pid: int | None = None) -> tuple:
    """A new private folder (mode 700) for one kernel's connection file and sockets, and the transport to use:
    ``(folder, "ipc")`` in the first of ``parents`` (default :func:`socket_parents`) where the longest socket
    path fits in :data:`SOCKET_PATH_MAX` characters and a folder can be made; else ``(folder in the first
    parent that can be written, "tcp")``, the kernel then listening on :data:`LOOPBACK` only. The folder's name
    holds the owning process's id (``kgir-kernel-<pid>-<random>``), by which a later run tells a dead run's folder
    (:func:`sweep_stale_kernel_files`)."""
    parents = [Path(p) for p in (parents if parents is not None else socket_parents())]
    prefix = f"{FOLDER_PREFIX}{os.getpid() if pid is None else pid}-"
    for parent in parents:
        longest = len(os.fsencode(str(parent / prefix))) + _FOLDER_RANDOM + _SOCKET_TAIL
        if longest > SOCKET_PATH_MAX:
            continue
        try:
            return Path(tempfile.mkdtemp(prefix=prefix, dir=parent)), "ipc"
        except OSError:
            continue
    errors = []
    for parent in parents:
        try:
            return Path(tempfile.mkdtemp(prefix=prefix, dir=parent)), "tcp"
        except OSError as exc:
            errors.append(f"{parent}: {exc.strerror or exc}")
    raise OSError("no folder for the notebook kernel's connection file could be made (" + "; ".join(errors)
                  + "): set TMPDIR to a folder you can write")


class QuietKernelManager(AsyncKernelManager):
    """:class:`AsyncKernelManager` over IPC sockets, without the SIGINT before its shutdown request, its kernel
    drawing figures inline and keeping torch's compile cache in its own folder (:func:`kernel_env`).

    The connection file and the sockets live in a private folder ``kgir-kernel-<pid>-*`` (:func:`kernel_folder`:
    in ``$TMPDIR`` where the socket paths fit, TCP on the loopback address where no folder fits), made when the
    kernel starts and removed with the kernel's other resources (:meth:`_async_cleanup_resources`, which every way
    of shutting down reaches: the public ``shutdown_kernel`` of :class:`AsyncKernelManager` is the base class's
    coroutine itself, so an override of ``_async_shutdown_kernel`` would never run), or at once when the start
    fails."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.transport = "ipc"
        self._ipc_dir: Path | None = None

    async def _async_pre_start_kernel(self, **kw):
        if self._ipc_dir is None:
            self._ipc_dir, self.transport = kernel_folder()
            self.ip = str(self._ipc_dir / "kernel") if self.transport == "ipc" else LOOPBACK
            if self.transport == "tcp":
                try:  # CurveZMQ keys for a kernel that declares support (ipykernel does): no plain-text traffic
                    self.transport_encryption = "auto"
                except TraitError:  # pyzmq without CurveZMQ: plain TCP, on the loopback address only
                    pass
            self.connection_file = str(self._ipc_dir / "kernel.json")
        kw["env"] = kernel_env(kw.get("env") or os.environ, self._ipc_dir)
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


def sweep_stale_kernel_files(parents: list | None = None) -> list:
    """Remove what killed runs left of their kernels; the paths removed.

    In each of ``parents`` (default :func:`socket_parents`), of the entries owned by this user:

    * a folder ``kgir-kernel-<pid>-*`` (:func:`kernel_folder`) whose process ``pid`` is gone and none of whose
      sockets accepts a connection;
    * a folder ``kgir-kernel-*`` without a process id (an older version's) that has been untouched for
      :data:`STALE_AFTER_S` seconds and none of whose sockets accepts a connection;
    * in the first of ``parents`` only (``$TMPDIR``, where jupyter_client writes them), a kernel connection file
      ``tmp*.json`` (jupyter_client's default name, an older version's) untouched for :data:`STALE_AFTER_S` seconds
      whose kernel accepts no connection on its shell socket.

    A live run's files are never touched: its process exists, its kernel answers."""
    removed = []
    now = time.time()
    for n, parent in enumerate([Path(p) for p in (parents if parents is not None else socket_parents())]):
        try:
            entries = sorted(parent.iterdir())
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.lstat()
            except OSError:
                continue
            if st.st_uid != os.getuid() or entry.is_symlink():
                continue
            stale = False
            if entry.name.startswith(FOLDER_PREFIX) and entry.is_dir():
                m = re.match(re.escape(FOLDER_PREFIX) + r"(\d+)-", entry.name)
                owner_gone = not _alive(int(m.group(1))) if m else now - st.st_mtime > STALE_AFTER_S
                try:
                    stale = owner_gone and not any(_answers_unix(s) for s in entry.iterdir() if s.is_socket())
                except OSError:
                    continue
            elif (n == 0 and re.fullmatch(r"tmp[^/]*\.json", entry.name) and entry.is_file()
                  and now - st.st_mtime > STALE_AFTER_S):
                info = _connection_info(entry)
                stale = info is not None and not _kernel_answers(info)
            if stale:
                try:
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
                except OSError:
                    continue
                removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _answers_unix(path: Path) -> bool:
    """Whether something listens on the Unix socket ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        try:
            s.connect(os.fsencode(path))
        except OSError:
            return False
    return True


def _connection_info(path: Path) -> dict | None:
    """The contents of a kernel connection file (a JSON object with a signing key and a shell port); None for
    any other file."""
    try:
        if path.stat().st_size > 65536:
            return None
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not {"key", "shell_port", "transport", "ip"} <= set(info):
        return None
    return info


def _kernel_answers(info: dict) -> bool:
    """Whether the kernel of connection ``info`` accepts a connection on its shell socket."""
    port = info.get("shell_port")
    if info.get("transport") == "ipc":
        return _answers_unix(Path(f"{info.get('ip')}-{port}"))
    if port is None:  # no shell port recorded: nothing to connect to
        return False
    host = str(info.get("ip") or LOOPBACK)
    host = LOOPBACK if host in ("0.0.0.0", "*", "") else host
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except (OSError, ValueError, TypeError):
        return False


TIMING_KEYS = ("start_time", "end_time", "duration")
INJECTED_ID = "injected-parameters"


def tidy_output_notebook(path: Path, output_path: Path | None = None) -> None:
    """Rewrite the executed notebook at ``path`` (module docstring): papermill's ``input_path`` /
    ``output_path`` as shown paths (``output_path``, when given, is where the file is going: the runner executes
    into a partial copy it renames once finished); no cell timing (``metadata.papermill`` times,
    ``metadata.execution``); the injected parameters cell under a fixed id; no empty display outputs (a finished
    progress bar clears its display, :mod:`kgir_lib.progress`) and no progress-bar text (:func:`strip_bar_outputs`:
    an output stored by an older run, or a bar that printed to a stream); consecutive outputs of one stream as one
    (:func:`merge_streams`). Written only when something changed."""
    from .report import shown

    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    meta = nb.metadata.get("papermill", {})
    if output_path is not None and "output_path" in meta:
        meta["output_path"] = str(output_path)
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
