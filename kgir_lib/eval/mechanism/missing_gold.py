"""Where the gold passages missing from KGIR-RAG's final reader prompt were (notebook 04, ``04_missing_gold_where``).

The loss decomposition (:mod:`kgir_lib.eval.mechanism.loss_decomposition`) swaps the gold passages the final
reader prompt lacks into it, condition (b). A passage can be missing for two reasons: no retrieval of the loop
found it, or a retrieval found it and the paper's context rule did not show it (§2.4: the reader reads the
triples of ``G_Ans`` and the *new* passages of ``D'_t``, ``P_t``, never ``D_1`` itself). This module counts, from
the traces alone (no model call), each missing gold passage by where it was:

- ``in D_1``: in the first retrieval ``D_1`` (the original question's top ``top_k``), and among those, in its top
  ``n`` (the reader's passage budget, ``context_passages``);
- ``in a D'_t only``: not in ``D_1``, in a later retrieval of the loop (some round's ``D'_t``, or ``D_t`` of a
  round after the first, whose query is the previous round's rewrite);
- ``never retrieved``: in no retrieval of the loop.

The questions are those of the loss decomposition (:func:`~kgir_lib.eval.mechanism.loss_decomposition.prompts_of`:
gold passages known, the final answer written by a reader call); the prompt is its
:func:`~kgir_lib.eval.mechanism.loss_decomposition.final_prompt`. The same reader prompt is read by every reader of
the decomposition, so the counts hold for each.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from . import round_facts as rf
from .loss_decomposition import final_prompt

IN_D1 = "in D_1"
IN_LATER = "in a D'_t only"
NEVER = "never retrieved"
WHERE = (IN_D1, IN_LATER, NEVER)


def retrieved(record: Mapping) -> list:
    """Every passage a retrieval of the loop returned, in the order first seen: ``D_1``, then each round's
    ``D'_t`` and the later rounds' ``D_t``."""
    out = list(rf.d_first(record))
    for rnd in rf.rounds(record):
        out += rf.d_t(rnd) + rf.d_rewrite(rnd)
    return list(dict.fromkeys(out))


def where_missing(record: Mapping) -> dict:
    """``{gold pid: where}`` for each gold passage missing from the final reader prompt (:data:`WHERE`), in gold
    order; ``{}`` when nothing is missing, the question has no gold passages or no reader call."""
    _, gold = rf.golds(record)
    prompt = final_prompt(record, None)
    if not gold or prompt is None:
        return {}
    d1 = set(rf.d_first(record))
    found = set(retrieved(record))
    shown = set(prompt.pids)
    return {g: IN_D1 if g in d1 else IN_LATER if g in found else NEVER
            for g in dict.fromkeys(gold) if g not in shown}


def d1_rank(record: Mapping, pid: str) -> int:
    """The 1-based rank of ``pid`` in ``D_1``; 0 when it is not there."""
    d1 = rf.d_first(record)
    return d1.index(pid) + 1 if pid in d1 else 0


TOP_N = "of which in D_1's top n"
COLUMNS = ["dataset", "questions", "gold passages", "in the prompt", "missing", IN_D1, TOP_N,
           IN_LATER, NEVER, "questions missing gold", "questions: every missing passage retrieved",
           "questions: a missing passage never retrieved", "top k", "n"]
COLUMN_NOTES = {
    "questions": "questions with gold passages whose final answer a reader call wrote (the loss decomposition's)",
    "gold passages": "their gold passages",
    "in the prompt": "gold passages in KGIR-RAG's final reader prompt",
    "missing": "gold passages not in it: what condition (b) of the loss decomposition swaps in",
    IN_D1: "missing gold passages the first retrieval D_1 (the question's top k) held",
    "of which in D_1's top n": "of those, in D_1's top n (n: the reader's passage budget)",
    IN_LATER: "missing gold passages not in D_1 that a later retrieval (a round's D'_t) held",
    NEVER: "missing gold passages no retrieval of the loop held",
    "questions missing gold": "questions whose final prompt lacks a gold passage",
    "questions: every missing passage retrieved": "of those, questions whose every missing gold passage was retrieved",
    "questions: a missing passage never retrieved": "of those, questions with a missing gold passage never retrieved",
}


def missing_gold_table(records: Sequence[Mapping], dataset: str, n: int) -> pd.DataFrame:
    """One row for ``dataset``'s KGIR-RAG trace records: the gold passages of the final reader prompts, those
    missing, by where they were (:func:`where_missing`); ``n`` is the reader's passage budget."""
    row = dict.fromkeys(COLUMNS[1:], 0)
    top_k = 0
    for record in records:
        _, gold = rf.golds(record)
        prompt = final_prompt(record, None)
        if not gold or prompt is None:
            continue
        gold = list(dict.fromkeys(gold))
        where = where_missing(record)
        top_k = max(top_k, len(rf.d_first(record)))
        row["questions"] += 1
        row["gold passages"] += len(gold)
        row["in the prompt"] += len(gold) - len(where)
        row["missing"] += len(where)
        for pid, place in where.items():
            row[place] += 1
            row["of which in D_1's top n"] += place == IN_D1 and d1_rank(record, pid) <= n
        if where:
            row["questions missing gold"] += 1
            never = NEVER in where.values()
            row["questions: a missing passage never retrieved"] += never
            row["questions: every missing passage retrieved"] += not never
    row.update({"top k": top_k, "n": n})
    return pd.DataFrame([{"dataset": dataset, **row}]).reindex(columns=COLUMNS)


def missing_gold_sentence(table: pd.DataFrame, dataset: str) -> str:
    """The row of ``dataset`` in one sentence, every number from the table."""
    r = table[table["dataset"] == dataset].iloc[0]
    missing, top_n = int(r["missing"]), int(r[TOP_N])
    if not missing:
        return (f"{dataset}: every gold passage of the {int(r['questions'])} questions is in KGIR-RAG's final "
                f"reader prompt.")
    return (f"{dataset}: of the {missing} gold passages missing from KGIR-RAG's final reader prompt "
            f"({int(r['questions missing gold'])} of {int(r['questions'])} questions), {int(r[IN_D1])} were in the "
            f"first retrieval D_1's top {int(r['top k'])} ({top_n} in its top "
            f"{int(r['n'])}), {int(r[IN_LATER])} only in a later round's D'_t, and {int(r[NEVER])} in no "
            f"retrieval; on {int(r['questions: every missing passage retrieved'])} of the "
            f"{int(r['questions missing gold'])} questions every missing passage had been retrieved.")


# ---------------------------------------------------------------------------- the (a) -> (b) step, split
NOTHING = "nothing missing"
ALL_RETRIEVED = "every missing passage retrieved"
SOME_NEVER = "a missing passage never retrieved"
CLASSES = (ALL_RETRIEVED, SOME_NEVER, NOTHING)


def question_class(record: Mapping) -> str:
    """Where a question's missing gold passages were (:data:`CLASSES`): all retrieved (withheld by the context
    rule), at least one never retrieved, or nothing missing."""
    where = where_missing(record)
    return NOTHING if not where else SOME_NEVER if NEVER in where.values() else ALL_RETRIEVED


SWAP_CAPTION = ("The loss decomposition's step (a) -> (b), the missing gold passages swapped into KGIR-RAG's own "
                "reader prompt, split by where the question's missing gold was: every missing passage retrieved "
                "(withheld by the context rule), a missing passage no retrieval found, nothing missing. The "
                "answers are the decomposition's own (no new call); EM points over all its questions.")
SWAP_COLUMNS = ["dataset", "reader", "class", "questions", "wrong -> right", "right -> wrong", "ΔEM points"]


def swap_by_class(records: Sequence[Mapping], scored: Mapping[str, pd.DataFrame], dataset: str,
                  before: str = "as_run", after: str = "retrieval_fixed") -> pd.DataFrame:
    """The decomposition's (a) -> (b) step (``before`` -> ``after``) per reader, split by :func:`question_class`:
    questions, answers it turned right and wrong, and the EM points (×100 / all questions) each class adds.
    ``scored``: ``{reader: scored answers}`` (``qid, condition, EM``) of the loss decomposition."""
    cls = {rf.qid_of(r): question_class(r) for r in records}
    rows = []
    for reader, s in scored.items():
        em = s.pivot(index="qid", columns="condition", values="EM")
        em["class"] = [cls[q] for q in em.index]
        for c in CLASSES:
            g = em[em["class"] == c]
            up = int(((g[after] > 0) & (g[before] == 0)).sum())
            down = int(((g[after] == 0) & (g[before] > 0)).sum())
            rows.append({"dataset": dataset, "reader": reader, "class": c, "questions": len(g), "wrong -> right": up,
                         "right -> wrong": down, "ΔEM points": 100.0 * (up - down) / len(em) if len(em) else 0.0})
    return pd.DataFrame(rows, columns=SWAP_COLUMNS)


def swap_sentence(table: pd.DataFrame, dataset: str, reader: str) -> str:
    """The (a) -> (b) step of ``dataset`` read by ``reader``, split by where the missing gold was, in one
    sentence from :func:`swap_by_class`'s table."""
    rows = table[(table["dataset"] == dataset) & (table["reader"] == reader)].set_index("class")
    a, n = rows.loc[ALL_RETRIEVED], rows.loc[SOME_NEVER]
    return (f"{dataset} ({reader}): swapping the missing gold in turns {int(a['wrong -> right'])} answers right and "
            f"{int(a['right -> wrong'])} wrong on the {int(a['questions'])} questions whose every missing gold "
            f"passage had been retrieved ({a['ΔEM points']:+.1f} EM), and {int(n['wrong -> right'])} right and "
            f"{int(n['right -> wrong'])} wrong on the {int(n['questions'])} with a gold passage no retrieval found "
            f"({n['ΔEM points']:+.1f} EM).")
