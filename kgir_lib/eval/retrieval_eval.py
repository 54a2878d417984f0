"""Single-step retrieval quality: Recall@k of dense and BM25 retrieval (paper §3.3.3, notebook 02).

Recall@k is HippoRAG's definition (:func:`kgir_lib.eval.metrics.recall_at_k`): per
question, the share of its gold passages among the first k retrieved from the
whole corpus, averaged over questions, ×100. Questions without gold passages
are left out (their recall is undefined) and the count ``n`` says how many
were scored.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from ..report import HIPPORAG2_RECALL
from .metrics import mean_recall


def rankings(index, questions: Sequence, k: int) -> list:
    """The top-``k`` pids of every question (one batched ``index.search``)."""
    hits = index.search([q.question for q in questions], k) if questions else []
    return [[pid for pid, _ in row] for row in hits]


def _scored(questions: Sequence) -> list:
    return [q for q in questions if q.gold_pids]


def recall_curve(index_by_name: Mapping[str, object], questions: Sequence, ks: Sequence[int]) -> pd.DataFrame:
    """Long table ``retriever, k, recall, n``: mean Recall@k ×100 of each index for each ``k``."""
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be a non-empty list of integers >= 1, got {list(ks)}")
    qs = _scored(questions)
    rows = []
    for name, index in index_by_name.items():
        ranked = rankings(index, qs, max(ks))
        for k in ks:
            r = 100 * mean_recall(ranked, [q.gold_pids for q in qs], k)
            rows.append({"retriever": name, "k": int(k), "recall": r, "n": len(qs)})
    return pd.DataFrame(rows, columns=["retriever", "k", "recall", "n"])


def recall_table(index_by_name: Mapping[str, object], questions: Sequence, ks: Sequence[int] = (2, 5)) -> pd.DataFrame:
    """One row a retriever: ``R@k`` columns (×100) and ``n`` (questions scored)."""
    curve = recall_curve(index_by_name, questions, ks)
    table = curve.pivot(index="retriever", columns="k", values="recall")
    table = table.reindex(list(index_by_name)).rename(columns=lambda k: f"R@{k}")
    table.columns.name = None
    table["n"] = curve.groupby("retriever")["n"].first().reindex(table.index).astype(int)
    return table


SINGLE_STEP = ("BM25", "Contriever", "NV-Embed-v2")


def published_recall(datasets: Sequence[str] = ("musique", "hotpotqa"),
                     methods: Sequence[str] = SINGLE_STEP) -> pd.DataFrame:
    """HippoRAG 2 paper's Recall@2 / @5, one row a method (default: its single-step retrievers)."""
    rows = {}
    for method in methods:
        by_ds = HIPPORAG2_RECALL[method]
        row = {}
        for ds in datasets:
            if ds in by_ds:
                row[f"{ds} R@2"], row[f"{ds} R@5"] = by_ds[ds]
        rows[method] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def recall_by_dataset(tables: Mapping[str, pd.DataFrame], *, with_n: bool = False, prefix: str = "") -> pd.DataFrame:
    """Datasets side by side: ``tables`` maps a dataset to its :func:`recall_table`; one row a retriever (named
    ``prefix`` + retriever), columns ``{dataset} R@k`` for every k, and ``{dataset} n`` (questions scored, an integer
    column) when ``with_n``. A retriever missing from a dataset's table has empty cells there."""
    rows: dict = {}
    for dataset, table in tables.items():
        ks = [c for c in table.columns if c.startswith("R@")]
        for retriever, row in table.iterrows():
            cells = rows.setdefault(f"{prefix}{retriever}", {})
            cells.update({f"{dataset} {k}": row[k] for k in ks})
            if with_n:
                cells[f"{dataset} n"] = int(row["n"])
    out = pd.DataFrame.from_dict(rows, orient="index")
    out = out.astype({c: "Int64" for c in out.columns if c.endswith(" n")})
    out.index.name = "retriever"
    return out


def with_published_recall(ours: pd.DataFrame, datasets: Sequence[str]) -> pd.DataFrame:
    """``ours`` (from :func:`recall_by_dataset`) above the HippoRAG 2 paper's single-step rows (``published: …``)
    for the columns ours has; only MuSiQue and HotpotQA have published numbers."""
    pub = published_recall([d for d in datasets if d in HIPPORAG2_RECALL["BM25"]])
    pub.index = [f"published: {m}" for m in pub.index]
    out = pd.concat([ours, pub[[c for c in pub.columns if c in ours.columns]]])
    out.index.name = "retriever"
    return out
