"""The Hub path (``python -m kgir_lib.data_sources full``, what ``scripts/paper.sh`` uses), hardened, against local
servers (tests/data_server.py): what it copies from the Hub's cache is checked; a host that accepts the connection
and never answers is given up on after the read timeout (``KGIR_DOWNLOAD_TIMEOUT_S``: the tests set 1 s; the
defaults, 10 s and 20 s, and the variable are pinned by unit tests); an HTTP error is named with its status and URL, not as a host out of
reach; the partial downloads a killed fetch leaves in the Hub's cache are removed at the next start.

The probes that found it: a Hub-cache file altered on disk was copied with no check; a silent host was given up on
after 466 s; HTTP 500 and 404 read "could not reach ... on a machine with internet"; a killed fetch left a 0-byte
``.incomplete``."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import SHARED_DATA
from data_server import HF_REPO, hf_path, serve, upstream_tree
from kgir_lib.data import DataError
from kgir_lib.data_sources import download_hipporag2
from kgir_lib.data_sources.fetch import TIMEOUT_VARIABLE
from kgir_lib.data_sources.hub import clean_incomplete

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not (SHARED_DATA / "musique").is_dir(), reason=f"no samples at {SHARED_DATA}")


@pytest.fixture(scope="module")
def tree() -> dict:
    return upstream_tree(SHARED_DATA)


def use(server_env: dict, hf_cache: Path, monkeypatch) -> None:
    for name, value in server_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")


def cli(*args: str, env: dict, timeout: float = 120) -> tuple:
    """``python -m kgir_lib.data_sources ARGS`` in a child: (completed process, seconds it took)."""
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "kgir_lib.data_sources", *args], cwd=REPO, capture_output=True,
                         text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO), **env})
    return out, time.monotonic() - start


def cli_here(*args: str, env: dict, monkeypatch, capsys) -> tuple:
    """What :func:`cli` gives, from the command's ``main`` in this process (its imports already paid; the library
    reads these variables when asked): (completed process, seconds it took). The silent-host tests run the
    command itself as a child."""
    from kgir_lib.data_sources.__main__ import main

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    start = time.monotonic()
    code = main(list(args))
    seconds, out = time.monotonic() - start, capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out.out, out.err), seconds


class SilentHost(str):
    """The URL of a host that accepts every connection and never answers a byte; ``connections`` counts them."""
    connections: list


@contextmanager
def silent_host():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    url = SilentHost(f"http://127.0.0.1:{sock.getsockname()[1]}")
    url.connections = []

    def accept():
        while True:
            try:
                url.connections.append(sock.accept()[0])  # kept open, never written to
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield url
    finally:
        sock.close()
        for conn in url.connections:
            conn.close()


@contextmanager
def status_host(status: int):
    """A server answering every request with HTTP ``status``."""
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self):
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = do_GET = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # shutdown() waits for the serving loop's next poll: every 0.05 s, not the default 0.5 s (each test's end)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def blobs(hf_cache: Path) -> Path:
    return hf_cache / f"datasets--{HF_REPO.replace('/', '--')}" / "blobs"


# ------------------------------------------------------------------ what is copied from the Hub's cache is checked
def test_a_hub_cache_file_altered_on_disk_is_refused_removed_and_downloaded_again(tmp_path, tree, monkeypatch):
    hub = tmp_path / "hf"
    with serve(tree, hf_cache=hub) as server:
        use(server.env(), hub, monkeypatch)
        download_hipporag2(["musique"], tmp_path / "first", timeout_s=5)
        blob = next(p for p in blobs(hub).iterdir() if p.stat().st_size == len(tree[hf_path("musique.json")]))
        data = bytearray(blob.read_bytes())
        at = re.search(rb'"answer": ?"([^"]{3})', data).start(1)
        data[at:at + 3] = b"XYZ"  # an answer changed, the file still JSON of the same size
        blob.write_bytes(bytes(data))
        with pytest.raises(DataError, match=r"the Hugging Face cache's copy of .*/musique\.json does not match the "
                                            r"checksum the Hub gave it \(SHA-256 .*changed on disk.*removed"):
            download_hipporag2(["musique"], tmp_path / "second", timeout_s=5)
        assert not blob.exists() and not (tmp_path / "second" / "musique" / "musique.json").exists()
        got = download_hipporag2(["musique"], tmp_path / "second", timeout_s=5)  # downloaded again, whole
    assert got[0].read_bytes() == tree[hf_path("musique.json")]


def test_a_full_set_whose_sample_questions_differ_from_the_manifest_is_refused_naming_the_field(tmp_path, tree,
                                                                                                monkeypatch):
    """The Hub's checksum only says the cache holds what the host served; the manifest says what the suite's
    samples were computed from: a release with one sample answer changed is refused as the sample path refuses it."""
    path = hf_path("musique.json")
    records = json.loads(tree[path])
    sample_ids = [r["id"] for r in json.loads((SHARED_DATA / "musique" / "musique.json").read_text())]
    changed = next(rec for rec in records if rec["id"] == sample_ids[3])
    changed["answer"] = "Not the answer"
    hub = tmp_path / "hf"
    with serve({**tree, path: json.dumps(records).encode()}, hf_cache=hub) as server:
        use(server.env(), hub, monkeypatch)
        with pytest.raises(DataError, match=r"HippoRAG 2's full musique does not hold the sample's questions as the "
                                            r"committed manifest does.*\n  musique: .*answers"):
            download_hipporag2(["musique"], tmp_path / "dl", timeout_s=5)
    assert not (tmp_path / "dl" / "musique").exists()
    assert not [p for p in (hub / f"datasets--{HF_REPO.replace('/', '--')}" / "snapshots").rglob("musique*.json")]


# ------------------------------------------------------------------ a host that never answers, HTTP errors named
# The read timeout the commands get here (the defaults, 10 s for `full` and 20 s for the samples, would be waited out
# for real; the unit tests below pin them and the variable that sets them)
SHORT_S = 1
FAKE_KEY = "sk-kgirhub-Wq2Lp6Rt3YHn4Kd9"  # a mirror's credentials in the endpoint: masked in every message


def _full_command(url: str, folder: Path) -> tuple:
    endpoint = url.replace("http://", f"http://user:{FAKE_KEY}@")
    return cli("full", "musique", "--target", str(folder / "dl"), env={
        "KGIR_HF_ENDPOINT": endpoint, "HF_HUB_CACHE": str(folder / "hf"), "HF_HUB_OFFLINE": "0",
        TIMEOUT_VARIABLE: str(SHORT_S)}, timeout=120)


def _sample_fetch(url: str, folder: Path) -> tuple:
    return cli("fetch", "musique_train", "--target", str(folder / "s"), "--cache", str(folder / "u"),
               env={"KGIR_GITHUB_RAW_URL": url, "KGIR_HF_ENDPOINT": url, "HF_HUB_CACHE": str(folder / "hf"),
                    "HF_HUB_OFFLINE": "0", TIMEOUT_VARIABLE: str(SHORT_S)}, timeout=120)


def _against_a_silent_host(command, folder: Path) -> tuple:
    """``command(url, folder)`` against a host of its own that accepts and never answers: (url, completed process,
    seconds it took, folder)."""
    with silent_host() as url:
        out, seconds = command(url, folder)
    return url, out, seconds, folder


@pytest.fixture(scope="module")
def silent_runs(tmp_path_factory) -> dict:
    """The full command and the sample fetch, each against a silent host, run at once: each only waits out its own
    timeout (:data:`SHORT_S` each), so together they take one wait, not the sum."""
    commands = {"full": _full_command, "fetch": _sample_fetch}
    with ThreadPoolExecutor(len(commands)) as pool:
        started = {name: pool.submit(_against_a_silent_host, command, tmp_path_factory.mktemp(f"silent_{name}"))
                   for name, command in commands.items()}
        return {name: future.result() for name, future in started.items()}


def test_the_read_timeouts_default_to_the_documented_20_s_for_the_samples_and_10_s_for_the_full_sets(monkeypatch):
    from kgir_lib.data_sources import fetch

    monkeypatch.delenv(TIMEOUT_VARIABLE, raising=False)
    assert (fetch.READ_S, fetch.FULL_READ_S) == (20.0, 10.0)
    with fetch.client() as http:
        assert (http.timeout.read, http.timeout.connect) == (20.0, 5.0)
    asked = []

    def client(timeout_s=None):  # the full sets' client: its timeout recorded, then no request
        asked.append(timeout_s)
        raise RuntimeError("no request")

    monkeypatch.setattr(fetch, "client", client)
    with pytest.raises(RuntimeError):
        download_hipporag2(["musique"], Path("unused"))
    assert asked == [10.0]
    doc = " ".join((REPO / "docs" / "operations.md").read_text(encoding="utf-8").split())
    assert ("(20 s for the samples, 10 s for `full`; `KGIR_DOWNLOAD_TIMEOUT_S` sets it, in seconds, for both" in doc)
    assert TIMEOUT_VARIABLE == "KGIR_DOWNLOAD_TIMEOUT_S"


def test_the_variable_sets_both_read_timeouts_and_cuts_the_connect_timeout(monkeypatch):
    from kgir_lib.data_sources import fetch

    monkeypatch.setenv(TIMEOUT_VARIABLE, "1.5")
    assert fetch.read_timeout(fetch.READ_S) == fetch.read_timeout(fetch.FULL_READ_S) == 1.5
    with fetch.client() as http:
        assert (http.timeout.read, http.timeout.connect) == (1.5, 1.5)
    monkeypatch.setenv(TIMEOUT_VARIABLE, "60")
    with fetch.client() as http:
        assert (http.timeout.read, http.timeout.connect) == (60.0, 5.0)


@pytest.mark.parametrize("value", ["0", "-3", "ten", "nan", "inf"])
def test_a_read_timeout_that_is_not_a_number_above_0_is_refused_naming_it(value, monkeypatch, tmp_path):
    monkeypatch.setenv(TIMEOUT_VARIABLE, value)
    with pytest.raises(DataError, match=f"KGIR_DOWNLOAD_TIMEOUT_S='{value}' is not a number of seconds above 0"):
        download_hipporag2(["musique"], tmp_path / "dl")
    assert not (tmp_path / "dl").exists()


def test_a_host_that_accepts_and_never_answers_is_given_up_on_after_the_read_timeout_by_the_full_command(silent_runs):
    url, out, seconds, folder = silent_runs["full"]
    assert out.returncode == 1 and SHORT_S <= seconds < 30, (seconds, out.stderr)
    assert f"accepted the connection but sent no answer within {SHORT_S} s" in out.stderr and "Traceback" not in out.stderr
    assert f"http://***@{url.removeprefix('http://')}/datasets/" in out.stderr and FAKE_KEY not in out.stderr
    assert not [p for p in folder.rglob("*") if p.is_file()]


def test_with_a_warm_cache_a_host_that_never_answers_costs_one_timeout_and_the_checked_copy_is_used(tmp_path, tree,
                                                                                                    monkeypatch):
    hub = tmp_path / "hf"
    with serve(tree, hf_cache=hub) as server:
        use(server.env(), hub, monkeypatch)
        download_hipporag2(["musique"], tmp_path / "first", timeout_s=5)
    with silent_host() as url:
        monkeypatch.setenv("KGIR_HF_ENDPOINT", url)
        start = time.monotonic()
        got = download_hipporag2(["musique"], tmp_path / "second", timeout_s=SHORT_S)
        seconds = time.monotonic() - start
        assert len(url.connections) == 1  # the first file's probe; the second file is not asked for
    assert seconds < 30 and got[0].read_bytes() == tree[hf_path("musique.json")]


def test_a_host_that_accepts_and_never_answers_is_given_up_on_after_the_read_timeout_by_the_sample_fetch(silent_runs):
    _, out, seconds, folder = silent_runs["fetch"]
    assert out.returncode == 1 and SHORT_S <= seconds < 30, (seconds, out.stderr)
    assert f"accepted the connection but sent no answer within {SHORT_S} s" in out.stderr
    assert not (folder / "s").exists() and not (folder / "u").exists()


@pytest.mark.parametrize("status, reason", [(500, "Internal Server Error"), (404, "Not Found")])
def test_an_http_error_of_the_hub_is_named_with_its_status_and_url_not_as_out_of_reach(tmp_path, status, reason,
                                                                                      monkeypatch, capsys):
    with status_host(status) as url:
        out, seconds = cli_here("full", "musique", "--target", str(tmp_path / "dl"), env={
            "KGIR_HF_ENDPOINT": url, "HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"},
            monkeypatch=monkeypatch, capsys=capsys)
    assert out.returncode == 1 and seconds < 30
    assert (f"{url}/datasets/{HF_REPO}/resolve/main/musique.json answered HTTP {status} {reason}"
            in out.stderr), out.stderr
    assert "could not reach" not in out.stderr and "internet" not in out.stderr


@pytest.mark.parametrize("status", [500, 404])
def test_an_http_error_of_a_sample_host_is_named_with_its_status_and_url(tmp_path, status, monkeypatch, capsys):
    with status_host(status) as url:
        endpoint = url.replace("http://", f"http://user:{FAKE_KEY}@")
        out, _ = cli_here("fetch", "musique_train", "--target", str(tmp_path / "s"), "--cache", str(tmp_path / "u"),
                          env={"KGIR_GITHUB_RAW_URL": endpoint, "KGIR_HF_ENDPOINT": url,
                               "HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"},
                          monkeypatch=monkeypatch, capsys=capsys)
    assert out.returncode == 1 and FAKE_KEY not in out.stderr
    masked = url.replace("http://", "http://***@")
    assert f"could not download {masked}/OSU-NLP-Group/HippoRAG/" in out.stderr and f"answered HTTP {status}" in out.stderr
    assert "could not reach" not in out.stderr and "machine with internet" not in out.stderr


# ------------------------------------------------------------------ no .incomplete left by a kill
def test_the_incomplete_file_a_killed_full_download_leaves_is_removed_at_the_next_start(tmp_path, tree):
    hub = tmp_path / "hf"
    path = hf_path("musique_corpus.json")
    code = (f"from pathlib import Path; from kgir_lib.data_sources import download_hipporag2; "
            f"download_hipporag2(['musique'], Path({str(tmp_path / 'dl')!r}), timeout_s=10)")
    with serve(tree, stall={path: 100_000}, hf_cache=hub) as server:
        env = {**os.environ, **server.env(), "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen([sys.executable, "-c", code], env=env)
        deadline = time.monotonic() + 60
        partial = []
        while time.monotonic() < deadline and not partial:  # the stalled file's partial download (0 bytes:
            partial = list(blobs(hub).glob(f"{server.etags[path]}.*.incomplete"))  # the client writes 10 MB chunks)
            time.sleep(0.2)
        time.sleep(0.5)  # its first bytes sent
        proc.kill()
        proc.wait(timeout=10)
    assert partial and all(p.exists() for p in partial)  # what the kill left
    with serve(tree, hf_cache=hub) as server:
        env = {**server.env()}
        out, _ = cli("full", "musique", "--target", str(tmp_path / "dl"), env=env)
    assert out.returncode == 0, out.stderr
    assert not list(blobs(hub).glob("*.incomplete"))
    assert (tmp_path / "dl" / "musique" / "musique_corpus.json").read_bytes() == tree[path]


def test_an_incomplete_file_whose_download_holds_its_lock_is_left_alone(tmp_path, monkeypatch):
    from filelock import FileLock

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    folder = blobs(tmp_path)
    folder.mkdir(parents=True)
    busy, stale = folder / ("a" * 64 + ".1234abcd.incomplete"), folder / ("b" * 64 + ".5678abcd.incomplete")
    busy.write_bytes(b"")
    stale.write_bytes(b"")
    lock_dir = tmp_path / ".locks" / folder.parent.name
    lock_dir.mkdir(parents=True)
    with FileLock(str(lock_dir / ("a" * 64 + ".lock"))):
        assert clean_incomplete(HF_REPO) == [stale]
        assert busy.exists() and not stale.exists()
    assert clean_incomplete(HF_REPO) == [busy] and not busy.exists()
