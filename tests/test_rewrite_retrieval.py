"""The rewrite's own retrieval and the ranked-list rules (kgir_lib.eval.mechanism.rewrite_retrieval) on hand-made
lists."""
from __future__ import annotations

from kgir_lib.eval.mechanism.rewrite_retrieval import (RULES, current_rule_agreement, gold_gain, gold_loss,
                                                       merge_alternate, rewrite_retrieval_table, rewrite_rows,
                                                       rule_context_first, rule_current, rule_retrieval_order,
                                                       rule_rewrite_first, rule_table)

from _mech_traces import record, rnd

GOLD = ("g1", "g3")


def _t1() -> dict:
    """D_1 = [g1, a, b]; round 1: D'_1 = [c, a], shown [c, a] (g1 lost); round 2: D'_2 = [g3, g1] (g3 gained)."""
    return record("T1", gold_pids=GOLD, rounds=[
        rnd(t=1, retrieved=["g1", "a", "b"], rewrite_retrieved=["c", "a"], reflection_passages=["c", "a"],
            verdict="missing"),
        rnd(t=2, retrieved=["c", "a"], rewrite_retrieved=["g3", "g1"], reflection_passages=["g3", "g1"],
            final={"raw": "", "question": "", "answer": "x", "forced": True, "context_pids": ["g3"]})])


def _t2() -> dict:
    """One round: D_1 = [x, y], D'_1 = [g3]: a gain, no loss."""
    return record("T2", gold_pids=GOLD, rounds=[rnd(retrieved=["x", "y"], rewrite_retrieved=["g3"],
                                                    reflection_passages=["g3"])])


def test_merge_alternate():
    assert merge_alternate(["a", "b", "c"], ["b", "d"]) == ["a", "b", "d", "c"]
    assert merge_alternate([], ["d"]) == ["d"]


def test_gain_and_loss():
    t = _t1()
    assert (gold_gain(t, 1), gold_gain(t, 2)) == ([], ["g3"])
    assert (gold_loss(t, 1, 2), gold_loss(t, 2, 2)) == (["g1"], [])
    assert gold_loss(t, 1, 1) == ["g1"] and gold_loss(_t2(), 1, 2) == []
    # the reader's context counts as shown
    t["trace"]["rounds"][0]["final"] = {"answer": "x", "context_pids": ["g1"]}
    assert gold_loss(t, 1, 2) == []


def test_rewrite_rows_recalls():
    rows = rewrite_rows(_t1(), n_ctx=2, ks=(2,))
    assert [(r["round"], r["gain"], r["loss"], r["R@2 D_1"], r["R@2 merged"], r["R@2 D'_t"]) for r in rows] == \
        [(1, False, True, 0.5, 0.5, 0.0), (2, True, False, 0.5, 1.0, 1.0)]


def test_rewrite_retrieval_table():
    tab = rewrite_retrieval_table([_t1(), _t2()], n_ctx=2, ks=(2,), dataset="ds").set_index("round")
    r1 = tab.loc[1]
    assert (r1["n"], r1["gain"], r1["loss"], r1["p gain vs loss"]) == (2, 1, 1, 1.0)
    assert (r1["R@2 D_1"], r1["R@2 D_1+D'_t"], r1["R@2 D'_t"]) == (25.0, 50.0, 25.0)
    assert r1["p R@2 merged vs D_1"] == 1.0
    assert (tab.loc[2, "n"], tab.loc[2, "gain"], tab.loc[2, "loss"]) == (1, 1, 0)


def _rules_trace(**kw) -> dict:
    return record("R", gold_pids=("d",), rounds=[
        rnd(t=1, retrieved=["a", "b", "c"], gans=[("h", "r", "t", "b", 0.3), ("h2", "r", "t", "e", 0.8)],
            rewrite_retrieved=["d", "a"], reflection_passages=["d"], verdict="missing"),
        rnd(t=2, retrieved=["d", "a"], gans=[("h3", "r", "t", "b", 0.9)], rewrite_retrieved=["f", "d"],
            reflection_passages=["f", "d"], verdict="answer", **kw)])


def test_each_rule_exact_list():
    t = _rules_trace()
    assert rule_current(t, 5) == ["b", "e", "d", "f", "a", "c"]
    assert rule_context_first(t, 5) == ["f", "d", "b", "e", "a", "c"]
    assert rule_rewrite_first(t, 5) == ["d", "f", "a", "b", "c"]
    assert rule_retrieval_order(t, 5) == ["a", "d", "f", "b", "c"]
    with_ctx = _rules_trace(final={"answer": "x", "context_pids": ["x", "f"]})
    assert rule_context_first(with_ctx, 5) == ["x", "f", "b", "e", "d", "a", "c"]


def _no_rewrite(variant="no_rewrite") -> dict:
    r = rnd(retrieved=["a", "b", "c"], gans=[("h2", "r", "t", "e", 0.8)], rewrite=None, verdict=None)
    return record("R", gold_pids=("d",), rounds=[r], variant=variant, answered_by="reader")


def test_rules_without_rewrite_and_without_reflection():
    t = _no_rewrite()
    assert [RULES[k](t, 5) for k in RULES] == [["e", "a", "b", "c"], ["e", "a", "b", "c"], ["a", "b", "c"],
                                               ["a", "b", "c"]]
    nr = record("R", variant="no_reflection", answered_by="reader",
                rounds=[rnd(retrieved=["a"], rewrite_retrieved=["p", "q", "s"], verdict=None,
                            gans=[("h", "r", "t", "a", 0.5)])])
    assert rule_current(nr, 2) == ["a", "p", "q", "s"]
    assert rule_context_first(nr, 2) == ["p", "q", "a", "s"]


def test_rule_table_exact():
    tab = rule_table([_rules_trace()], [_no_rewrite()], n_ctx=5, dataset="ds").set_index(["rule", "k"])
    assert tab.loc[("current", 2), ["KGIR-RAG", "w/o rewrite", "difference"]].tolist() == [0.0, 0.0, 0.0]
    assert tab.loc[("current", 5), ["KGIR-RAG", "w/o rewrite", "difference", "p"]].tolist() == [100.0, 0.0, 100.0, 1.0]
    assert tab.loc[("reader context first", 2), "KGIR-RAG"] == 100.0
    assert tab.loc[("D'_t first", 2), "KGIR-RAG"] == 100.0
    assert tab.loc[("retrieval order", 2), "KGIR-RAG"] == 100.0
    assert set(tab["n"]) == {1}


def test_current_rule_agreement_counts_lines_with_stored_lists():
    ok = _rules_trace()
    ok["ranked_pids"] = ["b", "e", "d", "f", "a", "c"]
    bad = dict(_rules_trace(), ranked_pids=["a"])
    assert current_rule_agreement([ok, bad, _rules_trace()["trace"]], 5) == 1



def test_loss_counts_only_the_first_n_ctx_passages_of_d1():
    """D_1 = [a, g1, b] and round 1 shows only [c]: the gold g1 at rank 2 is lost from a context of 2 passages,
    not from a context of 1 (it was never in it)."""
    t = record("L", gold_pids=("g1",), rounds=[rnd(retrieved=["a", "g1", "b"], rewrite_retrieved=["c"],
                                                    reflection_passages=["c"])])
    assert (gold_loss(t, 1, 1), gold_loss(t, 1, 2)) == ([], ["g1"])
    assert rewrite_retrieval_table([t], n_ctx=1, ks=(2,)).loc[0, "loss"] == 0
    assert rewrite_retrieval_table([t], n_ctx=2, ks=(2,)).loc[0, "loss"] == 1


def test_rule_difference_is_the_mean_over_questions():
    """Three questions; under "D'_t first" KGIR-RAG has the gold passage in its top 2 on question R only, w/o
    rewrite on none: the differences 1, 0, 0 average 33.3 points (their median would be 0)."""
    others = [record(q, gold_pids=("z",), rounds=_rules_trace()["trace"]["rounds"]) for q in ("S", "T")]
    no_rewrite = [_no_rewrite()] + [dict(_no_rewrite(), qid=q) for q in ("S", "T")]
    for r in no_rewrite[1:]:
        r["trace"] = dict(r["trace"], qid=r["qid"], gold_pids=["z"])
    tab = rule_table([_rules_trace(), *others], no_rewrite, n_ctx=5).set_index(["rule", "k"])
    row = tab.loc[("D'_t first", 2)]
    assert (row["n"], row["KGIR-RAG"], row["w/o rewrite"]) == (3, 100 * (1 / 3), 0.0)
    assert row["difference"] == 100 * (1 / 3)


def test_a_gold_passage_an_earlier_rewrite_found_is_no_gain():
    """g3 is in D'_1 and again in D'_2: a gain in round 1 only."""
    t = record("G", gold_pids=GOLD, rounds=[rnd(t=1, retrieved=["a"], rewrite_retrieved=["g3"], verdict="missing"),
                                            rnd(t=2, retrieved=["g3"], rewrite_retrieved=["g3", "b"])])
    assert (gold_gain(t, 1), gold_gain(t, 2)) == (["g3"], [])


def test_a_later_round_of_passages_shows_only_its_first_n_ctx():
    """Round 2 stands passages in for an empty G_Ans: the first 2 of D_2 = [x, y, g1], so g1 (top of D_1) is
    not shown in round 2."""
    t = record("P", gold_pids=GOLD, rounds=[
        rnd(t=1, retrieved=["g1", "a"], rewrite_retrieved=["x"], reflection_passages=["g1"], verdict="missing"),
        rnd(t=2, retrieved=["x", "y", "g1"], evidence_source="passages", rewrite_retrieved=["z"],
            reflection_passages=["z"])])
    assert (gold_loss(t, 1, 2), gold_loss(t, 2, 2), gold_loss(t, 2, 3)) == ([], ["g1"], [])


def test_rounds_without_a_rewrite_retrieval_are_skipped_and_rounds_sorted():
    """Record A's round 1 has no rewrite (w/o rewrite's shape), its round 2 has; record B has round 1 only.
    A question without gold passages has NaN recalls (not None)."""
    a = record("A", gold_pids=GOLD, rounds=[rnd(t=1, rewrite=None, verdict="missing"),
                                            rnd(t=2, retrieved=["a"], rewrite_retrieved=["g1"])])
    b = record("B", gold_pids=GOLD, rounds=[rnd(t=1, retrieved=["g1"], rewrite_retrieved=["c"])])
    assert [(r["qid"], r["round"]) for r in rewrite_rows(a, 2, ks=(2,))] == [("A", 2)]
    tab = rewrite_retrieval_table([a, b], n_ctx=2, ks=(2,))
    assert list(tab["round"]) == [1, 2] and list(tab["dataset"]) == ["", ""] and list(tab["n"]) == [1, 1]
    none = rewrite_rows(record("N", gold_pids=(), rounds=[rnd()]), 2, ks=(2,))[0]
    assert all(isinstance(none[c], float) and none[c] != none[c] for c in ("R@2 D_1", "R@2 merged", "R@2 D'_t"))


def test_rewrite_retrieval_p_of_d_prime_against_d1():
    """Round 1 of _t1 and _t2: R@2 of D'_1 minus D_1 is -0.5 and +0.5; the sign-flip p of (-0.5, +0.5) is 1."""
    tab = rewrite_retrieval_table([_t1(), _t2()], n_ctx=2, ks=(2,), dataset="ds").set_index("round")
    assert tab.loc[1, "p R@2 D'_t vs D_1"] == 1.0 and tab.loc[1, "dataset"] == "ds"


def test_rule_table_difference_dataset_and_empty_pairs():
    """Under "retrieval order" both runs put d at rank 2 for question R (1 and 1: difference 0, not 2); a
    custom rule set is honoured; runs without a common question give n 0 and NaN means."""
    nrw = record("R", gold_pids=("d",), variant="no_rewrite", answered_by="reader",
                 rounds=[rnd(retrieved=["a", "d"], rewrite=None, verdict=None)])
    tab = rule_table([_rules_trace()], [nrw], n_ctx=5, dataset="ds").set_index(["rule", "k"])
    row = tab.loc[("retrieval order", 2)]
    assert (row["KGIR-RAG"], row["w/o rewrite"], row["difference"]) == (100.0, 100.0, 0.0)
    assert set(tab["dataset"]) == {"ds"}
    only = rule_table([_rules_trace()], [nrw], n_ctx=5, rules={"D'_t first": RULES["D'_t first"]})
    assert list(only["rule"]) == ["D'_t first", "D'_t first"] and list(only["dataset"]) == ["", ""]
    none = rule_table([_rules_trace()], [dict(nrw, qid="other")], n_ctx=5)
    assert set(none["n"]) == {0} and none["difference"].isna().all() and none["KGIR-RAG"].isna().all()


def test_rule_recalls_of_a_question_without_gold_and_of_no_question():
    from kgir_lib.eval.mechanism.rewrite_retrieval import rule_recalls

    out = rule_recalls([record("N", gold_pids=(), rounds=[rnd()])], 5, ks=(2,))
    assert out["R@2"].isna().all() and len(out) == len(RULES)
    assert list(rule_recalls([], 5, ks=(2, 5)).columns) == ["qid", "rule", "R@2", "R@5"]


def test_rule_recalls_pass_the_run_s_context_size_to_each_rule():
    """An older w/o-reflection trace without final.context_pids: its reader context, and so the "reader context
    first" rule, is the first n_ctx of D'_1."""
    from kgir_lib.eval.mechanism.rewrite_retrieval import rule_recalls

    old = record("O", gold_pids=("q",), variant="no_reflection", answered_by="reader",
                 rounds=[rnd(retrieved=["a", "b"], rewrite_retrieved=["p", "q"], verdict=None)])
    rule = {"reader context first": RULES["reader context first"]}
    # n_ctx 1: context [p], then the current rule's [pCompaq (G_Ans), p, q, ...]: q is third
    assert list(rule_recalls([old], 1, ks=(2,), rules=rule)["R@2"]) == [0.0]
    assert list(rule_recalls([old], 2, ks=(2,), rules=rule)["R@2"]) == [1.0]  # context [p, q]
