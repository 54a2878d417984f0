"""Single-step retrievers (BM25, dense), read by the shared reader.

**Retrieval-only rows.** HippoRAG 2's tables have rows "BM25" and "Contriever":
a retriever's top passages read by the same reader. :class:`BM25Retriever` and
:class:`DenseRetriever` are those rows. With the workspace's own encoder,
:class:`DenseRetriever` retrieves exactly what Naive RAG retrieves (both are the
cosine top-k of paper eq. 2); give it another ``model`` (e.g. Contriever where a
model hub is reachable) to make it a different retriever. Their context and
ranked list follow the one rule of :mod:`kgir_lib.methods.context`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from ..data import Question
from ..methods.base import MethodBase, Workspace
from ..methods.context import context_of, hits_pids, read, retrieval_output


@dataclass
class BM25Retriever(MethodBase):
    """BM25 (Robertson & Zaragoza; rank_bm25 Okapi) top-k, read by the shared reader.

    Context: the first ``cfg.context_passages`` of the BM25 top-k. Candidates: the
    BM25 top-k (``top_k`` = ``cfg.top_k`` unless given). One LLM call a question.
    """

    top_k: Optional[int] = None
    name = "BM25"
    key = "bm25"
    uses_kg = False
    knobs = {"top_k": "top_k"}

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        texts = [q.question for q in questions]
        hits = ws.get_bm25().search(texts, int(self.setting(ws, "top_k")))
        answers = read(ws, texts, [context_of(ws, hits_pids(h)) for h in hits], stage="bm25_reader")
        return [retrieval_output(ws, q, h, a, "bm25") for q, h, a in zip(questions, hits, answers)]


@dataclass
class DenseRetriever(MethodBase):
    """Dense cosine top-k (paper eq. 2), read by the shared reader (HippoRAG 2's "Contriever" row).

    ``model=None`` uses the workspace's dense index (then it retrieves exactly
    what Naive RAG retrieves); a model name builds a second index with that
    encoder, cached beside the first. Context: the first ``cfg.context_passages``
    of the top-k; candidates: the top-k. One LLM call a question.
    """

    top_k: Optional[int] = None
    model: Optional[str] = None
    name = "Dense"
    key = "dense"
    uses_kg = False
    knobs = {"top_k": "top_k"}

    def __post_init__(self) -> None:
        super().__post_init__()
        self._indexes: dict = {}

    def index(self, ws: Workspace):
        if self.model is None or self.model == ws.dense.encoder.model_name:
            return ws.dense
        if ws.dataset.name not in self._indexes:
            from ..retrieval import DenseIndex, Encoder

            enc = Encoder(self.model, ws.cfg.embed_batch_size, max_length=ws.cfg.embed_max_length)
            self._indexes[ws.dataset.name] = DenseIndex(ws.dataset.corpus.passages, enc,
                                                        ws.cfg.run_dir / "cache" / "embeddings", progress=False)
        return self._indexes[ws.dataset.name]

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        texts = [q.question for q in questions]
        index = self.index(ws)
        hits = index.search(texts, int(self.setting(ws, "top_k")))
        answers = read(ws, texts, [context_of(ws, hits_pids(h)) for h in hits], stage="dense_reader")
        return [retrieval_output(ws, q, h, a, f"dense:{index.encoder.model_name}")
                for q, h, a in zip(questions, hits, answers)]
