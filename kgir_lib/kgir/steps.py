"""The steps of KGIR-RAG (paper §2.2-2.4), each a small object with one public method.

The loop of Algorithm 2 (:mod:`kgir_lib.kgir.loop`) is assembled from them
(:class:`~kgir_lib.kgir.loop.Steps`); :data:`~kgir_lib.kgir.loop.PAPER` is the paper's method.
What each kind of step is handed and returns is written in :mod:`kgir_lib.kgir.contract`: a step
returns its result and the loop records it in the round (:class:`~kgir_lib.kgir.rounds.LoopRound`).
A step reads what it needs from the run (:class:`~kgir_lib.kgir.state.Run`: the workspace, the
settings, the counters) and from the round records; it writes there only its own trace detail
(its reply, whether the reply was usable or cut) and the LLM usage of its stage. Every LLM step
sends ONE batched ``generate`` call for all open questions.

============================  ==========================================  ======================
step                          what it does                                paper
============================  ==========================================  ======================
:class:`Retrieve`             dense top-k passages of each query          eq. 2
:class:`NER`                  finds the seeds: ``E_q = NER(q)``           eq. 4 (Algorithm 1)
:class:`Subgraph`             ``G_q``, matching, ``G_tmp``, trees,        eqs. 3, 5-7
                              ``G_Ans``                                   (Algorithm 1)
:class:`ShapeEvidence`        what Rewrite, Reflection, the reader see    §2.3-2.4
:class:`Rewrite`              ``q'_t = Rewrite(q, history, G_Ans_t)``     eq. 8, Fig. 4
:class:`RetrieveRewritten`    ``D'_t``: the retrieval of ``q'_t``         §2.3
:class:`ReflectionPassages`   ``P_t``: what the reflection reads of D'_t  §2.4
:class:`Reflect`              answer or ask for another round             §2.4, Fig. 5
:class:`Read`                 the shared reader answers ``q``             §3.3.1
============================  ==========================================  ======================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from ..methods.reader import answer_usable, parse_answer, reader_request
from .contract import Evidence, Ranked, RetrieveStep, Rewritten, SeedsStep
from .rewrite import (evidence_block, parse_reflection, parse_rewrite, reflection_requests,
                      rewrite_requests, verdict_request, with_verdict)
from .rounds import FinalCall, LoopRound, Verdict
from .seeds import ner_requests, ner_usable, parse_entities
from .state import LoopState, Run, reflection_passages
from .subgraph import (EvidenceSubgraph, Seeds, format_triples, graph_triples, retrieve,
                       subgraphs_of)


class Retrieve:
    """Dense retrieval (eq. 2): the top ``run.top_k`` passages of each query over the whole
    corpus, as ``[(pid, cosine)]``, best first (one batched search)."""

    def __call__(self, run: Run, queries: Sequence[str]) -> list[Ranked]:
        return retrieve(run.ws, queries, run.top_k)


class NER:
    """Finds the seeds of Algorithm 1 by named-entity recognition (eq. 4): ONE batched NER call
    for the open questions' current queries; the entities of each reply, to be grounded in the
    query (:func:`~kgir_lib.kgir.seeds.match_question`). Records the reply in the round."""

    def __call__(self, run: Run, states: Sequence[LoopState],
                 rounds: Sequence[LoopRound]) -> list[Seeds]:
        if not states:
            return []
        requests = ner_requests([s.query for s in states], run.cfg.max_tokens("ner"))
        found = []
        for s, res, r in zip(states, run.ws.llm.generate(requests, stage="kgir_ner"), rounds):
            s.account("kgir_ner", res)
            r.ner_raw = res.text
            r.usable["ner"] = ner_usable(res.text, s.query)
            r.truncated["ner"] = res.truncated
            found.append(Seeds(parse_entities(res.text)))
        return found


class Subgraph:
    """Builds the evidence subgraph ``G_Ans`` (Algorithm 1) of every open question from its
    ``D_t``: ``G_q`` (passages the graph lacks are extracted first), then the seeds the ``seeds``
    step finds, matched (eq. 5), ``G_tmp``, the components and their maximum spanning trees
    (eqs. 6-7). Returns one :class:`~kgir_lib.kgir.subgraph.EvidenceSubgraph` a question (the
    loop records it in the round)."""

    def __call__(self, run: Run, states: Sequence[LoopState], rounds: Sequence[LoopRound],
                 seeds: SeedsStep) -> list[EvidenceSubgraph]:
        retrieved = [list(r.retrieved) for r in rounds]
        G_qs = graph_triples(run.ws, retrieved)
        found = seeds(run, states, rounds)
        return subgraphs_of(run.ws, [s.query for s in states], retrieved, G_qs, seeds=found,
                            threshold=run.ngram_threshold, weighting=run.edge_weight)


class ShapeEvidence:
    """What Rewrite, Reflection and the reader see of each round (§2.3-2.4): the ``G_Ans``
    triples, heaviest first, up to the profile's ``max_evidence_triples``; or the
    ``context_passages`` best passages of ``D_t`` (without the subgraph, or an empty ``G_Ans``
    with the run's ``passages_when_empty``). Counts ``empty_subgraph_rounds`` and
    ``evidence_capped_rounds``."""

    def __call__(self, run: Run, states: Sequence[LoopState], rounds: Sequence[LoopRound],
                 subgraphs: Sequence[Optional[EvidenceSubgraph]]) -> list[Evidence]:
        cap = run.cfg.max_evidence_triples
        shown = []
        for sub, r in zip(subgraphs, rounds):
            if sub is None or (not sub.kept and run.passages_when_empty):
                if sub is not None:
                    run.count("empty_subgraph_rounds")
                pids = [p for p, _ in r.retrieved[:run.cfg.context_passages]]
                text = evidence_block(passages_text=run.passages_text(pids))
                shown.append(Evidence("passages", text, pids))
                continue
            ranked = sub.ranked_evidence()
            distinct = len(dict.fromkeys((t.head, t.relation, t.tail) for t in ranked))
            n = distinct if cap is None else min(cap, distinct)
            run.count("evidence_capped_rounds", int(n < distinct))
            text = evidence_block(format_triples(ranked, cap))
            shown.append(Evidence("subgraph", text, [], triples=distinct, shown=n))
        return shown


class Rewrite:
    """``q'_t = Rewrite(q, history, G_Ans_t)`` (eq. 8, Fig. 4): ONE call for the open questions,
    each reading the round's evidence; a reply without a question is malformed (counted,
    ``rewrite_malformed``; the loop keeps the query). Returns each question's
    :class:`~kgir_lib.kgir.contract.Rewritten`."""

    def __call__(self, run: Run, states: Sequence[LoopState],
                 rounds: Sequence[LoopRound]) -> list[Rewritten]:
        requests = rewrite_requests([s.q.question for s in states], [r.evidence for r in rounds],
                                    [s.history for s in states],
                                    max_tokens=run.cfg.max_tokens("rewrite"))
        rewrites = []
        for s, res in zip(states, run.ws.llm.generate(requests, stage="kgir_rewrite")):
            s.account("kgir_rewrite", res)
            parsed = parse_rewrite(res.text)
            run.count("rewrite_malformed", int(parsed is None))
            rewrites.append(Rewritten(parsed, res.text, truncated=res.truncated))
        return rewrites


class RetrieveRewritten:
    """``D'_t`` (§2.3): the rewritten questions ``q'_t`` retrieved as the queries are, by the
    composition's ``retrieve`` step (one batched search)."""

    def __call__(self, run: Run, states: Sequence[LoopState], rewrites: Sequence[str],
                 retrieve: RetrieveStep) -> list[Ranked]:
        return retrieve(run, rewrites)


@dataclass(frozen=True)
class ReflectionPassages:
    """``P_t`` (§2.4): at most ``context_passages`` passages of ``D'_t`` under ``rule``
    (:func:`~kgir_lib.kgir.state.reflection_passages`; ``None``: the profile's
    ``reflection_passages``)."""

    rule: Optional[str] = None

    def __call__(self, run: Run, state: LoopState, first: Sequence[str],
                 rewritten: Sequence[str]) -> list[str]:
        rule = self.rule or run.cfg.reflection_passages
        return reflection_passages(first, rewritten, run.cfg.context_passages, rule)


def reflection_verdicts(run: Run, states: Sequence[LoopState], rounds: Sequence[LoopRound],
                        last: bool) -> list:
    """Reflection (Fig. 5) of every open question in ONE call, reading the round's rewrite, its
    evidence, the history and ``P_t``; then ONE verdict turn
    (:func:`~kgir_lib.kgir.rewrite.verdict_request`) for the replies without a verdict line. The
    verdicts are recorded in the rounds, with the usable rates of the first reply (``reflect``)
    and of the verdict turn (``reflect_verdict``). ``last``: the prompt says the model must
    answer."""
    cfg = run.cfg
    requests = reflection_requests([r.rewritten() for r in rounds], [r.evidence for r in rounds],
                                   [s.history for s in states],
                                   [run.passages_text(r.shown_passages()) for r in rounds],
                                   final=[last] * len(states),
                                   originals=[s.q.question for s in states],
                                   max_tokens=cfg.max_tokens("reflect"), prompt=cfg.reflect_prompt)
    replies = run.ws.llm.generate(requests, stage="kgir_reflect")
    verdicts = []
    for s, res, r in zip(states, replies, rounds):
        s.account("kgir_reflect", res)
        verdict = parse_reflection(res.text)
        run.count("reflection_malformed", int(verdict.malformed))
        r.reflection = Verdict(**verdict.to_dict(), raw=res.text, final=last)
        r.usable["reflect"] = not verdict.malformed
        r.truncated["reflect"] = res.truncated
        verdicts.append(verdict)
    redo = [i for i, v in enumerate(verdicts) if v.malformed]
    if not redo:
        return verdicts
    again = [verdict_request(requests[i], replies[i].text, last, cfg.max_tokens("verdict"))
             for i in redo]
    for i, res in zip(redo, run.ws.llm.generate(again, stage="kgir_reflect_verdict")):
        states[i].account("kgir_reflect_verdict", res)
        verdicts[i] = with_verdict(verdicts[i], res.text)
        run.count("verdict_turns")
        run.count("verdict_turns_malformed", int(verdicts[i].malformed))
        r = rounds[i]
        r.reflection = Verdict(**verdicts[i].to_dict(), raw=replies[i].text, final=last,
                               verdict_raw=res.text)
        r.usable["reflect_verdict"] = not verdicts[i].malformed
        r.truncated["reflect_verdict"] = res.truncated
    return verdicts


def hand_to_reader(run: Run, state: LoopState, r: LoopRound, passages: Sequence[str]) -> None:
    """Set the question's reader context: the round's evidence (``G_Ans`` triples, or the passages
    that stand in for them), then ``passages`` not already in it."""
    parts = [] if r.evidence_source == "passages" else [r.evidence.removeprefix("Triples:\n")]
    pids = list(dict.fromkeys(list(r.evidence_pids) + list(passages)))
    if pids:
        parts.append(run.passages_text(pids))
    state.final_context = "\n\n".join(parts) if parts else "(none)"
    state.final_pids = pids


class Reflect:
    """Reflection (§2.4, Fig. 5) and what the loop does with it: a question whose reflection says
    "answer" stops (answered by the shared reader from what the reflection read, or with the
    reflection's own answer under the profile's ``kgir_answer_source`` "reflection"); in the last
    round a question still open is handed to the shared reader (``answered_by``
    ``forced_reader``); any other goes on with ``query = q'_t``. Returns the questions that go
    on."""

    def __call__(self, run: Run, states: Sequence[LoopState], rounds: Sequence[LoopRound],
                 last: bool) -> list[LoopState]:
        verdicts = reflection_verdicts(run, states, rounds, last)
        still = []
        for s, verdict, r in zip(states, verdicts, rounds):
            if verdict.answerable:
                s.answered_by = "reflection"
                s.reflection_answer = verdict.answer
                if run.cfg.kgir_answer_source == "reflection":
                    s.answer = verdict.answer
                    s.answer_source = "reflection"
                else:
                    hand_to_reader(run, s, r, r.shown_passages())
            elif last:
                hand_to_reader(run, s, r, r.shown_passages())
                s.answered_by = "forced_reader"
                run.count("forced_answers")
            else:
                s.go_on(r.rewritten(), verdict.missing)
                still.append(s)
        return still


class Read:
    """The shared reader (the one answer prompt of every method): ONE call answering the original
    question ``q`` of each state from its context (:func:`hand_to_reader`). Records the call in
    the state's last round and returns the answers."""

    def __call__(self, run: Run, states: Sequence[LoopState]) -> list[str]:
        if not states:
            return []
        max_tokens = run.cfg.max_tokens("reader")
        requests = [reader_request(s.q.question, s.reader_context(), max_tokens) for s in states]
        answers = []
        for s, res in zip(states, run.ws.llm.generate(requests, stage="kgir_final")):
            s.account("kgir_final", res)
            answer = parse_answer(res.text)
            r = s.rounds[-1]
            r.final = FinalCall(raw=res.text, question=s.q.question, answer=answer,
                                forced=s.answered_by == "forced_reader",
                                context_pids=list(s.final_pids))
            r.usable["reader"] = answer_usable(res.text)
            r.truncated["reader"] = res.truncated
            answers.append(answer)
        return answers
