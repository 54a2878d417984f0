"""The records of a KGIR-RAG case study (paper §3.5, Fig. 6; notebook 07): one round, one case.

:class:`CaseStudy` is everything KGIR-RAG did for one question, its rounds the loop's own records
(:class:`~kgir_lib.kgir.rounds.LoopRound`, read back from the trace), with tables for the notebook. Built by
:mod:`kgir_lib.notebook.case.build`, shown by :mod:`kgir_lib.notebook.case.display`; :func:`load_kgir_traces`
reads the run's KGIR-RAG traces that notebook 07 chooses its case from.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

import pandas as pd

from ...config import Config
from ...eval.metrics import recall_at_k
from ...kgir.rounds import LoopRound
from ...methods.base import MethodOutput, Workspace
from ...traces import read_traces, trace_dataset, trace_files

KGIR_METHOD = "KGIR-RAG"
FREE_DATASET = "free"
FREE_QID = "free"
# ``answered_by`` of a trace, in words: what ended the loop
STOPPED_BY: dict[Optional[str], str] = {"reflection": "the reflection's verdict", "forced_reader": "the round cap",
                                         "reader": "the variant's fixed rounds (no reflection stop)"}


class CaseStudyError(ValueError):
    """A question id, dataset or user-supplied passage list is unusable; the message says which."""


@dataclass
class CaseStudy:
    """Everything KGIR-RAG did for one question, and how its answer scores."""

    dataset: str
    qid: str
    question: str
    gold_answers: list
    gold_pids: list
    answer: str
    answered_by: Optional[str]
    em: float
    f1: float
    rounds: list
    output: MethodOutput
    ws: Workspace = field(repr=False, compare=False)

    @property
    def recall(self) -> dict:
        """Recall@2 / @5 (×100) of KGIR-RAG's final ranked list; empty without gold passages."""
        if not self.gold_pids:
            return {}
        return {f"R@{k}": 100 * recall_at_k(self.output.ranked_pids, self.gold_pids, k) for k in (2, 5)}

    def title(self, pid: str) -> str:
        return self.ws.dataset.corpus[pid].title if self.ws and pid in self.ws.dataset.corpus else pid

    # ------------------------------------------------------------------ tables for the notebook
    def steps_frame(self) -> pd.DataFrame:
        """One row per round: query, retrieval, subgraph sizes, rewrite and verdict."""
        gold = set(self.gold_pids)
        rows = []
        for r in self.rounds:
            rows.append({
                "round": r.iteration, "query": r.query,
                "gold retrieved": f"{sum(p in gold for p, _ in r.retrieved)}/{len(gold)}" if gold else "",
                "|G_q|": len(r.G_q), "E_q": "; ".join(r.E_q), "seeds": "; ".join(r.seeds),
                "|G_tmp|": len(r.G_tmp), "|G_Ans|": len(r.G_Ans), "rewrite": r.rewrite or "",
                "verdict": r.verdict(),
                "answer / missing": (r.reflection.answer or r.reflection.missing or "") if r.reflection else "",
            })
        return pd.DataFrame(rows).set_index("round")

    def passages_frame(self, round_no: int = 1, which: str = "retrieved", chars: int = 160) -> pd.DataFrame:
        """The passages of a round (``retrieved``, ``rewrite_retrieved`` or ``new``), gold ones marked."""
        r = self.round(round_no)
        pairs = {"retrieved": r.retrieved, "rewrite_retrieved": r.rewrite_retrieved,
                 "new": [(p, None) for p in r.new_passages]}.get(which)
        if pairs is None:
            raise CaseStudyError(f"parameter 'which': 'retrieved', 'rewrite_retrieved' or 'new', got {which!r}")
        gold = set(self.gold_pids)
        rows = []
        for rank, (pid, score) in enumerate(pairs, 1):
            p = self.ws.dataset.corpus[pid] if self.ws and pid in self.ws.dataset.corpus else None
            text = (p.text if p else "")
            rows.append({"rank": rank, "title": p.title if p else pid, "cosine": score, "gold": pid in gold,
                         "text": text if len(text) <= chars else text[:chars] + " ..."})
        return pd.DataFrame(rows).set_index("rank")

    def reading_frame(self, round_no: int = 1, chars: int = 160) -> pd.DataFrame:
        """What the reflection and the shared reader read in a round, side by side: one row a passage either read,
        in the order the reflection read them, then the reader's others. The reflection reads the evidence (the
        ``G_Ans`` triples shown; the passages of ``D_t`` standing in for an empty ``G_Ans``) and the round's
        passages ``P_t`` (§2.4); the reader (when the round called it) reads the same evidence and passages
        (:func:`kgir_lib.kgir.steps.hand_to_reader`), ``context_pids``. Gold passages are marked."""
        r = self.round(round_no)
        reflection = list(dict.fromkeys(list(r.evidence_pids) + list(r.reflection_passages or [])))
        reader = list(r.final.context_pids) if r.final is not None else []
        gold = set(self.gold_pids)
        rows = []
        for pid in dict.fromkeys(reflection + reader):
            p = self.ws.dataset.corpus[pid] if self.ws and pid in self.ws.dataset.corpus else None
            text = p.text if p else ""
            rows.append({"passage": p.title if p else pid, "gold": pid in gold,
                         "reflection read it": "yes" if pid in reflection else "no",
                         "reader read it": ("yes" if pid in reader else "no") if r.final is not None else "not called",
                         "text": text if len(text) <= chars else text[:chars] + " ..."})
        return pd.DataFrame(rows, columns=["passage", "gold", "reflection read it", "reader read it", "text"])

    def reading_note(self, round_no: int = 1) -> str:
        """One sentence: the evidence both read in a round besides the passages of :meth:`reading_frame`."""
        r = self.round(round_no)
        if r.evidence_source == "passages":
            evidence = "no G_Ans triple: the passages of D_t stood in for the subgraph"
        elif r.evidence_triples:
            shown = r.evidence_shown if r.evidence_shown is not None else r.evidence_triples
            evidence = (f"the {shown} heaviest of the round's {r.evidence_triples} G_Ans triples"
                        f"{' (`max_evidence_triples`)' if shown < r.evidence_triples else ''}")
        else:
            evidence = "no evidence from the subgraph stage"
        who = "the reflection and the reader both read" if r.final is not None else \
            "the reflection read (the reader was not called in this round)"
        return f"Round {r.iteration}: {who} {evidence}, and the passages below."

    def matches_frame(self, round_no: int = 1) -> pd.DataFrame:
        """NER entities (eq. 4), whether each occurs in the round's query (the NER guard) and was used, and the
        graph entities each matched (eq. 5). A fallback replaces the LLM's entities even when they occur in the
        question (none of them matched), so the two columns can differ."""
        from ...kgir.seeds import ground_entities

        r = self.round(round_no)
        rows = []
        for e in r.llm_entities:
            rows.append({"question entity": e, "source": "LLM NER",
                         "occurs in the question": bool(ground_entities([e], r.query)),
                         "used as a seed name": e in r.E_q,
                         "matched graph entities": ", ".join(f"{g} ({s:.2f})" for g, s in r.matches.get(e, []))})
        for e in r.E_q:
            if e not in r.llm_entities:
                rows.append({"question entity": e, "source": f"fallback ({r.fallback_reason})",
                             "occurs in the question": True, "used as a seed name": True,
                             "matched graph entities": ", ".join(f"{g} ({s:.2f})" for g, s in r.matches.get(e, []))})
        return pd.DataFrame(rows, columns=["question entity", "source", "occurs in the question", "used as a seed name",
                                           "matched graph entities"])

    def triples_frame(self, round_no: int = 1, which: str = "G_Ans") -> pd.DataFrame:
        """``G_q``, ``G_tmp`` or ``G_Ans`` of a round, with edge weights where computed and source titles."""
        r = self.round(round_no)
        triples = {"G_q": r.G_q, "G_tmp": r.G_tmp, "G_Ans": r.G_Ans}.get(which)
        if triples is None:
            raise CaseStudyError(f"parameter 'which': 'G_q', 'G_tmp' or 'G_Ans', got {which!r}")
        weights = r.subgraph.weights if r.subgraph else {}
        kept = set(r.G_Ans)
        return pd.DataFrame([{"head": t.head, "relation": t.relation, "tail": t.tail,
                              "weight": weights.get(t), "in G_Ans": t in kept, "source": self.title(t.pid)}
                             for t in triples],
                            columns=["head", "relation", "tail", "weight", "in G_Ans", "source"])

    def round(self, round_no: int) -> LoopRound:
        for r in self.rounds:
            if r.iteration == round_no:
                return r
        raise CaseStudyError(f"round {round_no} does not exist (this case has rounds "
                             f"{[r.iteration for r in self.rounds]})")

    def result_frame(self) -> pd.DataFrame:
        """The final answer against the gold answers, with who wrote it and what stopped the loop.

        The reflection decides when to stop (§2.4); with ``kgir_answer_source`` ``reader`` the shared reader
        words the answer, so the reflection's own ``Answer:`` line is shown beside it."""
        trace = self.output.trace if self.output is not None else {}
        return pd.DataFrame([{"question": self.question, "KGIR-RAG answer": self.answer,
                              "worded by": trace.get("answer_source") or "",
                              "loop stopped by": STOPPED_BY.get(self.answered_by, self.answered_by or ""),
                              "reflection's answer": trace.get("reflection_answer") or "",
                              "gold": " | ".join(self.gold_answers),
                              "EM": 100 * self.em, "F1": 100 * self.f1, **self.recall}])


def load_kgir_traces(cfg: Config, datasets: Optional[Iterable[str]] = None) -> list:
    """Every full KGIR-RAG trace record in the run directory, each tagged with its ``dataset``."""
    wanted = set(datasets) if datasets is not None else None
    out, seen = [], set()
    for path in trace_files(cfg):
        if wanted is not None and trace_dataset(path) not in wanted:
            continue
        for rec in read_traces(path):
            trace = rec.get("trace") or {}
            key = (trace_dataset(path), str(rec.get("qid")))
            if trace.get("method") == KGIR_METHOD and trace.get("variant", "full") == "full" and key not in seen:
                seen.add(key)  # the same question traced by two notebooks counts once
                out.append({**rec, "dataset": trace_dataset(path)})
    return out
