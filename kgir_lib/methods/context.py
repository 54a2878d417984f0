"""The reader's context and the final ranked list: one rule for every compared method (paper §3.3.1, §3.3.3).

**The final ranked list (Recall@k, paper §3.3.3), one rule for every method.**
``ranked_pids`` = the passages the reader was shown, in the order they were put
in its context, followed by the method's remaining candidates in the method's
own order, duplicates removed (:func:`final_ranking`). Each method's docstring
names its context and its candidates. The reader always sees the first
``cfg.context_passages`` passages of the method's context list, each cut to
``cfg.passage_chars`` characters (:func:`read`), through the one shared reader
prompt (:mod:`kgir_lib.methods.reader`), so the comparison is about *which* passages a
method finds, not about prompt wording.
"""
from __future__ import annotations

from typing import Any, Hashable, Iterable, Optional, Sequence

from ..data import Question
from ..llm import LLMUsage
from .base import MethodOutput, Workspace
from .reader import answer_batch, format_passages


def dedup(pids: Iterable[Hashable]) -> list:
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
