"""Building a case study: a KGIR-RAG trace as a :class:`~kgir_lib.case_records.CaseStudy`, and running one.

- :func:`case_from_dataset`: KGIR-RAG on one question of a dataset (the run's workspace, its KG,
  indexes and LLM cache; :func:`kgir_lib.pipeline.workspace`);
- :func:`case_from_passages`: a free question over a small corpus the user supplies; its triples are
  extracted with the profile's LLM first (the offline stage of §2.1), in a workspace built by the same
  :func:`kgir_lib.pipeline.workspace` (nothing stored);
- :func:`subgraph_from_trace`, :func:`round_from_trace`, :func:`case_from_output`: trace -> case.

:data:`FIGURE6_EXAMPLE` is the paper's own Fig. 6 question over a six-passage corpus written for this
suite, read from the package data file ``kgir_lib/examples/figure6.json``.
"""
from __future__ import annotations

import json
from importlib import resources
from typing import Any, Optional, Sequence

from .case_records import FREE_DATASET, FREE_QID, CaseRound, CaseStudy, CaseStudyError
from .config import Config
from .data import Corpus, Dataset, Passage, Question, passage_id
from .kg import KnowledgeGraph, Triple
from .methods.base import MethodOutput, Workspace
from .metrics import best_em, best_f1
from .subgraph import EvidenceSubgraph, seed_components


def load_example(name: str = "figure6") -> dict:
    """A free-question example shipped as ``kgir_lib/examples/<name>.json``: question, answers, passages."""
    data = json.loads(resources.files("kgir_lib").joinpath("examples", f"{name}.json").read_text(encoding="utf-8"))
    return {"question": data["question"], "answers": list(data["answers"]),
            "passages": [tuple(p) for p in data["passages"]]}


FIGURE6_EXAMPLE = load_example("figure6")


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
    """A Workspace over a user-supplied corpus (:func:`kgir_lib.pipeline.workspace`, KG in memory only),
    with the triples of every passage extracted first (§2.1)."""
    from .pipeline import workspace

    ds = Dataset(FREE_DATASET, [question], Corpus(list(passages)))
    ws = workspace(cfg, ds, llm=llm, progress=False, encoder=encoder, store=False)
    ws.ensure_kg([p.pid for p in ds.corpus.passages])
    return ws


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
