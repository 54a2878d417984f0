"""The paper-shaped tables of a suite's scores (notebook 05).

- :func:`summary_table`: our column group of KGIR-RAG Tables 4/5 (EM/F1) and 6
  (Recall@2/5); :func:`kgir_lib.report.with_published` puts the published numbers
  beside it in separate, labelled column groups; the figures are in :mod:`kgir_lib.notebook.viz`.
- :func:`cost_table`: LLM calls, tokens and seconds per question (the LLM cost of building each graph:
  :func:`kgir_lib.eval.cost.indexing_cost`; confidence intervals: :mod:`kgir_lib.eval.bootstrap`).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd


def questions_per_dataset(scores: pd.DataFrame) -> str:
    """How many questions each dataset of ``scores`` holds, for labels: ``"10"`` when every dataset has the
    same number, else each dataset's, e.g. ``"musique_train 100, hotpotqa 84"`` (a sample capped by a
    dataset's size)."""
    n = scores.groupby("dataset", sort=False)["qid"].nunique()
    if n.empty:
        return "0"
    if n.nunique() == 1:
        return str(int(n.iloc[0]))
    return ", ".join(f"{d} {int(k)}" for d, k in n.items())


def ours_label(cfg, n) -> str:
    """The column-group label of our numbers, e.g. ``ours (Qwen2.5-Coder-0.5B-Instruct-Q4_K_M, n=10)``;
    ``n`` as from :func:`questions_per_dataset`."""
    return f"ours ({cfg.llm_model}, n={n})"


def summary_table(scores: pd.DataFrame, metrics: Sequence[str] = ("EM", "F1"), label: str = "ours",
                  datasets: Optional[Sequence[str]] = None) -> pd.DataFrame:
    """Mean metrics per method (rows, in first-seen order) and dataset: columns ``(label, dataset, metric)``."""
    if scores.empty:
        return pd.DataFrame()
    datasets = list(datasets) if datasets is not None else list(dict.fromkeys(scores["dataset"]))
    methods = list(dict.fromkeys(scores["method"]))
    mean = scores.groupby(["method", "dataset"], sort=False)[list(metrics)].mean()
    cols = pd.MultiIndex.from_tuples([(label, d, m) for d in datasets for m in metrics],
                                     names=["source", "dataset", "metric"])
    out = pd.DataFrame(index=pd.Index(methods, name="method"), columns=cols, dtype=float)
    for (method, d), row in mean.iterrows():
        if d in datasets:
            for m in metrics:
                out.loc[method, (label, d, m)] = row[m]
    return out


def cost_table(scores: pd.DataFrame, runs: Optional[pd.DataFrame] = None, by_dataset: bool = False) -> pd.DataFrame:
    """Per method (and dataset): LLM calls, prompt / completion tokens, LLM seconds and wall seconds per question,
    completions cut at their token budget (finish reason "length") per question and, for KGIR-RAG and its
    ablations, the seed-match rate: the share of evidence-subgraph rounds with at least one seed (eq. 5).

    LLM seconds: backend time of the method's calls when first computed (cache hits
    count their stored time, :class:`StoredTimeLLM`); wall seconds: this run's total
    time divided by its questions (embedding, graph work and cache look-ups included).
    """
    keys = ["method", "dataset"] if by_dataset else ["method"]
    g = scores.groupby(keys, sort=False)
    out = pd.DataFrame({
        "questions": g.size(),
        "LLM calls / q": g["calls"].mean(),
        "prompt tokens / q": g["prompt_tokens"].mean(),
        "completion tokens / q": g["completion_tokens"].mean(),
        "tokens / q": g["prompt_tokens"].mean() + g["completion_tokens"].mean(),
        "LLM seconds / q": g["seconds"].mean(),
        "cache hits / q": g["cache_hits"].mean(),
        "truncated / q": g["truncated"].mean() if "truncated" in scores else np.nan,
        "seed-match % of rounds": (100 * g["rounds_with_seed"].sum(min_count=1) / g["subgraph_rounds"].sum(min_count=1)
                                   if "subgraph_rounds" in scores else np.nan),
        "F1": g["F1"].mean(),
    })
    if runs is not None and not runs.empty:
        r = runs.groupby(keys, sort=False)[["wall_seconds", "n"]].sum()
        out["wall seconds / q (this run)"] = r["wall_seconds"] / r["n"].where(r["n"] > 0)
    return out
