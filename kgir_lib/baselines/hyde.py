"""HyDE (Gao et al., ACL 2023): retrieve with the embedding of a hypothetical passage.

KGIR-RAG §3.3.1 group 3 ("rewrite methods").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..data import Question
from ..llm.prompts import chat
from ..methods.base import MethodBase, Workspace
from ..methods.context import context_of, hits_pids, read, retrieval_output


def hyde_vectors(ws: Workspace, questions: Sequence[str], passages: Sequence[str],
                 include_query: bool) -> np.ndarray:
    """HyDE's query vector (its eq. for v̂): the mean of the hypothetical passage's embedding and,
    if ``include_query``, the question's, renormalised (cosine search).

    An empty passage (the model wrote nothing) falls back to the question's embedding.
    """
    q_emb = ws.dense.embed_queries(list(questions))
    texts = [p.strip() for p in passages]
    nonempty = [t for t in texts if t]
    d_emb = iter(ws.dense.embed_queries(nonempty)) if nonempty else iter(())
    rows = []
    for qv, t in zip(q_emb, texts):
        if not t:
            rows.append(qv)
            continue
        dv = next(d_emb)
        v = (dv + qv) / 2.0 if include_query else dv
        rows.append(v / (np.linalg.norm(v) or 1.0))
    return np.stack(rows) if rows else np.zeros((0, ws.dense.embeddings.shape[1]), dtype=np.float32)


@dataclass
class HyDE(MethodBase):
    """HyDE with one hypothetical document a question (the paper samples N; one keeps the cost at one call).

    Stage 1 (ONE batched call): the LLM writes a passage answering the question
    (``prompts/hyde.txt``). Stage 2: retrieve the cosine top-``top_k`` with the vector of
    :func:`hyde_vectors` (HyDE averages the hypothetical documents' embeddings with
    the query's; ``include_query=False`` uses the passage alone). Stage 3 (ONE call):
    the shared reader. **Context**: the first ``cfg.context_passages`` of that
    retrieval; **candidates**: its top-k. Two LLM calls a question.
    """

    include_query: bool = True
    top_k: Optional[int] = None
    name = "HyDE"
    key = "hyde"
    uses_kg = False
    knobs = {"top_k": "top_k"}

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        texts = [q.question for q in questions]
        reqs = [chat("hyde", {"question": t}, max_tokens=ws.cfg.max_tokens("hyde"), stop=("\n\n", "\nQuestion:"))
                for t in texts]
        docs = ws.llm.generate(reqs, stage="hyde_generate")
        vectors = hyde_vectors(ws, texts, [d.text for d in docs], self.include_query)
        hits = ws.dense.search_vectors(vectors, int(self.setting(ws, "top_k"))) if texts else []
        answers = read(ws, texts, [context_of(ws, hits_pids(h)) for h in hits], stage="hyde_reader")
        out = []
        for q, h, a, doc in zip(questions, hits, answers, docs):
            o = retrieval_output(ws, q, h, a, "dense:hyde", {"hypothetical_passage": doc.text})
            o.usage.add(doc)
            out.append(o)
        return out
