"""A deployable repair of ours: the reflection and the reader see ``D_1``'s top passages beside
the new passages of ``D'_t`` (a composition of the paper's steps, beside the method, never in its
place).

Why: the paper's context rule (§2.4) shows the reflection, and the shared reader after it, the
triples of ``G_Ans`` and the passages ``P_t`` of the rewritten question's retrieval ``D'_t`` that
the round's ``D_t`` lacked. Whatever the first retrieval ``D_1`` found is never shown as a passage,
and on this suite's runs most of the gold passages missing from the final reader prompt were in
``D_1``'s top (:mod:`kgir_lib.eval.mechanism.missing_gold`). This composition changes that one
step and knows no gold:

- ``P_t`` (:class:`FirstAndNewPassages`): one budget, the profile's ``context_passages`` (``n``),
  filled in one order: ``D_1``'s passages and the new passages of ``D'_t`` taken in turn,
  ``D_1``'s first (``D_1[0]``, ``new[0]``, ``D_1[1]``, ``new[1]``, ...), each passage once; when
  one list runs out the other fills the budget. The new passages are the paper's
  (:func:`~kgir_lib.kgir.state.reflection_passages`, rule ``"new"``).
- every other step is the paper's (:data:`~kgir_lib.kgir.loop.PAPER`); the reader reads
  ``G_Ans``'s triples, then ``P_t`` (:func:`~kgir_lib.kgir.steps.hand_to_reader`), as in the
  method.

:data:`FIRST_AND_NEW` is the row (:class:`~kgir_lib.kgir.variants.Variant`),
:class:`FirstAndNewKGIRRAG` the method that runs it (registry key :data:`KEY`). **Tests, declared
before any run** (:data:`FAMILY`): per dataset, the exact paired tests of this method against
KGIR-RAG (``kgir``) and against Naive RAG (``naive_rag``) on the same questions: McNemar's exact
test for EM, the sign-flip test for F1; Holm within the dataset's four tests.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from .loop import PAPER, Loop
from .state import LoopState, Run, reflection_passages
from .variants import KGIRRAG, Variant

KEY = "kgir_first_and_new"
FAMILY = tuple((against, metric) for against in ("kgir", "naive_rag") for metric in ("EM", "F1"))


def first_and_new(first: Sequence[str], new: Sequence[str], n: int) -> list:
    """At most ``n`` passages: ``first`` and ``new`` taken in turn, ``first``'s first, each passage
    once; when one runs out the other fills the budget."""
    out: list = []
    a = list(dict.fromkeys(first))
    b = list(dict.fromkeys(new))
    for i in range(max(len(a), len(b))):
        for p in (a[i] if i < len(a) else None, b[i] if i < len(b) else None):
            if p is not None and p not in out and len(out) < n:
                out.append(p)
    return out


@dataclass(frozen=True)
class FirstAndNewPassages:
    """``P_t``: ``D_1``'s top and the new passages of ``D'_t`` in turn, at most
    ``context_passages`` (:func:`first_and_new`, module docstring)."""

    def __call__(
        self, run: Run, state: LoopState, first: Sequence[str], rewritten: Sequence[str]
    ) -> list:
        n = run.cfg.context_passages
        new = reflection_passages(first, rewritten, n, "new")
        return first_and_new(state.first_retrieval or first, new, n)


FIRST_AND_NEW = Variant(
    "KGIR-RAG + D_1 beside D'_t (ours)", KEY, "ours",
    Loop(replace(PAPER, passages=FirstAndNewPassages())),
    "The full method with P_t, what the reflection and the reader read beside G_Ans's triples, "
    "made of the first retrieval D_1's top passages and the new passages of D'_t in turn (D_1's "
    "first), context_passages in all; no gold knowledge.")


@dataclass
class FirstAndNewKGIRRAG(KGIRRAG):
    """KGIR-RAG with ``D_1``'s top passages beside the new passages of ``D'_t``
    (:data:`FIRST_AND_NEW`)."""

    @property
    def spec(self) -> Variant:
        return FIRST_AND_NEW
