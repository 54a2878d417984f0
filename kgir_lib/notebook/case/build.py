"""Building a case study: a KGIR-RAG trace as a :class:`~kgir_lib.notebook.case.records.CaseStudy`, and running one.

- :func:`case_from_dataset`: KGIR-RAG on one question of a dataset (the run's workspace, its KG,
  indexes and LLM cache; :func:`kgir_lib.pipeline.workspace`);
- :func:`case_from_passages`: a free question over a small corpus the user supplies; its triples are
  extracted with the profile's LLM first (the offline stage of §2.1), in a workspace built by the same
  :func:`kgir_lib.pipeline.workspace` (nothing stored);
- :func:`case_from_output`: trace -> case (rounds read by :meth:`LoopRound.from_dict`).

:data:`FIGURE6_EXAMPLE` is the paper's own Fig. 6 question over a six-passage corpus written for this
suite, read from the package data file ``kgir_lib/examples/figure6.json``.
"""
from __future__ import annotations

import json
from importlib import resources
from typing import Any, Sequence

from ...config import Config
from ...data import Corpus, Dataset, Passage, Question, passage_id
from ...eval.metrics import best_em, best_f1
from ...gold import GoldHop, chain_bridges
from ...kgir.rounds import trace_rounds
from ...methods.base import MethodOutput, Workspace
from .records import FREE_DATASET, FREE_QID, CaseStudy, CaseStudyError


def load_example(name: str = "figure6") -> dict:
    """A free-question example shipped as ``kgir_lib/examples/<name>.json``: question, answers, passages, and,
    where the example knows them, its gold ``bridge`` entity, the ``next_hop`` passage titles and the gold
    ``decomposition`` (hops ``{question, answer, support}``, ``support`` a passage title) (else None, [], [])."""
    data = json.loads(resources.files("kgir_lib").joinpath("examples", f"{name}.json").read_text(encoding="utf-8"))
    return {"question": data["question"], "answers": list(data["answers"]),
            "passages": [tuple(p) for p in data["passages"]], "bridge": data.get("bridge"),
            "next_hop": list(data.get("next_hop", [])), "decomposition": list(data.get("decomposition", []))}


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


def case_from_dataset(cfg: Config, dataset: str, qid: str, llm=None, method: Any = None) -> CaseStudy:
    """KGIR-RAG on question ``qid`` of ``dataset`` (the run's workspace: its KG, indexes and LLM cache)."""
    from ...pipeline import workspace

    ws = workspace(cfg, dataset, llm=llm, progress=False)
    return run_case(ws, find_question(ws.dataset, qid), method)


def _passages(items: Sequence) -> list:
    """User-supplied ``(title, text)`` pairs as :class:`Passage` objects, checked."""
    if not isinstance(items, (list, tuple)):
        raise CaseStudyError(f"parameter 'free_passages': a list of (title, text) pairs, got "
                             f"{type(items).__name__}")
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
    from ...pipeline import workspace

    ds = Dataset(FREE_DATASET, [question], Corpus(list(passages)))
    ws = workspace(cfg, ds, llm=llm, progress=False, encoder=encoder, store=False)
    ws.ensure_kg([p.pid for p in ds.corpus.passages])
    return ws


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


def case_from_passages(cfg: Config, question: str, passages: Sequence, answers: Sequence[str] = (),
                       llm=None, encoder=None, method: Any = None, decomposition: Sequence = ()) -> CaseStudy:
    """KGIR-RAG (``method``, default the full method) on a free ``question`` over user-supplied ``passages``
    (``(title, text)`` pairs).

    The passages' triples are extracted first with the profile's LLM (cached);
    ``answers`` (gold answer and aliases, may be empty) score the final answer.
    ``decomposition`` (:func:`free_gold_hops`) gives the question its gold chain, which the oracle study
    variants read (``kgir_oracle_rewrite``: the ideal rewrite), and its gold passages, the hops' supporting
    passages (as MuSiQue's are, §3.3.3), so the case reports Recall@k and marks them in what the reflection and
    the reader read; without one there are no gold passages and no Recall@k. KGIR-RAG itself reads no gold.
    """
    if not isinstance(question, str) or not question.strip():
        raise CaseStudyError("parameter 'free_question': needs a non-empty question")
    if answers is None:
        answers = ()
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, (list, tuple)) or not all(isinstance(a, str) for a in answers):
        raise CaseStudyError(f"parameter 'free_answers': a list of answer strings, got {answers!r}")
    ps = _passages(passages)
    hops = free_gold_hops(decomposition, ps)
    answers = tuple(str(a) for a in answers)
    gold_pids = tuple(dict.fromkeys(h.pid for h in hops))
    q = Question(FREE_QID, question.strip(), answers, gold_pids, FREE_DATASET, len(hops) or None, hops,
                 chain_bridges(hops, question.strip(), answers))
    ws = free_workspace(cfg, q, ps, llm=llm, encoder=encoder)
    return run_case(ws, q, method)
