"""IRCoT (Trivedi et al., ACL 2023): interleave one chain-of-thought sentence and a retrieval with it.

KGIR-RAG §3.3.1 group 2 ("iterative methods").
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..data import Question
from ..llm import ChatRequest, LLMUsage
from ..llm.prompts import chat
from ..methods.base import MethodBase, MethodOutput, Workspace
from ..methods.context import context_of, final_ranking, hits_json, hits_pids, interleave, read
from ..methods.reader import format_passages

ANSWER_MARKER = re.compile(r"answer\s+is\s*[:：]?\s*(.*)", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def parse_step(text: str) -> tuple:
    """``(sentence, answer)`` of one reasoning step.

    The sentence is the first line of the reply; a line with the answer marker
    ("... answer is: X") is kept whole and ends the chain (``answer`` = X, possibly
    empty); otherwise only its first sentence is kept (IRCoT keeps one sentence a
    step) and ``answer`` is ``None``.
    """
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    m = ANSWER_MARKER.search(line)
    if m:
        return line, m.group(1).strip().rstrip(".").strip()
    return _SENTENCE_END.split(line, maxsplit=1)[0].strip(), None


@dataclass
class IRCoT(MethodBase):
    """IRCoT: retrieve with the question, then up to ``max_steps`` rounds of (one CoT sentence, retrieval with it).

    Control flow (batched: each step is ONE LLM call over the questions still open):

    1. retrieve the top-``k`` passages with the question;
    2. step ``s`` = 1 .. ``max_steps``: the LLM writes the next CoT sentence from the
       passages so far (``prompts/ircot.txt``); a sentence with "answer is" ends the
       question's chain; an empty reply, or a sentence the chain already holds, ends it
       too (a repeated sentence would retrieve the same passages again: IRCoT has no such
       rule, but a small model that loops would otherwise spend every step on it); any
       other sentence is the query of a new top-``k`` retrieval (IRCoT retrieves with the
       last CoT sentence);
    3. the shared reader answers from the collected passages.

    LLM calls a question: (sentences written) + 1; retrievals: 1 + (sentences
    without the answer marker).

    Collected passages: IRCoT concatenates every retrieval's paragraphs (up to 15).
    Here the reader sees only ``cfg.context_passages`` passages, so the retrieval
    rounds are merged round-robin (the best of each round first, then the second
    best, ...) so every round contributes. **Context**: the first
    ``cfg.context_passages`` of that merge (also the context of each reasoning
    step); **candidates**: the whole merge.
    """

    max_steps: Optional[int] = None
    top_k: Optional[int] = None
    name = "IRCoT"
    key = "ircot"
    uses_kg = False
    knobs = {"max_steps": "ircot_max_steps", "top_k": "top_k"}

    def _request(self, ws: Workspace, question: str, pool: list, cot: list) -> ChatRequest:
        ctx = format_passages(ws.passages(context_of(ws, pool)), ws.cfg.passage_chars)
        return chat("ircot", {"context": ctx, "question": question, "cot": " ".join(cot) if cot else "(none)"},
                    max_tokens=ws.cfg.max_tokens("ircot"), stop=("\n",))

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        k, steps = int(self.setting(ws, "top_k")), int(self.setting(ws, "max_steps"))
        texts = [q.question for q in questions]
        state: list[dict[str, Any]] = [{"retrievals": [{"query": t, "hits": h}], "cot": [], "raw": [], "stop": None,
                                        "cot_answer": None, "usage": LLMUsage()}
                                       for t, h in zip(texts, ws.dense.search(texts, k))]
        for _ in range(steps):
            open_ = [i for i, s in enumerate(state) if s["stop"] is None]
            if not open_:
                break
            reqs = [self._request(ws, texts[i], self._pool(state[i]), state[i]["cot"]) for i in open_]
            results = ws.llm.generate(reqs, stage="ircot_reason")
            queries, who = [], []
            for i, res in zip(open_, results):
                s = state[i]
                s["usage"].add(res)
                s["raw"].append(res.text)
                sentence, answer = parse_step(res.text)
                if not sentence:
                    s["stop"] = "empty"
                    continue
                if answer is None and sentence in s["cot"]:
                    s["stop"] = "repeated"  # the same query again would retrieve the same passages
                    continue
                s["cot"].append(sentence)
                if answer is not None:
                    s["stop"], s["cot_answer"] = "answer", answer
                else:
                    queries.append(sentence)
                    who.append(i)
            for i, query, hits in zip(who, queries, ws.dense.search(queries, k) if queries else []):
                state[i]["retrievals"].append({"query": query, "hits": hits})
        for s in state:
            s["stop"] = s["stop"] or "max_steps"
        pools = [self._pool(s) for s in state]
        contexts = [context_of(ws, p) for p in pools]
        answers = read(ws, texts, contexts, stage="ircot_reader")
        out = []
        for q, s, pool, ctx, (answer, res) in zip(questions, state, pools, contexts, answers):
            s["usage"].add(res)
            trace = {"cot": s["cot"], "raw_steps": s["raw"], "stop": s["stop"], "cot_answer": s["cot_answer"],
                     "retrievals": [{"query": r["query"], "hits": hits_json(r["hits"])} for r in s["retrievals"]],
                     "context_pids": ctx, "reader_raw": res.text}
            out.append(MethodOutput(q.qid, answer, final_ranking(ctx, pool), s["usage"], trace))
        return out

    @staticmethod
    def _pool(state: dict) -> list:
        return interleave([hits_pids(r["hits"]) for r in state["retrievals"]])
