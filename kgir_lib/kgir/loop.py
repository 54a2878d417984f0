"""KGIR-RAG (paper §2.2-2.4, Algorithms 1-2) and its Table 7 ablations.

The loop, for every open question, round ``t = 1 .. max_iterations``::

    query_1 = q
    D_t     = dense top-k(query_t)                                    eq. 2
    G_Ans_t = evidence subgraph(query_t, D_t)         [kgir_ner]      Algorithm 1
    q'_t    = Rewrite(q, history, G_Ans_t)            [kgir_rewrite]  eq. 8
    D'_t    = dense top-k(q'_t);  P_t = reflection passages of D'_t
    verdict = Reflection(q'_t, G_Ans_t, history, P_t) [kgir_reflect]  Fig. 5
    answer  -> stop;  missing -> history += (q'_t, missing), query_{t+1} = q'_t

In the last round the reflection prompt says it must answer; a question it still leaves open is answered
by the shared reader (``answered_by`` ``forced_reader``).

Settings of the profile (:class:`kgir_lib.config.Config`), each a choice the paper leaves open:

- ``max_evidence_triples``: how many ``G_Ans`` triples (heaviest first) Rewrite, Reflection and the reader
  see; null shows every triple, as the paper does. Each round records ``evidence_triples`` and
  ``evidence_shown``, and ``stats["evidence_capped_rounds"]`` counts the rounds where the cap binds.
- ``reflection_passages``: ``P_t`` (:func:`~kgir_lib.kgir.state.reflection_passages`).
- ``kgir_answer_source``: who writes the final answer once the reflection says "answer". ``"reader"``:
  the shared reader (the short-answer prompt every other method answers through) answers ``q`` from the
  evidence the reflection read (its ``G_Ans`` triples or their stand-in passages, then ``P_t``); the
  reflection decides *when* to stop, the reader words the answer, so an EM difference between methods is
  not a difference of answer form. ``"reflection"``: the reflection's own ``Answer:`` line (Fig. 5).
  The trace keeps the reflection's answer either way (``reflection_answer``).
- ``reflect_prompt``: the reflection's prompt file.
- An empty ``G_Ans`` (no seed matched, or no triple around it): with ``passages_when_empty`` (default)
  the ``context_passages`` best passages of ``D_t`` stand in for it, in every variant (the w/o-subgraph
  ablation's own stand-in); the round records ``evidence_source`` ``"passages"``.
- Every reader call answers the *original* question ``q``; the rewrite's facts reach the reader through
  the evidence and the rewritten question's retrieval.

Variants (:data:`VARIANTS`, paper Table 7 §3.4, plus one study) are switches of the same loop:

- ``full``: as above.
- ``no_subgraph``: no NER / subgraph; the ``context_passages`` most similar passages of ``D_t`` stand in
  for ``G_Ans_t``.
- ``no_reflection``: one round; the reader answers from ``G_Ans_1`` and the top of ``D'_1`` ("rewrite once
  with the subgraph, retrieve once, answer").
- ``no_rewrite``: one round; the reader answers from ``G_Ans_1`` alone.
- ``forced``: every round runs and the reflection's stop is ignored; the reader answers at every round
  (``round_answers``), so the answer after T = 1, 2, 3 rounds is read off one run. A study of what
  iteration adds when a small model stops early, not the paper's method.

Final ranked list: :func:`~kgir_lib.kgir.state.ranked_list`. Batching: every stage runs across all
open questions as ONE ``llm.generate`` call per stage per round; retrieval is batched the same way.

Each output's trace holds every round as a :class:`~kgir_lib.kgir.rounds.LoopRound` (query,
retrieval, subgraph, rewrite, passages, reflection, reader call, usable/truncated flags per stage), the
answer, who answered, ``answer_source``, ``reflection_answer`` and LLM usage per stage; the tables read from
traces live in :mod:`kgir_lib.kgir.rounds`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional, Sequence

from ..data import Question
from ..methods.base import MethodBase, MethodOutput, Workspace
from ..methods.reader import answer_usable, format_passages, parse_answer, reader_request
from ..progress import progress as tqdm  # one line per bar in executed notebooks
from .seeds import ner_usable
from .rewrite import (evidence_block, parse_reflection, parse_rewrite, reflection_requests, rewrite_requests,
                      verdict_request, with_verdict)
from .rounds import FinalCall, LoopRound, Verdict
from .state import LoopState, reflection_passages
from .subgraph import EvidenceSubgraph, build_subgraphs, format_triples, resolve_weighting, retrieve


@dataclass(frozen=True)
class Variant:
    """Which stages of the loop a variant runs (module docstring)."""

    name: str
    key: str
    subgraph: bool = True    # Algorithm 1 builds G_Ans (else the most similar passages stand in)
    rewrite: bool = True     # eq. 8 and the rewritten question's retrieval D'_t
    reflection: bool = True  # Fig. 5 decides when to stop (else: answer after round 1)
    forced: bool = False     # ignore the reflection's stop; the reader answers at every round


VARIANTS: dict = {
    "full": Variant("KGIR-RAG", "kgir"),
    "no_subgraph": Variant("KGIR-RAG w/o subgraph", "kgir_no_subgraph", subgraph=False),
    "no_reflection": Variant("KGIR-RAG w/o reflection", "kgir_no_reflection", reflection=False),
    "no_rewrite": Variant("KGIR-RAG w/o rewrite", "kgir_no_rewrite", rewrite=False, reflection=False),
    "forced": Variant("KGIR-RAG (forced rounds)", "kgir_forced", forced=True),
}
KEYS = {v: spec.key for v, spec in VARIANTS.items()}
STAT_KEYS = ("ner_fallbacks", "rewrite_malformed", "reflection_malformed", "forced_answers", "subgraphs",
             "rounds_with_seed", "empty_subgraph_rounds", "evidence_capped_rounds")


@dataclass
class KGIRRAG(MethodBase):
    """KGIR-RAG and its variants; see the module docstring for the loop, the settings and the variants.

    ``max_iterations``, ``top_k`` and ``ngram_threshold`` default (``None``) to the profile's values
    (:meth:`~kgir_lib.methods.base.MethodBase.setting`);
    ``edge_weight`` is ``"auto"`` (reranker if configured, else cosine of question and triple text),
    ``"reranker"``, ``"cosine"`` or ``"passage"``.
    """

    variant: str = "full"
    max_iterations: Optional[int] = None
    top_k: Optional[int] = None
    ngram_threshold: Optional[float] = None
    edge_weight: Optional[str] = None
    passages_when_empty: bool = True
    knobs = {"max_iterations": "max_iterations", "top_k": "top_k", "ngram_threshold": "ngram_threshold"}
    variants: ClassVar[dict] = VARIANTS  # the study variants' subclass (kgir_lib.kgir.study) has its own table

    def __post_init__(self) -> None:
        if self.variant not in self.variants:
            raise ValueError(f"unknown KGIR-RAG variant {self.variant!r} (choose from {sorted(self.variants)})")
        super().__post_init__()
        resolve_weighting(self.edge_weight, None)  # validates the name
        self.stats: dict = {}

    @property
    def spec(self) -> Variant:
        return self.variants[self.variant]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def key(self) -> str:
        return self.spec.key

    @property
    def uses_kg(self) -> bool:  # (evaluate.run_fingerprint: only then does the KG matter)
        return self.spec.subgraph

    # ------------------------------------------------------------------ the loop
    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        """Answer every question (module docstring); one :class:`MethodOutput` per question, in order."""
        self.stats = {"questions": len(questions), **dict.fromkeys(STAT_KEYS, 0)}
        states = [LoopState(q=q, query=q.question) for q in questions]
        open_, T, v = list(states), self._rounds(ws), self.spec
        bar = tqdm(total=T, desc=f"{self.name} rounds", disable=not getattr(ws.llm, "progress", False) or not states,
                   leave=False)
        for t in range(1, T + 1):
            if not open_:
                break
            bar.update(1)
            rounds = self._retrieve(ws, open_, t)                              # D_t, eq. 2
            subs = self._subgraphs(ws, open_, rounds) if v.subgraph else [None] * len(open_)  # Algorithm 1
            evidence = [self._evidence(ws, sub, r) for sub, r in zip(subs, rounds)]
            if not v.rewrite:                                                   # w/o rewrite: answer now
                self._hand_to_reader(ws, open_, rounds, [[] for _ in open_])
                break
            rewrites = self._rewrite(ws, open_, evidence, rounds)              # q'_t, eq. 8
            shown = self._rewrite_retrieval(ws, open_, rewrites, rounds)       # D'_t and P_t
            if not v.reflection:                                                # w/o reflection: answer now
                n = ws.cfg.context_passages
                self._hand_to_reader(ws, open_, rounds, [[p for p, _ in r.rewrite_retrieved[:n]] for r in rounds])
                break
            verdicts = self._reflect(ws, open_, rewrites, evidence, shown, rounds, t == T)  # Fig. 5
            open_ = self._next_round(ws, open_, verdicts, rewrites, shown, rounds, t == T)
        bar.close()
        self._read(ws, [s for s in states if s.answer is None and s.final_context is not None], "final")
        return [self._output(s) for s in states]

    def _rounds(self, ws: Workspace) -> int:
        if not self.spec.reflection:
            return 1
        return int(self.setting(ws, "max_iterations"))

    # ------------------------------------------------------------------ stages
    def _retrieve(self, ws: Workspace, open_: Sequence[LoopState], t: int) -> list:
        """``D_t`` for every open question (one batched search); a new round record each."""
        D = retrieve(ws, [s.query for s in open_], self.setting(ws, "top_k"))
        rounds = []
        for s, d in zip(open_, D):
            r = LoopRound(iteration=t, query=s.query, retrieved=[(p, float(x)) for p, x in d])
            s.rounds.append(r)
            if t == 1:
                s.first_retrieval = [p for p, _ in d]
            rounds.append(r)
        return rounds

    def _subgraphs(self, ws: Workspace, open_: Sequence[LoopState], rounds: Sequence[LoopRound]) -> list:
        """Algorithm 1 for every open question (ONE batched NER call); records the subgraph in each round."""
        subs, ner = build_subgraphs(ws, [s.query for s in open_], [r.retrieved for r in rounds],
                                    top_k=self.setting(ws, "top_k"), threshold=self.setting(ws, "ngram_threshold"),
                                    weighting=self.edge_weight, entities=self._given_entities(open_))
        for s, sub, res, r in zip(open_, subs, ner, rounds):
            r.subgraph, r.G_q, r.n_G_q, r.n_G_tmp = sub, list(sub.G_q), len(sub.G_q), len(sub.G_tmp)
            if res is not None:  # (None: the study variant's gold entities stood in for NER)
                s.account("kgir_ner", res)
                r.ner_raw, r.usable["ner"], r.truncated["ner"] = res.text, ner_usable(res.text, s.query), res.truncated
            self._count("subgraphs")
            self._count("ner_fallbacks", int(sub.used_fallback))
            self._count("rounds_with_seed", int(bool(sub.seeds)))
            s.keep_evidence_weights(sub.kept, sub.weights)
        return subs

    def _given_entities(self, open_: Sequence[LoopState]) -> Optional[list]:
        """Per open question, a function of ``G_q`` giving E_q in place of NER; ``None``: NER for all (eq. 4)."""
        return None

    def _evidence(self, ws: Workspace, sub: Optional[EvidenceSubgraph], r: LoopRound) -> str:
        """What Rewrite, Reflection and the reader see: ``G_Ans`` triples (heaviest first, up to
        ``max_evidence_triples``), or the best passages of ``D_t`` (w/o subgraph; an empty ``G_Ans`` with
        ``passages_when_empty``). Recorded in the round."""
        cap = ws.cfg.max_evidence_triples
        if sub is None or (not sub.kept and self.passages_when_empty):
            if sub is not None:
                self._count("empty_subgraph_rounds")
            r.evidence_source = "passages"
            r.evidence_pids = [p for p, _ in r.retrieved[:ws.cfg.context_passages]]
            r.evidence = evidence_block(passages_text=self._passages_text(ws, r.evidence_pids))
            return r.evidence
        distinct = list(dict.fromkeys((t.head, t.relation, t.tail) for t in sub.ranked_evidence()))
        r.evidence_source, r.evidence_pids = "subgraph", []
        r.evidence_triples, r.evidence_shown = len(distinct), len(distinct) if cap is None else min(cap, len(distinct))
        self._count("evidence_capped_rounds", int(r.evidence_shown < r.evidence_triples))
        r.evidence = evidence_block(format_triples(sub.ranked_evidence(), cap))
        return r.evidence

    def _rewrite(self, ws: Workspace, open_: Sequence[LoopState], evidence: Sequence[str],
                 rounds: Sequence[LoopRound]) -> list:
        """``q'_t = Rewrite(q, history, G_Ans_t)`` (eq. 8) in ONE call; a malformed reply keeps the query."""
        res_all = ws.llm.generate(rewrite_requests([s.q.question for s in open_], evidence, [s.history for s in open_],
                                                   max_tokens=ws.cfg.max_tokens("rewrite")), stage="kgir_rewrite")
        rewrites = []
        for s, res, r in zip(open_, res_all, rounds):
            s.account("kgir_rewrite", res)
            parsed = parse_rewrite(res.text)
            self._count("rewrite_malformed", int(parsed is None))
            r.rewrite_raw, r.rewrite, r.rewrite_malformed = res.text, parsed or s.query, parsed is None
            r.rewrite_unchanged = r.rewrite.strip().lower() == s.query.strip().lower()
            r.usable["rewrite"], r.truncated["rewrite"] = parsed is not None, res.truncated
            rewrites.append(r.rewrite)
        return rewrites

    def _rewrite_retrieval(self, ws: Workspace, open_: Sequence[LoopState], rewrites: Sequence[str],
                           rounds: Sequence[LoopRound]) -> list:
        """``D'_t`` for every rewritten question (one batched search) and the reflection's passages ``P_t``."""
        n = ws.cfg.context_passages
        shown = []
        for s, d2, r in zip(open_, retrieve(ws, rewrites, self.setting(ws, "top_k")), rounds):
            first, second = [p for p, _ in r.retrieved], [p for p, _ in d2]
            s.rewrite_retrievals.append(second)
            r.rewrite_retrieved = [(p, float(x)) for p, x in d2]
            r.new_passages = [p for p in second if p not in set(first)][:n]
            r.reflection_passages = reflection_passages(first, second, n, ws.cfg.reflection_passages)
            shown.append(r.reflection_passages)
        return shown

    def _reflect(self, ws: Workspace, open_: Sequence[LoopState], rewrites: Sequence[str], evidence: Sequence[str],
                 shown: Sequence[list], rounds: Sequence[LoopRound], last: bool) -> list:
        """Reflection (Fig. 5) in ONE call, then ONE verdict turn for the replies without a verdict line."""
        cfg = ws.cfg
        requests = reflection_requests(rewrites, evidence, [s.history for s in open_],
                                       [self._passages_text(ws, ps) for ps in shown], [last] * len(open_),
                                       [s.q.question for s in open_], max_tokens=cfg.max_tokens("reflect"),
                                       prompt=cfg.reflect_prompt)
        replies = ws.llm.generate(requests, stage="kgir_reflect")
        return self._verdicts(ws, open_, requests, replies, rounds, last)

    def _verdicts(self, ws: Workspace, open_: Sequence[LoopState], requests: list, replies: list,
                  rounds: Sequence[LoopRound], last: bool) -> list:
        """Parse the reflection replies; a reply with no verdict line gets the verdict turn
        (:func:`kgir_lib.kgir.rewrite.verdict_request`, one batched call). Usable rates are recorded for the first
        reply (``reflect``) and for the verdict turn (``reflect_verdict``)."""
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

    def _next_round(self, ws: Workspace, open_: Sequence[LoopState], verdicts: Sequence, rewrites: Sequence[str],
                    shown: Sequence[list], rounds: Sequence[LoopRound], last: bool) -> list:
        """Act on the verdicts: stop the questions the reflection answered (the last round stops all; the
        forced variant answers every question with the reader and stops none before the last round).
        Returns the questions that go on with ``query = q'_t``."""
        if self.spec.forced:
            self._hand_to_reader(ws, open_, rounds, shown)
            self._read(ws, open_, "round")
        still = []
        for s, verdict, q2, ps, r in zip(open_, verdicts, rewrites, shown, rounds):
            if verdict.answerable and not self.spec.forced:
                s.answered_by, s.reflection_answer = "reflection", verdict.answer
                if ws.cfg.kgir_answer_source == "reflection":
                    s.answer, s.answer_source = verdict.answer, "reflection"
                else:
                    self._hand_to_reader(ws, [s], [r], [ps])
            elif last and self.spec.forced:
                s.answer, s.answered_by = s.round_answers[-1], "reader"
            elif last:
                self._hand_to_reader(ws, [s], [r], [ps])
                s.answered_by = "forced_reader"
                self._count("forced_answers")
            else:
                s.history.append({"rewrite": q2, "missing": verdict.missing})
                s.query = q2
                still.append(s)
        return still

    # ------------------------------------------------------------------ the reader
    def _hand_to_reader(self, ws: Workspace, states: Sequence[LoopState], rounds: Sequence[LoopRound],
                        passages: Sequence[Sequence[str]]) -> None:
        """Set each question's reader context: the round's evidence (``G_Ans`` triples or the passages that
        stand in for them), then ``passages`` not already in it."""
        for s, r, ps in zip(states, rounds, passages):
            parts = [] if r.evidence_source == "passages" else [r.evidence.removeprefix("Triples:\n")]
            pids = list(dict.fromkeys(list(r.evidence_pids) + list(ps)))
            if pids:
                parts.append(self._passages_text(ws, pids))
            s.final_context, s.final_pids = "\n\n".join(parts) if parts else "(none)", pids

    def _read(self, ws: Workspace, states: Sequence[LoopState], when: str) -> None:
        """ONE shared-reader call (stage ``kgir_final``) answering ``q`` from each state's context. ``when``:
        ``"final"`` sets the answer; ``"round"`` (forced rounds) records the round's answer."""
        if not states:
            return
        reqs = [reader_request(s.q.question, s.final_context, ws.cfg.max_tokens("reader")) for s in states]
        for s, res in zip(states, ws.llm.generate(reqs, stage="kgir_final")):
            s.account("kgir_final", res)
            answer, r = parse_answer(res.text), s.rounds[-1]
            r.final = FinalCall(raw=res.text, question=s.q.question, answer=answer,
                                forced=s.answered_by == "forced_reader", context_pids=list(s.final_pids))
            r.usable["reader"], r.truncated["reader"] = answer_usable(res.text), res.truncated
            if when == "round":
                s.round_answers.append(answer)
            else:
                s.answer, s.answered_by = answer, s.answered_by or "reader"

    # ------------------------------------------------------------------ helpers and output
    @staticmethod
    def _passages_text(ws: Workspace, pids: Sequence[str]) -> str:
        return format_passages(ws.passages(pids), ws.cfg.passage_chars)

    def _count(self, key: str, n: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + n

    def _output(self, s: LoopState) -> MethodOutput:
        trace = {
            "method": self.name, "variant": self.variant, "qid": s.q.qid, "question": s.q.question,
            "gold_answers": list(s.q.answers), "gold_pids": list(s.q.gold_pids),
            "answer": s.answer or "", "answered_by": s.answered_by,
            "answer_source": s.answer_source, "reflection_answer": s.reflection_answer,
            "iterations_used": len(s.rounds), "rounds": [r.to_dict() for r in s.rounds], "history": s.history,
            "llm": {stage: u.to_dict() for stage, u in s.stage_usage.items()}, "usage": s.usage.to_dict(),
        }
        if self.spec.forced:
            trace["round_answers"] = list(s.round_answers)
        return MethodOutput(qid=s.q.qid, answer=s.answer or "", ranked_pids=s.ranked_pids(), usage=s.usage,
                            trace=trace)
