"""What each KGIR-RAG variant hands the reader (kgir_lib.eval.mechanism.reader_context) on hand-made traces."""
from __future__ import annotations

import math

import pytest

from kgir_lib.eval.mechanism.reader_context import COLUMNS, gold_in_context, reader_context_table

from _mech_traces import record, rnd

GOLD = ("pCompaq", "pHP")


def _final(*pids) -> dict:
    return {"raw": "", "question": "", "answer": "x", "forced": False, "context_pids": list(pids)}


def _full(qid: str, *pids) -> dict:
    """The full method: the reader reads the passages of D'_1 new to the round."""
    return record(qid, gold_pids=GOLD, rounds=[rnd(final=_final(*pids))])


def _no_reflection(qid: str, *pids) -> dict:
    return record(qid, gold_pids=GOLD, variant="no_reflection", answered_by="reader",
                  rounds=[rnd(verdict=None, final=_final(*pids))])


def test_gold_is_counted_in_the_last_round_that_called_the_reader():
    t = record("q", gold_pids=GOLD, rounds=[rnd(t=1, final=_final("pIBM")), rnd(t=2, final=_final("pHP", "pDell")),
                                            rnd(t=3)])
    assert gold_in_context(t, 5) == 1
    assert gold_in_context(record("q", gold_pids=GOLD, rounds=[]), 5) == 0


def test_table_pairs_each_variant_with_the_full_method():
    runs = {"kgir": [_full("q1", "pApple"), _full("q2", "pHP"), _full("q3", "pHP", "pCompaq")],
            "kgir_no_reflection": [_no_reflection("q1", "pCompaq", "pHP", "pApple"), _no_reflection("q2", "pHP"),
                                   _no_reflection("q3", "pCompaq"), _no_reflection("q9", "pHP")]}
    tab = reader_context_table(runs, 5, "ds").set_index("method")
    assert list(reader_context_table(runs, 5, "ds").columns) == COLUMNS
    full, ablated = tab.loc["kgir"], tab.loc["kgir_no_reflection"]
    assert (full["n"], full["context passages"], full["gold in context %"], full["questions with gold"]) == \
        (3, 4 / 3, 50.0, 2)
    assert (full["more gold"], full["fewer gold"], full["p sign test"]) == (0, 0, 1.0)
    # q9 has no full-method trace, so it is left out of the pairing
    assert (ablated["n"], ablated["context passages"], ablated["gold in context %"]) == (3, 5 / 3, 200 / 3)
    assert (ablated["questions with gold"], ablated["more gold"], ablated["fewer gold"]) == (3, 1, 1)
    assert ablated["p sign test"] == 1.0


def test_sign_test_is_exact():
    runs = {"kgir": [_full(f"q{i}") for i in range(6)],
            "kgir_no_reflection": [_no_reflection(f"q{i}", "pHP") for i in range(6)]}
    row = reader_context_table(runs, 5, "ds").set_index("method").loc["kgir_no_reflection"]
    assert (row["more gold"], row["fewer gold"]) == (6, 0)
    assert row["p sign test"] == pytest.approx(2 * 0.5 ** 6)


def test_no_gold_passages_gives_nan_share_and_a_missing_reference_is_named():
    runs = {"kgir": [record("q1", gold_pids=(), rounds=[rnd(final=_final("pHP"))])]}
    assert math.isnan(reader_context_table(runs, 5, "ds").loc[0, "gold in context %"])
    with pytest.raises(ValueError, match="reference method 'kgir'"):
        reader_context_table({"kgir_no_rewrite": []}, 5, "ds")


def test_a_variant_without_paired_questions_is_skipped_and_the_next_still_read():
    runs = {"kgir": [_full("q1", "pHP")], "kgir_no_rewrite": [_no_reflection("q9", "pHP")],
            "kgir_no_reflection": [_no_reflection("q1", "pHP", "pCompaq")]}
    assert list(reader_context_table(runs, 5, "ds")["method"]) == ["kgir", "kgir_no_reflection"]


def test_traces_without_a_recorded_context_use_the_run_s_context_size():
    """An older w/o-reflection trace has no final.context_pids: its context is the first n_ctx of D'_1."""
    old = record("q1", gold_pids=GOLD, variant="no_reflection", answered_by="reader",
                 rounds=[rnd(verdict=None, rewrite_retrieved=("pApple", "pHP", "pCompaq"))])
    assert (gold_in_context(old, 1), gold_in_context(old, 2), gold_in_context(old, 3)) == (0, 1, 2)
    runs = {"kgir": [old], "kgir_no_reflection": [old]}
    assert reader_context_table(runs, 2, "ds").loc[0, "context passages"] == 2.0
