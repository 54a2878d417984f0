"""The written contract of KGIR-RAG's steps (kgir_lib.kgir.contract): the loop acts on what each step returns, never
on a record the step wrote; the evidence and the rewrite's retrieval are steps of their own; a step that returns the
wrong thing stops the run at once with an error naming the step; no step field of ``Steps`` is typed ``Any``."""
from __future__ import annotations

import dataclasses
import typing

import pytest

from kgir_lib.kgir import contract
from kgir_lib.kgir.contract import Evidence, Rewritten, StepContractError
from kgir_lib.kgir.loop import PAPER, Loop, Steps
from kgir_lib.kgir.rounds import LoopRound
from kgir_lib.kgir.state import LoopState
from kgir_lib.kgir.steps import Read, Reflect, Retrieve, RetrieveRewritten, Rewrite, ShapeEvidence
from kgir_lib.kgir.variants import KGIRRAG

REWRITE = "Which company did Compaq merge with in 2002?"


def script(req):
    kind = req.prompt
    if kind == "kgir_ner":
        return "Entities: Compaq; 1994"
    if kind == "kgir_rewrite":
        return f"Rewritten question: {REWRITE}"
    if kind.startswith("kgir_reflect"):
        return "Reasoning: the evidence names the partner.\nAnswer: Hewlett-Packard"
    return "Answer: HP"


def answer(ws, steps: Steps, max_iterations: int = 1):
    method = KGIRRAG(max_iterations=max_iterations)
    run = method.start(ws, len(ws.dataset.questions))
    return run, Loop(steps).answer(run, ws.dataset.questions)


def test_steps_fields_are_typed_by_their_protocols_not_any():
    hints = typing.get_type_hints(Steps, vars(contract) | {"Optional": typing.Optional})
    assert set(hints) == {"retrieve", "seeds", "subgraph", "rewrite", "passages", "reflect", "read", "evidence",
                          "rewrite_retrieval"}
    assert typing.Any not in hints.values()
    for name, hint in hints.items():
        kinds = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        assert all(getattr(k, "_is_protocol", False) for k in kinds), f"{name}: {hint}"
    assert isinstance(PAPER.evidence, ShapeEvidence) and isinstance(PAPER.rewrite_retrieval, RetrieveRewritten)


def test_the_loop_uses_what_the_rewrite_returns(tiny_workspace):
    """A rewrite step that only returns its questions (it writes nothing into the round) drives D'_t and the
    trace: what the loop used to drop."""
    class Returns:
        def __call__(self, run, states, rounds):
            return [REWRITE + " (returned)" for _ in states]

    ws = tiny_workspace(script)
    _, [s] = answer(ws, dataclasses.replace(PAPER, rewrite=Returns()))
    r = s.rounds[0]
    assert r.rewrite == REWRITE + " (returned)" and r.rewrite_raw == "" and not r.rewrite_malformed
    assert "rewrite" not in r.usable  # no model reply: no usable rate
    searched = []

    class Spy(Retrieve):
        def __call__(self, run, queries):
            searched.append(list(queries))
            return super().__call__(run, queries)

    answer(ws, dataclasses.replace(PAPER, rewrite=Returns(), retrieve=Spy()))
    assert searched == [[ws.dataset.questions[0].question], [REWRITE + " (returned)"]]


def test_a_rewrite_that_writes_the_round_but_returns_nothing_usable_is_refused(tiny_workspace):
    class WritesTheRound:
        def __call__(self, run, states, rounds):
            for r in rounds:
                r.rewrite = REWRITE
            return None

    with pytest.raises(StepContractError, match=r"step 'rewrite' \(WritesTheRound\) returned NoneType"):
        answer(tiny_workspace(script), dataclasses.replace(PAPER, rewrite=WritesTheRound()))


@pytest.mark.parametrize("field, step, match", [
    ("retrieve", lambda run, queries: [["pid-without-score"] for _ in queries],
     r"step 'retrieve' \(function\) returned item 0 of type list: each is a ranked list"),
    ("rewrite", lambda run, states, rounds: [], r"step 'rewrite' \(function\) returned 0 items for 1 questions"),
    ("rewrite", lambda run, states, rounds: [42], r"step 'rewrite' \(function\) returned item 0 of type int"),
    ("evidence", lambda run, states, rounds, subs: ["triples"], r"step 'evidence' \(function\) returned item 0 "
                                                                r"of type str: each is an Evidence"),
    ("rewrite_retrieval", lambda run, states, rewrites, retrieve: "D'", r"step 'rewrite_retrieval' .* returned str"),
    ("passages", lambda run, state, first, rewritten: [1, 2], r"step 'passages' \(function\) returned list"),
    ("reflect", lambda run, states, rounds, last: [object()], r"step 'reflect' .* none of the states"),
    ("read", lambda run, states: [None] * len(states), r"step 'read' \(function\) returned item 0 of type "
                                                       r"NoneType: each is an answer str"),
    ("seeds", lambda run, states, rounds: ["Compaq"], r"step 'seeds' \(function\) returned item 0 of type str: "
                                                      r"each is a Seeds"),
    ("subgraph", lambda run, states, rounds, seeds: [None], r"step 'subgraph' \(function\) returned item 0"),
])
def test_a_step_returning_the_wrong_thing_fails_at_once_naming_the_step(tiny_workspace, field, step, match):
    with pytest.raises(StepContractError, match=match):
        answer(tiny_workspace(script), dataclasses.replace(PAPER, **{field: step}))


def test_a_step_that_is_no_step_is_refused_when_composed():
    with pytest.raises(ValueError, match="step 'read' is a str"):
        Steps(read="the reader")
    with pytest.raises(ValueError, match="evidence: part of every composition"):
        Steps(evidence=None)


def test_the_evidence_is_a_step_of_its_own(tiny_workspace):
    """Replacing the evidence step changes what the rewrite reads; the paper's step returns Evidence records,
    one a question, which the loop writes into the round."""
    seen = []

    class OnePassage:
        def __call__(self, run, states, rounds, subgraphs):
            return [Evidence("passages", "Passages:\n(only this)", [r.retrieved[0][0]]) for r in rounds]

    class Spy(Rewrite):
        def __call__(self, run, states, rounds):
            seen.extend(r.evidence for r in rounds)
            return super().__call__(run, states, rounds)

    ws = tiny_workspace(script)
    _, [s] = answer(ws, dataclasses.replace(PAPER, evidence=OnePassage(), rewrite=Spy()))
    assert seen == ["Passages:\n(only this)"] and s.rounds[0].evidence_source == "passages"
    assert s.rounds[0].evidence_pids == [s.rounds[0].retrieved[0][0]]
    run, [paper] = answer(ws, PAPER)
    r = paper.rounds[0]
    [shown] = ShapeEvidence()(run, [paper], [r], [r.subgraph])
    assert shown == Evidence("subgraph", r.evidence, [], triples=r.evidence_triples, shown=r.evidence_shown)
    assert r.evidence.startswith("Triples:") and r.evidence_triples == len(r.G_Ans) > 0


def test_the_rewrites_retrieval_is_a_step_of_its_own(tiny_workspace):
    """D'_t comes from the rewrite_retrieval step, handed q'_t and the composition's retriever."""
    handed = []

    class OriginalToo:
        def __call__(self, run, states, rewrites, retrieve):
            handed.append((list(rewrites), type(retrieve).__name__))
            return retrieve(run, [f"{s.q.question} {q2}" for s, q2 in zip(states, rewrites)])

    ws = tiny_workspace(script)
    _, [s] = answer(ws, dataclasses.replace(PAPER, rewrite_retrieval=OriginalToo()))
    assert handed == [([REWRITE], "Retrieve")]
    both = Retrieve()(KGIRRAG().start(ws, 1), [f"{ws.dataset.questions[0].question} {REWRITE}"])[0]
    assert s.rounds[0].rewrite_retrieved == [(p, float(x)) for p, x in both]
    assert s.rewrite_retrievals == [[p for p, _ in both]]


def test_a_rewrite_note_reaches_the_trace_and_back():
    r = LoopRound(iteration=1, query="q", retrieved=[])
    assert r.record_rewrite("raw", "q2?", "q", truncated=False, note={"form": "mine", "why": 1}) == "q2?"
    d = r.to_dict()
    assert d["rewrite"] == {"raw": "raw", "question": "q2?", "malformed": False, "unchanged": False,
                            "form": "mine", "why": 1}
    assert LoopRound.from_dict(d).rewrite_note == {"form": "mine", "why": 1}
    r.record_rewrite("raw", None, "q")
    assert r.rewrite == "q" and r.rewrite_malformed and "form" not in r.to_dict()["rewrite"]
    assert Rewritten("x").note == {} and Read()(None, []) == []


def test_a_step_reading_what_no_step_recorded_names_the_round_or_the_question(tiny_workspace):
    """The reflection reads q'_t and P_t, the reader its context: run before the steps that record them, each stops
    with an error naming the round or the question (no prompt is built on None, no LLM call is made)."""
    ws = tiny_workspace(script)
    q = ws.dataset.questions[0]
    run = KGIRRAG().start(ws, 1)
    state = LoopState(q=q, query=q.question)
    r = LoopRound(iteration=1, query=q.question, retrieved=[])
    with pytest.raises(ValueError, match=r"round 1 of query .*: no rewrite q'_t recorded"):
        Reflect()(run, [state], [r], False)
    assert r.record_rewrite("raw", REWRITE, q.question) == r.rewritten() == REWRITE
    with pytest.raises(ValueError, match=r"round 1 of query .*: no passages P_t recorded"):
        Reflect()(run, [state], [r], False)
    with pytest.raises(ValueError, match=rf"question {q.qid}: no reader context"):
        Read()(run, [state])
    assert ws.llm.usage.total().calls == 0
    r.reflection_passages = []
    state.final_context = "(none)"
    assert r.shown_passages() == [] and state.reader_context() == "(none)"
