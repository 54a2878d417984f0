"""Forced-rounds table (kgir_lib.eval.mechanism.forced_rounds): per-round recalls, answers, change counting, exact
tests."""
from __future__ import annotations

import pytest

from kgir_lib.eval.mechanism.forced_rounds import evidence_weights, forced_round_table, forced_rows, ranked_until

from _mech_traces import record, rnd

D1 = ["pX1", "pX2", "pX3", "pX4", "pX5", "pCompaq"]
DP1 = ["pY1", "pY2", "pY3", "pY4", "pY5", "pY6"]
DP2 = ["pY1", "pHP", "pZ1", "pZ2", "pZ3"]
DP3 = ["pZ1", "pZ2", "pZ3", "pZ4", "pZ5"]


def _q1(answers=("IBM", "HP", "Hewlett-Packard")) -> dict:
    rounds = [rnd(t=1, retrieved=D1, gans=[("A", "r", "B", "pX2", 0.5)], rewrite_retrieved=DP1, verdict="missing"),
              rnd(t=2, retrieved=DP1, gans=[("C", "r", "D", "pY3", 0.9)], rewrite_retrieved=DP2, verdict="missing"),
              rnd(t=3, retrieved=DP2, gans=[], rewrite_retrieved=DP3, verdict="answer")]
    return record("Q1", rounds=rounds, answer=answers[-1], round_answers=list(answers))


def _answers_only(qid, answers, gold) -> dict:
    return record(qid, rounds=[rnd(t=t) for t in (1, 2, 3)], answer=answers[-1], round_answers=list(answers),
                  gold_answers=gold)


def test_ranked_list_truncated_at_round_t():
    r = _q1()
    assert evidence_weights(r["trace"]["rounds"]) == {"pX2": 0.5, "pY3": 0.9}
    assert ranked_until(r, 1)[:5] == ["pX2", "pY1", "pY2", "pY3", "pY4"]
    assert ranked_until(r, 2)[:5] == ["pY3", "pX2", "pY1", "pY2", "pHP"]
    assert ranked_until(r, 3)[:5] == ["pY3", "pX2", "pY1", "pZ1", "pY2"]


def test_forced_rows_recalls():
    rows = forced_rows(_q1())
    got = [(r["R@5 D'_t"], r["recall cumulative"], r["R@5 cumulative (rule)"]) for r in rows]
    assert got == [(0.0, 0.5, 0.0), (0.5, 1.0, 0.5), (0.0, 1.0, 0.0)]
    assert [r["EM"] for r in rows] == [0.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="round_answers"):
        forced_rows(record("plain"))


def test_forced_round_table_changes_and_tests():
    recs = [_q1(),
            _answers_only("Q2", ["HP", "HP", "Compaq"], ["Hewlett-Packard", "HP"]),
            _answers_only("Q3", ["Packard Bell", "Hewlett Packard Company", "Packard Bell"], ["Hewlett Packard"])]
    tab = forced_round_table(recs, "ds").set_index("round")
    assert list(tab["n"]) == [3, 3, 3]
    assert list(tab["EM"].round(3)) == [33.333, 66.667, 33.333]
    r2, r3 = tab.loc[2], tab.loc[3]
    assert [r2[c] for c in ("changed", "EM better", "EM worse", "EM neither", "F1 better", "F1 worse", "F1 neither")] \
        == [2, 1, 0, 1, 2, 0, 0]
    assert [r3[c] for c in ("changed", "EM better", "EM worse", "EM neither", "F1 better", "F1 worse", "F1 neither")] \
        == [3, 0, 1, 2, 0, 2, 1]
    assert (r2["McNemar b"], r2["McNemar c"], r2["EM p vs round 1"]) == (0, 1, 1.0)
    assert (r3["McNemar b"], r3["McNemar c"], r3["EM p vs round 1"]) == (1, 1, 1.0)
    assert r2["F1 p vs round 1"] == 0.5                                 # d = (1, 0, 0.3): 2 of 4 sign sets
    assert tab.loc[1, "changed"] != tab.loc[1, "changed"]               # round 1 has no previous round (NaN)
    assert tab.loc[1, "recall cumulative"] == pytest.approx(100 * (0.5 + 1.0 + 1.0) / 3)
    assert tab.loc[2, "recall cumulative"] == 100.0


def test_unchanged_answers_differ_only_in_form_are_not_changes():
    recs = [_answers_only("Q", ["the HP", "HP.", "hp"], ["HP"])]
    tab = forced_round_table(recs).set_index("round")
    assert list(tab.loc[[2, 3], "changed"]) == [0, 0]


def test_empty_input_gives_the_columns():
    assert list(forced_round_table([]).columns)[:3] == ["dataset", "round", "n"]


def test_table_columns_and_f1_by_round():
    recs = [_answers_only("Q2", ["HP", "HP", "Compaq"], ["Hewlett-Packard", "HP"]),
            _answers_only("Q3", ["Packard Bell", "Hewlett Packard Company", "Packard Bell"], ["Hewlett Packard"])]
    tab = forced_round_table(recs, "ds")
    assert list(tab.columns) == list(forced_round_table([]).columns) == [
        "dataset", "round", "n", "R@5 D'_t", "recall cumulative", "R@5 cumulative (rule)", "EM", "F1", "changed",
        "EM better", "EM worse", "EM neither", "F1 better", "F1 worse", "F1 neither", "McNemar b", "McNemar c",
        "EM p vs round 1", "F1 p vs round 1"]
    # F1: Q2 1, 1, 0; Q3 0.5 ("packard" of two words each), 0.8 (precision 2/3, recall 1), 0.5
    assert [round(x, 6) for x in tab["F1"]] == [75.0, 90.0, 25.0]
    assert list(tab["dataset"]) == ["ds"] * 3 and list(tab["round"]) == [1, 2, 3]


def test_a_question_without_gold_passages_has_no_recall():
    rows = forced_rows(record("G", gold_pids=(), rounds=[rnd(t=1), rnd(t=2)], round_answers=["HP", "HP"]))
    assert len(rows) == 2
    for r in rows:
        assert all(r[c] != r[c] for c in ("R@5 D'_t", "recall cumulative", "R@5 cumulative (rule)"))  # NaN


def test_the_last_round_s_own_retrieval_is_read():
    """Round 3 is the last of Q1: its own D'_3 is read (with gold pZ1, which D'_2 and D'_3 hold, D'_1 not)."""
    rows = forced_rows(_q1())
    assert (rows[2]["round"], rows[2]["R@5 D'_t"]) == (3, 0.0)
    q = record("L", gold_pids=("pZ1",), rounds=_q1()["trace"]["rounds"], round_answers=["x", "y", "z"])
    assert [r["R@5 D'_t"] for r in forced_rows(q)] == [0.0, 1.0, 1.0]
