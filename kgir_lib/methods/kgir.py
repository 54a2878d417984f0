"""KGIR-RAG (paper §2.2-2.4, Algorithms 1-2; METHOD.md §2) and its Table 7 ablations.

The loop, for every open question, round ``t = 1 .. max_iterations``::

    query_1 = q
    D_t     = dense top-k(query_t)                                  eq. 2
    G_Ans_t = evidence subgraph(query_t, D_t)       [stage kgir_ner]  Algorithm 1
    q'_t    = Rewrite(q, history, G_Ans_t)          [stage kgir_rewrite]  eq. 8
    D'_t    = dense top-k(q'_t);  new_t = D'_t \\ D_t (first context_passages)
    verdict = Reflection(q'_t, G_Ans_t, history, new_t) [stage kgir_reflect]
    answer  -> done;  missing -> history += (q'_t, missing), query_{t+1} = q'_t

Rewrite and Reflection see at most ``MAX_EVIDENCE_TRIPLES`` (20) ``G_Ans``
triples, heaviest first. In the last round the reflection prompt says it must answer; a question whose
reflection still gives no answer is answered by the shared reader from
``G_Ans_T`` and ``new_T`` (stage ``kgir_final``, recorded as ``forced``).

Batching: every stage runs across all questions still open, as ONE
``llm.generate`` call per stage per round (so a vLLM server or engine is kept
full); retrieval is batched the same way.

Variants (paper Table 7, §3.4), switches of the same loop:

- ``"full"``: as above.
- ``"no_subgraph"``: no NER / subgraph; Rewrite and Reflection see the
  ``context_passages`` most similar passages of ``D_t`` instead of ``G_Ans_t``.
- ``"no_reflection"``: one round: subgraph, one rewrite, one retrieval with
  ``q'_1``, then the reader answers ``q'_1`` from ``G_Ans_1`` and ``new_1``.
- ``"no_rewrite"``: one round: subgraph, then the reader answers ``q`` from
  ``G_Ans_1`` alone (no rewrite, no reflection, no iteration).

Final ranked passage list (for Recall@k, METHOD.md §6):

1. the source passages of ``G_Ans`` edges over all rounds, ordered by their
   best edge weight (ties: first seen);
2. then every other retrieved passage in retrieval order: round 1's ``D_1``,
   round 1's rewrite retrieval ``D'_1``, round 2's ``D_2``, ... (duplicates
   dropped). Without the subgraph (``no_subgraph``) step 1 is empty.

Each :class:`MethodOutput` carries a JSON-serialisable trace: every round's
query, retrieval, subgraph (``EvidenceSubgraph.to_dict``), rewrite (raw and
parsed), new passages, reflection verdict (raw and parsed), the answer, who
answered, and the LLM usage per stage.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence

from tqdm.auto import tqdm

from ..data import Question
from ..reader import format_passages, parse_answer, reader_request
from ..rewrite import (evidence_block, parse_reflection, parse_rewrite, reflection_requests, rewrite_requests)
from ..subgraph import EvidenceSubgraph, build_subgraphs, format_triples, resolve_weighting, retrieve
from .base import MethodOutput, QuestionUsage, Workspace

VARIANTS = {
    "full": "KGIR-RAG",
    "no_subgraph": "KGIR-RAG w/o subgraph",
    "no_reflection": "KGIR-RAG w/o reflection",
    "no_rewrite": "KGIR-RAG w/o rewrite",
}
STAGES = ("kgir_ner", "kgir_rewrite", "kgir_reflect", "kgir_final")
MAX_EVIDENCE_TRIPLES = 20
READER_MAX_TOKENS = 32


@dataclass
class _Open:
    """Loop state of one question."""

    q: Question
    query: str
    history: list = field(default_factory=list)
    rounds: list = field(default_factory=list)
    usage: QuestionUsage = field(default_factory=QuestionUsage)
    stage_usage: dict = field(default_factory=dict)
    evidence_weights: dict = field(default_factory=dict)  # pid -> best G_Ans edge weight
    retrieval_order: list = field(default_factory=list)
    answer: Optional[str] = None
    answered_by: Optional[str] = None
    final_question: Optional[str] = None
    final_context: Optional[str] = None

    def account(self, stage: str, result) -> None:
        self.usage.add(result)
        s = self.stage_usage.setdefault(stage, {"calls": 0, "cache_hits": 0, "prompt_tokens": 0,
                                                 "completion_tokens": 0, "seconds": 0.0})
        s["calls"] += 1
        s["cache_hits"] += int(result.cached)
        s["prompt_tokens"] += result.prompt_tokens
        s["completion_tokens"] += result.completion_tokens
        s["seconds"] += result.seconds

    def ranked_pids(self) -> list:
        evidence = sorted(self.evidence_weights, key=lambda p: -self.evidence_weights[p])  # stable: first seen
        return list(dict.fromkeys(evidence + self.retrieval_order))


class KGIRRAG:
    """KGIR-RAG and its Table 7 ablations; see the module docstring for the loop and the ranked list.

    ``max_iterations``, ``top_k`` and ``ngram_threshold`` default (``None``) to the
    profile's values; ``edge_weight`` is ``"auto"`` (reranker if configured, else
    cosine of question and triple text), ``"reranker"``, ``"cosine"`` or ``"passage"``.
    """

    def __init__(self, variant: str = "full", max_iterations: Optional[int] = None, top_k: Optional[int] = None,
                 ngram_threshold: Optional[float] = None, edge_weight: Optional[str] = None):
        if variant not in VARIANTS:
            raise ValueError(f"unknown KGIR-RAG variant {variant!r} (choose from {sorted(VARIANTS)})")
        if max_iterations is not None and max_iterations < 1:
            raise ValueError(f"parameter 'max_iterations': must be >= 1, got {max_iterations}")
        if top_k is not None and top_k < 1:
            raise ValueError(f"parameter 'top_k': must be >= 1, got {top_k}")
        if ngram_threshold is not None and not 0.0 <= ngram_threshold <= 1.0:
            raise ValueError(f"parameter 'ngram_threshold': must be in [0, 1], got {ngram_threshold}")
        resolve_weighting(edge_weight, None)  # validates the name
        self.variant = variant
        self.name = VARIANTS[variant]
        self.uses_kg = variant != "no_subgraph"  # (evaluate.run_fingerprint: only then does the KG matter)
        self.max_iterations = max_iterations
        self.top_k = top_k
        self.ngram_threshold = ngram_threshold
        self.edge_weight = edge_weight
        self.stats: dict = {}

    # ------------------------------------------------------------------ helpers
    def _rounds(self, ws: Workspace) -> int:
        if self.variant in ("no_reflection", "no_rewrite"):
            return 1
        return self.max_iterations or ws.cfg.max_iterations

    @staticmethod
    def _passages_text(ws: Workspace, pids: Sequence[str]) -> str:
        return format_passages(ws.passages(pids), ws.cfg.passage_chars)

    def _count(self, key: str, n: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + n

    # ------------------------------------------------------------------ the loop
    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        """Answer every question; returns one :class:`MethodOutput` per question, in order."""
        cfg = ws.cfg
        k = self.top_k or cfg.top_k
        n_ctx = cfg.context_passages
        use_subgraph = self.variant != "no_subgraph"
        T = self._rounds(ws)
        self.stats = {"questions": len(questions), "ner_fallbacks": 0, "rewrite_malformed": 0,
                      "reflection_malformed": 0, "forced_answers": 0, "subgraphs": 0}
        states = [_Open(q=q, query=q.question) for q in questions]
        open_ = list(states)
        bar = tqdm(total=T, desc=f"{self.name} rounds", disable=not getattr(ws.llm, "progress", False) or not states,
                   leave=False)
        for t in range(1, T + 1):
            if not open_:
                break
            bar.update(1)
            last = t == T
            # -- retrieval with the current query (eq. 2), batched
            D = retrieve(ws, [s.query for s in open_], k)
            rounds = [{"iteration": t, "query": s.query, "retrieved": [[p, round(float(x), 6)] for p, x in d]}
                      for s, d in zip(open_, D)]
            for s, d, r in zip(open_, D, rounds):
                s.rounds.append(r)
                s.retrieval_order.extend(p for p, _ in d)
            # -- evidence subgraph (Algorithm 1): ONE NER call for all open questions
            evidence = []
            subs: list = [None] * len(open_)
            if use_subgraph:
                subs, ner = build_subgraphs(ws, [s.query for s in open_], D, k=k, threshold=self.ngram_threshold,
                                            weighting=self.edge_weight)
                for s, sub, res, r in zip(open_, subs, ner, rounds):
                    s.account("kgir_ner", res)
                    r["ner_raw"] = res.text
                    r["subgraph"] = sub.to_dict()
                    self._count("subgraphs")
                    self._count("ner_fallbacks", int(sub.used_fallback))
                    for tr in sub.kept:
                        w = sub.weights.get(tr, 0.0)
                        if tr.pid not in s.evidence_weights or w > s.evidence_weights[tr.pid]:
                            s.evidence_weights[tr.pid] = w
                    evidence.append(evidence_block(format_triples(sub.ranked_evidence(), MAX_EVIDENCE_TRIPLES)))
            else:
                evidence = [evidence_block(passages_text=self._passages_text(ws, [p for p, _ in d[:n_ctx]]))
                            for d in D]
            for r, ev in zip(rounds, evidence):
                r["evidence"] = ev
            if self.variant == "no_rewrite":
                for s, sub in zip(open_, subs):
                    s.final_question = s.q.question
                    s.final_context = format_triples(sub.ranked_evidence(), MAX_EVIDENCE_TRIPLES)
                open_ = []
                break
            # -- rewrite (eq. 8): ONE call
            rw = ws.llm.generate(rewrite_requests([s.q.question for s in open_], evidence,
                                                  [s.history for s in open_]), stage="kgir_rewrite")
            rewrites = []
            for s, res, r in zip(open_, rw, rounds):
                s.account("kgir_rewrite", res)
                parsed = parse_rewrite(res.text)
                self._count("rewrite_malformed", int(parsed is None))
                rewrites.append(parsed or s.query)
                r["rewrite"] = {"raw": res.text, "question": parsed or s.query, "malformed": parsed is None}
            # -- retrieval with the rewritten questions; passages new to this round
            D2 = retrieve(ws, rewrites, k)
            news = []
            for s, d, d2, r in zip(open_, D, D2, rounds):
                seen = {p for p, _ in d}
                new = [p for p, _ in d2 if p not in seen][:n_ctx]
                news.append(new)
                s.retrieval_order.extend(p for p, _ in d2)
                r["rewrite_retrieved"] = [[p, round(float(x), 6)] for p, x in d2]
                r["new_passages"] = new
            if self.variant == "no_reflection":
                for s, sub, q2, new in zip(open_, subs, rewrites, news):
                    s.final_question = q2
                    s.final_context = self._reader_context(ws, sub, new)
                open_ = []
                break
            # -- reflection (Fig. 5): ONE call
            rf = ws.llm.generate(reflection_requests(rewrites, evidence, [s.history for s in open_],
                                                     [self._passages_text(ws, new) for new in news],
                                                     [last] * len(open_), [s.q.question for s in open_]),
                                 stage="kgir_reflect")
            still = []
            for s, res, q2, sub, d, new, r in zip(open_, rf, rewrites, subs, D, news, rounds):
                s.account("kgir_reflect", res)
                verdict = parse_reflection(res.text)
                self._count("reflection_malformed", int(verdict.malformed))
                r["reflection"] = {"raw": res.text, "final": last, **verdict.to_dict()}
                if verdict.answerable:
                    s.answer, s.answered_by = verdict.answer, "reflection"
                elif last:
                    s.final_question = q2
                    top = [] if use_subgraph else [p for p, _ in d[:n_ctx]]  # w/o subgraph: the passages stand in
                    s.final_context = self._reader_context(ws, sub, top + [p for p in new if p not in top])
                else:
                    s.history.append({"rewrite": q2, "missing": verdict.missing})
                    s.query = q2
                    still.append(s)
            open_ = still
        bar.close()
        self._final_answers(ws, states)
        return [self._output(s) for s in states]

    # ------------------------------------------------------------------ answers and outputs
    def _reader_context(self, ws: Workspace, sub: Optional[EvidenceSubgraph], new: Sequence[str]) -> str:
        """Reader context: the G_Ans triples, then the passages new to the round."""
        parts = []
        if sub is not None:
            parts.append(format_triples(sub.ranked_evidence(), MAX_EVIDENCE_TRIPLES))
        if new:
            parts.append(self._passages_text(ws, new))
        return "\n\n".join(parts) if parts else "(none)"

    def _final_answers(self, ws: Workspace, states: Sequence[_Open]) -> None:
        """ONE reader call for every question still without an answer (ablations and forced answers)."""
        todo = [s for s in states if s.answer is None]
        if not todo:
            return
        reqs = [reader_request(s.final_question or s.q.question, s.final_context or "(none)", READER_MAX_TOKENS)
                for s in todo]
        for s, res in zip(todo, ws.llm.generate(reqs, stage="kgir_final")):
            s.account("kgir_final", res)
            s.answer = parse_answer(res.text)
            forced = self.variant in ("full", "no_subgraph")
            s.answered_by = "forced_reader" if forced else "reader"
            self._count("forced_answers", int(forced))
            s.rounds[-1]["final"] = {"raw": res.text, "question": s.final_question, "answer": s.answer,
                                     "forced": forced}

    def _output(self, s: _Open) -> MethodOutput:
        ranked = s.ranked_pids()
        trace = {
            "method": self.name,
            "variant": self.variant,
            "qid": s.q.qid,
            "question": s.q.question,
            "gold_answers": list(s.q.answers),
            "gold_pids": list(s.q.gold_pids),
            "answer": s.answer or "",
            "answered_by": s.answered_by,
            "iterations_used": len(s.rounds),
            "rounds": s.rounds,
            "history": s.history,
            "llm": s.stage_usage,
            "usage": asdict(s.usage),
        }
        return MethodOutput(qid=s.q.qid, answer=s.answer or "", ranked_pids=ranked, usage=s.usage, trace=trace)


# ---------------------------------------------------------------------- reading traces back
def trace_row(trace: dict) -> dict:
    """Loop facts of one question's trace: rounds, who answered, fallbacks and malformed replies, LLM use."""
    rounds = trace.get("rounds", [])
    llm = trace.get("llm", {})
    return {
        "qid": trace.get("qid"),
        "iterations": trace.get("iterations_used", len(rounds)),
        "answered_by": trace.get("answered_by"),
        "ner_fallbacks": sum(bool((r.get("subgraph") or {}).get("used_fallback")) for r in rounds),
        "rewrite_malformed": sum(bool((r.get("rewrite") or {}).get("malformed")) for r in rounds),
        "reflection_malformed": sum(bool((r.get("reflection") or {}).get("malformed")) for r in rounds),
        "G_Ans_triples": sum(len((r.get("subgraph") or {}).get("G_Ans", [])) for r in rounds),
        "pruned_triples": sum(len((r.get("subgraph") or {}).get("pruned", [])) for r in rounds),
        "llm_calls": sum(s.get("calls", 0) for s in llm.values()),
        "prompt_tokens": sum(s.get("prompt_tokens", 0) for s in llm.values()),
        "completion_tokens": sum(s.get("completion_tokens", 0) for s in llm.values()),
        **{f"calls_{k}": llm.get(k, {}).get("calls", 0) for k in STAGES},
    }


def trace_table(outputs: Sequence[MethodOutput]):
    """:func:`trace_row` for every output, as a DataFrame (works on outputs read back from trace files)."""
    import pandas as pd

    return pd.DataFrame([trace_row(o.trace) for o in outputs])
