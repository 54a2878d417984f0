"""Naive Gen and Naive RAG (KGIR-RAG §3.3.1, group 1: "native reasoning methods")."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from ..data import Question
from ..llm import LLMUsage
from ..methods.base import MethodBase, MethodOutput, Workspace
from ..methods.context import context_of, hits_pids, read, retrieval_output
from ..methods.reader import closed_book_request, parse_answer


@dataclass
class NaiveGen(MethodBase):
    """The LLM answers alone, no retrieval (HippoRAG 2's "no retrieval" row).

    Closed-book prompt (``prompts/closed_book.txt``), same answer format as the
    reader. One LLM call a question. Ranked list: empty; the trace says
    ``no_retrieval`` so Recall@k is reported as not applicable, not as 0.
    """

    name = "Naive Gen"
    key = "naive_gen"
    uses_kg = False

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        results = ws.llm.generate([closed_book_request(q.question, ws.cfg.max_tokens("reader")) for q in questions],
                                  stage="naive_gen")
        out = []
        for q, res in zip(questions, results):
            usage = LLMUsage()
            usage.add(res)
            out.append(MethodOutput(q.qid, parse_answer(res.text), [], usage,
                                    {"no_retrieval": True, "raw": res.text}))
        return out


@dataclass
class NaiveRAG(MethodBase):
    """Naive RAG (Lewis et al. 2020): dense top-k passages in the reader's prompt.

    Retrieval: cosine top-``top_k`` (paper eq. 2; ``cfg.top_k`` unless given, the paper's
    10). Context: the first ``cfg.context_passages`` of them. Candidates: the
    top-k. One LLM call a question.
    """

    top_k: Optional[int] = None
    name = "Naive RAG"
    key = "naive_rag"
    uses_kg = False
    knobs = {"top_k": "top_k"}

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        texts = [q.question for q in questions]
        hits = ws.dense.search(texts, int(self.setting(ws, "top_k")))
        answers = read(ws, texts, [context_of(ws, hits_pids(h)) for h in hits], stage="naive_rag_reader")
        return [retrieval_output(ws, q, h, a, "dense") for q, h, a in zip(questions, hits, answers)]
