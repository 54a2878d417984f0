"""What each KGIR-RAG round adds, from a forced-rounds run (paper §2.4, Table 7's iteration count).

The forced-rounds variant (method key ``kgir_forced``) runs exactly ``max_iterations`` rounds whatever
the reflection says, and records the shared reader's answer after every round (``round_answers``; the
answer "after T rounds" is ``round_answers[T-1]``). Per dataset and round ``t``, :func:`forced_round_table`:

- ``R@5 D'_t``: Recall@5 of the round's rewrite retrieval alone;
- ``recall cumulative``: share of gold passages among all passages retrieved up to round ``t``
  (``D_1 .. D_t`` and ``D'_1 .. D'_t``, no budget);
- ``R@5 cumulative (rule)``: Recall@5 of the method's ranked-list rule (:func:`kgir_lib.kgir.state.ranked_list`:
  ``G_Ans`` source passages by best edge weight, then ``D'_1 .. D'_t`` interleaved, then ``D_1``) built
  from rounds 1 .. ``t`` only -- the list the method would report had it stopped after round ``t``;
- ``EM`` / ``F1`` of ``round_answers[t-1]``;
- ``changed``: questions whose normalised answer differs from round ``t-1``'s, split into better / worse
  / neither by EM and by F1;
- exact tests against round 1: McNemar on EM (``b``: right only in round 1, ``c``: only in round ``t``),
  the sign-flip test on F1.

Recall means skip questions without gold passages (:mod:`kgir_lib.eval.metrics`).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ...kgir.state import ranked_list
from ..metrics import best_em, best_f1, normalize_answer, recall_at_k
from ..stats import mcnemar_exact, sign_flip_test
from . import round_facts as rf

# What the columns of forced_round_table mean (shown under the table in notebook 04).
COLUMN_NOTES = {
    "R@5 D'_t": "Recall@5 of the round's retrieval with the rewritten question alone",
    "recall cumulative": "share of the gold passages among every passage retrieved up to this round",
    "R@5 cumulative (rule)": "Recall@5 of the method's ranked list built from rounds 1 to this one",
    "changed": "questions whose answer differs from the round before",
    "EM better": "of the changed answers: exact match gained (EM 0 -> 100)",
    "EM worse": "of the changed answers: exact match lost",
    "EM neither": "of the changed answers: EM the same before and after (both wrong, or both right)",
    "F1 better": "of the changed answers: F1 higher than the round before",
    "F1 worse": "of the changed answers: F1 lower",
    "F1 neither": "of the changed answers: F1 unchanged",
    "McNemar b": "questions right (EM) after round 1 but not after this round",
    "McNemar c": "questions right after this round but not after round 1",
    "EM p vs round 1": "exact McNemar test of this round's EM against round 1's",
    "F1 p vs round 1": "sign-flip permutation test of this round's F1 against round 1's",
}


def evidence_weights(rounds: Sequence[Mapping]) -> dict:
    """``{pid: best G_Ans edge weight}`` over ``rounds``, first seen first (as the loop accumulates it)."""
    out: dict = {}
    for rnd in rounds:
        for row in rf.gans_rows(rnd):
            pid, w = str(row[3]), float(row[4]) if len(row) > 4 else 0.0
            if pid not in out or w > out[pid]:
                out[pid] = w
    return out


def ranked_until(record: Mapping, t: int) -> list:
    """The method's ranked list built from rounds 1 .. ``t`` (module docstring)."""
    rs = rf.rounds(record)[:t]
    return ranked_list(evidence_weights(rs), [rf.d_rewrite(r) for r in rs], rf.d_first(record))


def _set_recall(found: set, gold: Sequence[str]) -> float:
    g = set(gold)
    return len(g & found) / len(g) if g else float("nan")


def forced_rows(record: Mapping) -> list:
    """One row a round of one forced-rounds trace: recalls, the round's answer and its EM / F1."""
    answers, gold = rf.golds(record)
    ra = rf.trace_of(record).get("round_answers")
    if not isinstance(ra, list):
        raise ValueError(f"question {rf.qid_of(record)!r}: trace has no 'round_answers' (not a forced-rounds run)")
    rs = rf.rounds(record)
    rows, seen = [], set()
    for t in range(1, len(ra) + 1):
        rnd = rs[t - 1] if t <= len(rs) else {}
        seen |= set(rf.d_t(rnd)) | set(rf.d_rewrite(rnd))
        answer = rf.round_answer(record, t) or ""
        rows.append({"qid": rf.qid_of(record), "round": t, "answer": answer,
                     "R@5 D'_t": recall_at_k(rf.d_rewrite(rnd), gold, 5) if gold else float("nan"),
                     "recall cumulative": _set_recall(seen, gold),
                     "R@5 cumulative (rule)": recall_at_k(ranked_until(record, t), gold, 5) if gold else float("nan"),
                     "EM": best_em(answer, answers), "F1": best_f1(answer, answers)})
    return rows


def _changes(prev: pd.DataFrame, cur: pd.DataFrame) -> dict:
    """Counts of answers that changed between two rounds (rows aligned by question), and how."""
    changed = prev["answer"].map(normalize_answer).to_numpy() != cur["answer"].map(normalize_answer).to_numpy()
    out = {"changed": int(changed.sum())}
    for m in ("EM", "F1"):
        d = cur[m].to_numpy() - prev[m].to_numpy()
        out[f"{m} better"] = int((changed & (d > 0)).sum())
        out[f"{m} worse"] = int((changed & (d < 0)).sum())
        out[f"{m} neither"] = int((changed & (d == 0)).sum())
    return out


def forced_round_table(records: Sequence[Mapping], dataset: str = "") -> pd.DataFrame:
    """Per round of forced-rounds traces (module docstring); recalls, EM and F1 ×100."""
    rows = pd.DataFrame([row for r in records for row in forced_rows(r)])
    cols = ["dataset", "round", "n", "R@5 D'_t", "recall cumulative", "R@5 cumulative (rule)", "EM", "F1", "changed",
            "EM better", "EM worse", "EM neither", "F1 better", "F1 worse", "F1 neither",
            "McNemar b", "McNemar c", "EM p vs round 1", "F1 p vs round 1"]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    by_round = {t: g.set_index("qid") for t, g in rows.groupby("round", sort=True)}
    first = by_round[1]
    out = []
    for t, g in by_round.items():
        g = g.loc[g.index.intersection(first.index)]
        base = first.loc[g.index]
        row = {"dataset": dataset, "round": t, "n": len(g),
               **{c: 100 * float(np.nanmean(g[c])) if g[c].notna().any() else float("nan")
                  for c in ("R@5 D'_t", "recall cumulative", "R@5 cumulative (rule)")},
               "EM": 100 * g["EM"].mean(), "F1": 100 * g["F1"].mean()}
        if t > 1:
            prev = by_round[t - 1]
            both = g.index.intersection(prev.index)
            row.update(_changes(prev.loc[both], g.loc[both]))
            mc = mcnemar_exact(base["EM"], g["EM"])
            row.update({"McNemar b": mc.b, "McNemar c": mc.c, "EM p vs round 1": mc.p,
                        "F1 p vs round 1": sign_flip_test(g["F1"].to_numpy() - base["F1"].to_numpy())})
        out.append(row)
    return pd.DataFrame(out, columns=cols)
