"""The reflection's calibration and the oracle stop (kgir_lib.eval.mechanism.calibration) on a hand-made set."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from kgir_lib.eval.mechanism import round_facts as rf  # noqa: E402
from kgir_lib.eval.mechanism.calibration import (calibration_table, oracle_stop_rows, oracle_stop_table,  # noqa: E402
                                                 plot_calibration)

from _mech_traces import record, rnd  # noqa: E402

SRC = (("Compaq", "was top PC maker of", "1994", "pCompaq", 0.9),)


def _set() -> list:
    """Round 1: three 'answer' verdicts (2 right as returned, 1 right as the reflection's own), two 'missing'
    (one with both gold passages in its input), one malformed; round 2: one 'answer' (right), one 'missing'
    with the gold among the evidence passages of an empty G_Ans."""
    return [
        record("A", rounds=[rnd(answer="HP")]),
        record("B", rounds=[rnd(answer="IBM")]),
        record("C", rounds=[rnd(answer="IBM", final={"raw": "", "question": "", "answer": "HP", "forced": False,
                                                      "context_pids": ["pHP"]})]),
        record("D", rounds=[rnd(verdict="missing", gans=SRC, reflection_passages=["pHP"]), rnd(t=2, answer="HP")]),
        record("E", rounds=[rnd(verdict="missing", gans=SRC, reflection_passages=["pApple"]),
                            rnd(t=2, verdict="missing", evidence_source="passages", retrieved=("pX", "pHP", "pCompaq"),
                                reflection_passages=["pApple"])]),
        record("F", rounds=[rnd(verdict="malformed")]),
    ]


def test_calibration_table_known_fractions():
    tab = calibration_table(_set(), n_ctx=3, dataset="ds").set_index("round")
    r1, r2, al = tab.loc["1"], tab.loc["2"], tab.loc["all"]
    assert (r1["reflections"], r1["answer"], r1["missing"], r1["malformed"]) == (6, 3, 2, 1)
    assert r1["P(correct | answer) %"] == pytest.approx(200 / 3)
    assert r1["P(own answer correct | answer) %"] == pytest.approx(100 / 3)
    assert r1["P(gold present | missing) %"] == 50.0
    assert r1["gold share in input | missing %"] == 75.0
    assert (r2["answer"], r2["P(correct | answer) %"], r2["missing"], r2["P(gold present | missing) %"]) == \
        (1, 100.0, 1, 100.0)
    assert (al["reflections"], al["P(correct | answer) %"]) == (8, 75.0)
    assert al["P(gold present | missing) %"] == pytest.approx(200 / 3)


def test_evidence_passages_count_only_up_to_n_ctx():
    e = _set()[4]
    tab = calibration_table([e], n_ctx=2).set_index("round")
    assert tab.loc["2", "P(gold present | missing) %"] == 0.0           # pCompaq is 3rd of D_2
    assert tab.loc["2", "gold share in input | missing %"] == 50.0


def test_shown_rows_cap_count_and_list():
    gans = [("A", "r", "B", "p1", 0.1), ("C", "r", "D", "p2", 0.9), ("C", "r", "D", "p3", 0.5),
            ("E", "r", "F", "p4", 0.7)]
    r = rnd(gans=gans)
    assert [x[3] for x in rf.shown_rows(r)] == ["p2", "p4", "p3", "p1"]          # heaviest first, default cap
    assert [x[3] for x in rf.shown_rows(r, cap=1)] == ["p2", "p3"]               # one fact, from two passages
    assert [x[3] for x in rf.shown_rows(dict(r, evidence_shown=2))] == ["p2", "p4", "p3"]
    assert rf.shown_rows(dict(r, evidence_shown=[["A", "r", "B", "p1"]])) == [["A", "r", "B", "p1"]]
    assert rf.reflection_input(dict(r, evidence_shown=1), 5) == ["p2", "p3", "pHP", "pApple", "pCompaq"]


def _forced(qid, answers, verdicts):
    rounds = [rnd(t=t, verdict=v, answer="x", final={"raw": "", "question": "", "answer": a, "forced": True,
                                                    "context_pids": []})
              for t, (a, v) in enumerate(zip(answers, verdicts), 1)]
    return record(qid, rounds=rounds, answer=answers[-1], round_answers=list(answers))


def test_oracle_stop():
    recs = [_forced("X", ["IBM", "HP", "HP"], ["missing", "answer", "answer"]),
            _forced("Y", ["HP", "IBM", "IBM"], ["missing", "missing", "answer"]),
            _forced("Z", ["IBM", "IBM", "IBM"], ["answer", "missing", "missing"])]
    assert oracle_stop_rows(recs[0]) == {"qid": "X", "stop": 2, "EM stop": 1.0, "oracle": 2, "EM oracle": 1.0,
                                         "EM round 1": 0.0, "EM round T": 1.0}
    row = oracle_stop_table(recs, "ds").iloc[0]
    assert row["n"] == 3
    assert row["EM reflection stop"] == pytest.approx(100 / 3) and row["EM oracle stop"] == pytest.approx(200 / 3)
    assert (row["mean stop round"], row["mean oracle round"]) == (2.0, 2.0)
    assert (row["McNemar b"], row["McNemar c"], row["p oracle vs reflection stop"]) == (0, 1, 1.0)
    with pytest.raises(ValueError, match="round_answers"):
        oracle_stop_rows(record("plain"))


def test_round_answer_prefers_round_answers_then_final_then_reflection():
    r = _forced("X", ["IBM", "HP"], ["missing", "answer"])
    assert [rf.round_answer(r, t) for t in (1, 2, 3)] == ["IBM", "HP", None]
    assert rf.round_answer(_set()[2], 1) == "HP"
    assert rf.round_answer(_set()[1], 1) == "IBM"
    assert rf.round_answer(_set()[3], 1) is None


def test_plot_calibration_bars():
    ax = plot_calibration(calibration_table(_set(), n_ctx=3, dataset="ds"))
    assert len(ax.patches) == 4                                                   # 2 rounds x 2 shares
    assert [round(p.get_height(), 3) for p in ax.patches] == [66.667, 100.0, 50.0, 100.0]


def test_plot_calibration_draws_exactly_this_figure():
    """Every element of the figure on the hand-made set (round 1: 3 "answer", 2 "missing"; round 2: 1 and 1):
    bars centred 0.2 either side of each round's tick, 0.4 wide; the n= labels above them; axes, title, legend
    beside the axes; a new figure of 7 x 3.5 inches when no axes are given."""
    import matplotlib.pyplot as plt
    from matplotlib.font_manager import FontProperties

    small, x_small = (FontProperties(size=s).get_size_in_points() for s in ("small", "x-small"))
    ax = plot_calibration(calibration_table(_set(), n_ctx=3, dataset="ds"))
    assert tuple(ax.figure.get_size_inches()) == (7.0, 3.5)
    bars = [(round(p.get_x(), 6), round(p.get_width(), 6), round(p.get_height(), 3)) for p in ax.patches]
    assert bars == [(-0.4, 0.4, 66.667), (0.6, 0.4, 100.0), (0.0, 0.4, 50.0), (1.0, 0.4, 100.0)]
    notes = [(t.get_text(), t.xy, t.get_ha(), t.get_fontsize()) for t in ax.texts]
    assert notes == [("n=3/2", (0, 101), "center", x_small), ("n=1/1", (1, 101), "center", x_small)]
    assert list(ax.get_xticks()) == [0, 1]
    assert [(t.get_text(), t.get_fontsize()) for t in ax.get_xticklabels()] == [("ds\nround 1", small),
                                                                               ("ds\nround 2", small)]
    assert ax.get_ylim() == (0.0, 110.0) and ax.get_ylabel() == "% of verdicts"
    assert ax.get_title() == "KGIR-RAG reflection calibration (n = answer/missing verdicts)"
    legend = ax.get_legend()
    assert [(t.get_text(), t.get_fontsize()) for t in legend.get_texts()] == [
        ('"answer" verdicts that are correct', small), ('"missing" verdicts with the gold already in the input', small)]
    anchor = legend.get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    assert legend._loc == 2 and (round(anchor.x0, 6), round(anchor.y0, 6)) == (1.01, 1.0)  # upper left, beside
    plt.close(ax.figure)


def test_oracle_stop_reads_the_last_round_and_refuses_an_empty_answer_list():
    """Answers IBM, HP, IBM: right only in round 2, so the last round's EM (0) is not round 2's (1)."""
    row = oracle_stop_rows(_forced("W", ["IBM", "HP", "IBM"], ["missing", "missing", "missing"]))
    assert (row["EM round 1"], row["EM round T"], row["oracle"], row["stop"]) == (0.0, 0.0, 2, 3)
    for bad in ([], "HP"):
        with pytest.raises(ValueError, match="round_answers"):
            oracle_stop_rows(record("R", round_answers=bad))


def test_oracle_stop_table_columns_and_round_scores():
    cols = ["dataset", "n", "EM reflection stop", "EM oracle stop", "EM round 1", "EM round T", "mean stop round",
            "mean oracle round", "McNemar b", "McNemar c", "p oracle vs reflection stop"]
    assert list(oracle_stop_table([]).columns) == cols
    tab = oracle_stop_table([_forced("X", ["IBM", "HP", "HP"], ["missing", "answer", "answer"]),
                             _forced("W", ["HP", "IBM", "IBM"], ["missing", "missing", "missing"])], "ds")
    assert list(tab.columns) == cols
    assert tab.iloc[0][["dataset", "EM round 1", "EM round T"]].tolist() == ["ds", 50.0, 50.0]


def test_shown_rows_rank_rows_without_a_weight_as_weight_zero():
    """An older trace row has no weight (four fields): it ranks as weight 0, so after a weight 0.5 and before a
    negative cosine weight -0.5."""
    gans = [["A", "r", "B", "p1", -0.5], ["C", "r", "D", "p2"], ["E", "r", "F", "p3", 0.5]]
    assert [x[3] for x in rf.shown_rows(rnd(gans=gans))] == ["p3", "p2", "p1"]


def test_natural_rounds_sentence_counts_the_rounds_each_question_ran():
    import pandas as pd

    from kgir_lib.eval.mechanism.calibration import natural_rounds_sentence

    rows = [("d", 1, "reflection")] * 18 + [("d", 2, "reflection"), ("d", 3, "forced_reader")]
    rows += [("e", 1, "reflection"), ("e", 2, "reflection"), ("e", 2, "reflection")]
    table = pd.DataFrame(rows, columns=["dataset", "iterations", "answered_by"])
    assert natural_rounds_sentence(table, "d") == (
        "d (n = 20): the loop goes past round 1 by itself on 2 of 20 questions (1 round: 18, 2 rounds: 1, 3 "
        "rounds: 1; 1 answered by the reader after the last round); so what the step attribution and the loss "
        "decomposition study is, in effect, one round (retrieve, build G_Ans, rewrite once, retrieve D'_1, reflect, "
        "read): the iteration itself is exercised only by the forced rounds.")
    assert natural_rounds_sentence(table, "e") == (
        "e (n = 3): the loop goes past round 1 by itself on 2 of 3 questions (1 round: 1, 2 rounds: 2; 0 answered "
        "by the reader after the last round).")
