"""ITER-RETGEN (Shao et al., Findings of EMNLP 2023): retrieval and generation in T rounds.

KGIR-RAG §3.3.1 group 2 ("iterative methods").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from ..data import Question
from ..llm import ChatRequest, LLMUsage
from ..llm.prompts import chat
from ..methods.base import MethodBase, MethodOutput, Workspace
from ..methods.context import context_of, final_ranking, hits_json, hits_pids, read
from ..methods.reader import format_passages


def next_query(question: str, generation: str) -> str:
    """ITER-RETGEN's retrieval query for round t+1: the question followed by round t's generation."""
    generation = " ".join((generation or "").split())
    return f"{question} {generation}".strip()


@dataclass
class IterRetGen(MethodBase):
    """ITER-RETGEN with ``rounds`` = T (default ``cfg.iter_retgen_rounds``, the paper's 3).

    Round t = 1 .. T (each stage ONE batched LLM call): retrieve the top-``k`` with
    the question (t = 1) or with question + the generation of round t-1; then
    generate from the first ``cfg.context_passages`` retrieved passages. Rounds
    1 .. T-1 generate a short chain of thought ending in an answer
    (``prompts/iter_retgen.txt``), which only serves as the next query; round T's
    generation is the shared reader, whose answer is the final one (ITER-RETGEN
    answers with the last round's generation). Exactly T generations and T
    retrievals a question.

    **Context**: the first ``cfg.context_passages`` of the last retrieval;
    **candidates**: the last retrieval's top-k.
    """

    rounds: Optional[int] = None
    top_k: Optional[int] = None
    name = "ITER-RETGEN"
    key = "iter_retgen"
    uses_kg = False
    knobs = {"rounds": "iter_retgen_rounds", "top_k": "top_k"}

    def _request(self, ws: Workspace, question: str, pids: list) -> ChatRequest:
        ctx = format_passages(ws.passages(pids), ws.cfg.passage_chars)
        return chat("iter_retgen", {"context": ctx, "question": question}, max_tokens=ws.cfg.max_tokens("iter_retgen"),
                    stop=("\n\n", "\nQuestion:", "\nPassages:"))

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        rounds, k = int(self.setting(ws, "rounds")), int(self.setting(ws, "top_k"))
        texts = [q.question for q in questions]
        usages = [LLMUsage() for _ in questions]
        log: list[list[dict]] = [[] for _ in questions]
        queries = list(texts)
        for t in range(1, rounds + 1):
            hits = ws.dense.search(queries, k)
            contexts = [context_of(ws, hits_pids(h)) for h in hits]
            if t < rounds:
                results = ws.llm.generate([self._request(ws, q, c) for q, c in zip(texts, contexts)],
                                          stage="iter_retgen_generate")
            else:
                answered = read(ws, texts, contexts, stage="iter_retgen_reader")
                answers, results = [a for a, _ in answered], [r for _, r in answered]
            for i, (res, h) in enumerate(zip(results, hits)):
                usages[i].add(res)
                log[i].append({"round": t, "query": queries[i], "hits": hits_json(h), "generation": res.text})
            queries = [next_query(q, r.text) for q, r in zip(texts, results)]
        out = []
        for i, q in enumerate(questions):
            ctx = context_of(ws, [p for p, _ in log[i][-1]["hits"]])
            trace = {"rounds": log[i], "context_pids": ctx, "reader_raw": log[i][-1]["generation"]}
            out.append(MethodOutput(q.qid, answers[i], final_ranking(ctx, [p for p, _ in log[i][-1]["hits"]]),
                                    usages[i], trace))
        return out
