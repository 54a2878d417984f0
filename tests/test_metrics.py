"""EM / F1 / Recall@k (paper §3.3.2-3.3.3): hand-computed cases and agreement with the official HotpotQA logic."""
from __future__ import annotations

import math

import re
import string
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgir_lib.eval.metrics import (mean_recall, best_em, best_f1, exact_match, f1_score, normalize_answer, recall_at_k,
                                   summarise)


# ---------------------------------------------------------------- reference: hotpot_evaluate_v1 rules
# An independent re-statement of the official HotpotQA evaluation script's answer metrics
# (written from its documented behaviour, not copied): normalise = lower case, then drop
# string.punctuation characters, then replace the whole words a/an/the with a space, then
# collapse white space. F1 is zero when either side normalises to yes / no / noanswer and
# the two differ, and zero when no token is shared; EM compares normalised strings.
class OfficialHotpot:
    ARTICLES = re.compile(r"\b(a|an|the)\b")
    SPECIAL = ("yes", "no", "noanswer")

    @classmethod
    def normalize(cls, s: str) -> str:
        s = s.lower()
        s = "".join(c for c in s if c not in set(string.punctuation))
        s = cls.ARTICLES.sub(" ", s)
        return " ".join(s.split())

    @classmethod
    def f1(cls, prediction: str, ground_truth: str) -> tuple:
        p, g = cls.normalize(prediction), cls.normalize(ground_truth)
        zero = (0, 0, 0)
        if p in cls.SPECIAL and p != g:
            return zero
        if g in cls.SPECIAL and p != g:
            return zero
        p_toks, g_toks = p.split(), g.split()
        overlap = sum((Counter(p_toks) & Counter(g_toks)).values())
        if overlap == 0:
            return zero
        precision = overlap / len(p_toks)
        recall = overlap / len(g_toks)
        return 2 * precision * recall / (precision + recall), precision, recall

    @classmethod
    def em(cls, prediction: str, ground_truth: str) -> bool:
        return cls.normalize(prediction) == cls.normalize(ground_truth)


TRICKY = [
    ("The Eiffel Tower", "Eiffel Tower"),
    ("an apple", "apple"),
    ("Theatre", "the atre"),              # 'the' inside a word is not an article
    ("A.B.C.", "abc"),
    ("U.S. Army", "US army"),
    ("Hewlett-Packard", "Hewlett Packard"),
    ("yes", "yes"), ("yes", "no"), ("Yes.", "yes"), ("yes it is", "yes"), ("no", "No way"),
    ("noanswer", "noanswer"), ("noanswer", "some answer"),
    ("", ""), ("", "Paris"), ("Paris", ""), ("the", "a"), ("   ", "the"),
    ("Barack Obama", "President Barack Obama"),
    ("the the cat", "cat cat"),
    ("1,000", "1000"), ("$5", "5"), ("  spaced \t out\n", "spaced out"),
    ("café", "cafe"),                     # non-ASCII letters are kept as they are
    ("“quoted”", "quoted"),              # curly quotes are not string.punctuation
    ("July 4, 1776", "4 July 1776"),
    ("Paris, France", "Paris"),
]


@pytest.mark.parametrize("pred, gold", TRICKY)
def test_matches_official_hotpot_logic(pred, gold):
    assert normalize_answer(pred) == OfficialHotpot.normalize(pred)
    assert exact_match(pred, gold) == float(OfficialHotpot.em(pred, gold))
    assert f1_score(pred, gold) == pytest.approx(OfficialHotpot.f1(pred, gold)[0], abs=1e-12)


WORDS = st.sampled_from(["the", "a", "an", "The", "yes", "no", "noanswer", "Paris", "paris,", "France.",
                         "U.S.", "cat", "cat's", "an-apple", "1,000", "", " ", "—", "Theatre", "A"])
ANSWERS = st.lists(WORDS, max_size=6).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(ANSWERS, ANSWERS)
def test_random_answers_agree_with_official_logic(pred, gold):
    assert exact_match(pred, gold) == float(OfficialHotpot.em(pred, gold))
    assert f1_score(pred, gold) == pytest.approx(OfficialHotpot.f1(pred, gold)[0], abs=1e-12)


# ---------------------------------------------------------------- hand-computed values
def test_normalisation_by_hand():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An Apple a day") == "apple day"
    assert normalize_answer(None) == ""


def test_em_by_hand():
    assert exact_match("The Eiffel Tower.", "eiffel tower") == 1.0
    assert exact_match("Eiffel", "Eiffel Tower") == 0.0
    assert exact_match("", "") == 1.0


def test_f1_by_hand():
    # 2 shared tokens: precision 2/2, recall 2/3 -> F1 = 2*(1*2/3)/(1+2/3) = 0.8
    assert f1_score("Barack Obama", "President Barack Obama") == pytest.approx(0.8)
    # pred "cat" (articles dropped) vs gold "cat cat": 1 shared, P = 1, R = 1/2 -> 2/3
    assert f1_score("the the cat", "cat cat") == pytest.approx(2 / 3)
    # pred 4 tokens, gold 2, 1 shared: P = 1/4, R = 1/2 -> 1/3
    assert f1_score("Paris is in France", "Paris, Texas") == pytest.approx(1 / 3)
    assert f1_score("yes", "yes") == 1.0
    assert f1_score("yes", "no") == 0.0
    assert f1_score("yes it is", "yes") == 0.0   # the gold is "yes": anything else scores 0
    assert f1_score("", "") == 0.0               # nothing shared (official HotpotQA rule)
    assert f1_score("Hewlett-Packard", "Hewlett Packard") == 0.0


def test_max_over_gold_and_aliases():
    golds = ("Hewlett-Packard", "HP", "Hewlett Packard Company")
    assert best_em("hp", golds) == 1.0
    assert best_f1("Hewlett Packard", golds) == pytest.approx(0.8)  # vs the third alias: P 1, R 2/3
    assert best_em("Compaq", golds) == 0.0
    assert best_em("x", []) == 0.0 and best_f1("x", []) == 0.0
    # a bare string is one gold answer, not a list of letters
    assert best_em("Paris", "Paris") == 1.0 and best_f1("Paris", "paris") == 1.0


def test_recall_at_k_by_hand():
    ranked = ["p1", "g1", "p2", "g2", "p3"]
    assert recall_at_k(ranked, ["g1", "g2"], 2) == 0.5
    assert recall_at_k(ranked, ["g1", "g2"], 3) == 0.5
    assert recall_at_k(ranked, ["g1", "g2"], 4) == 1.0
    assert recall_at_k(ranked, ["g1", "g2", "g3"], 5) == pytest.approx(2 / 3)
    assert recall_at_k(["g1", "g1", "g2"], ["g1", "g2"], 2) == 1.0   # duplicates count once
    assert recall_at_k(ranked, ["g1", "g1"], 2) == 1.0
    assert recall_at_k([], ["g1"], 5) == 0.0
    assert math.isnan(recall_at_k(ranked, [], 5))  # undefined without gold passages
    with pytest.raises(ValueError, match="k must be"):
        recall_at_k(ranked, ["g1"], 0)


def test_summarise_by_hand():
    out = summarise(["Paris", "Barack Obama"], [("Paris",), ("President Barack Obama",)],
                    rankings=[["a", "b", "c"], ["x", "y", "z", "w", "v"]], golds=[["b", "c"], ["v"]])
    assert out["n"] == 2
    assert out["EM"] == pytest.approx(50.0)
    assert out["F1"] == pytest.approx(100 * (1.0 + 0.8) / 2)
    assert out["R@2"] == pytest.approx(100 * (0.5 + 0.0) / 2)
    assert out["R@5"] == pytest.approx(100 * (1.0 + 1.0) / 2)
    assert set(summarise(["a"], [["a"]])) == {"n", "EM", "F1"}
    assert summarise([], [])["EM"] == 0.0


def test_questions_without_gold_one_rule_in_summarise_and_score():
    """A question without gold passages is left out of Recall@k (not scored 0), in
    metrics.summarise and evaluate.score/mean_scores alike; EM/F1 still count it."""
    from kgir_lib.data import Question
    from kgir_lib.eval.evaluate import mean_scores, score
    from kgir_lib.methods.base import MethodOutput

    rankings, golds = [["g1", "x"], ["y", "z"]], [["g1"], []]
    out = summarise(["a", "b"], [["a"], ["c"]], rankings=rankings, golds=golds)
    assert out["R@2"] == 100.0 and out["n_recall"] == 1 and out["EM"] == 50.0  # the old rule: 50.0
    assert mean_recall(rankings, golds, 2) == 1.0
    assert math.isnan(mean_recall([["x"]], [[]], 2))
    qs = [Question("q1", "?", ("a",), ("g1",), "t", 1), Question("q2", "?", ("c",), (), "t", 1)]
    outs = [MethodOutput("q1", "a", ["g1", "x"]), MethodOutput("q2", "b", ["y", "z"])]
    means = mean_scores(score(outs, qs))
    assert means["R@2"] == out["R@2"] and means["EM"] == out["EM"]


def test_summarise_rejects_misaligned_input():
    with pytest.raises(ValueError, match="differ in length"):
        summarise(["a"], [])
    with pytest.raises(ValueError, match="differ in length"):
        summarise(["a"], [["a"]], rankings=[], golds=[])
    with pytest.raises(ValueError, match="both"):
        summarise(["a"], [["a"]], rankings=[["x"]])
