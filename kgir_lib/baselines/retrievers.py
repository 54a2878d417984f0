"""Single-step retrievers (BM25, dense) and the pieces every baseline shares.

**The final ranked list (Recall@k, paper §3.3.3), one rule for every method.**
``ranked_pids`` = the passages the reader was shown, in the order they were put
in its context, followed by the method's remaining candidates in the method's
own order, duplicates removed (:func:`final_ranking`). Each method's docstring
names its context and its candidates. The reader always sees the first
``cfg.context_passages`` passages of the method's context list, each cut to
``cfg.passage_chars`` characters (:func:`read`), through the one shared reader
prompt (:mod:`kgir_lib.reader`), so the comparison is about *which* passages a
method finds, not about prompt wording.

**Retrieval-only rows.** HippoRAG 2's tables have rows "BM25" and "Contriever":
a retriever's top passages read by the same reader. :class:`BM25Retriever` and
:class:`DenseRetriever` are those rows. With the workspace's own encoder,
:class:`DenseRetriever` retrieves exactly what Naive RAG retrieves (both are the
cosine top-k of paper eq. 2); give it another ``model`` (e.g. Contriever where a
model hub is reachable) to make it a different retriever.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..data import Question
from ..llm import LLMUsage
from ..reader import answer_batch, format_passages
from .base import MethodBase, MethodOutput, Workspace


# ---------------------------------------------------------------------------- shared helpers
def dedup(pids: Sequence[str]) -> list:
    """``pids`` in order, each once."""
    return list(dict.fromkeys(pids))


def final_ranking(context_pids: Sequence[str], candidates: Sequence[str]) -> list:
    """The uniform ranked list: reader context first (in context order), then the remaining candidates."""
    return dedup(list(context_pids) + list(candidates))


def context_of(ws: Workspace, pids: Sequence[str]) -> list:
    """The passages the reader is shown: the first ``cfg.context_passages`` of ``pids`` (deduplicated)."""
    return dedup(pids)[: ws.cfg.context_passages]


def read(ws: Workspace, questions: Sequence[str], context_pids: Sequence[Sequence[str]],
         stage: str) -> list:
    """The shared reader over each question's context passages: ONE batched LLM call.

    Returns ``(answer, ChatResult)`` pairs; ``context_pids`` must already be cut by :func:`context_of`.
    """
    contexts = [format_passages(ws.passages(pids), ws.cfg.passage_chars) for pids in context_pids]
    return answer_batch(ws.llm, list(questions), contexts, stage=stage, max_tokens=ws.cfg.max_tokens("reader"))


def interleave(lists: Sequence[Sequence[str]]) -> list:
    """Round-robin merge (1st of each list, then 2nd of each, ...), duplicates removed.

    Used where several retrievals share one capped context (IRCoT), so every
    retrieval round gets its best passages in.
    """
    out: dict = {}
    for rank in range(max((len(x) for x in lists), default=0)):
        for x in lists:
            if rank < len(x):
                out.setdefault(x[rank], None)
    return list(out)


def hits_pids(hits: Sequence[tuple]) -> list:
    return [p for p, _ in hits]


def hits_json(hits: Sequence[tuple]) -> list:
    """``[(pid, score), ...]`` as JSON-friendly pairs with rounded scores."""
    return [[p, round(float(s), 6)] for p, s in hits]


def retrieval_output(ws: Workspace, q: Question, hits: Sequence[tuple], answer_result: tuple,
                     retriever: str, extra: Optional[dict] = None) -> MethodOutput:
    """A single-retrieval method's output: context = top of ``hits``, candidates = the rest of ``hits``."""
    answer, res = answer_result
    usage = LLMUsage()
    usage.add(res)
    ctx = context_of(ws, hits_pids(hits))
    trace: dict[str, Any] = {"retriever": retriever, "retrieval": hits_json(hits), "context_pids": ctx,
                             "reader_raw": res.text}
    trace.update(extra or {})
    return MethodOutput(q.qid, answer, final_ranking(ctx, hits_pids(hits)), usage, trace)


# ---------------------------------------------------------------------------- retrievers
@dataclass
class BM25Retriever(MethodBase):
    """BM25 (Robertson & Zaragoza; rank_bm25 Okapi) top-k, read by the shared reader.

    Context: the first ``cfg.context_passages`` of the BM25 top-k. Candidates: the
    BM25 top-k (``k`` = ``cfg.top_k`` unless given). One LLM call a question.
    """

    k: Optional[int] = None
    name = "BM25"
    key = "bm25"
    uses_kg = False

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        texts = [q.question for q in questions]
        hits = ws.get_bm25().search(texts, self._k(ws, self.k))
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

    k: Optional[int] = None
    model: Optional[str] = None
    name = "Dense"
    key = "dense"
    uses_kg = False

    def __post_init__(self) -> None:
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
        hits = index.search(texts, self._k(ws, self.k))
        answers = read(ws, texts, [context_of(ws, hits_pids(h)) for h in hits], stage="dense_reader")
        return [retrieval_output(ws, q, h, a, f"dense:{index.encoder.model_name}")
                for q, h, a in zip(questions, hits, answers)]
