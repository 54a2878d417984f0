"""Recall@k tables of single-step retrievers on a hand-made case with known values."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from kgir_lib.data import Question
from kgir_lib.eval.retrieval_eval import (published_recall, recall_by_dataset, recall_curve, recall_table,
                                         with_published_recall)
from kgir_lib.retrieval import BM25Index

from conftest import make_passage


class FixedIndex:
    """Returns a fixed ranking per question text."""

    def __init__(self, ranking: dict):
        self.ranking = ranking
        self.calls = 0

    def search(self, queries, k):
        self.calls += 1
        return [[(pid, 1.0 / (i + 1)) for i, pid in enumerate(self.ranking[q][:k])] for q in queries]


QS = [
    Question("1", "q1", ("a",), ("g1", "g2"), "t"),
    Question("2", "q2", ("b",), ("g3",), "t"),
    Question("3", "q3", ("c",), (), "t"),  # no gold: not scored
]
GOOD = FixedIndex({"q1": ["g1", "x", "g2", "y", "z"], "q2": ["x", "y", "z", "w", "g3"], "q3": ["x"] * 5})
BAD = FixedIndex({"q1": ["x", "y", "z", "w", "v"], "q2": ["g3", "y", "z", "w", "v"], "q3": ["x"] * 5})


def test_recall_table_known_values():
    t = recall_table({"good": GOOD, "bad": BAD}, QS, ks=(1, 2, 3, 5))
    # good: q1 R@1=.5 R@2=.5 R@3=1 R@5=1; q2 R@1..3=0, R@5=1 -> means 25, 25, 50, 100
    assert t.loc["good"].tolist() == [25.0, 25.0, 50.0, 100.0, 2]
    # bad: q1 always 0; q2 always 1 -> 50 everywhere
    assert t.loc["bad"].tolist() == [50.0, 50.0, 50.0, 50.0, 2]
    assert list(t.columns) == ["R@1", "R@2", "R@3", "R@5", "n"] and list(t.index) == ["good", "bad"]


def test_recall_curve_is_monotone_and_one_search_per_index():
    idx = FixedIndex(GOOD.ranking)
    c = recall_curve({"good": idx}, QS, ks=range(1, 6))
    assert idx.calls == 1
    assert c["recall"].tolist() == [25.0, 25.0, 50.0, 50.0, 100.0]
    assert c["recall"].is_monotonic_increasing and set(c["n"]) == {2}


def test_no_scored_questions_gives_nan():
    t = recall_table({"good": GOOD}, QS[2:], ks=(2,))
    assert math.isnan(t.loc["good", "R@2"]) and t.loc["good", "n"] == 0


def test_bad_ks():
    with pytest.raises(ValueError, match="ks must be"):
        recall_curve({"good": GOOD}, QS, ks=(0, 2))


def test_bm25_on_a_tiny_corpus():
    ps = [make_passage("Compaq", "Compaq top PC maker 1994"), make_passage("HP", "HP merged with Compaq in 2002"),
          make_passage("Dell", "Dell founded 1984")]
    q = Question("1", "which company merged in 2002", ("HP",), (ps[1].pid,), "t")
    t = recall_table({"BM25": BM25Index(ps)}, [q], ks=(1,))
    assert t.loc["BM25", "R@1"] == 100.0


def test_published_recall_numbers():
    p = published_recall()
    assert p.loc["BM25"].tolist() == [32.4, 43.5, 57.3, 74.8]
    assert p.loc["NV-Embed-v2", "hotpotqa R@5"] == 94.5
    assert list(p.index) == ["BM25", "Contriever", "NV-Embed-v2"]  # single-step retrievers only
    assert published_recall(["musique"], ["HippoRAG 2"]).loc["HippoRAG 2"].tolist() == [56.1, 74.7]


def test_recall_by_dataset_puts_datasets_side_by_side():
    a = recall_table({"good": GOOD, "bad": BAD}, QS, ks=(2, 5))
    b = recall_table({"bad": BAD}, QS[1:], ks=(2, 5))  # one retriever only, one scored question
    t = recall_by_dataset({"d1": a, "d2": b}, with_n=True)
    assert list(t.columns) == ["d1 R@2", "d1 R@5", "d1 n", "d2 R@2", "d2 R@5", "d2 n"]
    assert t.index.name == "retriever" and list(t.index) == ["good", "bad"]
    assert t.loc["good", ["d1 R@2", "d1 R@5", "d1 n"]].tolist() == [25.0, 100.0, 2]
    assert t.loc["bad"].tolist() == [50.0, 50.0, 2, 100.0, 100.0, 1]
    assert math.isnan(t.loc["good", "d2 R@2"]) and t.loc["good", "d2 n"] is pd.NA
    assert str(t["d1 n"].dtype) == "Int64"
    plain = recall_by_dataset({"d1": a}, prefix="ours: ")
    assert list(plain.index) == ["ours: good", "ours: bad"] and list(plain.columns) == ["d1 R@2", "d1 R@5"]


def test_with_published_recall_adds_the_papers_rows_for_the_columns_ours_has():
    ours = recall_by_dataset({"hotpotqa": recall_table({"good": GOOD}, QS, ks=(2, 5)),
                              "musique_train": recall_table({"good": GOOD}, QS, ks=(2, 5))}, prefix="ours: ")
    t = with_published_recall(ours, ["hotpotqa", "musique_train"])
    assert list(t.index) == ["ours: good", "published: BM25", "published: Contriever", "published: NV-Embed-v2"]
    assert t.loc["published: BM25", ["hotpotqa R@2", "hotpotqa R@5"]].tolist() == [57.3, 74.8]
    assert t.loc["published: BM25", ["musique_train R@2"]].isna().all()  # no published number for it
    assert list(t.columns) == list(ours.columns) and t.index.name == "retriever"
