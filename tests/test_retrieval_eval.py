"""Recall@k tables of single-step retrievers on a hand-made case with known values."""
from __future__ import annotations

import math

import pytest

from kgir_lib.data import Question
from kgir_lib.eval.retrieval_eval import published_recall, recall_curve, recall_table
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
