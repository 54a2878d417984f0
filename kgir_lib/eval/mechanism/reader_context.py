"""What each KGIR-RAG variant hands the reader: the gold passages in its final context (paper §2.4, Table 7).

The variants of Table 7 answer through the same shared reader but give it different passages
(:func:`kgir_lib.kgir.steps.hand_to_reader`): the full method the passages of ``D'_t`` new to the
round (§2.4's "new passages"; the top of ``D'_t`` when none is new), *w/o reflection* the top of ``D'_1``,
*w/o rewrite* none beyond the passages that stand in for an empty ``G_Ans``. When the reflection stops in
round 1, the full method and *w/o reflection* differ in nothing else, so an accuracy gap between them is
a gap in what the reader reads; this table measures it.

:func:`reader_context_table`, per dataset and variant, over the questions both the variant and the
reference (the full method) answered:

- ``context passages``: mean passages in the reader's context (its ``G_Ans`` triples are not passages);
- ``gold in context %``: gold passages in the context, as a share of all gold passages;
- ``questions with gold``: questions whose context holds at least one gold passage;
- ``more gold`` / ``fewer gold``: questions whose context holds more / fewer gold passages than the
  reference's, with the exact two-sided sign test of the two counts (``p sign test``).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from ..stats import mcnemar_exact
from . import round_facts as rf

VARIANTS = ("kgir", "kgir_no_subgraph", "kgir_no_reflection", "kgir_no_rewrite")
COLUMNS = ["dataset", "method", "n", "context passages", "gold in context %", "questions with gold",
           "more gold", "fewer gold", "p sign test"]


def gold_in_context(record: Mapping, n_ctx: int) -> int:
    """How many of the question's gold passages the final answer's context holds
    (:func:`kgir_lib.eval.mechanism.round_facts.answer_context`)."""
    _, gold = rf.golds(record)
    return len(set(gold) & set(rf.answer_context(record, n_ctx)))


def reader_context_table(runs: Mapping[str, Sequence[Mapping]], n_ctx: int, dataset: str,
                         reference: str = "kgir") -> pd.DataFrame:
    """One row a variant in ``runs`` (``{method key: trace records}``, one dataset), paired with ``reference``
    on the questions both have (module docstring); ``n_ctx``: the run's ``context_passages``, for traces
    that predate ``final.context_pids``. ``reference`` must be in ``runs``."""
    if reference not in runs:
        raise ValueError(f"reader_context_table: no traces of the reference method {reference!r} "
                         f"(have {sorted(runs)})")
    ref = {rf.qid_of(r): gold_in_context(r, n_ctx) for r in runs[reference]}
    rows = []
    for method, records in runs.items():
        recs = [r for r in records if rf.qid_of(r) in ref]
        if not recs:
            continue
        n_gold = sum(len(rf.golds(r)[1]) for r in recs)
        mine = [gold_in_context(r, n_ctx) for r in recs]
        theirs = [ref[rf.qid_of(r)] for r in recs]
        more = [float(a > b) for a, b in zip(mine, theirs)]
        fewer = [float(a < b) for a, b in zip(mine, theirs)]
        test = mcnemar_exact(more, fewer)
        rows.append({"dataset": dataset, "method": method, "n": len(recs),
                     "context passages": sum(len(rf.answer_context(r, n_ctx)) for r in recs) / len(recs),
                     "gold in context %": 100.0 * sum(mine) / n_gold if n_gold else float("nan"),
                     "questions with gold": sum(g > 0 for g in mine),
                     "more gold": test.b, "fewer gold": test.c, "p sign test": test.p})
    return pd.DataFrame(rows, columns=COLUMNS)
