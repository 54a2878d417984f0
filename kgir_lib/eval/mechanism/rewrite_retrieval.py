"""What the rewritten question's own retrieval ``D'_t`` adds (paper §2.3, eq. 8), and how the final ranked
list is built from it (Recall@k as HippoRAG defines it, paper §3.3.3).

:func:`rewrite_retrieval_table`, per dataset and round ``t`` over the questions that reached it:

- *gain*: questions for which ``D'_t`` holds a gold passage none of ``D_1, D'_1 .. D'_{t-1}`` held;
- *loss*: questions with a gold passage among the first ``n_ctx`` (``context_passages``) of ``D_1`` that
  the round does not show as a passage to the reflection or the reader
  (:func:`kgir_lib.eval.mechanism.round_facts.shown_passages`); gain against loss: exact McNemar (``b``: gain only);
- Recall@k (k = 2, 5) of ``D_1`` alone, of ``D_1`` merged with ``D'_t`` (:func:`merge_alternate`), and of
  ``D'_t`` alone; the per-question differences merged - ``D_1`` and ``D'_t`` - ``D_1`` with sign-flip p.

:func:`rule_table` compares rules for the final ranked list, for KGIR-RAG against its w/o-rewrite
variant (whose ``D'_t`` are empty): Recall@2/5 of each, the difference and its sign-flip p. The rules
are :data:`RULES` (each function's docstring defines it).
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ...kgir.state import ranked_list
from ...methods.context import interleave
from ..metrics import recall_at_k
from ..stats import mcnemar_exact, sign_flip_test
from . import round_facts as rf
from .forced_rounds import evidence_weights

KS = (2, 5)


def merge_alternate(first: Sequence[str], second: Sequence[str]) -> list:
    """The declared merge rule: alternate by rank, ``first`` leading (1st of ``first``, 1st of ``second``,
    2nd of ``first``, ...), duplicates dropped where they recur."""
    return interleave([list(first), list(second)])


def gold_gain(record: Mapping, t: int) -> list:
    """Gold passages in ``D'_t`` that ``D_1`` and ``D'_1 .. D'_{t-1}`` lacked."""
    _, gold = rf.golds(record)
    rs = rf.rounds(record)
    before = set(rf.d_first(record)).union(*(rf.d_rewrite(r) for r in rs[:t - 1]))
    return [p for p in gold if p in set(rf.d_rewrite(rs[t - 1])) and p not in before]


def gold_loss(record: Mapping, t: int, n_ctx: int) -> list:
    """Gold passages among the first ``n_ctx`` of ``D_1`` that round ``t`` does not show as passages."""
    _, gold = rf.golds(record)
    shown = set(rf.shown_passages(rf.rounds(record)[t - 1], n_ctx))
    top = set(rf.d_first(record)[:n_ctx])
    return [p for p in gold if p in top and p not in shown]


def rewrite_rows(record: Mapping, n_ctx: int, ks: Sequence[int] = KS) -> list:
    """One row a round with a rewrite retrieval: gain, loss and the Recall@k of D_1, merged, D'_t."""
    _, gold = rf.golds(record)
    d1, rows = rf.d_first(record), []
    for t, rnd in enumerate(rf.rounds(record), 1):
        if "rewrite_retrieved" not in rnd:
            continue
        d2 = rf.d_rewrite(rnd)
        row = {"qid": rf.qid_of(record), "round": t, "gain": bool(gold_gain(record, t)),
               "loss": bool(gold_loss(record, t, n_ctx))}
        for k in ks:
            nan = float("nan")
            row[f"R@{k} D_1"] = recall_at_k(d1, gold, k) if gold else nan
            row[f"R@{k} merged"] = recall_at_k(merge_alternate(d1, d2), gold, k) if gold else nan
            row[f"R@{k} D'_t"] = recall_at_k(d2, gold, k) if gold else nan
        rows.append(row)
    return rows


def rewrite_retrieval_table(records: Sequence[Mapping], n_ctx: int, ks: Sequence[int] = KS,
                            dataset: str = "") -> pd.DataFrame:
    """Per round (module docstring); recalls ×100; differences' p from the sign-flip test."""
    d = pd.DataFrame([row for r in records for row in rewrite_rows(r, n_ctx, ks)])
    out = []
    for t, g in (d.groupby("round", sort=True) if not d.empty else []):
        mc = mcnemar_exact(g["gain"].astype(float), g["loss"].astype(float))
        row = {"dataset": dataset, "round": t, "n": len(g), "gain": int(g["gain"].sum()), "loss": int(g["loss"].sum()),
               "p gain vs loss": mc.p}
        for k in ks:
            ok = g[g[f"R@{k} D_1"].notna()]
            row[f"R@{k} D_1"] = 100 * ok[f"R@{k} D_1"].mean()
            row[f"R@{k} D_1+D'_t"] = 100 * ok[f"R@{k} merged"].mean()
            row[f"p R@{k} merged vs D_1"] = sign_flip_test(ok[f"R@{k} merged"] - ok[f"R@{k} D_1"])
            row[f"R@{k} D'_t"] = 100 * ok[f"R@{k} D'_t"].mean()
            row[f"p R@{k} D'_t vs D_1"] = sign_flip_test(ok[f"R@{k} D'_t"] - ok[f"R@{k} D_1"])
        out.append(row)
    return pd.DataFrame(out)


# ---------------------------------------------------------------------------- ranked-list rules
def rule_current(record: Mapping, n_ctx: int) -> list:
    """The loop's rule (:func:`kgir_lib.kgir.state.ranked_list`): ``G_Ans`` source passages of every round
    by best edge weight (ties: first seen), then ``D'_1 .. D'_T`` interleaved by round, then ``D_1``."""
    rs = rf.rounds(record)
    return ranked_list(evidence_weights(rs), [rf.d_rewrite(r) for r in rs], rf.d_first(record))


def rule_context_first(record: Mapping, n_ctx: int) -> list:
    """Reader context first: the passages of the final answer's context in their order
    (:func:`kgir_lib.eval.mechanism.round_facts.answer_context`), then the current rule's list."""
    return list(dict.fromkeys(rf.answer_context(record, n_ctx) + rule_current(record, n_ctx)))


def rule_rewrite_first(record: Mapping, n_ctx: int) -> list:
    """``D'_t`` first: ``D'_1 .. D'_T`` interleaved by round, then ``D_1``; no ``G_Ans`` prefix."""
    return list(dict.fromkeys(interleave([rf.d_rewrite(r) for r in rf.rounds(record)]) + rf.d_first(record)))


def rule_retrieval_order(record: Mapping, n_ctx: int) -> list:
    """Retrieval order: ``D_1``, ``D'_1``, ..., ``D'_T`` alternated by rank (1st of each, then 2nd, ...)."""
    return interleave([rf.d_first(record)] + [rf.d_rewrite(r) for r in rf.rounds(record)])


RULES: dict = {"current": rule_current, "reader context first": rule_context_first, "D'_t first": rule_rewrite_first,
               "retrieval order": rule_retrieval_order}


def rule_recalls(records: Sequence[Mapping], n_ctx: int, ks: Sequence[int] = KS,
                 rules: Mapping[str, Callable] = RULES) -> pd.DataFrame:
    """Per question and rule: Recall@k of that rule's list (NaN without gold passages)."""
    rows = []
    for r in records:
        _, gold = rf.golds(r)
        for name, rule in rules.items():
            ranked = rule(r, n_ctx)
            rows.append({"qid": rf.qid_of(r), "rule": name,
                         **{f"R@{k}": recall_at_k(ranked, gold, k) if gold else float("nan") for k in ks}})
    return pd.DataFrame(rows, columns=["qid", "rule", *(f"R@{k}" for k in ks)])


def rule_table(full: Sequence[Mapping], no_rewrite: Sequence[Mapping], n_ctx: int, ks: Sequence[int] = KS,
               dataset: str = "", rules: Mapping[str, Callable] = RULES) -> pd.DataFrame:
    """Per rule and k: Recall@k (×100) of KGIR-RAG and of w/o rewrite on their common questions with gold
    passages, the difference and its sign-flip p."""
    a, b = rule_recalls(full, n_ctx, ks, rules), rule_recalls(no_rewrite, n_ctx, ks, rules)
    j = a.merge(b, on=["qid", "rule"], suffixes=(" full", " no_rewrite"))
    out = []
    for name in rules:
        g = j[j["rule"] == name]
        for k in ks:
            x, y = g[f"R@{k} full"], g[f"R@{k} no_rewrite"]
            ok = x.notna() & y.notna()
            d = (x[ok] - y[ok]).to_numpy()
            out.append({"dataset": dataset, "rule": name, "k": k, "n": int(ok.sum()),
                        "KGIR-RAG": 100 * x[ok].mean(), "w/o rewrite": 100 * y[ok].mean(),
                        "difference": 100 * float(np.mean(d)) if d.size else float("nan"),
                        "p": sign_flip_test(d)})
    return pd.DataFrame(out)


def current_rule_agreement(records: Sequence[Mapping], n_ctx: int) -> int:
    """How many trace-file lines' stored ``ranked_pids`` equal :func:`rule_current` rebuilt from the trace
    (a check that the rebuilt rule is the loop's; bare traces without ``ranked_pids`` do not count)."""
    return sum(list(r["ranked_pids"]) == rule_current(r, n_ctx) for r in records if "ranked_pids" in r)
