"""The KGIR-RAG loop (paper §2.2-2.4, Algorithm 2), assembled from its steps.

For every open question, round ``t = 1 .. max_iterations``::

    query_1 = q
    D_t     = Retrieve(query_t)                          eq. 2
    G_Ans_t = Subgraph(query_t, D_t; seeds = NER)        Algorithm 1          [kgir_ner]
    E_t     = ShapeEvidence(G_Ans_t, D_t)                what the prompts show
    q'_t    = Rewrite(q, history, E_t)                   eq. 8                [kgir_rewrite]
    D'_t    = RetrieveRewritten(q'_t)                    eq. 2 again
    P_t     = ReflectionPassages(D_t, D'_t)
    verdict = Reflect(q'_t, G_Ans_t, history, P_t)       Fig. 5               [kgir_reflect]
    answer  -> stop;  missing -> history += (q'_t, missing), query_{t+1} = q'_t

then the shared reader (``Read``) answers ``q`` for every question handed to it
[``kgir_final``]. In the last round the reflection prompt says it must answer; a question it
still leaves open is answered by the shared reader (``answered_by`` ``forced_reader``).

:class:`Steps` holds one object per step (:mod:`kgir_lib.kgir.steps`), each of a kind written in
:mod:`kgir_lib.kgir.contract`: the loop records what a step returns and hands it on, and a step
that returns anything else stops the run with an error naming it. :data:`PAPER` is the paper's
method. A step left out (``None``) is one of Table 7's ablations (§3.4): without the
subgraph (no ``seeds``, no ``subgraph``) the ``context_passages`` best passages of ``D_t`` stand in
for ``G_Ans_t``; without the reflection the loop runs one round and the reader answers from
``G_Ans_1`` and the top of ``D'_1``; without the rewrite (and so without the reflection) it
answers from ``G_Ans_1`` alone. Every other composition is declared in
:data:`kgir_lib.kgir.variants.VARIANTS`.

Settings of the profile (:class:`kgir_lib.config.Config`), each a choice the paper leaves open:

- ``max_evidence_triples``: how many ``G_Ans`` triples (heaviest first) Rewrite, Reflection and
  the reader see; null shows every triple, as the paper does. Each round records
  ``evidence_triples`` and ``evidence_shown``; ``evidence_capped_rounds`` counts the rounds where
  the cap binds.
- ``reflection_passages``: ``P_t`` (:func:`~kgir_lib.kgir.state.reflection_passages`).
- ``kgir_answer_source``: who writes the final answer once the reflection says "answer"
  (:class:`~kgir_lib.kgir.steps.Reflect`). ``"reader"``: the shared reader (the short-answer
  prompt every other method answers through) answers ``q`` from the evidence the reflection read
  (its ``G_Ans`` triples or their stand-in passages, then ``P_t``); the reflection decides *when*
  to stop, the reader words the answer, so an EM difference between methods is not a difference
  of answer form. ``"reflection"``: the reflection's own ``Answer:`` line (Fig. 5). The trace
  keeps the reflection's answer either way (``reflection_answer``).
- ``reflect_prompt``: the reflection's prompt file.
- An empty ``G_Ans`` (no seed matched, or no triple around it): with ``passages_when_empty`` (a
  method parameter, default on) the ``context_passages`` best passages of ``D_t`` stand in for it,
  as without the subgraph; the round records ``evidence_source`` ``"passages"``.
- Every reader call answers the *original* question ``q``; the rewrite's facts reach the reader
  through the evidence and the rewritten question's retrieval.

Final ranked list: :func:`~kgir_lib.kgir.state.ranked_list`. Batching: every stage runs across
all open questions as ONE ``llm.generate`` call per stage per round; retrieval is batched the
same way.

Each output's trace (:func:`output`) holds every round as a
:class:`~kgir_lib.kgir.rounds.LoopRound` (query, retrieval, subgraph, rewrite, passages,
reflection, reader call, usable/truncated flags per stage), the answer, who answered,
``answer_source``, ``reflection_answer`` and LLM usage per stage; the tables read from traces live
in :mod:`kgir_lib.kgir.rounds`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol, Sequence

from ..data import Question
from ..methods.base import MethodOutput
from ..progress import progress as tqdm  # one line per bar in executed notebooks
from .contract import (CheckedSeeds, EvidenceStep, PassagesStep, Ranked, ReadStep, ReflectStep,
                       RetrieveStep, RewriteRetrievalStep, Rewritten, RewriteStep, SeedsStep,
                       SubgraphStep, checked, checked_passages, checked_states)
from .rounds import LoopRound
from .state import LoopState, Run
from .steps import (NER, Read, Reflect, ReflectionPassages, Retrieve, RetrieveRewritten, Rewrite,
                    ShapeEvidence, Subgraph, hand_to_reader)
from .subgraph import EvidenceSubgraph


@dataclass(frozen=True)
class Steps:
    """The steps one composition of KGIR-RAG runs, each an object with one public method whose
    kind is a protocol of :mod:`kgir_lib.kgir.contract`; ``None`` leaves a step out (Table 7,
    module docstring)."""

    retrieve: RetrieveStep = Retrieve()
    seeds: Optional[SeedsStep] = NER()
    subgraph: Optional[SubgraphStep] = Subgraph()
    rewrite: Optional[RewriteStep] = Rewrite()
    passages: PassagesStep = ReflectionPassages()
    reflect: Optional[ReflectStep] = Reflect()
    read: ReadStep = Read()
    evidence: EvidenceStep = ShapeEvidence()
    rewrite_retrieval: RewriteRetrievalStep = RetrieveRewritten()

    def __post_init__(self) -> None:
        if (self.seeds is None) != (self.subgraph is None):
            raise ValueError("Steps: the subgraph and its seeds go together (both or neither)")
        if self.rewrite is None and self.reflect is not None:
            raise ValueError("Steps: the reflection reads the rewrite: no reflection without it")
        always = ("retrieve", "passages", "read", "evidence", "rewrite_retrieval")
        missing = [name for name in always if getattr(self, name) is None]
        if missing:
            raise ValueError(f"Steps: {', '.join(missing)}: part of every composition")
        for name, step in vars(self).items():
            if step is not None and not callable(step):
                raise ValueError(f"Steps: step {name!r} is a {type(step).__name__}, not a step "
                                 f"(an object called with the run and its inputs)")


PAPER = Steps()  # the paper's method (§2.2-2.4)


class Composition(Protocol):
    """What a composition of steps runs: the loop over its :class:`~kgir_lib.kgir.loop.Steps`
    (:class:`~kgir_lib.kgir.loop.Loop`), or anything that answers questions with them."""

    @property
    def steps(self) -> Steps:
        ...

    def answer(self, run: Run, questions: Sequence[Question],
               label: str = ...) -> list[LoopState]:
        ...


@dataclass(frozen=True)
class Loop:
    """Algorithm 2 over a composition of :class:`Steps` (module docstring)."""

    steps: Steps = PAPER

    def answer(self, run: Run, questions: Sequence[Question],
               label: str = "KGIR-RAG") -> list[LoopState]:
        """Every question through the loop: one :class:`~kgir_lib.kgir.state.LoopState` each, in
        order (``label`` names the progress bar)."""
        steps = self.steps
        states = [LoopState(q=q, query=q.question) for q in questions]
        open_ = list(states)
        T = run.max_iterations if steps.reflect is not None else 1
        show = getattr(run.ws.llm, "progress", False) and bool(states)
        bar = tqdm(total=T, desc=f"{label} rounds", disable=not show, leave=False)
        for t in range(1, T + 1):
            if not open_:
                break
            bar.update(1)
            rounds = self._retrieve(run, open_, t)                                  # D_t, eq. 2
            subs: list[Optional[EvidenceSubgraph]] = [None] * len(open_)
            if steps.subgraph is not None and steps.seeds is not None:              # Algorithm 1
                found = steps.subgraph(run, open_, rounds, CheckedSeeds(steps.seeds))
                subs = list(checked("subgraph", steps.subgraph, found, len(open_)))
                self._record_subgraphs(run, open_, rounds, subs)
            shown = steps.evidence(run, open_, rounds, subs)
            for r, ev in zip(rounds, checked("evidence", steps.evidence, shown, len(open_))):
                r.record_evidence(ev.source, ev.text, ev.pids, triples=ev.triples,
                                  shown=ev.shown)
            if steps.rewrite is None:                               # w/o rewrite: answer now
                for s, r in zip(open_, rounds):
                    hand_to_reader(run, s, r, [])
                break
            rewrites = self._rewrite(run, open_, rounds)                            # q'_t, eq. 8
            self._rewrite_retrieval(run, open_, rounds, rewrites)                   # D'_t, P_t
            if steps.reflect is None:                               # w/o reflection: answer now
                n = run.cfg.context_passages
                for s, r in zip(open_, rounds):
                    hand_to_reader(run, s, r, [p for p, _ in r.rewrite_retrieved[:n]])
                break
            going = steps.reflect(run, open_, rounds, t == T)                       # Fig. 5
            open_ = checked_states(steps.reflect, going, open_)
        bar.close()
        finals = [s for s in states if s.answer is None and s.final_context is not None]
        answers = checked("read", steps.read, steps.read(run, finals), len(finals))
        for s, answer in zip(finals, answers):
            s.answer = answer
            s.answered_by = s.answered_by or "reader"
        return states

    # ------------------------------------------------------------------ the loop's own records
    def _retrieve(self, run: Run, open_: Sequence[LoopState], t: int) -> list[LoopRound]:
        """``D_t`` for every open question (one batched search); a new round record each."""
        step = self.steps.retrieve
        D = checked("retrieve", step, step(run, [s.query for s in open_]), len(open_))
        rounds = []
        for s, d in zip(open_, D):
            r = LoopRound(iteration=t, query=s.query, retrieved=[(p, float(x)) for p, x in d])
            s.rounds.append(r)
            if t == 1:
                s.first_retrieval = [p for p, _ in d]
            rounds.append(r)
        return rounds

    @staticmethod
    def _record_subgraphs(run: Run, open_: Sequence[LoopState], rounds: Sequence[LoopRound],
                          subs: Sequence[Optional[EvidenceSubgraph]]) -> None:
        """Each ``G_Ans`` in its round, counted; its passages' best edge weights in the state
        (the final ranked list)."""
        for s, sub, r in zip(open_, subs, rounds):
            assert sub is not None
            r.record_subgraph(sub)
            run.count("subgraphs")
            run.count("ner_fallbacks", int(sub.used_fallback))
            run.count("rounds_with_seed", int(bool(sub.seeds)))
            s.keep_evidence_weights(sub.kept, sub.weights)

    def _rewrite(self, run: Run, open_: Sequence[LoopState],
                 rounds: Sequence[LoopRound]) -> list[str]:
        """``q'_t`` of every open question, from what the rewrite step returns, recorded in the
        rounds; a rewrite without a question keeps the query."""
        step = self.steps.rewrite
        assert step is not None
        done = checked("rewrite", step, step(run, open_, rounds), len(open_))
        out = []
        for s, r, w in zip(open_, rounds, done):
            if isinstance(w, str):
                w = Rewritten(w)
            out.append(r.record_rewrite(w.raw, w.question, s.query, truncated=w.truncated,
                                        note=w.note))
        return out

    def _rewrite_retrieval(self, run: Run, open_: Sequence[LoopState],
                           rounds: Sequence[LoopRound], rewrites: Sequence[str]) -> None:
        """``D'_t`` for every rewritten question (the ``rewrite_retrieval`` step) and the
        reflection's passages ``P_t`` (the ``passages`` step), recorded in the rounds."""
        n = run.cfg.context_passages
        step = self.steps.rewrite_retrieval
        found: list[Ranked] = checked("rewrite_retrieval", step,
                                      step(run, open_, rewrites, self.steps.retrieve), len(open_))
        for s, d2, r in zip(open_, found, rounds):
            first = [p for p, _ in r.retrieved]
            second = [p for p, _ in d2]
            s.rewrite_retrievals.append(second)
            r.rewrite_retrieved = [(p, float(x)) for p, x in d2]
            r.new_passages = [p for p in second if p not in set(first)][:n]
            shown = self.steps.passages(run, s, first, second)
            r.reflection_passages = checked_passages(self.steps.passages, shown)


def output(state: LoopState, name: str, variant: str) -> MethodOutput:
    """The method output of one question: its answer, the final ranked list
    (:func:`~kgir_lib.kgir.state.ranked_list`) and the trace (module docstring)."""
    s = state
    trace = {
        "method": name, "variant": variant, "qid": s.q.qid, "question": s.q.question,
        "gold_answers": list(s.q.answers), "gold_pids": list(s.q.gold_pids),
        "answer": s.answer or "", "answered_by": s.answered_by,
        "answer_source": s.answer_source, "reflection_answer": s.reflection_answer,
        "iterations_used": len(s.rounds), "rounds": [r.to_dict() for r in s.rounds],
        "history": s.history, "llm": {stage: u.to_dict() for stage, u in s.stage_usage.items()},
        "usage": s.usage.to_dict(),
    }
    return MethodOutput(qid=s.q.qid, answer=s.answer or "", ranked_pids=s.ranked_pids(),
                        usage=s.usage, trace=trace)
