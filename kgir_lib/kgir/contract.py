"""The written contract of KGIR-RAG's steps: what each kind of step is handed and what it returns.

Every step of a composition (:class:`~kgir_lib.kgir.loop.Steps`) is an object with one public
method, ``__call__``; its kind is one :class:`typing.Protocol` below. A step returns its result;
the loop (:mod:`kgir_lib.kgir.loop`) records what it returns in the round
(:class:`~kgir_lib.kgir.rounds.LoopRound`) and hands it to the next step, and never reads a step's
result back out of a record. What a step may write besides its result is its own trace detail
(the NER reply, the reflection's verdict, the reader's call) and the run's counters.

=====================  ====================================================  ==================
``Steps`` field        handed                        returns, one per question   paper
=====================  ====================================================  ==================
``retrieve``           queries                       ``Ranked``: [(pid, score)]  eq. 2
``seeds``              states, rounds                :class:`Seeds`              eq. 4
``subgraph``           states, rounds, seeds step    :class:`EvidenceSubgraph`   Algorithm 1
``evidence``           states, rounds, subgraphs     :class:`Evidence`           §2.3-2.4
``rewrite``            states, rounds                :class:`Rewritten`          eq. 8, Fig. 4
``rewrite_retrieval``  states, ``q'_t``, retrieve    ``Ranked`` (``D'_t``)       §2.3
``passages``           one state, D_t, D'_t pids     pids (``P_t``)              §2.4
``reflect``            states, rounds, last round?   the states that go on       §2.4, Fig. 5
``read``               states                        answers (str)               §3.3.1
=====================  ====================================================  ==================

A step that returns anything else stops the run at once with a :class:`StepContractError` naming
the step (:func:`checked`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, Protocol, Sequence, TypeGuard, Union

from .subgraph import EvidenceSubgraph, Seeds

if TYPE_CHECKING:
    from .rounds import LoopRound
    from .state import LoopState, Run

Ranked = list[tuple[str, float]]  # [(pid, score)], best first: one retrieval of one query


@dataclass(frozen=True)
class Rewritten:
    """What a rewrite step returns for one question: ``question``, the rewritten question ``q'_t``
    (``None``: the reply had none, it is malformed and the loop keeps the query), the model's
    ``raw`` reply (``""``: no model call), ``truncated`` (the reply was cut at its token budget;
    ``None``: no model call, so no usable rate), and ``note``: the step's own words about how
    ``q'_t`` was made, written into the trace's ``rewrite`` record (empty for eq. 8's prompt)."""

    question: Optional[str]
    raw: str = ""
    truncated: Optional[bool] = None
    note: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Evidence:
    """What Rewrite, Reflection and the reader see of one round (:class:`EvidenceStep`):
    ``source`` ``"subgraph"`` (the ``G_Ans`` triples: ``triples`` distinct, ``shown`` of them) or
    ``"passages"`` (``pids`` stand in for ``G_Ans``), and the ``text`` the prompts show."""

    source: str
    text: str
    pids: list = field(default_factory=list)
    triples: Optional[int] = None
    shown: Optional[int] = None


class RetrieveStep(Protocol):
    """Dense retrieval (eq. 2): the ranked passages of each query."""

    def __call__(self, run: Run, queries: Sequence[str]) -> list[Ranked]:
        ...


class SeedsStep(Protocol):
    """The seeds of Algorithm 1 (eq. 4) of each open question."""

    def __call__(self, run: Run, states: Sequence[LoopState],
                 rounds: Sequence[LoopRound]) -> list[Seeds]:
        ...


class SubgraphStep(Protocol):
    """Algorithm 1: ``G_Ans`` of each open question from its ``D_t``, seeded by ``seeds``."""

    def __call__(self, run: Run, states: Sequence[LoopState], rounds: Sequence[LoopRound],
                 seeds: SeedsStep) -> list[EvidenceSubgraph]:
        ...


class EvidenceStep(Protocol):
    """What Rewrite, Reflection and the reader see: from each question's ``G_Ans`` (``None``:
    no subgraph step) or its round's ``D_t``."""

    def __call__(self, run: Run, states: Sequence[LoopState], rounds: Sequence[LoopRound],
                 subgraphs: Sequence[Optional[EvidenceSubgraph]]) -> list[Evidence]:
        ...


class RewriteStep(Protocol):
    """``q'_t`` of each open question (eq. 8), reading its round's evidence and its history; a
    plain string is taken as :class:`Rewritten` with that question and no model reply."""

    def __call__(self, run: Run, states: Sequence[LoopState],
                 rounds: Sequence[LoopRound]) -> Sequence[Union[Rewritten, str]]:
        ...


class RewriteRetrievalStep(Protocol):
    """``D'_t``: the passages of each rewritten question, with the composition's ``retrieve``."""

    def __call__(self, run: Run, states: Sequence[LoopState], rewrites: Sequence[str],
                 retrieve: RetrieveStep) -> list[Ranked]:
        ...


class PassagesStep(Protocol):
    """``P_t`` of one question: at most ``context_passages`` pids of ``D'_t`` (``rewritten``);
    ``first`` is ``D_t``."""

    def __call__(self, run: Run, state: LoopState, first: Sequence[str],
                 rewritten: Sequence[str]) -> list[str]:
        ...


class ReflectStep(Protocol):
    """The reflection of each open question and what follows it; returns the states that go on
    to the next round (``last``: the round cap is reached)."""

    def __call__(self, run: Run, states: Sequence[LoopState], rounds: Sequence[LoopRound],
                 last: bool) -> list[LoopState]:
        ...


class ReadStep(Protocol):
    """The shared reader: the answer of each state from its context."""

    def __call__(self, run: Run, states: Sequence[LoopState]) -> list[str]:
        ...


class StepContractError(TypeError):
    """A step returned something its kind does not return (the message names the step)."""


def _is_ranked(x: object) -> bool:
    return isinstance(x, (list, tuple)) and all(
        isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[0], str)
        for pair in x)


def _is_pids(x: object) -> TypeGuard[Sequence[str]]:
    return isinstance(x, (list, tuple)) and all(isinstance(p, str) for p in x)


# what each kind returns for one question, in words and as a test
ITEMS: dict[str, tuple[str, Callable[[object], bool]]] = {
    "retrieve": ("a ranked list [(pid, score)]", _is_ranked),
    "rewrite_retrieval": ("a ranked list [(pid, score)]", _is_ranked),
    "seeds": ("a Seeds", lambda x: isinstance(x, Seeds)),
    "subgraph": ("an EvidenceSubgraph", lambda x: isinstance(x, EvidenceSubgraph)),
    "evidence": ("an Evidence", lambda x: isinstance(x, Evidence)),
    "rewrite": ("a Rewritten or a str", lambda x: isinstance(x, (Rewritten, str))),
    "read": ("an answer str", lambda x: isinstance(x, str)),
}


def _fail(kind: str, step: object, why: str) -> StepContractError:
    return StepContractError(f"step {kind!r} ({type(step).__name__}) {why}")


def checked(kind: str, step: object, result: object, n: int) -> list:
    """``result`` of the ``kind`` step ``step`` as a list, if it holds one item of the kind (the
    module's table) for each of the ``n`` questions it was handed; else a
    :class:`StepContractError` naming the step, what it returned and what its kind returns."""
    what, test = ITEMS[kind]
    if not isinstance(result, (list, tuple)):
        raise _fail(kind, step, f"returned {type(result).__name__}: a list of {n} "
                                f"(one per question, each {what}) is its contract")
    if len(result) != n:
        raise _fail(kind, step, f"returned {len(result)} items for {n} questions")
    for i, item in enumerate(result):
        if not test(item):
            raise _fail(kind, step, f"returned item {i} of type {type(item).__name__}: "
                                    f"each is {what}")
    return list(result)


def checked_passages(step: object, result: object) -> list:
    """``P_t`` of one question (:class:`PassagesStep`), or a :class:`StepContractError`."""
    if not _is_pids(result):
        raise _fail("passages", step, f"returned {type(result).__name__} {result!r:.80}: "
                                      f"a list of pids (str) is its contract")
    return list(result)


def checked_states(step: object, result: object, states: Sequence[LoopState]) -> list:
    """The states a reflect step says go on: each one of the ``states`` it was handed."""
    if not isinstance(result, (list, tuple)):
        raise _fail("reflect", step, f"returned {type(result).__name__}: a list of the states "
                                     f"that go on is its contract")
    handed = {id(s) for s in states}
    strange = [i for i, s in enumerate(result) if id(s) not in handed]
    if strange:
        raise _fail("reflect", step, f"returned item {strange[0]} that is none of the states "
                                     f"it was handed")
    return list(result)


@dataclass(frozen=True)
class CheckedSeeds:
    """The seeds step as the subgraph step is handed it: its result checked (:func:`checked`)."""

    step: SeedsStep

    def __call__(self, run: Run, states: Sequence[LoopState],
                 rounds: Sequence[LoopRound]) -> list[Seeds]:
        return checked("seeds", self.step, self.step(run, states, rounds), len(states))
