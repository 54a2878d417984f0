"""An encoder's calls kept on disk, so a rerun that asks what a run before it asked loads no model.

The dense encoder of eq. 2 (:class:`kgir_lib.retrieval.Encoder`) is asked, besides the corpus (whose embeddings
:class:`~kgir_lib.retrieval.DenseIndex` caches), for the questions, the triple texts of the edge weights (§2.2),
the entity names of the matching rules, HippoRAG 2's fact texts and LightRAG's records. Loading its library alone
costs seconds of CPU in every notebook kernel; :class:`RememberedCalls` answers a call it has seen from the run's
cache instead, and encodes only the texts of a new call that no earlier call held.
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
TEXTS = "texts"  # the table of every text's vector, by model and text (never committed: a run's cache alone)
COSTS = "costs"  # the table of each call's characters, each text counted up to TEXT_CHARS_CAP (never committed):
                 # what computing the call costs, for kgir_lib.embedding_seed.select_calls to weigh
TEXT_CHARS_CAP = 1_100  # characters of a text that cost the encoder time: MiniLM reads 256 tokens, about 1,100
                        # characters of English (benchmarks/bench_encoder_calls.py: its CPU time per text goes
                        # with the text's characters, 0.18-0.24 ms each, up to there)
_CHUNK = 500  # keys a query asks for at once (SQLite's limit on a statement's parameters is 32,766 or 999)


def has_table(con, name: str) -> bool:
    """Whether the SQLite database of ``con`` has a table ``name`` (a store made before that table was added, or a
    committed seed, which keeps the calls alone, lacks some)."""
    return con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def call_chars(texts: Sequence[str]) -> int:
    """What computing a call of ``texts`` costs, in characters: each text's, up to :data:`TEXT_CHARS_CAP`."""
    return sum(min(len(t), TEXT_CHARS_CAP) for t in texts)


class RememberedCalls:
    """An encoder whose calls are kept on disk: each call of :meth:`encode` is stored under the encoder's
    :attr:`~Encoder.cache_name` and the exact list of texts it was given, in order, and a later call with the same
    list gets the stored vectors back, bit for bit what that call got, without loading the model.

    A call not stored is assembled text by text: each text's vector is kept too (the :data:`TEXTS` table, keyed by
    the encoder and the text), from the first call that held it, and the encoder is asked only for the texts no
    call held before (each once, in one call of their own). The notebooks ask for the same triple texts and questions
    in many calls (``results/benchmarks/regenerate.md`` counts the texts each notebook computes), so this computes
    each text once per run. A vector then comes from the batch of another call: how a text is batched with others
    can change the last bits of its vector (the padding of a batch), so a call assembled this way may differ in
    those bits from the same call computed whole; the committed tables do not depend on them (the fresh-clone
    regenerate of ``results/benchmarks/regenerate.md`` checks every committed file byte for byte). The store is one
    SQLite file in the run's cache (:func:`kgir_lib.pipeline.dense_index` puts it beside the corpus embeddings);
    each row carries the SHA-256 of its bytes, and a row that fails it is recomputed with a warning, never read.
    Every other attribute is the encoder's own.
    """

    def __init__(self, encoder, path: Path):
        self.encoder, self.path = encoder, Path(path)

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("encoder", "path"):  # (copy and pickle look these up first)
            raise AttributeError(name)
        return getattr(self.encoder, name)

    def _name(self) -> bytes:
        return str(getattr(self.encoder, "cache_name", self.encoder.model_name)).encode("utf-8")

    def _key(self, texts: Sequence[str]) -> str:
        h = hashlib.sha256(self._name())
        for t in texts:
            h.update(b"\x1e" + t.encode("utf-8"))
        return h.hexdigest()

    def _text_key(self, text: str) -> str:
        """A text's key in the :data:`TEXTS` table: the encoder's name and the text (a call of the one text has
        another key, :meth:`_key`, in the calls table)."""
        return hashlib.sha256(self._name() + b"\x1f" + text.encode("utf-8")).hexdigest()

    def _connect(self):
        import sqlite3

        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.path, timeout=60)
        con.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, vectors BLOB NOT NULL, "
                    "sha256 TEXT NOT NULL)")
        con.execute(f"CREATE TABLE IF NOT EXISTS {USED} (key TEXT PRIMARY KEY)")
        con.execute(f"CREATE TABLE IF NOT EXISTS {TEXTS} (key TEXT PRIMARY KEY, vector BLOB NOT NULL, "
                    "sha256 TEXT NOT NULL, computed INTEGER NOT NULL)")
        con.execute(f"CREATE TABLE IF NOT EXISTS {COSTS} (key TEXT PRIMARY KEY, chars INTEGER NOT NULL)")
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

    def _read_texts(self, con, keys: Sequence[str]) -> dict:
        """``{key: vector}`` of the texts the store holds among ``keys``; a row that fails its checksum is left out
        with a warning (its text is computed again)."""
        found: dict = {}
        damaged = 0
        for i in range(0, len(keys), _CHUNK):
            part = list(keys[i:i + _CHUNK])
            marks = ",".join("?" * len(part))
            for key, blob, want in con.execute(f"SELECT key, vector, sha256 FROM {TEXTS} WHERE key IN ({marks})",
                                               part):
                data = bytes(blob)
                if hashlib.sha256(data).hexdigest() == want and len(data) % 4 == 0:
                    found[key] = np.frombuffer(data, dtype="<f4")
                else:
                    damaged += 1
        if damaged:
            warnings.warn(f"{damaged} text vector(s) in {self.path} do not match their checksum (damaged); "
                          f"recomputing them", stacklevel=4)
        return found

    @staticmethod
    def _write_texts(con, keys: Sequence[str], emb: np.ndarray, computed: bool) -> None:
        """Keep each row of ``emb`` under its text's key: a computed row replaces the kept one (which was damaged or
        absent), a row copied from a stored call does not (a text already kept keeps its first vector)."""
        rows = []
        for key, row in zip(keys, np.asarray(emb, dtype="<f4")):
            data = row.tobytes()
            rows.append((key, data, hashlib.sha256(data).hexdigest(), int(computed)))
        with con:
            con.executemany(f"INSERT OR {'REPLACE' if computed else 'IGNORE'} INTO {TEXTS} VALUES (?, ?, ?, ?)", rows)

    def _assemble(self, con, texts: list, progress: bool) -> np.ndarray:
        """The vectors of ``texts``: each kept text's, the others encoded (each distinct text once) and kept."""
        keys = [self._text_key(t) for t in texts]
        found = self._read_texts(con, list(dict.fromkeys(keys)))
        todo = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in found))
        if todo:
            fresh = np.asarray(self.encoder.encode(todo, progress=progress), dtype=np.float32)
            todo_keys = [self._text_key(t) for t in todo]
            self._write_texts(con, todo_keys, fresh, computed=True)
            found.update(zip(todo_keys, fresh))
        return np.stack([found[k] for k in keys]).astype(np.float32)

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """The vectors of ``texts``: the stored call's (its texts then kept one by one too), else assembled from the
        kept texts and the encoder (:meth:`_assemble`; then stored as a call); either way the call is noted in the
        :data:`USED` table, with its cost (:data:`COSTS`). One connection to the store per call."""
        texts = list(texts)
        key = self._key(texts)
        con = self._connect()
        try:
            emb = self._read(con, key)
            if emb is None or emb.shape[0] != len(texts):
                emb = self._assemble(con, texts, progress) if texts else self.encoder.encode(texts, progress=progress)
                self._write(con, key, emb)
            elif texts:
                self._write_texts(con, [self._text_key(t) for t in texts], emb, computed=False)
            with con:
                con.execute(f"INSERT OR IGNORE INTO {USED} VALUES (?)", (key,))
                con.execute(f"INSERT OR IGNORE INTO {COSTS} VALUES (?, ?)", (key, call_chars(texts)))
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
