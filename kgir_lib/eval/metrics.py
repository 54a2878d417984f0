"""Answer and retrieval metrics (paper §3.3.2-3.3.3).

EM / F1 use SQuAD normalisation (lower case, strip punctuation and the articles
a/an/the, fold white space) and take the max over the gold answer and its
aliases. F1 follows the official HotpotQA evaluation: a yes/no/noanswer
prediction or gold scores F1 only when both are equal. Reported ×100 by
:func:`summarise`.

Recall@k is HippoRAG's passage-level definition: per question, the share of its
gold passages among the first k passages of the method's final ranked list,
averaged over questions.

**Questions without gold passages** (one rule everywhere):
Recall@k is *undefined* for them (:func:`recall_at_k` returns NaN) and they are
left out of the Recall@k mean (:func:`mean_recall`, used by :func:`summarise`;
``evaluate.score`` / ``mean_scores`` skip the NaN the same way); EM and F1 still
count them. Scoring them 0 would penalise a method for a question no ranked
list can answer; HippoRAG's evaluation sets have gold passages for every
question, so the rule changes nothing there.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

from ..gold import normalize_answer  # SQuAD normalisation; the gold chains name entities with it too

_SPECIAL = {"yes", "no", "noanswer"}


def exact_match(prediction: str, gold: str) -> float:
    """1.0 if the normalised strings are equal (two empty answers are equal), else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    """Token-level F1 of the normalised answers (official HotpotQA rules: yes/no/noanswer must match exactly;
    no shared token, including two empty answers, gives 0)."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in _SPECIAL or ref in _SPECIAL) and pred != ref:
        return 0.0
    pred_toks, ref_toks = pred.split(), ref.split()
    common = Counter(pred_toks) & Counter(ref_toks)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_toks), same / len(ref_toks)
    return 2 * precision * recall / (precision + recall)


def _golds(golds: Iterable[str] | str) -> list:
    # a bare string is one gold answer, not a sequence of one-letter answers
    return [golds] if isinstance(golds, str) else list(golds)


def best_em(prediction: str, golds: Iterable[str] | str) -> float:
    """Max EM over the gold answer and its aliases (0.0 when there is none)."""
    return max((exact_match(prediction, g) for g in _golds(golds)), default=0.0)


def best_f1(prediction: str, golds: Iterable[str] | str) -> float:
    """Max F1 over the gold answer and its aliases (0.0 when there is none)."""
    return max((f1_score(prediction, g) for g in _golds(golds)), default=0.0)


def recall_at_k(ranked_pids: Sequence[str], gold_pids: Sequence[str], k: int) -> float:
    """Share of ``gold_pids`` among the first ``k`` distinct ``ranked_pids`` (HippoRAG's Recall@k).

    Duplicates count once on both sides; no gold passages gives NaN (undefined; module docstring).
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    gold = set(gold_pids)
    if not gold:
        return float("nan")
    top = set(list(dict.fromkeys(ranked_pids))[:k])
    return len(gold & top) / len(gold)


def mean_recall(rankings: Sequence[Sequence[str]], golds: Sequence[Sequence[str]], k: int) -> float:
    """Mean Recall@k over the questions that have gold passages (NaN when none has)."""
    vals = [recall_at_k(r, g, k) for r, g in zip(rankings, golds) if set(g)]
    return sum(vals) / len(vals) if vals else float("nan")


def summarise(predictions: Sequence[str], answers: Sequence[Sequence[str]],
              rankings: Sequence[Sequence[str]] | None = None,
              golds: Sequence[Sequence[str]] | None = None, ks: Sequence[int] = (2, 5)) -> dict:
    """Mean EM, F1 (×100) and, given rankings and gold passages, Recall@k (×100).

    Recall@k averages over the questions with gold passages only (``n_recall`` of them;
    module docstring). Empty input gives zeros with ``n = 0``.
    """
    if len(predictions) != len(answers):
        raise ValueError(f"predictions ({len(predictions)}) and answers ({len(answers)}) differ in length")
    if (rankings is None) != (golds is None):
        raise ValueError("Recall@k needs both rankings and golds")
    if rankings is not None and golds is not None and not len(rankings) == len(golds) == len(predictions):
        raise ValueError(f"rankings ({len(rankings)}), golds ({len(golds)}) and predictions "
                         f"({len(predictions)}) differ in length")
    n = max(len(predictions), 1)
    out = {
        "n": len(predictions),
        "EM": 100 * sum(best_em(p, a) for p, a in zip(predictions, answers)) / n,
        "F1": 100 * sum(best_f1(p, a) for p, a in zip(predictions, answers)) / n,
    }
    if rankings is not None and golds is not None:
        out["n_recall"] = sum(bool(set(g)) for g in golds)
        for k in ks:
            out[f"R@{k}"] = 100 * mean_recall(rankings, golds, k)
    return out
