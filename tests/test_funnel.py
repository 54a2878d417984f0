"""The bridge funnel (kgir_lib.eval.mechanism.funnel) on hand-made traces: a whole chain, a chain broken at each
step."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from kgir_lib.data import Question  # noqa: E402
from kgir_lib.eval.mechanism.bridges import Bridge, bridge_aliases  # noqa: E402
from kgir_lib.eval.mechanism.funnel import (MATCH, STEPS, bridge_naming_table, funnel_rows, funnel_sentence,  # noqa: E402
                                            funnel_steps, funnel_table, match_rules_table, method_steps, naming_row,
                                            plot_funnel, weakest_step)

from _mech_traces import COMPAQ, QUESTION, REWRITE, record, rnd  # noqa: E402

CHAIN = ("reached", "seed", "in_gans", "named", "finds", "correct")


def _chain(steps: dict) -> tuple:
    return tuple(steps[f"chain_{k}"] for k in CHAIN)


def test_whole_chain():
    s = funnel_steps(record(), [COMPAQ], 1)
    assert _chain(s) == (True,) * 6
    assert not s["next_hop_in_D_t"]


def test_broken_at_seed():
    s = funnel_steps(record(rounds=[rnd(seeds=())]), [COMPAQ], 1)
    assert _chain(s) == (True, False, False, False, False, False)
    assert s["in_gans"] and s["named"] and s["finds"] and s["correct"]   # each step alone still holds


def test_broken_at_bridge_in_gans():
    gans = (("Dell", "was a", "PC maker", "pDell", 0.9),)
    s = funnel_steps(record(rounds=[rnd(gans=gans)]), [COMPAQ], 1)
    assert _chain(s) == (True, True, False, False, False, False)
    assert s["named"]                                   # the rewrite named it without G_Ans


def test_broken_at_rewrite_names():
    for round_ in (rnd(rewrite=QUESTION), rnd(rewrite=REWRITE, malformed=True)):
        s = funnel_steps(record(rounds=[round_]), [COMPAQ], 1)
        assert _chain(s) == (True, True, True, False, False, False)


def test_rewrite_naming_what_the_question_names_does_not_count():
    q = "Which company merged in 2002 with Compaq?"
    s = funnel_steps(record(question=q, rounds=[rnd(query=q, rewrite="Who merged with Compaq in 2002?")]), [COMPAQ], 1)
    assert not s["named"]


def test_broken_at_next_hop_retrieval():
    s = funnel_steps(record(rounds=[rnd(rewrite_retrieved=("pApple", "pCompaq"))]), [COMPAQ], 1)
    assert _chain(s) == (True, True, True, True, False, False)
    s = funnel_steps(record(rounds=[rnd(retrieved=("pCompaq", "pHP"))]), [COMPAQ], 1)   # D_t had it already
    assert _chain(s) == (True, True, True, True, False, False)
    assert s["next_hop_in_D_t"]


def test_broken_at_answer():
    s = funnel_steps(record(answer="IBM"), [COMPAQ], 1)
    assert _chain(s) == (True, True, True, True, True, False)
    s = funnel_steps(record(answer="HP"), [COMPAQ], 1)       # an alias of the gold answer
    assert s["chain_correct"]


def test_contained_entity_name_and_equal_mode():
    gans = (("Compaq Computer Corporation", "was top PC maker of", "1994", "pCompaq", 0.9),)
    r = record(rounds=[rnd(gans=gans)])
    assert funnel_steps(r, [COMPAQ], 1, mode="contains")["chain_in_gans"]
    assert not funnel_steps(r, [COMPAQ], 1, mode="equal")["chain_in_gans"]


def test_unreached_round_and_forced_round_answers():
    r = record(rounds=[rnd(), rnd(t=2)], round_answers=["IBM", "HP"], answer="HP")
    assert not funnel_steps(r, [COMPAQ], 1)["correct"]        # forced run: the answer after round 1
    assert funnel_steps(r, [COMPAQ], 2)["correct"]
    assert not any(funnel_steps(r, [COMPAQ], 3).values())


def test_funnel_table_exact_counts():
    recs = [record("a"),                                                   # whole chain, one round
            record("b", rounds=[rnd(rewrite=QUESTION, verdict="missing"), rnd(t=2)]),  # breaks at 3, then whole
            record("c", rounds=[rnd(gans=())], answer="IBM"),                # breaks at 2
            record("nobridge")]                                            # no gold bridge: left out
    bridges = {"a": [COMPAQ], "b": [COMPAQ], "c": [COMPAQ], "nobridge": []}
    rows = funnel_rows(recs, bridges, dataset="ds")
    assert len(rows) == 6                                                  # 3 questions x 2 rounds
    tab = funnel_table(rows).set_index(["round", "step"])
    assert list(tab.loc["1"]["n"]) == [3, 3, 2, 1, 1, 1]
    assert list(tab.loc["2"]["n"]) == [1, 1, 1, 1, 1, 1]
    assert list(tab.loc["any"]["n"]) == [3, 3, 2, 2, 2, 2]
    assert tab.loc[("1", "2 bridge in G_Ans"), "% of questions"] == pytest.approx(200 / 3)
    assert tab.loc[("1", "3 rewrite names it"), "% of previous step"] == pytest.approx(50.0)
    assert tab.loc[("1", "5 answer correct"), "n alone"] == 2               # a and b's final answers are right
    assert set(tab["questions"]) == {3}
    assert list(tab.loc["1"]["n next hop already in D_t"]) == [0] * 6


def test_funnel_table_counts_next_hop_already_retrieved():
    recs = [record("a", rounds=[rnd(retrieved=("pCompaq", "pHP"))]), record("b")]
    tab = funnel_table(funnel_rows(recs, {"a": [COMPAQ], "b": [COMPAQ]}, dataset="ds")).set_index(["round", "step"])
    assert list(tab.loc["1"]["n"]) == [2, 2, 2, 2, 1, 1]
    assert list(tab.loc["1"]["n next hop already in D_t"]) == [1, 1, 1, 1, 0, 0]


def test_plot_funnel_draws_one_bar_per_step_and_dataset():
    rows = funnel_rows([record("a")], {"a": [COMPAQ]}, dataset="x")
    rows2 = funnel_rows([record("a", answer="IBM")], {"a": [COMPAQ]}, dataset="y")
    tab = pd.concat([funnel_table(rows), funnel_table(rows2)])
    ax = plot_funnel(tab, "1")
    assert len(ax.patches) == 2 * len(STEPS)
    assert [p.get_width() for p in ax.patches[len(STEPS):]] == [100.0] * 5 + [0.0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["x (n = 1)", "y (n = 1)"]
    assert ax.get_title() == "KGIR-RAG bridge funnel, round 1"
    import matplotlib.pyplot as plt

    from kgir_lib import report

    fig, ax = plt.subplots(figsize=(9.5, 3.8))  # as notebook 04 draws it: legible on a 1024-px page too
    plot_funnel(tab, "any", ax=ax)
    fig.tight_layout()
    png = report.figure_png(fig)
    plt.close("all")
    assert min(report.figure_text_px(png, w) for w in report.FIGURE_FITS.values()) >= report.MIN_TEXT_PX


def _ircot(cot, retrievals, answer="HP"):
    """An IRCoT trace-file line; like the real ones, its trace keeps neither the question nor the gold answers."""
    rets = [{"query": "", "hits": [[p, 1.0] for p in h]} for h in retrievals]
    return {"qid": "q1", "answer": answer, "trace": {"cot": cot, "retrievals": rets}}


Q1 = Question("q1", QUESTION, ("Hewlett-Packard", "HP"), ("pCompaq", "pHP"), "ds", 2)


def test_method_steps_align_texts_with_their_retrievals():
    ir = _ircot(["The top PC maker of 1994 was Compaq.", "So the answer is: HP"], [["pCompaq"], ["pHP"]])
    assert method_steps("ircot", ir) == (
        [("The top PC maker of 1994 was Compaq.", ["pHP"]), ("So the answer is: HP", [])], ["pCompaq"])
    it = {"trace": {"rounds": [{"hits": [["p1", 1]], "generation": "Compaq."},
                               {"hits": [["pHP", 1]], "generation": "HP"}]}}
    assert method_steps("iter_retgen", it) == ([("Compaq.", ["pHP"])], ["p1"])
    hy = {"trace": {"hypothetical_passage": "Compaq merged.", "retrieval": [["pHP", 1.0]]}}
    assert method_steps("hyde", hy, ["p1"]) == ([("Compaq merged.", ["pHP"])], ["p1"])
    assert method_steps("kgir", record()) == ([(REWRITE, ["pHP", "pCompaq", "pApple"])], ["pCompaq", "pIBM", "pDell"])
    with pytest.raises(ValueError, match="method"):
        method_steps("naive_rag", hy)


def test_naming_row_and_table():
    yes = _ircot(["The top PC maker of 1994 was Compaq."], [["pCompaq"], ["pHP"]])
    no = _ircot(["A company merged."], [["pCompaq"], ["pHP"]], answer="IBM")
    assert naming_row("ircot", yes, [COMPAQ], question=Q1) == {"qid": "q1", "names": True, "finds": True,
                                                               "names_and_finds": True, "EM": 1.0}
    assert naming_row("ircot", yes, [COMPAQ])["EM"] == 0.0              # no question given, none in the trace
    assert naming_row("ircot", no, [COMPAQ], question=Q1)["names_and_finds"] is False
    asked = Question("q1", "Which company merged with Compaq?", ("HP",), (), "ds")
    assert naming_row("ircot", yes, [COMPAQ], question=asked)["names"] is False   # the question names it
    row = naming_row("hyde", {"qid": "q1", "trace": {"hypothetical_passage": "Compaq", "retrieval": [["pHP", 1.0]]}},
                     [COMPAQ], question=Q1)
    assert row["names"] and row["finds"] != row["finds"]                # no baseline: NaN
    no2 = {**no, "qid": "q2"}
    kg = [record("q1", rounds=[rnd(rewrite=QUESTION)]), record("q2")]
    qs = {"q1": Q1, "q2": Question("q2", QUESTION, ("Hewlett-Packard",), (), "ds")}
    tab = bridge_naming_table({"kgir": kg, "ircot": [yes, no2]}, {"q1": [COMPAQ], "q2": [COMPAQ]},
                              questions=qs).set_index("method")
    assert tab.loc["ircot", "% names bridge"] == 50.0 and tab.loc["kgir", "% names bridge"] == 50.0
    assert (tab.loc["ircot", "names: McNemar b"], tab.loc["ircot", "names: McNemar c"]) == (1, 1)
    assert tab.loc["ircot", "names: p vs kgir"] == 1.0
    assert tab.loc["ircot", "EM"] == 50.0


def test_other_alias_forms_name_the_bridge():
    b = Bridge("Hewlett-Packard", bridge_aliases("Hewlett-Packard"), ("p",))
    s = funnel_steps(record(rounds=[rnd(gans=(("Hewlett Packard", "merged with", "Compaq", "pHP", 1.0),),
                                        rewrite="Which company is Hewlett–Packard's partner?")]), [b], 1)
    assert s["chain_named"]


def test_weakest_step_is_the_smallest_share_of_the_previous_step():
    from kgir_lib.eval.mechanism.funnel import STEPS, weakest_step

    rows = [{"dataset": "d", "round": "any", "questions": 10, "step": s, "n": n,
             "% of previous step": pct} for s, n, pct in zip(STEPS, (10, 9, 8, 2, 1, 1),
                                                              (100.0, 90.0, 88.9, 25.0, 50.0, 100.0))]
    out = weakest_step(pd.DataFrame(rows))
    assert out.to_dict("records") == [{"dataset": "d", "questions": 10, "breaks at": STEPS[3],
                                       "passed the step before": 8, "passed it": 2, "% of previous step": 25.0}]


def test_funnel_sentence_quotes_the_table_and_its_weakest_step():
    rows = pd.DataFrame([
        {"dataset": "d", "qid": f"q{i}", "round": 1, **{k: v for k, v in zip(
            ["reached", "seed", "in_gans", "named", "finds", "correct"], flags)}, "next_hop_in_D_t": False}
        for i, flags in enumerate([(1, 1, 1, 1, 1, 1), (1, 1, 1, 1, 1, 0), (1, 1, 1, 0, 0, 0), (1, 0, 0, 0, 0, 0)])])
    for k in ["reached", "seed", "in_gans", "named", "finds", "correct"]:
        rows[k] = rows[k].astype(bool)
        rows[f"chain_{k}"] = rows[k]
    loose = funnel_table(rows)                   # containment: q2's G_Ans holds a name containing the bridge
    strict_rows = rows.copy()
    strict_rows.loc[2, ["in_gans", "chain_in_gans"]] = False   # ... but no entity of that very name
    both = pd.concat([funnel_table(strict_rows).assign(**{MATCH: "equal"}), loose.assign(**{MATCH: "contains"})])
    assert funnel_sentence(both, "d") == (
        "d: of the 4 questions with a gold bridge, a seed matched on 3; the evidence subgraph holds the bridge on 2 "
        "of those (67 %; 3 if a name containing the bridge counts), the rewrite names it on 2 (100 %), D'_t finds "
        "the next hop on 2 (100 %) and the answer is right on 1 (50 %). The chain breaks most at \"5 answer "
        "correct\": 1 of 2.")
    # a table of one rule (written before both were reported) holds containment, and the sentence says so
    assert funnel_sentence(loose, "d") == (
        "d: of the 4 questions with a gold bridge, a seed matched on 3; the evidence subgraph holds the bridge on 3 "
        "of those (100 %; a name containing the bridge counts: this table has no count for equal names), the "
        "rewrite names it on 2 (67 %), D'_t finds the next hop on 2 (100 %) and the answer is right on 1 (50 %). "
        "The chain breaks most at \"5 answer correct\": 1 of 2.")
    # a table of the equal rule only: no count under containment, so the sentence adds nothing to step 2
    assert funnel_sentence(both[both[MATCH] == "equal"], "d") == (
        "d: of the 4 questions with a gold bridge, a seed matched on 3; the evidence subgraph holds the bridge on 2 "
        "of those (67 %), the rewrite names it on 2 (100 %), D'_t finds the next hop on 2 (100 %) and the answer is "
        "right on 1 (50 %). The chain breaks most at \"5 answer correct\": 1 of 2.")
    with pytest.raises(ValueError, match="no 'equal' rows"):
        funnel_sentence(loose.assign(**{MATCH: "contains"}), "d")
    with pytest.raises(ValueError, match="no 'kgir' rows for dataset 'x'"):
        funnel_sentence(funnel_table(rows), "x")
    side = match_rules_table(both.assign(method="kgir")).set_index("step")
    assert side.loc[STEPS[2], ["n (equal)", "n (contains)"]].tolist() == [2, 3]
    assert match_rules_table(loose.assign(method="kgir")).empty  # an old table of one rule has no such view
    # one method and one round of a table with others, datasets and steps in the table's order (not sorted)
    base = both.assign(method="kgir")
    many = pd.concat([base, base.assign(dataset="a"), base.assign(method="other", n=base["n"] + 100),
                      base.assign(round="2", n=base["n"] + 50)])
    side = match_rules_table(many)
    assert list(side.columns) == ["dataset", "step", "n (equal)", "% of previous step (equal)", "n (contains)",
                                  "% of previous step (contains)"]
    assert side["dataset"].tolist() == ["d"] * len(STEPS) + ["a"] * len(STEPS)
    assert side["step"].tolist() == list(STEPS) * 2
    assert side[["n (equal)", "n (contains)"]].values.tolist()[:len(STEPS)] == [[4, 4], [3, 3], [2, 3], [2, 2], [2, 2],
                                                                                [1, 1]]


def _funnel_of(dataset: str, answers: list, round_: str) -> pd.DataFrame:
    records = [record(f"q{i}", answer=a) for i, a in enumerate(answers)]
    rows = funnel_rows(records, {f"q{i}": [COMPAQ] for i in range(len(answers))}, dataset=dataset)
    tab = funnel_table(rows)
    return tab[tab["round"] == round_]


def test_plot_funnel_draws_exactly_this_figure():
    """Two datasets (x: 1 question, right; y: 2 questions, one right), rows given in reverse (y first, steps
    last to first), with round-1 rows that must not be drawn: bars 0.8 / 2 = 0.4 thick, the second dataset's 0.4
    below the first's,
    ticks between them, steps top down, the axes and legend; 7 x 3.5 inches, round "any" by default."""
    import matplotlib.pyplot as plt
    tab = pd.concat([_funnel_of("x", ["HP"], "any"), _funnel_of("y", ["HP", "IBM"], "any"),
                     _funnel_of("y", ["IBM", "IBM"], "1")]).iloc[::-1]
    ax = plot_funnel(tab)
    assert tuple(ax.figure.get_size_inches()) == (7.0, 3.5)
    bars = [(round(p.get_y(), 6), round(p.get_height(), 6), p.get_width()) for p in ax.patches]
    y_bars = [(k - 0.2, 0.4, w) for k, w in zip(range(len(STEPS)), [100.0] * 5 + [50.0])]  # first seen: y
    x_bars = [(k + 0.2, 0.4, 100.0) for k in range(len(STEPS))]
    assert bars == [tuple(round(v, 6) for v in b) for b in y_bars + x_bars]
    assert [round(t, 6) for t in ax.get_yticks()] == [k + 0.2 for k in range(len(STEPS))]
    assert [t.get_text() for t in ax.get_yticklabels()] == list(STEPS) and ax.yaxis_inverted()
    assert ax.get_xlim() == (0.0, 100.0)
    assert ax.get_xlabel() == "% of questions with a gold bridge (chain up to the step)"
    assert ax.get_title() == "KGIR-RAG bridge funnel, over all rounds"
    legend = ax.get_legend()
    assert [(t.get_text(), t.get_fontsize()) for t in legend.get_texts()] == [("y (n = 2)", 10.0),
                                                                             ("x (n = 1)", 10.0)]
    assert legend._loc == 4  # lower right
    one = plot_funnel(_funnel_of("x", ["HP"], "any"))  # one dataset: bars 0.8 thick, centred on the ticks
    assert {round(p.get_height(), 6) for p in one.patches} == {0.8} and list(one.get_yticks()) == list(range(6))
    plt.close("all")


def test_weakest_step_per_method_and_dataset_in_table_order():
    """Rows of round "any" for (kgir_forced, musique_train) and (kgir, hotpotqa), in that order, and round-1 rows
    that must not count. kgir_forced breaks most at the seed (1 of 4: the step before is all 4 questions);
    kgir at step 2 (1 of 3 seeded: 33.3 %, below step 3's 100 %); step 0 is never a candidate."""
    def rows(method, dataset, round_, ns, pcts):
        return [{"method": method, "dataset": dataset, "round": round_, "questions": 4, "step": s, "n": n,
                 "% of previous step": p} for s, n, p in zip(STEPS, ns, pcts)]
    table = pd.DataFrame(rows("kgir_forced", "musique_train", "any", (4, 1, 1, 1, 1, 1), (100.0, 25.0, 100.0, 100.0,
                                                                                           100.0, 100.0))
                         + rows("kgir", "hotpotqa", "any", (4, 3, 1, 1, 1, 1), (5.0, 75.0, 33.3, 100.0, 100.0, 100.0))
                         + rows("kgir", "hotpotqa", "1", (4, 0, 0, 0, 0, 0), (100.0, 0.0, None, None, None, None)))
    out = weakest_step(table)
    assert out.to_dict("records") == [
        {"method": "kgir_forced", "dataset": "musique_train", "questions": 4, "breaks at": STEPS[1],
         "passed the step before": 4, "passed it": 1, "% of previous step": 25.0},
        {"method": "kgir", "dataset": "hotpotqa", "questions": 4, "breaks at": STEPS[2],
         "passed the step before": 3, "passed it": 1, "% of previous step": 33.3}]
