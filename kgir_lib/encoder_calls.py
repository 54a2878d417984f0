"""An encoder's calls kept on disk, so a rerun that asks what a run before it asked loads no model.

The dense encoder of eq. 2 (:class:`kgir_lib.retrieval.Encoder`) is asked, besides the corpus (whose embeddings
:class:`~kgir_lib.retrieval.DenseIndex` caches), for the questions, the triple texts of the edge weights (§2.2)
and the entity names of the matching rules. Loading its library alone costs seconds of CPU in every notebook
kernel; :class:`RememberedCalls` answers a call it has seen from the run's cache instead.
"""
from __future__ import annotations

import hashlib
import io
import warnings
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

CALLS_FILE = "calls.sqlite"  # in a run's embedding cache, beside the corpus embeddings; committed for the main job
                             # (kgir_lib.embedding_seed), so a fresh clone's main job loads no encoder
USED = "used"  # the table of the calls a cache was asked for (their keys): what a regenerate needs of a seed that
               # also holds calls no run asks any more (kgir_lib.embedding_seed.pack_calls commits only those)


class RememberedCalls:
    """An encoder whose calls are kept on disk: each call of :meth:`encode` is stored under the encoder's
    :attr:`~Encoder.cache_name` and the exact list of texts it was given, in order, and a later call with the same
    list gets the stored vectors back, bit for bit what that call computed, without loading the model.

    Keyed by the whole call, not by each text: how a text is batched with others can change the last bits of its
    vector, so a vector is only ever reused for the call that made it (the same rule as the corpus embeddings of
    :class:`DenseIndex` and HippoRAG 2's phrase embeddings). The store is one SQLite file in the run's cache
    (:func:`kgir_lib.pipeline.dense_index` puts it beside the corpus embeddings); each row carries the SHA-256 of
    its bytes, and a row that fails it is recomputed with a warning, never read. Every other attribute is the
    encoder's own.
    """

    def __init__(self, encoder, path: Path):
        self.encoder, self.path = encoder, Path(path)

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("encoder", "path"):  # (copy and pickle look these up first)
            raise AttributeError(name)
        return getattr(self.encoder, name)

    def _key(self, texts: Sequence[str]) -> str:
        h = hashlib.sha256(str(getattr(self.encoder, "cache_name", self.encoder.model_name)).encode("utf-8"))
        for t in texts:
            h.update(b"\x1e" + t.encode("utf-8"))
        return h.hexdigest()

    def _connect(self):
        import sqlite3

        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.path, timeout=60)
        con.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, vectors BLOB NOT NULL, "
                    "sha256 TEXT NOT NULL)")
        con.execute(f"CREATE TABLE IF NOT EXISTS {USED} (key TEXT PRIMARY KEY)")
        return con

    def _read(self, con, key: str) -> Optional[np.ndarray]:
        row = con.execute("SELECT vectors, sha256 FROM calls WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        data, want = bytes(row[0]), row[1]
        if hashlib.sha256(data).hexdigest() == want:
            try:
                return np.load(io.BytesIO(data))
            except (OSError, ValueError, EOFError):
                pass
        warnings.warn(f"embeddings of an encoder call in {self.path} do not match their checksum (damaged); "
                      f"recomputing them", stacklevel=3)
        return None

    @staticmethod
    def _write(con, key: str, emb: np.ndarray) -> None:
        buf = io.BytesIO()
        np.save(buf, emb)
        data = buf.getvalue()
        with con:
            con.execute("INSERT OR REPLACE INTO calls VALUES (?, ?, ?)", (key, data, hashlib.sha256(data).hexdigest()))

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """The vectors of ``texts``: the stored call's, else the encoder's (then stored); either way the call is
        noted in the :data:`USED` table. One connection to the store per call."""
        texts = list(texts)
        key = self._key(texts)
        con = self._connect()
        try:
            emb = self._read(con, key)
            if emb is None or emb.shape[0] != len(texts):
                emb = self.encoder.encode(texts, progress=progress)
                self._write(con, key, emb)
            with con:
                con.execute(f"INSERT OR IGNORE INTO {USED} VALUES (?)", (key,))
        finally:
            con.close()
        return emb

    @property
    def dim(self) -> int:
        """The vectors' width: from a stored call when there is one (the model is not loaded for it)."""
        if self.path.exists():
            con = self._connect()
            try:
                row = con.execute("SELECT vectors FROM calls LIMIT 1").fetchone()
            finally:
                con.close()
            if row is not None:
                shape = np.load(io.BytesIO(bytes(row[0]))).shape
                if len(shape) == 2:
                    return int(shape[1])
        return int(self.encoder.dim)
