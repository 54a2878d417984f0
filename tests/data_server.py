"""A stand-in for the two upstream hosts of the data (GitHub raw files, the Hugging Face hub) on 127.0.0.1.

:func:`upstream_tree` builds what the hosts serve from a folder holding the samples (``../shared/data``), in each
upstream's URL layout and file form, so ``python -m kgir_lib.data_sources fetch`` can be run end to end without
internet:

- ``/gh/OSU-NLP-Group/HippoRAG/<commit>/<path>``: the four files fetched verbatim (musique_train's questions,
  corpus and OpenIE, HotpotQA's query NER), byte for byte;
- ``/hf/datasets/osunlp/HippoRAG_2/resolve/main/<name>.json`` and ``<name>_corpus.json``: a larger release in
  upstream form, compact JSON with ASCII escapes (as public copies of the release are written): the sample's
  questions among distractor questions (MuSiQue: the musique_train questions; HotpotQA: altered copies with other
  ids and paragraph titles), shuffled; a corpus of every question's passages, shuffled. The 60 HotpotQA records
  of the paragraph-level copy are served re-split into sentences (each sentence but the first keeps its leading
  space, so joining gives the paragraph back), with sentence-level supporting facts out of context order, and a
  ``type`` and ``level``: the derivation must undo all of that to give the sample back.

The Hugging Face side speaks the part of the Hub's protocol that ``huggingface_hub.hf_hub_download`` uses for a
dataset file: ``HEAD`` and ``GET`` on ``/datasets/<repo>/resolve/<revision>/<file>`` answer with ``X-Repo-Commit``
(the commit the revision points at: one fixed commit per server, ``commit=`` to give another), ``ETag`` (the
SHA-256 of the body, quoted, as the Hub gives an LFS file's) and ``Content-Length``; a ``GET`` with ``Range:
bytes=N-`` gets the rest of the file (``206``, ``Content-Range``), as the client asks when it resumes a download
that broke off. A path the tree lacks is ``404``. The GitHub side answers ``GET`` only, with the file.

:func:`serve` starts a threaded server over a tree (``with serve(tree) as server``); ``server.env()`` is the
environment that points the suite at it: ``KGIR_HF_ENDPOINT``, ``KGIR_GITHUB_RAW_URL``, ``HF_HUB_OFFLINE=0`` and
``HF_HUB_CACHE``, a Hugging Face cache of the server's own (removed when it stops; ``hf_cache=`` gives one that
outlives it), so the stand-in's files never enter the user's real cache under the real repository's name.
``server.requests`` holds the paths asked for with ``GET``, ``server.heads`` those asked with ``HEAD``,
``server.tokens`` the ``Authorization`` headers received. ``truncate={path: n}`` sends only the first ``n`` bytes
of that file after a full ``Content-Length`` and hangs up, ``flaky={path: n}`` does so once only (a connection
dropped, then the file whole when asked again); ``unframed={path: n}`` sends ``n`` bytes with no length
and closes (a cut-off body the client cannot tell from a whole one by its framing); ``stall={path: n}`` sends ``n``
bytes of a full ``Content-Length`` and then nothing until the server stops (a process killed in mid-download).
Reuse it for an end-to-end run of ``scripts/main.sh`` in a fresh clone: ``env = {**os.environ, **server.env()}``
with ``KGIR_DATA_DIR`` unset.
"""
from __future__ import annotations

import copy
import hashlib
import json
import random
import re
import shutil
import tempfile
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, Optional

GITHUB_REPO, COMMIT = "OSU-NLP-Group/HippoRAG", "3d95d255a8db0c1699b853cfb4fbe5056708162d"
HF_REPO, REVISION = "osunlp/HippoRAG_2", "main"
STAND_IN_COMMIT = hashlib.sha1(b"stand-in for osunlp/HippoRAG_2 at main").hexdigest()  # what X-Repo-Commit says
VERBATIM = {  # sample file -> path in the GitHub repository
    "musique_train/musique_train.json": "data/musique_train.json",
    "musique_train/musique_train_corpus.json": "data/musique_train_corpus.json",
    "musique_train/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json":
        "output/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json",
    "hotpotqa/hotpotqa_queries.named_entity_output.tsv": "output/hotpotqa_queries.named_entity_output.tsv",
}
_SENTENCE_END = re.compile(r"(?<=[.!?])(?= )")


def gh_path(path: str) -> str:
    return f"/gh/{GITHUB_REPO}/{COMMIT}/{path}"


def hf_path(filename: str) -> str:
    return f"/hf/datasets/{HF_REPO}/resolve/{REVISION}/{filename}"


def sentence_level(rec: dict) -> dict:
    """A paragraph-level HotpotQA record in a plausible upstream form: sentences split, sentence-level supporting
    facts (first and last sentence) in reverse context order, a type and a level."""
    out = copy.deepcopy(rec)
    out["context"] = [[t, _SENTENCE_END.split(s[0])] for t, s in rec["context"]]
    supporting = {f[0] for f in rec["supporting_facts"]}
    facts = []
    for title, sentences in reversed(out["context"]):
        if title in supporting:
            facts += [[title, 0]] + ([[title, len(sentences) - 1]] if len(sentences) > 1 else [])
    out["supporting_facts"] = facts
    out["type"], out["level"] = "bridge", "medium"
    return out


def _distractor(rec: dict, i: int) -> dict:
    out = copy.deepcopy(rec)
    out["_id"] = f"distractor{i:04d}"
    out["answer"] = f"not {rec['answer']}"
    out["context"] = [[f"{t} (other)", s] for t, s in rec["context"]]
    out["supporting_facts"] = [[f"{t} (other)", n] for t, n in rec["supporting_facts"]]
    return out


def _corpus(records: list, schema: str) -> list:
    seen, out = set(), []
    for r in records:
        pairs = ([(p["title"], p["paragraph_text"]) for p in r["paragraphs"]] if schema == "musique"
                 else [(t, "".join(s)) for t, s in r["context"]])
        for pair in pairs:
            if pair not in seen:
                seen.add(pair)
                out.append({"title": pair[0], "text": pair[1]})
    return out


def _compact(value: object) -> bytes:
    return json.dumps(value).encode("ascii")


def upstream_tree(data_dir: Path, seed: int = 0) -> dict:
    """``{URL path: body}`` of both stand-in hosts, built from the samples in ``data_dir`` (module docstring)."""
    data_dir = Path(data_dir)
    rng = random.Random(seed)
    tree = {gh_path(remote): (data_dir / local).read_bytes() for local, remote in VERBATIM.items()}
    read = lambda rel: json.loads((data_dir / rel).read_bytes())  # noqa: E731
    musique = read("musique/musique.json") + read("musique_train/musique_train.json")
    hotpot = [sentence_level(r) if r["type"] == "" else r for r in read("hotpotqa/hotpotqa.json")]
    hotpot += [_distractor(r, i) for i, r in enumerate(hotpot[:20])]
    for name, records in (("musique", musique), ("hotpotqa", hotpot)):
        rng.shuffle(records)
        corpus = _corpus(records, name)
        rng.shuffle(corpus)
        tree[hf_path(f"{name}.json")] = _compact(records)
        tree[hf_path(f"{name}_corpus.json")] = _compact(corpus)
    return tree


class UpstreamServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, tree: dict, truncate: Optional[dict] = None, unframed: Optional[dict] = None,
                 stall: Optional[dict] = None, commit: str = STAND_IN_COMMIT, hf_cache: Optional[Path] = None,
                 flaky: Optional[dict] = None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.tree, self.truncate, self.unframed = tree, dict(truncate or {}), dict(unframed or {})
        self.flaky = dict(flaky or {})
        self.stall, self.stopping = dict(stall or {}), threading.Event()
        self.commit = commit
        self.etags = {path: hashlib.sha256(body).hexdigest() for path, body in tree.items()}
        self.own_cache = hf_cache is None
        self.hf_cache = Path(hf_cache) if hf_cache is not None else Path(tempfile.mkdtemp(prefix="kgir-hf-cache-"))
        self.requests: list = []
        self.heads: list = []
        self.tokens: list = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def env(self) -> dict:
        """The variables that point the suite's downloads at this server (module docstring)."""
        return {"KGIR_HF_ENDPOINT": f"{self.base}/hf", "KGIR_GITHUB_RAW_URL": f"{self.base}/gh",
                "HF_HUB_OFFLINE": "0", "HF_HUB_CACHE": str(self.hf_cache)}

    def stop(self) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()
        if self.own_cache:
            shutil.rmtree(self.hf_cache, ignore_errors=True)


class _Handler(BaseHTTPRequestHandler):
    server: UpstreamServer
    protocol_version = "HTTP/1.1"  # keep-alive, as the Hub's client expects; every answer says its length

    def log_message(self, *args) -> None:  # quiet
        pass

    def _hub_headers(self) -> None:
        """What the Hub's client reads from a resolve answer: the commit, the file's ETag."""
        if self.path.startswith("/hf/"):
            self.send_header("X-Repo-Commit", self.server.commit)
            self.send_header("ETag", f'"{self.server.etags[self.path]}"')

    def do_HEAD(self) -> None:
        srv = self.server
        srv.heads.append(self.path)
        body = srv.tree.get(self.path)
        if body is None:
            self._not_found()
            return
        self.send_response(200)
        self._hub_headers()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()

    def _not_found(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        srv = self.server
        srv.requests.append(self.path)
        if self.headers.get("Authorization"):
            srv.tokens.append(self.headers["Authorization"])
        body = srv.tree.get(self.path)
        if body is None:
            self._not_found()
            return
        start = _range_start(self.headers.get("Range"), len(body))
        if start is not None:  # a resumed download: the rest of the file
            self.send_response(206)
            self._hub_headers()
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            self.wfile.write(body[start:])
            return
        self.send_response(200)
        self._hub_headers()
        self.send_header("Content-Type", "application/octet-stream")
        if self.path in srv.unframed:
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body[:srv.unframed[self.path]])
            self.close_connection = True
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        cut = srv.flaky.pop(self.path, None)  # (flaky: this answer only)
        cut = cut if cut is not None else srv.truncate.get(self.path, srv.stall.get(self.path))
        if cut is not None:
            self.wfile.write(body[:cut])
            self.wfile.flush()
            if self.path in srv.stall:
                srv.stopping.wait(timeout=60)
            self.close_connection = True
            return
        self.wfile.write(body)


def _range_start(header: Optional[str], size: int) -> Optional[int]:
    """The first byte of ``Range: bytes=N-`` (the form a resumed download asks for), or None."""
    m = re.fullmatch(r"bytes=(\d+)-", (header or "").strip())
    return int(m.group(1)) if m and int(m.group(1)) < size else None


@contextmanager
def serve(tree: dict, truncate: Optional[dict] = None, unframed: Optional[dict] = None,
          stall: Optional[dict] = None, commit: str = STAND_IN_COMMIT, hf_cache: Optional[Path] = None,
          flaky: Optional[dict] = None) -> Iterator[UpstreamServer]:
    """A running :class:`UpstreamServer` over ``tree`` (stopped on exit)."""
    server = UpstreamServer(tree, truncate, unframed, stall, commit, hf_cache, flaky)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop()
        thread.join(timeout=5)


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
