"""Building a case study: a KGIR-RAG trace as a :class:`~kgir_lib.notebook.case.records.CaseStudy`, and running one.

- :func:`case_from_dataset`: KGIR-RAG on one question of a dataset (the run's workspace, its KG,
  indexes and LLM cache; :func:`kgir_lib.pipeline.workspace`);
- :func:`case_from_pipeline`: a free question over a small corpus the user supplies (checked by
  :func:`checked_passages`), indexed through the public API (:meth:`kgir_lib.api.KGIRPipeline.index`: its
  triples are extracted with the profile's LLM first, the offline stage of §2.1, nothing stored);
- :func:`case_from_output`: trace -> case (rounds read by :meth:`LoopRound.from_dict`).

:data:`FIGURE6_EXAMPLE` is the paper's own Fig. 6 question over a six-passage corpus written for this
suite, read from the package data file ``kgir_lib/examples/figure6.json``.
"""
from __future__ import annotations

from typing import Any, Sequence

from ...api import KGIRPipeline, passages_of
from ...config import Config
from ...data import Dataset, Passage, Question, load_example
from ...eval.metrics import best_em, best_f1
from ...gold import GoldHop, chain_bridges
from ...kgir.rounds import trace_rounds
from ...methods.base import MethodOutput, Workspace
from .records import FREE_DATASET, FREE_QID, CaseStudy, CaseStudyError


FIGURE6_EXAMPLE = load_example("figure6")


def case_from_output(ws: Workspace, question: Question, output: MethodOutput) -> CaseStudy:
    """A :class:`CaseStudy` from KGIR-RAG's output for ``question`` run in ``ws``."""
    trace = output.trace or {}
    rounds = trace_rounds(trace, ws.kg)
    return CaseStudy(dataset=ws.dataset.name, qid=question.qid, question=question.question,
                     gold_answers=list(question.answers), gold_pids=list(question.gold_pids),
                     answer=output.answer, answered_by=trace.get("answered_by"),
                     em=best_em(output.answer, question.answers), f1=best_f1(output.answer, question.answers),
                     rounds=rounds, output=output, ws=ws)


def run_case(ws: Workspace, question: Question, method: Any = None) -> CaseStudy:
    """Run KGIR-RAG (``method``, default the full method) on one question of ``ws`` with its full trace."""
    if method is None:
        from ...kgir.variants import KGIRRAG

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


def case_from_dataset(cfg: Config, dataset: str, qid: str, *, llm=None, method: Any = None) -> CaseStudy:
    """KGIR-RAG on question ``qid`` of ``dataset`` (the run's workspace: its KG, indexes and LLM cache)."""
    from ...pipeline import workspace

    ws = workspace(cfg, dataset, llm=llm, progress=False)
    return run_case(ws, find_question(ws.dataset, qid), method)


def checked_passages(passages: Sequence) -> list:
    """The notebook's ``free_passages`` as passages (:func:`kgir_lib.api.passages_of`), checked."""
    try:
        return passages_of(passages, "free_passages")
    except ValueError as exc:
        raise CaseStudyError(str(exc)) from None


def free_gold_hops(decomposition: Sequence, passages: Sequence[Passage]) -> tuple:
    """The gold hops of a free question (:class:`~kgir_lib.gold.GoldHop`) from ``{question, answer, support}``
    items, ``support`` the title of one of ``passages``; a CaseStudyError names a bad item."""
    by_title = {p.title: p.pid for p in passages}
    hops = []
    for i, hop in enumerate(decomposition):
        if not isinstance(hop, dict) or not all(isinstance(hop.get(k), str) for k in ("question", "answer", "support")):
            raise CaseStudyError(f"parameter 'decomposition': item {i} needs string 'question', 'answer' and 'support'")
        if hop["support"] not in by_title:
            raise CaseStudyError(f"parameter 'decomposition': item {i}'s support {hop['support']!r} is not a passage "
                                 f"title ({sorted(by_title)[:6]})")
        hops.append(GoldHop(hop["question"], hop["answer"], by_title[hop["support"]], hop["support"]))
    return tuple(hops)


def _free_question(question: str, answers: Sequence[str], decomposition: Sequence, passages: Sequence) -> Question:
    """The free question as a :class:`Question` of the free dataset: its gold answers and, from ``decomposition``
    (:func:`free_gold_hops` over ``passages``), its gold chain and passages; a CaseStudyError names a bad one."""
    hops = free_gold_hops(decomposition, passages)
    answers = tuple(str(a) for a in answers)
    gold_pids = tuple(dict.fromkeys(h.pid for h in hops))
    return Question(FREE_QID, question.strip(), answers, gold_pids, FREE_DATASET, len(hops) or None, hops,
                    chain_bridges(hops, question.strip(), answers))


def _checked(question: str, answers) -> tuple:
    if not isinstance(question, str) or not question.strip():
        raise CaseStudyError("parameter 'free_question': needs a non-empty question")
    if answers is None:
        answers = ()
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, (list, tuple)) or not all(isinstance(a, str) for a in answers):
        raise CaseStudyError(f"parameter 'free_answers': a list of answer strings, got {answers!r}")
    return question, answers


def case_from_pipeline(rag: KGIRPipeline, question: str, answers: Sequence[str] = (), *,
                       decomposition: Sequence = ()) -> CaseStudy:
    """KGIR-RAG (the pipeline's method) on a free ``question`` over the passages the public API indexed
    (:meth:`kgir_lib.api.KGIRPipeline.index`).

    ``answers`` (gold answer and aliases, may be empty) score the final answer. ``decomposition``
    (:func:`free_gold_hops`) gives the question its gold chain, which the oracle study variants read
    (``kgir_oracle_rewrite``: the ideal rewrite), and its gold passages, the hops' supporting passages (as MuSiQue's
    are, §3.3.3), so the case reports Recall@k and marks them in what the reflection and the reader read; without
    one there are no gold passages and no Recall@k. KGIR-RAG itself reads no gold.
    """
    question, answers = _checked(question, answers)
    ws = rag.workspace
    if ws is None:
        raise CaseStudyError("a free question needs a pipeline that has indexed its passages (KGIRPipeline.index)")
    q = _free_question(question, answers, decomposition, ws.dataset.corpus.passages)
    [out] = rag.answer([q])
    return case_from_output(ws, q, out)
