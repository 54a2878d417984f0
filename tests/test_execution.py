"""The runner's kernel: no TCP warning, no KeyboardInterrupt at shutdown, no machine path in papermill metadata,
nothing left in ``$TMPDIR``."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from kgir_lib.config import PROJECT_ROOT, default_data_dir
from kgir_lib import execution
from kgir_lib.execution import (FOLDER_PREFIX, INLINE_BACKEND, kernel_env, kernel_folder, sweep_stale_kernel_files,
                                 tidy_output_notebook)


def test_papermill_paths_are_rewritten_relative_to_the_project(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"input_path": str(PROJECT_ROOT / "notebooks" / "03_subgraph_mst.ipynb"),
                                "output_path": str(PROJECT_ROOT / "results" / "sample" / "notebooks" / "03.ipynb"),
                                "duration": 1.0}
    path = tmp_path / "out.ipynb"
    nbformat.write(nb, path)
    tidy_output_notebook(path)
    meta = nbformat.read(path, as_version=4).metadata["papermill"]
    assert meta == {"input_path": "notebooks/03_subgraph_mst.ipynb",
                    "output_path": "results/sample/notebooks/03.ipynb"}


def test_an_output_notebook_keeps_no_trace_of_when_or_how_fast_it_ran(tmp_path):
    """Two executions that compute the same thing write the same file: no timing, no random cell id, no
    empty display left by a finished progress bar; the outputs themselves are kept."""
    def executed(start: str, cell_id: str) -> nbformat.NotebookNode:
        nb = nbformat.v4.new_notebook()
        nb.metadata["papermill"] = {"start_time": start, "end_time": start, "duration": 3.2, "exception": False}
        injected = nbformat.v4.new_code_cell("profile = 'sample'")
        injected.metadata.update(tags=["injected-parameters"], papermill={"duration": 0.1, "start_time": start,
                                                                            "status": "completed"},
                                 execution={"iopub.status.busy": start})
        injected["id"] = cell_id
        work = nbformat.v4.new_code_cell("run()")
        work["id"] = "work"  # (a source cell keeps its id in every run)
        work.outputs = [nbformat.v4.new_output("display_data", data={"text/plain": ""}),
                        nbformat.v4.new_output("stream", name="stdout", text="EM 40.0\n")]
        nb.cells = [injected, work]
        return nb

    paths = []
    for i, (start, cell_id) in enumerate([("2026-12-01T10:00:00", "3638b562"), ("2026-12-03T11:56:06", "71299e5b")]):
        paths.append(tmp_path / f"run{i}.ipynb")
        nbformat.write(executed(start, cell_id), paths[-1])
        tidy_output_notebook(paths[-1])
    assert paths[0].read_bytes() == paths[1].read_bytes()
    nb = nbformat.read(paths[0], as_version=4)
    assert nb.metadata["papermill"] == {"exception": False}
    assert nb.cells[0]["id"] == "injected-parameters" and nb.cells[0].metadata["papermill"] == {"status": "completed"}
    assert "execution" not in nb.cells[0].metadata
    assert [o["output_type"] for o in nb.cells[1].outputs] == ["stream"]


def test_printed_text_split_into_several_stream_messages_is_stored_as_one(tmp_path):
    """The kernel may send two prints as one stream message or as two, depending on timing: the stored
    notebook is the same either way; stdout and stderr stay apart, and a display between them keeps its place."""
    def executed(texts: list) -> Path:
        nb = nbformat.v4.new_notebook()
        cell = nbformat.v4.new_code_cell("for d in data: print(d)")
        cell["id"] = "c"
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in texts]
        cell.outputs += [nbformat.v4.new_output("stream", name="stderr", text="warning\n"),
                         nbformat.v4.new_output("display_data", data={"text/plain": "table"}),
                         nbformat.v4.new_output("stream", name="stdout", text="after\n")]
        nb.cells = [cell]
        path = tmp_path / f"{len(texts)}.ipynb"
        nbformat.write(nb, path)
        tidy_output_notebook(path)
        return path

    one, two = executed(["musique_train: 100\nhotpotqa: 84\n"]), executed(["musique_train: 100\n", "hotpotqa: 84\n"])
    assert one.read_bytes() == two.read_bytes()
    outputs = nbformat.read(two, as_version=4).cells[0].outputs
    assert [(o["output_type"], o.get("name")) for o in outputs] == [("stream", "stdout"), ("stream", "stderr"),
                                                                   ("display_data", None), ("stream", "stdout")]
    assert outputs[0]["text"] == "musique_train: 100\nhotpotqa: 84\n"


def padded(folder: Path, length: int) -> Path:
    """A folder inside ``folder`` whose path is ``length`` characters long (a long ``$TMPDIR``)."""
    pad = length - len(str(folder)) - 1
    assert pad > 0, folder
    return folder / ("t" * pad)


# What importing torch._dynamo does (loading the encoder imports it): torch's cache_dir() makes the folder
# $TORCHINDUCTOR_CACHE_DIR, by default $TMPDIR/torchinductor_<user> (torch/_inductor/runtime/cache_dir_utils.py); the
# same rule without importing torch, seconds of CPU.
TORCH_CACHE_DIR = """import getpass, os, tempfile
os.makedirs(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or
            os.path.join(tempfile.gettempdir(), "torchinductor_" + getpass.getuser()), exist_ok=True)"""


def test_a_kernel_keeps_torchs_compile_cache_in_its_own_folder_unless_told_where(tmp_path):
    env = {"PATH": "/bin", "MPLBACKEND": "Agg"}
    assert kernel_env(env) == {"PATH": "/bin", "MPLBACKEND": INLINE_BACKEND}
    assert kernel_env(env, tmp_path)["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "torchinductor")
    assert kernel_env({**env, "TORCHINDUCTOR_CACHE_DIR": "/x"}, tmp_path)["TORCHINDUCTOR_CACHE_DIR"] == "/x"


@pytest.mark.slow  # starts notebook kernels or loads a model: the whole suite's
@pytest.mark.parametrize("tmpdir_length", [None, 150])
def test_a_run_prints_neither_kernel_warning_and_stores_no_absolute_output_path(tmp_path, tmpdir_length):
    """Also: a figure is stored as a picture although the caller exported a non-inline backend (a test's Agg), and
    the run leaves no file and no folder in its $TMPDIR (the kernel's socket folder is removed at shutdown, and
    torch's compile cache, :data:`TORCH_CACHE_DIR`, was in it). With a
    $TMPDIR of 150 characters, too long for a socket's path, the kernel connects all the same (its sockets go to a
    shorter folder, :func:`kgir_lib.execution.kernel_folder`), and that folder is removed as well."""
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("profile = None")
    params.metadata["tags"] = ["parameters"]
    figure = ("import matplotlib.pyplot as plt\nfrom IPython.display import display\n"
              "fig, ax = plt.subplots()\ndisplay(fig)\nplt.close(fig)")
    nb.cells = [params, nbformat.v4.new_code_cell(TORCH_CACHE_DIR), nbformat.v4.new_code_cell(figure),
                nbformat.v4.new_code_cell("print('ran')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (kgir)", "language": "python"}
    nbformat.write(nb, nbs / "00_probe.ipynb")
    (tmp_path / "data").symlink_to(default_data_dir().resolve())
    private_tmp = padded(tmp_path, tmpdir_length) if tmpdir_length else tmp_path / "tmp"  # the run's own $TMPDIR:
    # whatever it leaves there is found below
    (private_tmp / "before").mkdir(parents=True)
    (private_tmp / "before.txt").write_text("there before the run")
    before = sorted(p.relative_to(private_tmp) for p in private_tmp.rglob("*"))
    # torch's cache folder as a shell that names none has it: one the caller set would hide where the kernel puts it
    shell = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    env = {**shell, "KGIR_RESULTS_DIR": str(tmp_path / "results"), "KGIR_DATA_DIR": str(tmp_path / "data"),
           "PYTHONPATH": str(PROJECT_ROOT), "MPLBACKEND": "Agg", "TMPDIR": str(private_tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "kgir_lib.runner", "--profile", "ci", "--notebooks-dir", str(nbs)],
                            cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    after = sorted(p.relative_to(private_tmp) for p in private_tmp.rglob("*"))
    assert after == before, f"the run left in $TMPDIR: {sorted(set(after) - set(before))}"  # folders and files
    for parent in {private_tmp, Path(os.environ.get("XDG_RUNTIME_DIR") or "/tmp"), Path("/tmp")}:
        assert not list(parent.glob(f"{FOLDER_PREFIX}{proc.pid}-*")), parent  # nor in the shorter socket folder
    console = stdout + stderr
    assert "without encryption" not in console and "KeyboardInterrupt" not in console, console
    done = nbformat.read(tmp_path / "results" / "ci" / "notebooks" / "00_probe.ipynb", as_version=4)
    assert done.cells[-1].outputs[0]["text"] == "ran\n"
    assert [sorted(o.get("data", {})) for o in done.cells[-2].outputs] == [["image/png", "text/plain"]]
    assert done.metadata["papermill"]["output_path"] == "$KGIR_RESULTS_DIR/ci/notebooks/00_probe.ipynb"
    assert not list(Path(tmp_path).glob("nbs/kernel-*"))  # no IPC socket left beside the notebooks


@pytest.fixture
def short_tmp():
    """A folder short enough for a Unix socket's path inside it (tmp_path may be too long: a test's name, a long
    $TMPDIR), removed afterwards."""
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        yield Path(folder)


def test_a_long_tmpdir_puts_the_kernel_sockets_in_the_first_folder_where_their_paths_fit(tmp_path, short_tmp):
    """A socket's path is at most SOCKET_PATH_MAX characters: a $TMPDIR of 150 is passed over for a shorter folder;
    the folder names its owner's process, and the longest socket path in it fits."""
    long_tmp = padded(tmp_path, 150)
    long_tmp.mkdir()
    folder, transport = kernel_folder([long_tmp, short_tmp], pid=4242)
    assert (transport, folder.parent) == ("ipc", short_tmp) and folder.name.startswith(f"{FOLDER_PREFIX}4242-")
    assert len(os.fsencode(str(folder / "kernel-999"))) <= execution.SOCKET_PATH_MAX
    assert folder.stat().st_mode & 0o777 == 0o700  # the connection file's key is for this user alone
    assert not list(long_tmp.iterdir())


def test_where_no_socket_path_fits_the_kernel_talks_tcp_on_loopback(tmp_path):
    long_a, long_b = padded(tmp_path, 150), padded(tmp_path, 140)
    long_b.mkdir()  # (the first one does not exist: the second is used)
    folder, transport = kernel_folder([long_a, long_b], pid=7)
    assert (transport, folder.parent) == ("tcp", long_b)


def test_no_writable_folder_for_the_kernel_is_an_error_naming_each_and_tmpdir(tmp_path):
    with pytest.raises(OSError, match=r"(?s)nowhere.*also_missing.*set TMPDIR"):
        kernel_folder([tmp_path / "nowhere", tmp_path / "also_missing"])


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _connection_file(path: Path, port: int, age_s: float = 600) -> Path:
    path.write_text(json.dumps({"shell_port": port, "iopub_port": port + 1, "ip": "127.0.0.1", "key": "secret-key",
                                "transport": "tcp", "signature_scheme": "hmac-sha256"}))
    os.utime(path, (time.time() - age_s, time.time() - age_s))
    return path


def test_kernel_files_of_dead_runs_are_swept_and_a_live_runs_are_kept(short_tmp):
    """Removed: the folder of a process that is gone, an old id-less folder whose sockets nobody listens on, an old
    connection file whose kernel accepts no connection. Kept: the folder of a live process, a connection file whose
    kernel answers or that is recent (its kernel may be starting), an id-less folder with a listening socket, a JSON
    file that is no connection file."""
    old = time.time() - 600
    dead = short_tmp / f"{FOLDER_PREFIX}{_dead_pid()}-abcdefgh"
    live = short_tmp / f"{FOLDER_PREFIX}{os.getpid()}-abcdefgh"
    legacy_dead, legacy_live = short_tmp / f"{FOLDER_PREFIX}deadbeef", short_tmp / f"{FOLDER_PREFIX}livebeef"
    for folder in (dead, live, legacy_dead, legacy_live):
        folder.mkdir()
        (folder / "kernel.json").write_text("{}")
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(legacy_live / "kernel-1"))
    listening.listen()
    closed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a socket file nobody listens on
    closed.bind(str(legacy_dead / "kernel-1"))
    closed.close()
    server = socket.create_server(("127.0.0.1", 0))
    free = socket.create_server(("127.0.0.1", 0))
    free_port = free.getsockname()[1]
    free.close()
    gone = _connection_file(short_tmp / "tmpgone.json", free_port)
    answering = _connection_file(short_tmp / "tmplive.json", server.getsockname()[1])
    recent = _connection_file(short_tmp / "tmprecent.json", free_port, age_s=0)
    other = short_tmp / "tmpother.json"
    other.write_text('{"a": 1}')
    for path in (legacy_dead, legacy_live, other):
        os.utime(path, (old, old))
    second = short_tmp / "second"  # a later parent ($XDG_RUNTIME_DIR, /tmp): no connection file is removed there
    second.mkdir()
    elsewhere = _connection_file(second / "tmpgone.json", free_port)
    try:
        removed = sweep_stale_kernel_files([short_tmp, second, short_tmp / "missing"])
    finally:
        listening.close()
        server.close()
    assert sorted(removed) == sorted([dead, legacy_dead, gone])
    assert sorted(p.name for p in short_tmp.iterdir()) == sorted(
        p.name for p in (live, legacy_live, answering, recent, other, second))
    assert elsewhere.exists()


@pytest.mark.slow  # starts notebook kernels or loads a model: the whole suite's
def test_where_no_socket_folder_fits_a_notebook_runs_over_tcp_and_leaves_nothing(tmp_path, monkeypatch, capfd):
    """Over TCP on the loopback address, encrypted (CurveZMQ keys): the kernel has no cause to warn."""
    import papermill as pm

    long_tmp = padded(tmp_path, 150)
    long_tmp.mkdir()
    monkeypatch.setattr(execution, "socket_parents", lambda: [long_tmp])
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import json\nfrom ipykernel.connect import get_connection_file\n"
                                          "print(json.load(open(get_connection_file()))['transport'])")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (kgir)", "language": "python"}
    nbformat.write(nb, tmp_path / "probe.ipynb")
    pm.execute_notebook(str(tmp_path / "probe.ipynb"), str(tmp_path / "out.ipynb"), progress_bar=False,
                        log_output=False, kernel_name="python3", kernel_manager_class=execution.QuietKernelManager)
    done = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert done.cells[0].outputs[0]["text"] == "tcp\n"
    assert not list(long_tmp.iterdir())  # the connection file's folder is removed at shutdown
    console = capfd.readouterr()
    assert "without encryption" not in console.out + console.err, console.err
