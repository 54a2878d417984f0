"""KGIR-RAG (paper §2.2-2.4, Algorithms 1-2) and its Table 7 ablations.

The loop, for every open question, round ``t = 1 .. max_iterations``::

    query_1 = q
    D_t     = dense top-k(query_t)                                  eq. 2
    G_Ans_t = evidence subgraph(query_t, D_t)       [stage kgir_ner]  Algorithm 1
    q'_t    = Rewrite(q, history, G_Ans_t)          [stage kgir_rewrite]  eq. 8
    D'_t    = dense top-k(q'_t)
    P_t     = reflection passages of D'_t (below)
    verdict = Reflection(q'_t, G_Ans_t, history, P_t) [stage kgir_reflect]
    answer  -> done;  missing -> history += (q'_t, missing), query_{t+1} = q'_t

Rewrite and Reflection see at most ``MAX_EVIDENCE_TRIPLES`` (20) ``G_Ans``
triples, heaviest first. In the last round the reflection prompt says it must answer; a question whose
reflection still gives no answer is answered by the shared reader (stage ``kgir_final``, recorded as
``forced``): the original question ``q``, ``G_Ans_T`` and ``P_T``.

Choices the paper leaves open:

- **Reflection passages** ``P_t`` (§2.4: the reflection combines the evidence
  subgraph, the rewrite history and "the passages the previous stage did not
  retrieve"): the passages of ``D'_t`` that are not in ``D_t`` come first, and
  the list is topped up with the best other passages of ``D'_t`` up to
  ``context_passages``. With only the new passages, a rewrite that returns the
  question unchanged (``D'_t = D_t``) leaves the reflection with no passage at
  all, and with an empty ``G_Ans`` it is blind (it could not
  answer a Fig. 6 question); topping up keeps the paper's emphasis on new passages and never
  shows nothing while ``D'_t`` is not empty.
- **Empty** ``G_Ans`` (no seed matched, or no triple around it): the step that
  fails is eq. 5 (matching ``E_q`` to the entities of ``G_q``); then Rewrite has
  no fact to substitute and returns the question, so ``D'_t = D_t``. With
  ``passages_when_empty=True`` (default) Rewrite and Reflection see the
  ``context_passages`` best passages of ``D_t`` in that round instead (as in the
  w/o-subgraph ablation, the paper's own stand-in for the subgraph); the trace
  records ``evidence_source`` ``"passages"`` and the stats count
  ``empty_subgraph_rounds``.
- **Reader questions**: every reader call (forced answer, w/o reflection, w/o
  rewrite) answers the *original* question ``q``; the rewrite's facts reach the
  reader through ``G_Ans`` and the rewritten question's retrieval.

Batching: every stage runs across all questions still open, as ONE
``llm.generate`` call per stage per round (so a vLLM server or engine is kept
full); retrieval is batched the same way.

Variants (paper Table 7, §3.4), switches of the same loop:

- ``"full"``: as above.
- ``"no_subgraph"``: no NER / subgraph; Rewrite and Reflection see the
  ``context_passages`` most similar passages of ``D_t`` instead of ``G_Ans_t``.
- ``"no_reflection"``: one round: subgraph, one rewrite, one retrieval with
  ``q'_1``, then the reader answers ``q`` from ``G_Ans_1`` and the top
  ``context_passages`` passages of ``D'_1`` (paper §3.4: "rewrite once with the
  subgraph, retrieve once, answer").
- ``"no_rewrite"``: one round: subgraph, then the reader answers ``q`` from
  ``G_Ans_1`` alone (no rewrite, no reflection, no iteration).

Final ranked passage list (for Recall@k, paper §3.3.3):

1. the source passages of ``G_Ans`` edges over all rounds, ordered by their
   best edge weight (ties: first seen);
2. then the retrievals with the rewritten questions ``D'_1 .. D'_T``,
   interleaved by round (1st of ``D'_1``, 1st of ``D'_2``, ..., then the 2nd of
   each, ...), so every round's rewrite counts within the top 5;
3. then ``D_1``, the retrieval with the original question; duplicates dropped.

``D_t`` for ``t > 1`` is the retrieval with ``q'_{t-1}``, i.e. ``D'_{t-1}``, so
it adds nothing. Without the subgraph (``no_subgraph``) step 1 is empty;
without the rewrite (``no_rewrite``) step 2 is.

Usable outputs: each round's trace records, per stage, whether
the reply was parsed as intended (``usable``: NER gave a JSON entity list with
an entity that occurs in the question; the rewrite a question; the reflection
an ``Answer:`` or ``Missing:`` line; the reader a short non-empty answer) and
whether it was cut at the token budget (``truncated``). :func:`usable_table`
turns traces into rates per stage; ``rounds_with_seed`` / ``rounds`` is the
seed-match rate.

Each :class:`MethodOutput` carries a JSON-serialisable trace: every round as a
:class:`~kgir_lib.methods.kgir_rounds.CaseRound` (``to_dict``: query, retrieval,
subgraph, rewrite (raw and parsed), new passages, reflection verdict (raw and
parsed), final reader call), the answer, who answered, and the LLM usage per
stage (:class:`~kgir_lib.llm.LLMUsage`). The tables read from traces
(:func:`trace_row`, :func:`usable_table`, ...) live in :mod:`kgir_lib.methods.kgir_rounds`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from ..progress import progress as tqdm  # one line per bar in executed notebooks

from ..data import Question
from ..llm import LLMUsage
from ..reader import answer_usable, format_passages, parse_answer, reader_request
from ..rewrite import (evidence_block, parse_reflection, parse_rewrite, reflection_requests, rewrite_requests,
                       verdict_request, with_verdict)
from ..subgraph import EvidenceSubgraph, build_subgraphs, format_triples, ner_usable, resolve_weighting, retrieve
from .base import MethodBase, MethodOutput, Workspace
from .kgir_rounds import (STAGES, USABLE_STAGES, CaseRound, FinalCall, Verdict, seed_match_rate,  # noqa: F401
                          trace_row, trace_rounds, trace_table, usable_counts, usable_table)
from .retrievers import interleave

VARIANTS = {
    "full": "KGIR-RAG",
    "no_subgraph": "KGIR-RAG w/o subgraph",
    "no_reflection": "KGIR-RAG w/o reflection",
    "no_rewrite": "KGIR-RAG w/o rewrite",
}
KEYS = {"full": "kgir", "no_subgraph": "kgir_no_subgraph", "no_reflection": "kgir_no_reflection",
        "no_rewrite": "kgir_no_rewrite"}
MAX_EVIDENCE_TRIPLES = 20


@dataclass
class _Open:
    """Loop state of one question."""

    q: Question
    query: str
    history: list = field(default_factory=list)
    rounds: list = field(default_factory=list)            # [CaseRound]
    usage: LLMUsage = field(default_factory=LLMUsage)
    stage_usage: dict = field(default_factory=dict)       # stage -> LLMUsage
    evidence_weights: dict = field(default_factory=dict)  # pid -> best G_Ans edge weight
    first_retrieval: list = field(default_factory=list)   # D_1 pids
    rewrite_retrievals: list = field(default_factory=list)  # [D'_t pids] by round
    answer: Optional[str] = None
    answered_by: Optional[str] = None
    final_question: Optional[str] = None
    final_context: Optional[str] = None

    def account(self, stage: str, result) -> None:
        self.usage.add(result)
        self.stage_usage.setdefault(stage, LLMUsage()).add(result)

    def ranked_pids(self) -> list:
        """G_Ans passages (best edge weight), then D'_1..D'_T interleaved by round, then D_1 (module docstring)."""
        return ranked_list(self.evidence_weights, self.rewrite_retrievals, self.first_retrieval)


def ranked_list(evidence_weights: dict, rewrite_retrievals: Sequence[Sequence[str]],
                first_retrieval: Sequence[str]) -> list:
    """KGIR-RAG's final ranked list: ``G_Ans`` source passages by their best edge weight
    (ties: first seen), then the rewrite retrievals ``D'_t`` interleaved by round, then ``D_1``; no duplicates."""
    evidence = sorted(evidence_weights, key=lambda p: -evidence_weights[p])  # stable: first seen
    return list(dict.fromkeys(evidence + interleave(rewrite_retrievals) + list(first_retrieval)))


def reflection_passages(first: Sequence[str], rewritten: Sequence[str], n: int) -> list:
    """``P_t``: the passages of ``D'_t`` (``rewritten``) not in ``D_t`` (``first``) first, topped up with the
    best other passages of ``D'_t``, ``n`` at most (module docstring: never blind when ``D'_t = D_t``)."""
    seen = set(first)
    new = [p for p in rewritten if p not in seen]
    return list(dict.fromkeys(new + list(rewritten)))[:n]


@dataclass
class KGIRRAG(MethodBase):
    """KGIR-RAG and its Table 7 ablations; see the module docstring for the loop and the ranked list.

    ``max_iterations``, ``top_k`` and ``ngram_threshold`` default (``None``) to the
    profile's values; ``edge_weight`` is ``"auto"`` (reranker if configured, else
    cosine of question and triple text), ``"reranker"``, ``"cosine"`` or ``"passage"``.
    ``name`` and ``key`` are the variant's (class-level tables ``VARIANTS`` and ``KEYS``).
    """

    variant: str = "full"
    max_iterations: Optional[int] = None
    top_k: Optional[int] = None
    ngram_threshold: Optional[float] = None
    edge_weight: Optional[str] = None
    passages_when_empty: bool = True

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown KGIR-RAG variant {self.variant!r} (choose from {sorted(VARIANTS)})")
        if self.max_iterations is not None and self.max_iterations < 1:
            raise ValueError(f"parameter 'max_iterations': must be >= 1, got {self.max_iterations}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"parameter 'top_k': must be >= 1, got {self.top_k}")
        if self.ngram_threshold is not None and not 0.0 <= self.ngram_threshold <= 1.0:
            raise ValueError(f"parameter 'ngram_threshold': must be in [0, 1], got {self.ngram_threshold}")
        resolve_weighting(self.edge_weight, None)  # validates the name
        self.stats: dict = {}

    @property
    def name(self) -> str:
        return VARIANTS[self.variant]

    @property
    def key(self) -> str:
        return KEYS[self.variant]

    @property
    def uses_kg(self) -> bool:  # (evaluate.run_fingerprint: only then does the KG matter)
        return self.variant != "no_subgraph"

    # ------------------------------------------------------------------ helpers
    def _rounds(self, ws: Workspace) -> int:
        if self.variant in ("no_reflection", "no_rewrite"):
            return 1
        return self.max_iterations or ws.cfg.max_iterations

    @staticmethod
    def _passages_text(ws: Workspace, pids: Sequence[str]) -> str:
        return format_passages(ws.passages(pids), ws.cfg.passage_chars)

    def _verdicts(self, ws: Workspace, open_: list, requests: list, replies: list, rounds: list,
                  last: bool) -> list:
        """Parse the reflection replies (Fig. 5); a reply with no verdict line gets the verdict turn
        (:func:`kgir_lib.rewrite.verdict_request`, one batched call). Usable rates are recorded for the
        first reply (``reflect``) and for the verdict turn (``reflect_verdict``)."""
        verdicts = []
        for s, res, r in zip(open_, replies, rounds):
            s.account("kgir_reflect", res)
            verdict = parse_reflection(res.text)
            self._count("reflection_malformed", int(verdict.malformed))
            r.reflection = Verdict(**verdict.to_dict(), raw=res.text, final=last)
            r.usable["reflect"], r.truncated["reflect"] = not verdict.malformed, res.truncated
            verdicts.append(verdict)
        redo = [i for i, v in enumerate(verdicts) if v.malformed]
        if not redo:
            return verdicts
        again = ws.llm.generate([verdict_request(requests[i], replies[i].text, last, ws.cfg.max_tokens("verdict"))
                                 for i in redo], stage="kgir_reflect_verdict")
        for i, res in zip(redo, again):
            s, r = open_[i], rounds[i]
            s.account("kgir_reflect_verdict", res)
            verdicts[i] = with_verdict(verdicts[i], res.text)
            self._count("verdict_turns")
            self._count("verdict_turns_malformed", int(verdicts[i].malformed))
            r.reflection = Verdict(**verdicts[i].to_dict(), raw=r.reflection.raw, final=last, verdict_raw=res.text)
            r.usable["reflect_verdict"], r.truncated["reflect_verdict"] = not verdicts[i].malformed, res.truncated
        return verdicts

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
                      "reflection_malformed": 0, "forced_answers": 0, "subgraphs": 0, "rounds_with_seed": 0,
                      "empty_subgraph_rounds": 0}
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
            rounds = [CaseRound(iteration=t, query=s.query, retrieved=[(p, float(x)) for p, x in d]) for s, d in zip(open_, D)]
            for s, d, r in zip(open_, D, rounds):
                s.rounds.append(r)
                if t == 1:
                    s.first_retrieval = [p for p, _ in d]
            # -- evidence subgraph (Algorithm 1): ONE NER call for all open questions
            subs: list = [None] * len(open_)
            if use_subgraph:
                subs = self._subgraphs(ws, open_, D, rounds, k)
            evidence = [self._evidence(ws, sub, d, r) for sub, d, r in zip(subs, D, rounds)]
            if self.variant == "no_rewrite":
                for s, sub, d in zip(open_, subs, D):
                    s.final_context = self._reader_context(ws, sub, [])
                open_ = []
                break
            # -- rewrite (eq. 8): ONE call
            rw = ws.llm.generate(rewrite_requests([s.q.question for s in open_], evidence,
                                                  [s.history for s in open_], max_tokens=cfg.max_tokens("rewrite")),
                                 stage="kgir_rewrite")
            rewrites = []
            for s, res, r in zip(open_, rw, rounds):
                s.account("kgir_rewrite", res)
                parsed = parse_rewrite(res.text)
                self._count("rewrite_malformed", int(parsed is None))
                rewrites.append(parsed or s.query)
                r.rewrite_raw, r.rewrite, r.rewrite_malformed = res.text, parsed or s.query, parsed is None
                r.rewrite_unchanged = (parsed or s.query).strip().lower() == s.query.strip().lower()
                r.usable["rewrite"], r.truncated["rewrite"] = parsed is not None, res.truncated
            # -- retrieval with the rewritten questions; the reflection's passages P_t
            D2 = retrieve(ws, rewrites, k)
            shown = []
            for s, d, d2, r in zip(open_, D, D2, rounds):
                first, second = [p for p, _ in d], [p for p, _ in d2]
                seen = set(first)
                shown.append(reflection_passages(first, second, n_ctx))
                s.rewrite_retrievals.append(second)
                r.rewrite_retrieved = [(p, float(x)) for p, x in d2]
                r.new_passages = [p for p in second if p not in seen][:n_ctx]
                r.reflection_passages = shown[-1]
            if self.variant == "no_reflection":
                for s, sub, d2 in zip(open_, subs, D2):
                    s.final_context = self._reader_context(ws, sub, [p for p, _ in d2[:n_ctx]])
                open_ = []
                break
            # -- reflection (Fig. 5): ONE call, then ONE verdict turn for the replies without a verdict line
            rq = reflection_requests(rewrites, evidence, [s.history for s in open_],
                                     [self._passages_text(ws, ps) for ps in shown], [last] * len(open_),
                                     [s.q.question for s in open_], max_tokens=cfg.max_tokens("reflect"))
            rf = ws.llm.generate(rq, stage="kgir_reflect")
            verdicts = self._verdicts(ws, open_, rq, rf, rounds, last)
            still = []
            for s, verdict, q2, sub, ps, r in zip(open_, verdicts, rewrites, subs, shown, rounds):
                if verdict.answerable:
                    s.answer, s.answered_by = verdict.answer, "reflection"
                elif last:
                    s.final_context = self._reader_context(ws, sub, ps, r.evidence_source == "passages")
                else:
                    s.history.append({"rewrite": q2, "missing": verdict.missing})
                    s.query = q2
                    still.append(s)
            open_ = still
        bar.close()
        self._final_answers(ws, states)
        return [self._output(s) for s in states]

    def _subgraphs(self, ws: Workspace, open_: Sequence[_Open], D: Sequence, rounds: Sequence[CaseRound], k: int) -> list:
        """Algorithm 1 for every open question (ONE batched NER call); records the subgraph in each round."""
        subs, ner = build_subgraphs(ws, [s.query for s in open_], D, k=k, threshold=self.ngram_threshold,
                                    weighting=self.edge_weight)
        for s, sub, res, r in zip(open_, subs, ner, rounds):
            s.account("kgir_ner", res)
            r.ner_raw, r.subgraph, r.G_q = res.text, sub, list(sub.G_q)
            r.n_G_q, r.n_G_tmp = len(sub.G_q), len(sub.G_tmp)
            r.usable["ner"], r.truncated["ner"] = ner_usable(res.text, s.query), res.truncated
            self._count("subgraphs")
            self._count("ner_fallbacks", int(sub.used_fallback))
            self._count("rounds_with_seed", int(bool(sub.seeds)))
            for tr in sub.kept:
                w = sub.weights.get(tr, 0.0)
                if tr.pid not in s.evidence_weights or w > s.evidence_weights[tr.pid]:
                    s.evidence_weights[tr.pid] = w
        return subs

    def _evidence(self, ws: Workspace, sub: Optional[EvidenceSubgraph], d: Sequence, r: CaseRound) -> str:
        """What Rewrite and Reflection see: ``G_Ans`` triples, or the best passages of ``D_t`` (w/o subgraph;
        an empty ``G_Ans`` with ``passages_when_empty``)."""
        top = [p for p, _ in d[:ws.cfg.context_passages]]
        if sub is None or (not sub.kept and self.passages_when_empty):
            if sub is not None:
                self._count("empty_subgraph_rounds")
            r.evidence_source = "passages"
            ev = evidence_block(passages_text=self._passages_text(ws, top))
        else:
            r.evidence_source = "subgraph"
            ev = evidence_block(format_triples(sub.ranked_evidence(), MAX_EVIDENCE_TRIPLES))
        r.evidence = ev
        return ev

    # ------------------------------------------------------------------ answers and outputs
    def _reader_context(self, ws: Workspace, sub: Optional[EvidenceSubgraph], passages: Sequence[str],
                        no_triples: bool = False) -> str:
        """Reader context: the G_Ans triples (unless ``no_triples``), then ``passages``."""
        parts = []
        if sub is not None and not no_triples and sub.kept:
            parts.append(format_triples(sub.ranked_evidence(), MAX_EVIDENCE_TRIPLES))
        if passages:
            parts.append(self._passages_text(ws, passages))
        if not parts and sub is not None:
            parts.append(format_triples(sub.ranked_evidence(), MAX_EVIDENCE_TRIPLES))
        return "\n\n".join(parts) if parts else "(none)"

    def _final_answers(self, ws: Workspace, states: Sequence[_Open]) -> None:
        """ONE reader call for every question still without an answer (ablations and forced answers).

        The reader answers the original question ``q`` (module docstring)."""
        todo = [s for s in states if s.answer is None]
        if not todo:
            return
        budget = ws.cfg.max_tokens("reader")
        reqs = [reader_request(s.q.question, s.final_context or "(none)", budget) for s in todo]
        for s, res in zip(todo, ws.llm.generate(reqs, stage="kgir_final")):
            s.account("kgir_final", res)
            s.answer = parse_answer(res.text)
            forced = self.variant in ("full", "no_subgraph")
            s.answered_by = "forced_reader" if forced else "reader"
            self._count("forced_answers", int(forced))
            last = s.rounds[-1]
            last.final = FinalCall(raw=res.text, question=s.q.question, answer=s.answer, forced=forced)
            last.usable["reader"], last.truncated["reader"] = answer_usable(res.text), res.truncated

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
            "rounds": [r.to_dict() for r in s.rounds],
            "history": s.history,
            "llm": {stage: u.to_dict() for stage, u in s.stage_usage.items()},
            "usage": s.usage.to_dict(),
        }
        return MethodOutput(qid=s.q.qid, answer=s.answer or "", ranked_pids=ranked, usage=s.usage, trace=trace)
