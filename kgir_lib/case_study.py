"""A step-by-step case study of KGIR-RAG for one question (paper §3.5, Fig. 6; notebook 07).

- :func:`case_from_dataset` runs KGIR-RAG on one question of a dataset (by id);
  :func:`case_from_passages` on a free question over a small corpus the user
  supplies (its triples are extracted with the profile's LLM first, as the
  offline stage of §2.1 would). Both return a :class:`CaseStudy`: every round's
  retrieved passages, the triples of those passages (``G_q``, eq. 3), the NER
  output and the n-gram matches (eq. 4-5), ``G_tmp`` and ``G_Ans`` (eq. 5-7),
  the rewrite (eq. 8), the reflection verdict with its reasoning (Fig. 5), and
  the final answer scored against the gold answers.
- :func:`baseline_answers`: what every other method answered for the same
  question (from the run's trace files when they hold it, else run now).
- :func:`find_bridge_cases` scans KGIR-RAG traces for the pattern of Fig. 6: not
  answerable in round 1, the question rewritten around a *bridge entity* taken
  from ``G_Ans``, answered in round 2, ideally correctly; it ranks candidates.

Everything goes through the workspace's LLM and its cache: a case already run
by notebook 04 costs no LLM call.
"""
from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import pandas as pd

from .config import Config
from .data import Corpus, Dataset, Passage, Question, passage_id
from .kg import KnowledgeGraph, Triple
from .metrics import best_em, best_f1, recall_at_k
from .methods.base import MethodOutput, Workspace
from .subgraph import EvidenceSubgraph, normalize_name, seed_components

KGIR_METHOD = "KGIR-RAG"
FREE_DATASET = "free"
FREE_QID = "free"


class CaseStudyError(ValueError):
    """A question id, dataset or user-supplied passage list is unusable; the message says which."""


# ----------------------------------------------------------------------------- structures
@dataclass
class CaseRound:
    """One round of the KGIR-RAG loop as the trace recorded it (§2.2-2.4)."""

    iteration: int
    query: str
    retrieved: list                      # D_t: [(pid, cosine)], best first (eq. 2)
    G_q: list                            # triples of D_t (eq. 3)
    ner_raw: Optional[str] = None        # the LLM's NER reply (eq. 4)
    llm_entities: list = field(default_factory=list)
    E_q: list = field(default_factory=list)
    used_fallback: bool = False
    fallback_reason: Optional[str] = None
    matches: dict = field(default_factory=dict)  # {question entity: [(graph entity, n-gram similarity)]}
    seeds: list = field(default_factory=list)
    subgraph: Optional[EvidenceSubgraph] = None  # G_tmp, components, weights, G_Ans
    evidence: str = ""                   # what Rewrite and Reflection were shown
    rewrite: Optional[str] = None        # q'_t (eq. 8)
    rewrite_raw: Optional[str] = None
    rewrite_malformed: bool = False
    rewrite_retrieved: list = field(default_factory=list)
    new_passages: list = field(default_factory=list)  # passages new to the round, shown to Reflection
    reflection: Optional[dict] = None    # answerable, answer, missing, reasoning, raw, final
    final: Optional[dict] = None         # the forced / ablation reader call, when there was one

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
        if r.get("answerable"):
            return "answer"
        return "malformed" if r.get("malformed") else "missing"


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
    ws: Workspace = field(repr=False, compare=False, default=None)

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
                "answer / missing": (r.reflection or {}).get("answer") or (r.reflection or {}).get("missing") or "",
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

    def matches_frame(self, round_no: int = 1) -> pd.DataFrame:
        """NER entities (eq. 4) and the graph entities each matched by n-gram similarity (eq. 5)."""
        r = self.round(round_no)
        rows = []
        for e in r.llm_entities or [None]:
            if e is None:
                break
            rows.append({"question entity": e, "source": "LLM NER", "kept (occurs in question)": e in r.E_q,
                         "matched graph entities": ", ".join(f"{g} ({s:.2f})" for g, s in r.matches.get(e, []))})
        for e in r.E_q:
            if e not in r.llm_entities:
                rows.append({"question entity": e, "source": f"fallback ({r.fallback_reason})",
                             "kept (occurs in question)": True,
                             "matched graph entities": ", ".join(f"{g} ({s:.2f})" for g, s in r.matches.get(e, []))})
        return pd.DataFrame(rows, columns=["question entity", "source", "kept (occurs in question)",
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

    def round(self, round_no: int) -> CaseRound:
        for r in self.rounds:
            if r.iteration == round_no:
                return r
        raise CaseStudyError(f"round {round_no} does not exist (this case has rounds "
                             f"{[r.iteration for r in self.rounds]})")

    def result_frame(self) -> pd.DataFrame:
        """The final answer against the gold answers."""
        return pd.DataFrame([{"question": self.question, "KGIR-RAG answer": self.answer,
                              "answered by": self.answered_by, "gold": " | ".join(self.gold_answers),
                              "EM": 100 * self.em, "F1": 100 * self.f1, **self.recall}])


# ----------------------------------------------------------------------------- trace -> case
def _triple(row: Sequence) -> Triple:
    return Triple(str(row[0]), str(row[1]), str(row[2]), str(row[3]))


def subgraph_from_trace(d: dict, G_q: Sequence[Triple] = ()) -> EvidenceSubgraph:
    """Rebuild an :class:`EvidenceSubgraph` from its trace form (``EvidenceSubgraph.to_dict``).

    ``G_tmp`` is ``G_Ans`` plus the pruned triples; when ``G_q`` is given their
    order is ``G_q``'s (Algorithm 1 keeps it), else kept first.
    """
    kept = [_triple(x) for x in d.get("G_Ans", [])]
    pruned = [_triple(x) for x in d.get("pruned", [])]
    weights = {_triple(x): float(x[4]) for x in d.get("G_Ans", []) + d.get("pruned", []) if len(x) > 4}
    tmp = set(kept) | set(pruned)
    in_gq = [t for t in dict.fromkeys(G_q) if t in tmp]
    G_tmp = in_gq if len(in_gq) == len(tmp) else list(dict.fromkeys(kept + pruned))
    seeds = list(d.get("seeds", []))
    return EvidenceSubgraph(
        question=d.get("question", ""), retrieved=[tuple(x) for x in d.get("retrieved", [])], G_q=list(G_q),
        llm_entities=list(d.get("llm_entities", [])), E_q=list(d.get("E_q", [])),
        used_fallback=bool(d.get("used_fallback")), fallback_reason=d.get("fallback_reason"),
        matches={k: [(e, float(s)) for e, s in v] for k, v in d.get("matches", {}).items()},
        seeds=seeds, G_tmp=G_tmp, components=seed_components(G_tmp, seeds), weights=weights,
        kept=[t for t in G_tmp if t in set(kept)], pruned=[t for t in G_tmp if t in set(pruned)],
        weighting=d.get("weighting", "cosine"))


def round_from_trace(r: dict, kg: Optional[KnowledgeGraph] = None) -> CaseRound:
    """One trace round as a :class:`CaseRound`; ``G_q`` is re-read from ``kg`` (the trace keeps its size only)."""
    retrieved = [(str(p), float(s)) for p, s in r.get("retrieved", [])]
    G_q = kg.triples_of([p for p, _ in retrieved]) if kg is not None else []
    sub_d = r.get("subgraph")
    sub = subgraph_from_trace(sub_d, G_q) if sub_d else None
    rw = r.get("rewrite") or {}
    return CaseRound(
        iteration=int(r.get("iteration", 0)), query=r.get("query", ""), retrieved=retrieved, G_q=G_q,
        ner_raw=r.get("ner_raw"), llm_entities=list(sub.llm_entities) if sub else [],
        E_q=list(sub.E_q) if sub else [], used_fallback=bool(sub.used_fallback) if sub else False,
        fallback_reason=sub.fallback_reason if sub else None, matches=dict(sub.matches) if sub else {},
        seeds=list(sub.seeds) if sub else [], subgraph=sub, evidence=r.get("evidence", ""),
        rewrite=rw.get("question"), rewrite_raw=rw.get("raw"), rewrite_malformed=bool(rw.get("malformed")),
        rewrite_retrieved=[(str(p), float(s)) for p, s in r.get("rewrite_retrieved", [])],
        new_passages=list(r.get("new_passages", [])), reflection=r.get("reflection"), final=r.get("final"))


def case_from_output(ws: Workspace, question: Question, output: MethodOutput) -> CaseStudy:
    """A :class:`CaseStudy` from KGIR-RAG's output for ``question`` run in ``ws``."""
    trace = output.trace or {}
    rounds = [round_from_trace(r, ws.kg) for r in trace.get("rounds", [])]
    return CaseStudy(dataset=ws.dataset.name, qid=question.qid, question=question.question,
                     gold_answers=list(question.answers), gold_pids=list(question.gold_pids),
                     answer=output.answer, answered_by=trace.get("answered_by"),
                     em=best_em(output.answer, question.answers), f1=best_f1(output.answer, question.answers),
                     rounds=rounds, output=output, ws=ws)


def run_case(ws: Workspace, question: Question, method: Any = None) -> CaseStudy:
    """Run KGIR-RAG (``method``, default the full method) on one question of ``ws`` with its full trace."""
    if method is None:
        from .methods.kgir import KGIRRAG

        method = KGIRRAG()
    [out] = method.run(ws, [question])
    return case_from_output(ws, question, out)


def find_question(dataset: Dataset, qid: str) -> Question:
    """The question ``qid`` of ``dataset``; the error lists a few valid ids."""
    for q in dataset.questions:
        if q.qid == str(qid):
            return q
    some = [q.qid for q in dataset.questions[:5]]
    raise CaseStudyError(f"parameter 'qid': no question {qid!r} in dataset {dataset.name!r} "
                         f"({len(dataset.questions)} questions, e.g. {some})")


def case_from_dataset(cfg: Config, dataset: str, qid: str, llm=None, method: Any = None) -> CaseStudy:
    """KGIR-RAG on question ``qid`` of ``dataset`` (the run's workspace: its KG, indexes and LLM cache)."""
    from .pipeline import workspace

    ws = workspace(cfg, dataset, llm=llm, progress=False)
    return run_case(ws, find_question(ws.dataset, qid), method)


def _passages(items: Sequence) -> list:
    """User-supplied ``(title, text)`` pairs as :class:`Passage` objects, checked."""
    if not items:
        raise CaseStudyError("parameter 'free_passages': give at least one (title, text) pair")
    out, seen = [], set()
    for i, item in enumerate(items):
        if isinstance(item, dict):
            item = (item.get("title"), item.get("text"))
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise CaseStudyError(f"parameter 'free_passages': item {i} is not a (title, text) pair: {item!r}")
        title, text = item
        if not isinstance(title, str) or not isinstance(text, str) or not text.strip():
            raise CaseStudyError(f"parameter 'free_passages': item {i} needs a string title and a non-empty text")
        pid = passage_id(title, text)
        if pid not in seen:
            seen.add(pid)
            out.append(Passage(pid, title, text))
    return out


def free_workspace(cfg: Config, question: Question, passages: Sequence[Passage], llm=None,
                   encoder=None) -> Workspace:
    """A Workspace over a user-supplied corpus: dense index, and a KG extracted from every passage (§2.1)."""
    from .kg.extract import update_kg
    from .llm import build_llm
    from .pipeline import reranker
    from .retrieval import DenseIndex, Encoder

    llm = llm or build_llm(cfg, progress=False)
    ds = Dataset(FREE_DATASET, [question], Corpus(list(passages)))
    encoder = encoder or Encoder(cfg.embed_model, cfg.embed_batch_size)
    dense = DenseIndex(ds.corpus.passages, encoder, cfg.run_dir / "cache" / "embeddings", progress=False)
    kg = KnowledgeGraph()
    update_kg(kg, llm, ds.corpus.passages, stage="extract", max_tokens=cfg.max_tokens("extract"))

    def ensure(pids: Sequence[str]) -> None:
        missing = kg.missing(pids)
        if missing:
            update_kg(kg, llm, [ds.corpus[p] for p in missing], stage="extract", max_tokens=cfg.max_tokens("extract"))

    return Workspace(cfg=cfg, dataset=ds, llm=llm, dense=dense, kg=kg, reranker=reranker(cfg), ensure_kg=ensure)


def case_from_passages(cfg: Config, question: str, passages: Sequence, answers: Sequence[str] = (),
                       llm=None, encoder=None, method: Any = None) -> CaseStudy:
    """KGIR-RAG on a free ``question`` over user-supplied ``passages`` (``(title, text)`` pairs).

    The passages' triples are extracted first with the profile's LLM (cached);
    ``answers`` (gold answer and aliases, may be empty) score the final answer.
    There are no gold passages, so no Recall@k.
    """
    if not isinstance(question, str) or not question.strip():
        raise CaseStudyError("parameter 'free_question': needs a non-empty question")
    if isinstance(answers, str):
        answers = [answers]
    ps = _passages(passages)
    q = Question(FREE_QID, question.strip(), tuple(str(a) for a in answers), (), FREE_DATASET, None)
    ws = free_workspace(cfg, q, ps, llm=llm, encoder=encoder)
    return run_case(ws, q, method)


# ----------------------------------------------------------------------------- baselines
def trace_files(cfg: Config) -> list:
    """Every ``traces/<method>/<dataset>.jsonl`` of the run directory."""
    root = cfg.run_dir / "traces"
    return sorted(root.glob("*/*.trace.jsonl")) if root.exists() else []


def _read_jsonl(path: Path) -> list:
    """A trace file's records (:func:`kgir_lib.traces.read_traces`: a torn last line is dropped, else an error)."""
    from .traces import read_traces

    return read_traces(path)


def _method_of(record: dict, path: Path) -> str:
    trace = record.get("trace") or {}
    return str(trace.get("method") or path.parent.name)


def traced_answers(cfg: Config, dataset: str, qid: str) -> dict:
    """``{method: (answer, ranked_pids)}`` for question ``qid`` from the run's trace files."""
    out = {}
    for path in trace_files(cfg):
        if trace_dataset(path) != dataset:
            continue
        for rec in _read_jsonl(path):
            if str(rec.get("qid")) == str(qid):
                found = (rec.get("answer", ""), rec.get("ranked_pids", []))
                out.setdefault(_method_of(rec, path), found)  # by the trace's method name ...
                out.setdefault(path.parent.name, found)        # ... and by the folder (the method's key)
    return out


def baseline_answers(case: CaseStudy, methods: Optional[Iterable[str]] = None, run_missing: bool = True,
                     use_traces: bool = True) -> pd.DataFrame:
    """What every other method answered for the case's question, scored like KGIR-RAG's answer.

    ``methods`` are registry keys for :func:`kgir_lib.methods.build_method` (default:
    every method of notebook 05 except KGIR-RAG and the ablation variants). An
    answer already in the run's traces (notebooks 04/05)
    is read from there (``source = "trace"``); otherwise the method runs now on
    this one question (``source = "run"``; cached). KGIR-RAG's own row comes first.
    """
    from .methods import DEFAULT_METHODS, build_method

    names = list(methods) if methods is not None else default_baselines(DEFAULT_METHODS)
    traced = traced_answers(case.ws.cfg, case.dataset, case.qid) if use_traces and case.dataset != FREE_DATASET else {}
    q = find_question(case.ws.dataset, case.qid)
    rows = [_answer_row(KGIR_METHOD, case.answer, case.output.ranked_pids, q, "this case")]
    for name in names:
        method = build_method(name)
        label = getattr(method, "name", name)
        if label == KGIR_METHOD:
            continue
        hit = next((traced[k] for k in (label, getattr(method, "key", None), name) if k in traced), None)
        if hit is not None:
            rows.append(_answer_row(label, *hit, q, "trace"))
        elif run_missing:
            [out] = method.run(case.ws, [q])
            rows.append(_answer_row(label, out.answer, out.ranked_pids, q, "run"))
    return pd.DataFrame(rows).set_index("method")


def default_baselines(keys: Iterable[str]) -> list:
    """The baselines of a method list: no KGIR-RAG key and no ablation variant (``*_no_*``)."""
    return [k for k in keys if not k.startswith("kgir") and "_no_" not in k]


def _answer_row(method: str, answer: str, ranked: Sequence[str], q: Question, source: str) -> dict:
    row = {"method": method, "answer": answer, "EM": 100 * best_em(answer, q.answers),
           "F1": 100 * best_f1(answer, q.answers)}
    if q.gold_pids:
        row.update({f"R@{k}": 100 * recall_at_k(ranked, q.gold_pids, k) for k in (2, 5)})
    row["source"] = source
    return row


# ----------------------------------------------------------------------------- the Fig. 6 pattern
def _mentions(text: str, entity: str) -> bool:
    n = normalize_name(entity)
    return len(n) >= 3 and f" {n} " in f" {normalize_name(text)} "


_TRIPLE_ECHO = re.compile(r"^\s*[\(\[].*[\)\]]\s*\??\s*$")  # "(h, r, t)" or "(h, r t)?" copied whole
_FUNCTION_WORDS = {"the", "a", "an", "of", "in", "on", "at", "to", "for", "and", "or", "by", "with", "from", "is",
                   "was", "were", "are", "be", "what", "who", "whom", "which", "when", "where", "how", "why", "did",
                   "does", "do", "that", "this", "it", "its", "as"}


def is_question_rewrite(question: str, rewrite: Optional[str]) -> bool:
    """Whether ``rewrite`` reads as a rewrite of ``question`` (eq. 8), not an echo of a triple or of the prompt.

    It must not be wholly bracketed like a ``(h, r, t)`` triple, and must keep at least one
    content word of the question (a rewrite changes the multi-hop part, not the
    whole question).
    """
    if not rewrite or _TRIPLE_ECHO.match(rewrite):
        return False
    q_words = set(normalize_name(question).split()) - _FUNCTION_WORDS
    return bool(q_words & set(normalize_name(rewrite).split()))


def bridge_entities(question: str, rewrite: Optional[str], G_Ans: Sequence) -> list:
    """Entities of ``G_Ans`` that the rewrite names and the original question does not (the bridge, Fig. 6).

    Empty when the rewrite is not a question rewrite (:func:`is_question_rewrite`):
    a small model that copies a triple into the "rewrite" names the triple's
    entities without having rewritten anything.
    """
    if not is_question_rewrite(question, rewrite):
        return []
    ents = dict.fromkeys(e for t in G_Ans for e in ((t[0], t[2]) if isinstance(t, (list, tuple)) else (t.head, t.tail)))
    return [e for e in ents if _mentions(rewrite, e) and not _mentions(question, e)]


def bridge_features(record: dict) -> dict:
    """How far one KGIR-RAG trace follows Fig. 6 (a record is a trace-file line or a bare trace)."""
    trace = record.get("trace", record)
    rounds = trace.get("rounds", [])
    question = trace.get("question", "")
    answer = record.get("answer", trace.get("answer", "")) or ""
    gold = trace.get("gold_answers", [])
    r1 = rounds[0] if rounds else {}
    refl1 = r1.get("reflection") or {}
    rewrite1 = (r1.get("rewrite") or {}).get("question")
    g_ans1 = (r1.get("subgraph") or {}).get("G_Ans", [])
    bridges = bridge_entities(question, rewrite1, g_ans1)
    answered_round = None
    for r in rounds:
        if (r.get("reflection") or {}).get("answerable"):
            answered_round = int(r.get("iteration", 0))
            break
    feats = {
        "qid": str(trace.get("qid", record.get("qid", ""))),
        "question": question,
        "rounds": len(rounds),
        "unanswered_round1": bool(refl1) and not refl1.get("answerable", False),
        "missing_round1": bool(refl1) and not refl1.get("answerable", False) and bool(refl1.get("missing")),
        "rewrite_1": rewrite1 or "",
        "bridge_entities": bridges,
        "bridge_rewrite": bool(bridges),
        "answered_round": answered_round,
        "answered_round2": answered_round == 2,
        "answer": answer,
        "gold": " | ".join(map(str, gold)),
        "EM": 100 * best_em(answer, gold) if gold else 0.0,
        "F1": 100 * best_f1(answer, gold) if gold else 0.0,
    }
    feats["figure6"] = feats["unanswered_round1"] and feats["bridge_rewrite"] and feats["answered_round2"]
    feats["figure6_correct"] = feats["figure6"] and feats["EM"] == 100.0
    # ranking: the structural steps first (bridge rewrite weighs most), then correctness
    feats["score"] = (2.0 * feats["bridge_rewrite"] + feats["unanswered_round1"] + 0.5 * feats["missing_round1"]
                      + feats["answered_round2"]
                      + 0.5 * (answered_round is not None and answered_round >= 2)
                      + feats["EM"] / 100 + 0.5 * feats["F1"] / 100)
    return feats


def find_bridge_cases(traces: Iterable[dict], dataset: Optional[str] = None) -> pd.DataFrame:
    """Rank KGIR-RAG traces by how closely they follow Fig. 6, best first.

    A full match (``figure6``) is: round 1's reflection did not answer, round 1's
    rewrite is a rewrite of the question that names an entity of round 1's
    ``G_Ans`` absent from the question (the bridge), and round 2's reflection
    answered; ``figure6_correct`` adds EM = 100. ``missing_round1`` marks a round-1
    verdict that named the missing information (as in Fig. 5) rather than a
    malformed reply.
    Only full-method KGIR-RAG traces count (ablation variants are skipped).
    Ties keep the input order.
    """
    rows = []
    for rec in traces:
        trace = rec.get("trace", rec)
        if trace.get("method", KGIR_METHOD) != KGIR_METHOD or trace.get("variant", "full") != "full":
            continue
        feats = bridge_features(rec)
        feats["dataset"] = rec.get("dataset") or trace.get("dataset") or dataset or ""
        rows.append(feats)
    cols = ["dataset", "qid", "score", "figure6", "figure6_correct", "unanswered_round1", "missing_round1",
            "bridge_rewrite",
            "answered_round2", "answered_round", "rounds", "bridge_entities", "question", "rewrite_1", "answer",
            "gold", "EM", "F1"]
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values("score", ascending=False, kind="stable").reset_index(drop=True)


def trace_dataset(path: Path) -> str:
    """The dataset a trace file belongs to (``<dataset>.trace.jsonl``)."""
    return path.name.removesuffix(".jsonl").removesuffix(".trace")


def load_kgir_traces(cfg: Config, datasets: Optional[Iterable[str]] = None) -> list:
    """Every full KGIR-RAG trace record in the run directory, each tagged with its ``dataset``."""
    wanted = set(datasets) if datasets is not None else None
    out, seen = [], set()
    for path in trace_files(cfg):
        if wanted is not None and trace_dataset(path) not in wanted:
            continue
        for rec in _read_jsonl(path):
            trace = rec.get("trace") or {}
            key = (trace_dataset(path), str(rec.get("qid")))
            if trace.get("method") == KGIR_METHOD and trace.get("variant", "full") == "full" and key not in seen:
                seen.add(key)  # the same question traced by two notebooks counts once
                out.append({**rec, "dataset": trace_dataset(path)})
    return out


# ----------------------------------------------------------------------------- the paper's own example
# KGIR-RAG Fig. 6 as a free question: a small corpus written for this suite (facts, not text copied from
# a dataset), with distractors, so the bridge (Compaq) must be found before the answer (Hewlett-Packard).
FIGURE6_EXAMPLE = {
    "question": "Which company merged in 2002 with the top PC maker of 1994?",
    "answers": ["Hewlett-Packard", "HP"],
    "passages": [
        ("Compaq", "Compaq was an American computer company. In 1994 Compaq became the largest "
                   "manufacturer of personal computers in the world, ahead of IBM and Apple."),
        ("Hewlett-Packard", "Hewlett-Packard (HP) was an American technology company. In 2002 Hewlett-Packard "
                            "completed its merger with Compaq, the personal computer maker."),
        ("IBM Personal Computer", "IBM sold its personal computer business to Lenovo in 2005."),
        ("Dell", "Dell is a computer company founded by Michael Dell in 1984 in Austin, Texas."),
        ("Apple Inc.", "Apple released the Macintosh personal computer in 1984."),
        ("Gateway, Inc.", "Gateway was a computer maker; it was acquired by Acer in 2007."),
    ],
}


# ----------------------------------------------------------------------------- notebook display
def _show(*objs) -> None:
    from IPython.display import Markdown, display

    for o in objs:
        display(Markdown(o) if isinstance(o, str) else o)


def repeated_rounds(case: CaseStudy) -> dict:
    """``{round: earlier round}`` for rounds whose query and retrieval repeat an earlier round's.

    When a rewrite is unusable the loop keeps the question, so the next round
    retrieves the same passages and builds the same subgraph; the display says
    so instead of printing the same tables again.
    """
    out: dict = {}
    for i, r in enumerate(case.rounds):
        for prev in case.rounds[:i]:
            if prev.query == r.query and prev.retrieved == r.retrieved and prev.iteration not in out:
                out[r.iteration] = prev.iteration
                break
    return out


def show_retrieval(case: CaseStudy, chars: int = 160) -> None:
    """Each round's query and its dense top-k passages (eq. 2), gold passages marked."""
    same = repeated_rounds(case)
    for r in case.rounds:
        if r.iteration in same:
            _show(f"**Round {r.iteration}** — the same query and passages as round {same[r.iteration]}")
            continue
        _show(f"**Round {r.iteration}** — query: *{r.query}*", case.passages_frame(r.iteration, chars=chars))


def show_ner(case: CaseStudy) -> None:
    """Each round's raw NER reply (eq. 4), the entities kept, and their n-gram matches in ``G_q`` (eq. 5)."""
    same = repeated_rounds(case)
    for r in case.rounds:
        if r.subgraph is None:
            _show(f"**Round {r.iteration}**: no subgraph stage (ablation variant)")
            continue
        if r.iteration in same:
            _show(f"**Round {r.iteration}** — the same NER, matches and seeds as round {same[r.iteration]}")
            continue
        fb = f" — fallback used ({r.fallback_reason})" if r.used_fallback else ""
        _show(f"**Round {r.iteration}** — |G_q| = {len(r.G_q)} triples; NER reply: `{(r.ner_raw or '').strip()}`{fb}; "
              f"seeds: {', '.join(r.seeds) or '(none)'}", case.matches_frame(r.iteration))


def draw_rounds(case: CaseStudy, width: float = 6.0):
    """One panel per round: ``G_tmp`` with ``G_Ans`` highlighted (:func:`kgir_lib.viz.draw_subgraph`)."""
    import matplotlib.pyplot as plt

    from .viz import draw_subgraph, legend_handles

    same = repeated_rounds(case)
    rounds = [r for r in case.rounds if r.subgraph is not None and r.iteration not in same] or case.rounds[:1]
    fig, axes = plt.subplots(1, max(len(rounds), 1), figsize=(width * max(len(rounds), 1), width * 0.8),
                             squeeze=False)
    for ax, r in zip(axes[0], rounds):
        if r.subgraph is None:
            ax.set_axis_off()
            continue
        also = [k for k, v in same.items() if v == r.iteration]
        repeat = (f" (round {also[0]} repeats it)" if len(also) == 1 else
                  f" (rounds {', '.join(map(str, also))} repeat it)" if also else "")
        label = f"round {r.iteration}{repeat}"
        draw_subgraph(ax, r.subgraph, title=textwrap.fill(f"{label}: {r.query}", 70))
    fig.legend(handles=legend_handles(), loc="lower center", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def show_subgraphs(case: CaseStudy) -> None:
    """Each round's ``G_Ans`` triples with their weights (eq. 7)."""
    same = repeated_rounds(case)
    for r in case.rounds:
        if r.iteration in same:
            _show(f"**Round {r.iteration}** — the same G_tmp and G_Ans as round {same[r.iteration]}")
        elif r.subgraph is not None:
            _show(f"**Round {r.iteration}** — G_tmp {len(r.G_tmp)} triples, {len(r.subgraph.components)} "
                  f"component(s) with a seed, G_Ans {len(r.G_Ans)} triples:", case.triples_frame(r.iteration, "G_Ans"))


def show_rewrites(case: CaseStudy) -> None:
    """Each rewrite (eq. 8): the question before, the raw reply, the parsed rewrite, the bridge entities."""
    for r in case.rounds:
        if r.rewrite_raw is None:
            continue
        bridges = bridge_entities(case.question, r.rewrite, r.G_Ans)
        bad = " (malformed: the previous question was kept)" if r.rewrite_malformed else ""
        _show(f"**Round {r.iteration}** — *{r.query}* → **{r.rewrite}**{bad}  \n"
              f"raw reply: `{(r.rewrite_raw or '').strip()}`  \n"
              f"entities of G_Ans the rewrite introduces: {', '.join(bridges) or '(none)'}")
        if r.new_passages:
            _show("passages the rewrite retrieved that round's first retrieval had not:",
                  case.passages_frame(r.iteration, "new"))


def show_reflections(case: CaseStudy) -> None:
    """Each reflection verdict (Fig. 5) with its reasoning, and any forced final reader call."""
    for r in case.rounds:
        if r.reflection:
            v = r.reflection
            what = f"answer **{v.get('answer')}**" if v.get("answerable") else (
                f"missing: *{v.get('missing')}*" if v.get("missing") else "no verdict (malformed reply)")
            _show(f"**Round {r.iteration}**{' (last round)' if v.get('final') else ''} — {what}  \n"
                  f"reasoning: {v.get('reasoning') or '(none)'}  \nraw reply: `{(v.get('raw') or '').strip()}`")
        if r.final:
            _show(f"**Round {r.iteration}** — final reader call ({'forced' if r.final.get('forced') else 'ablation'}):"
                  f" question *{r.final.get('question')}* → **{r.final.get('answer')}**")


def display_case(case: CaseStudy, draw: bool = True):
    """Every stage of ``case`` in order; returns the subgraph figure (or ``None``)."""
    _show(f"### {case.question}", case.steps_frame())
    _show("#### Retrieval (eq. 2)")
    show_retrieval(case)
    _show("#### NER and n-gram matches (eq. 4-5)")
    show_ner(case)
    fig = None
    if draw:
        _show("#### G_tmp and G_Ans (eq. 5-7)")
        import matplotlib.pyplot as plt

        fig = draw_rounds(case)
        _show(fig)
        plt.close(fig)  # shown once; still savable
    show_subgraphs(case)
    _show("#### Rewrites (eq. 8)")
    show_rewrites(case)
    _show("#### Reflection (Fig. 5)")
    show_reflections(case)
    _show("#### Result", case.result_frame())
    return fig
