"""Scoring a method's outputs: per-question EM, F1, Recall@2/5 and LLM usage (all ×100 where a metric,
paper §3.3.2-3.3.3), their means, and how each method writes its answers.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ...data import Question
from ...llm import LLMUsage
from ...methods.base import MethodOutput
from ..metrics import best_em, best_f1, recall_at_k

METRICS = ("EM", "F1", "R@2", "R@5")
# LLMUsage fields in score()
USAGE = ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "seconds", "truncated")
SEEDS = ("subgraph_rounds", "rounds_with_seed")  # KGIR-RAG evidence-subgraph rounds, and those with >= 1 seed (eq. 5)


def score(outputs: Sequence[MethodOutput], questions: Sequence[Question]) -> pd.DataFrame:
    """One row a question: EM, F1 (×100, SQuAD normalisation, max over aliases), R@2, R@5 (×100) and usage.

    Recall is NaN for a method without retrieval (trace ``no_retrieval``) and for a
    question without gold passages. Rows follow ``outputs``; every output's question
    must be in ``questions``.
    """
    outputs, questions = list(outputs), list(questions)
    if any(isinstance(o, Question) for o in outputs[:1]):
        raise TypeError("score(outputs, questions): the method outputs come first")
    by_qid = {q.qid: q for q in questions}
    rows = []
    for o in outputs:
        if o.qid not in by_qid:
            raise KeyError(f"score: output for question {o.qid!r} is not among the questions")
        q = by_qid[o.qid]
        row = {"qid": q.qid, "answer": o.answer, "gold": q.answers[0] if q.answers else "",
               "EM": 100.0 * best_em(o.answer, q.answers), "F1": 100.0 * best_f1(o.answer, q.answers)}
        no_retrieval = bool((o.trace or {}).get("no_retrieval"))
        for k in (2, 5):
            # no gold passages: recall_at_k is NaN (metrics module docstring: one rule with summarise)
            row[f"R@{k}"] = np.nan if no_retrieval else 100.0 * recall_at_k(o.ranked_pids, q.gold_pids, k)
        u = o.usage if isinstance(o.usage, LLMUsage) else LLMUsage.from_dict(o.usage)
        row.update({k: getattr(u, k) for k in USAGE})
        row.update(_seed_rounds(o.trace or {}))
        rows.append(row)
    cols = ["qid", "answer", "gold", *METRICS, *USAGE, *SEEDS]
    return pd.DataFrame(rows, columns=cols)


def reader_contexts(outputs: Sequence[MethodOutput]) -> pd.DataFrame:
    """One row a question: ``qid`` and ``context``, the passage ids the shared reader read, in order (a tuple; the
    trace's ``context_pids``), or None where the trace names no single reader context (a method without one,
    KGIR-RAG's rounds)."""
    rows = []
    for o in outputs:
        pids = (o.trace or {}).get("context_pids")
        rows.append({"qid": o.qid, "context": tuple(pids) if isinstance(pids, (list, tuple)) else None})
    return pd.DataFrame(rows, columns=["qid", "context"])


def _seed_rounds(trace: dict) -> dict:
    """Subgraph rounds and rounds with a seed of a KGIR-RAG trace; NaN for other methods."""
    if "rounds" not in trace:
        return {k: np.nan for k in SEEDS}
    from ..mechanism.loop_tables import trace_row

    row = trace_row(trace)
    return {k: row[k] for k in SEEDS}


def mean_scores(df: pd.DataFrame) -> dict:
    """Means of the metric and usage columns of a :func:`score` frame (NaN-skipping), plus ``n``."""
    out: dict[str, float] = {"n": int(len(df))}
    for c in (*METRICS, *USAGE):
        if c in df:
            out[c] = float(df[c].mean()) if len(df) else float("nan")
    return out


def answer_form(scores: pd.DataFrame) -> pd.DataFrame:
    """How each method's answers are written, per method and dataset: mean answer length in words and the
    answers with partial credit (F1 > 0 but EM = 0), beside EM and F1 (×100).

    EM and F1 (paper §3.3.2, SQuAD normalisation) part ways when an answer holds the gold answer and more
    words: such an answer costs EM, not F1. A method whose EM trails its F1 by more than the others' is
    writing longer answers, not retrieving worse. Rows in first-seen order of ``(method, dataset)``;
    ``scores`` as from :func:`run_suite` (columns ``method``, ``dataset``, ``answer``, ``EM``, ``F1``).
    """
    missing = {"method", "dataset", "answer", "EM", "F1"} - set(scores.columns)
    if missing:
        raise KeyError(f"answer_form: scores lack column(s) {sorted(missing)}")
    df = scores.assign(
        words=scores["answer"].fillna("").astype(str).str.split().str.len(),
        partial=((scores["F1"] > 0) & (scores["EM"] == 0)).astype(int))
    g = df.groupby(["method", "dataset"], sort=False)
    return pd.DataFrame({
        "questions": g.size(),
        "answer words (mean)": g["words"].mean(),
        "partial credit (F1 > 0, EM = 0)": g["partial"].sum(),
        "EM": g["EM"].mean(),
        "F1": g["F1"].mean(),
    })
