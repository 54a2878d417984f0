"""Paired bootstrap confidence intervals: which differences between methods a question sample supports.

Per question, the difference of a metric between two methods is resampled over questions with
replacement; the interval is the percentiles of the resampled mean differences (notebook 05, §5).

**How an interval is read** (:data:`kgir_lib.eval.claims.READING_RULE`, the one rule the notebooks, the README
and the docs state): the verdicts come from the exact paired tests with Holm's correction inside each claim's family
(:mod:`kgir_lib.eval.claims`); a bootstrap interval is the effect size with its uncertainty, unadjusted for the
many comparisons, and never a verdict. So :func:`bootstrap_table` says only on which side of 0 an interval lies
(:data:`SIDE_COLUMN`), not which method is better.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

SIDE_COLUMN = "95 % CI vs 0 (unadjusted)"
ABOVE, BELOW, CONTAINS = "above 0", "below 0", "contains 0"


def paired_bootstrap(a: Sequence[float], b: Sequence[float], n_boot: int = 2000, seed: int = 0,
                     alpha: float = 0.05) -> tuple:
    """Paired bootstrap CI of mean(a - b) over questions: ``(mean_diff, lo, hi)``.

    ``a[i]`` and ``b[i]`` are two methods' scores on the same question i. Resample the
    question indices with replacement ``n_boot`` times (``numpy.random.default_rng(seed)``),
    take the mean difference of each resample; the interval is the (α/2, 1-α/2)
    percentiles of those means (numpy's linear interpolation); ``mean_diff`` is the
    observed mean difference.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired_bootstrap: a and b must be 1-D and of equal length, got {a.shape} and {b.shape}")
    if a.size == 0:
        raise ValueError("paired_bootstrap: no paired values")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("paired_bootstrap: NaN scores (a metric not defined for some question)")
    if n_boot < 1 or not 0 < alpha < 1:
        raise ValueError(f"paired_bootstrap: need n_boot >= 1 and 0 < alpha < 1, got {n_boot}, {alpha}")
    d = a - b
    idx = np.random.default_rng(seed).integers(0, d.size, size=(n_boot, d.size))
    means = d[idx].mean(axis=1)
    lo, hi = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(d.mean()), float(lo), float(hi)


def dataset_groups(scores: pd.DataFrame, pooled: bool = True) -> list:
    """``[(dataset, rows)]`` in first-seen order, plus ``("all", scores)`` when ``pooled`` and there are
    several datasets (pooled rows resample (dataset, question) pairs together)."""
    groups = [(d, scores[scores["dataset"] == d]) for d in dict.fromkeys(scores["dataset"])]
    if pooled and len(groups) > 1:
        groups.append(("all", scores))
    return groups


def paired_scores(rows: pd.DataFrame, reference: str, other: str, metric: str) -> tuple:
    """``(a, b)``: ``metric`` of ``reference`` and of ``other`` on the (dataset, qid) pairs both have a value for
    (a NaN, e.g. recall without gold passages, leaves that question out); empty arrays if none."""
    if metric not in rows.columns:
        return np.array([]), np.array([])
    ref = rows[rows["method"] == reference].set_index(["dataset", "qid"])[metric]
    oth = rows[rows["method"] == other].set_index(["dataset", "qid"])[metric]
    common = ref.index.intersection(oth.index)
    a, b = ref.loc[common].to_numpy(float), oth.loc[common].to_numpy(float)
    ok = ~(np.isnan(a) | np.isnan(b))
    return a[ok], b[ok]


def bootstrap_table(scores: pd.DataFrame, reference: str = "KGIR-RAG", metrics: Sequence[str] = ("EM", "F1"),
                    n_boot: int = 2000, seed: int = 0, pooled: bool = True) -> pd.DataFrame:
    """``reference`` minus every other method, per dataset (and pooled over datasets), paired by question.

    Columns: ``n``, ``mean diff``, ``CI lo``, ``CI hi`` (95 %), and :data:`SIDE_COLUMN`: where the interval lies,
    :data:`ABOVE` / :data:`BELOW` 0 or :data:`CONTAINS` it. It is not a verdict
    (:data:`kgir_lib.eval.claims.READING_RULE`): the interval is not adjusted for the many comparisons of the table.
    Pooled rows (dataset ``all``) resample (dataset, question) pairs together.
    """
    if scores.empty or reference not in set(scores["method"]):
        return pd.DataFrame(columns=["dataset", "baseline", "metric", "n", "mean diff", "CI lo", "CI hi",
                                     SIDE_COLUMN])
    rows = []
    for d, df in dataset_groups(scores, pooled):
        for other in dict.fromkeys(df["method"]):
            if other == reference:
                continue
            for m in metrics:
                a, b = paired_scores(df, reference, other, m)
                if a.size == 0:
                    continue
                diff, lo, hi = paired_bootstrap(a, b, n_boot=n_boot, seed=seed)
                side = ABOVE if lo > 0 else BELOW if hi < 0 else CONTAINS
                rows.append({"dataset": d, "baseline": other, "metric": m, "n": a.size, "mean diff": diff,
                             "CI lo": lo, "CI hi": hi, SIDE_COLUMN: side})
    return pd.DataFrame(rows)
