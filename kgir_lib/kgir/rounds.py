"""One round of the KGIR-RAG loop as a typed record, written into the trace and read back from it.

:class:`LoopRound` is the one shape of a round: the loop (:mod:`kgir_lib.kgir.loop`) fills it
and writes it into the question's trace with :meth:`LoopRound.to_dict`; every reader (notebook
07's case, :mod:`kgir_lib.notebook.case.bridges`, the tables of
:mod:`kgir_lib.eval.mechanism.loop_tables`, :func:`kgir_lib.notebook.viz.render_trace`) reads it
back with :meth:`LoopRound.from_dict`, which tolerates keys an older trace lacks.

Trace form of a round (keys of stages that did not run are absent)::

    iteration, query, retrieved [[pid, cosine]], usable {stage: bool}, truncated {stage: bool},
    ner_raw, subgraph (EvidenceSubgraph.to_dict), evidence_source, evidence, evidence_pids,
    evidence_triples, evidence_shown (G_Ans triples, and those shown under the profile's cap),
    rewrite {raw, question, malformed, unchanged[, the step's note]}, rewrite_retrieved,
    new_passages, reflection_passages,
    reflection {raw, final, answerable, answer, missing, reasoning, malformed[, verdict_raw]},
    final {raw, question, answer, forced, context_pids} (the shared reader's call of the round)

A rewrite step other than eq. 8's prompt may add its own words on how ``q'_t`` was made (its
``note``, :class:`~kgir_lib.kgir.contract.Rewritten`) to the ``rewrite`` record;
``final.forced`` says the reader answered because the round cap was reached (Algorithm 2).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence

from ..kg import KnowledgeGraph
from .rewrite import Reflection
from .subgraph import EvidenceSubgraph

STAGES = ("kgir_ner", "kgir_rewrite", "kgir_reflect", "kgir_reflect_verdict", "kgir_final")
_REWRITE_KEYS = ("raw", "question", "malformed", "unchanged")  # the rest of a rewrite: its note


def _pairs(rows: Sequence) -> list:
    return [(str(p), float(s)) for p, s in rows]


@dataclass
class Verdict(Reflection):
    """A round's reflection (Fig. 5) as the trace keeps it: the parsed verdict, the raw reply,
    whether it was the last round, and the verdict turn's reply if there was one."""

    raw: str = ""
    final: bool = False
    verdict_raw: Optional[str] = None  # the verdict turn's reply (the first had no verdict line)

    @classmethod
    def from_dict(cls, d: dict) -> "Verdict":
        return cls(answerable=bool(d.get("answerable")), answer=d.get("answer"),
                   missing=d.get("missing"), reasoning=d.get("reasoning") or "",
                   malformed=bool(d.get("malformed")), raw=d.get("raw") or "",
                   final=bool(d.get("final")), verdict_raw=d.get("verdict_raw"))

    def to_dict(self) -> dict:
        d = asdict(self)
        out = {"raw": d.pop("raw"), "final": d.pop("final"), **d}
        if out["verdict_raw"] is None:
            del out["verdict_raw"]
        return out


@dataclass
class FinalCall:
    """A shared-reader call of the round: the answer after the reflection stopped (or the round
    cap was reached: ``forced``), an ablation's answer, or an answer read at every round;
    ``context_pids`` are the passages it read."""

    raw: str
    question: str
    answer: str
    forced: bool
    context_pids: list = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict) -> "FinalCall":
        return cls(d.get("raw") or "", d.get("question") or "", d.get("answer") or "",
                   bool(d.get("forced")), list(d.get("context_pids") or []))


@dataclass
class LoopRound:
    """One round of the KGIR-RAG loop (§2.2-2.4): retrieval, subgraph, rewrite, reflection,
    reader."""

    iteration: int
    query: str
    retrieved: list                      # D_t: [(pid, cosine)], best first (eq. 2)
    G_q: list = field(default_factory=list)  # triples of D_t (eq. 3); the trace keeps its size only
    ner_raw: Optional[str] = None        # the LLM's NER reply (eq. 4)
    subgraph: Optional[EvidenceSubgraph] = None  # NER, matches, seeds, G_tmp, components, G_Ans
    n_G_q: Optional[int] = None          # |G_q| and |G_tmp| as computed (the trace keeps G_Ans and
    n_G_tmp: Optional[int] = None        # the pruned triples only: a subgraph read back holds part)
    evidence_source: Optional[str] = None  # "subgraph" | "passages": what Rewrite, Reflection saw
    evidence: str = ""                   # that evidence text
    evidence_pids: list = field(default_factory=list)  # the passages of a "passages" evidence
    evidence_triples: Optional[int] = None  # distinct G_Ans triples, and how many were shown
    evidence_shown: Optional[int] = None    # (cfg.max_evidence_triples)
    rewrite: Optional[str] = None        # q'_t (eq. 8); the query kept when the reply was malformed
    rewrite_raw: Optional[str] = None    # None: no rewrite stage in this round
    rewrite_malformed: bool = False
    rewrite_unchanged: bool = False
    rewrite_note: dict = field(default_factory=dict)  # a rewrite step's own words on q'_t
    rewrite_retrieved: list = field(default_factory=list)  # D'_t: [(pid, cosine)]
    new_passages: list = field(default_factory=list)  # passages of D'_t not in D_t
    reflection_passages: Optional[list] = None  # P_t, shown to Reflection
    reflection: Optional[Verdict] = None
    final: Optional[FinalCall] = None    # the shared reader's call of the round, when there was one
    usable: dict = field(default_factory=dict)     # stage -> reply parsed as intended
    truncated: dict = field(default_factory=dict)  # stage -> reply cut at its token budget

    # ------------------------------------------------------------------ the subgraph's parts
    @property
    def llm_entities(self) -> list:
        return list(self.subgraph.llm_entities) if self.subgraph else []

    @property
    def E_q(self) -> list:
        return list(self.subgraph.E_q) if self.subgraph else []

    @property
    def used_fallback(self) -> bool:
        return bool(self.subgraph.used_fallback) if self.subgraph else False

    @property
    def fallback_reason(self) -> Optional[str]:
        return self.subgraph.fallback_reason if self.subgraph else None

    @property
    def matches(self) -> dict:
        return dict(self.subgraph.matches) if self.subgraph else {}

    @property
    def seeds(self) -> list:
        return list(self.subgraph.seeds) if self.subgraph else []

    @property
    def G_tmp(self) -> list:
        return list(self.subgraph.G_tmp) if self.subgraph else []

    @property
    def G_Ans(self) -> list:
        return list(self.subgraph.kept) if self.subgraph else []

    def verdict(self) -> str:
        """'answer', 'missing', 'malformed' or '' (no reflection in this round)."""
        r = self.reflection
        if not r:
            return ""
        if r.answerable:
            return "answer"
        return "malformed" if r.malformed else "missing"

    def rewritten(self) -> str:
        """``q'_t`` as :meth:`record_rewrite` recorded it; a ``ValueError`` naming the round when
        there is none (a step that reads the rewrite ran before the rewrite step)."""
        if self.rewrite is None:
            raise ValueError(f"round {self.iteration} of query {self.query!r}: no rewrite q'_t "
                             f"recorded (the rewrite step runs before the steps that read it)")
        return self.rewrite

    def shown_passages(self) -> list:
        """``P_t`` as the loop recorded it; a ``ValueError`` naming the round when there is none
        (a step that reads ``P_t`` ran before the passages step)."""
        if self.reflection_passages is None:
            raise ValueError(f"round {self.iteration} of query {self.query!r}: no passages P_t "
                             f"recorded (the passages step runs before the steps that read them)")
        return self.reflection_passages

    # ------------------------------------------------------------------ what the loop records
    def record_subgraph(self, sub: EvidenceSubgraph) -> None:
        """The round's ``G_Ans`` (Algorithm 1) and the sizes of ``G_q`` and ``G_tmp``."""
        self.subgraph = sub
        self.G_q = list(sub.G_q)
        self.n_G_q = len(sub.G_q)
        self.n_G_tmp = len(sub.G_tmp)

    def record_evidence(self, source: str, text: str, pids: Sequence[str], *,
                        triples: Optional[int] = None, shown: Optional[int] = None) -> None:
        """What Rewrite, Reflection and the reader see of the round
        (:class:`~kgir_lib.kgir.contract.Evidence`)."""
        self.evidence_source = source
        self.evidence = text
        self.evidence_pids = list(pids)
        self.evidence_triples = triples
        self.evidence_shown = shown

    def record_rewrite(self, raw: str, question: Optional[str], query: str, *,
                       truncated: Optional[bool] = None, note: Optional[dict] = None) -> str:
        """The round's ``q'_t``: ``question``, or the ``query`` kept when the reply had none (a
        malformed reply). ``truncated`` is the reply's cut flag (``None``: no LLM reply, so no
        usable rate either); ``note``: the rewrite step's own words, written into the trace's
        ``rewrite`` record (module docstring). Returns ``q'_t``."""
        self.rewrite_raw = raw
        self.rewrite = question or query
        self.rewrite_malformed = question is None
        self.rewrite_unchanged = self.rewrite.strip().lower() == query.strip().lower()
        self.rewrite_note = dict(note or {})
        if truncated is not None:
            self.usable["rewrite"] = question is not None
            self.truncated["rewrite"] = truncated
        return self.rewrite

    # ------------------------------------------------------------------ trace form
    def to_dict(self) -> dict:
        d: dict = {"iteration": self.iteration, "query": self.query,
                   "retrieved": [[p, round(float(s), 6)] for p, s in self.retrieved],
                   "usable": dict(self.usable), "truncated": dict(self.truncated)}
        if self.subgraph is not None:
            d["ner_raw"] = self.ner_raw
            d["subgraph"] = self.subgraph.to_dict()
        if self.evidence_source is not None:
            d["evidence_source"] = self.evidence_source
            d["evidence"] = self.evidence
            if self.evidence_source == "passages":
                d["evidence_pids"] = list(self.evidence_pids)
            else:
                d["evidence_triples"] = self.evidence_triples
                d["evidence_shown"] = self.evidence_shown
        if self.rewrite_raw is not None:
            d["rewrite"] = {"raw": self.rewrite_raw, "question": self.rewrite,
                            "malformed": self.rewrite_malformed,
                            "unchanged": self.rewrite_unchanged}
            d["rewrite"].update(self.rewrite_note)
        if self.reflection_passages is not None:
            d["rewrite_retrieved"] = [[p, round(float(s), 6)] for p, s in self.rewrite_retrieved]
            d["new_passages"] = list(self.new_passages)
            d["reflection_passages"] = list(self.reflection_passages)
        if self.reflection is not None:
            d["reflection"] = self.reflection.to_dict()
        if self.final is not None:
            d["final"] = asdict(self.final)
        return d

    @classmethod
    def from_dict(cls, r: dict, kg: Optional[KnowledgeGraph] = None) -> "LoopRound":
        """A round back from its trace form; ``G_q`` is re-read from ``kg`` (the trace keeps its
        size only)."""
        retrieved = _pairs(r.get("retrieved", []))
        G_q = kg.triples_of([p for p, _ in retrieved]) if kg is not None else []
        sub_d = r.get("subgraph") or {}
        rw = r.get("rewrite")
        rewritten = "rewrite_retrieved" in r or "reflection_passages" in r
        shown = r.get("reflection_passages", r.get("new_passages", []))
        return cls(
            iteration=int(r.get("iteration", 0)), query=r.get("query", ""), retrieved=retrieved,
            G_q=G_q, ner_raw=r.get("ner_raw"),
            subgraph=EvidenceSubgraph.from_dict(sub_d, G_q) if sub_d else None,
            n_G_q=sub_d.get("n_G_q"), n_G_tmp=sub_d.get("n_G_tmp"),
            evidence_source=r.get("evidence_source"), evidence=r.get("evidence", ""),
            evidence_pids=list(r.get("evidence_pids") or []),
            evidence_triples=r.get("evidence_triples"), evidence_shown=r.get("evidence_shown"),
            rewrite=(rw or {}).get("question"),
            rewrite_raw=(rw or {}).get("raw") if rw is not None else None,
            rewrite_malformed=bool((rw or {}).get("malformed")),
            rewrite_unchanged=bool((rw or {}).get("unchanged")),
            rewrite_note={k: v for k, v in (rw or {}).items() if k not in _REWRITE_KEYS},
            rewrite_retrieved=_pairs(r.get("rewrite_retrieved", [])),
            new_passages=list(r.get("new_passages", [])),
            reflection_passages=list(shown) if rewritten else None,
            reflection=Verdict.from_dict(r["reflection"]) if r.get("reflection") else None,
            final=FinalCall.from_dict(r["final"]) if r.get("final") else None,
            usable=dict(r.get("usable") or {}), truncated=dict(r.get("truncated") or {}))


def trace_rounds(trace: dict, kg: Optional[KnowledgeGraph] = None) -> list:
    """The :class:`LoopRound` records of a KGIR-RAG trace (``MethodOutput.trace``, or a trace-file
    line)."""
    if "rounds" not in trace:
        trace = trace.get("trace") or {}
    return [LoopRound.from_dict(r, kg) for r in trace.get("rounds", [])]
