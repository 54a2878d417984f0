"""Notebook 07's case: chosen by one call along the Fig. 6 chain (kgir_lib.notebook.case.choice), drawn as its bridge
path (kgir_lib.notebook.case.bridge_viz), on the paper's Fig. 6 case (Compaq / HP) with a scripted LLM."""
from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from kgir_lib.notebook.case.bridge_viz import bridge_view, draw_bridge  # noqa: E402
from kgir_lib.notebook.case.build import run_case  # noqa: E402
from kgir_lib.notebook.case.choice import CHAIN, chain_clause, chain_table, choose_case, heuristic_chain  # noqa: E402
from test_case_study import fig6_script  # noqa: E402


@pytest.fixture
def fig6_case(tiny_workspace, tiny_dataset):
    return run_case(tiny_workspace(fig6_script), tiny_dataset.questions[0])


def variant(record: dict, qid: str, **changes) -> dict:
    out = json.loads(json.dumps(record))
    out["qid"] = out["trace"]["qid"] = qid
    r1 = out["trace"]["rounds"][0]
    for key, value in changes.items():
        if key == "answer":
            out["answer"] = out["trace"]["answer"] = value
        else:
            r1[key] = value
    return out


def test_the_chain_of_the_fig6_case_and_the_furthest_case_is_chosen(fig6_case):
    good = fig6_case.output.to_json()
    r1 = good["trace"]["rounds"][0]
    gold = good["trace"]["gold_pids"]
    # the round-1 rewrite names Compaq, an entity of G_Ans the question does not; its retrieval ranks the gold
    # Hewlett-Packard passage second where the question's own ranked it third; the answer is right
    assert heuristic_chain(good) == (True, True, True)
    assert not any(p in gold for p in r1["new_passages"])  # moved up, not new
    wrong = variant(good, "q-wrong", answer="IBM")
    echo = variant(good, "q-echo", rewrite={**r1["rewrite"], "question": good["trace"]["question"]})
    table = chain_table([echo, wrong, good])
    assert list(table.columns[2:5]) == list(CHAIN)
    assert table.loc[0, "qid"] == "q1" and table.loc[table["qid"] == "q-echo", "reached"].item() == 0
    choice = choose_case([echo, wrong, good])
    assert (choice.dataset, choice.qid) == (table.loc[0, "dataset"], "q1")
    assert choice.full and "completes the whole chain" in choice.note and choice.note.endswith(
        "1 of 3 KGIR-RAG traces of this run complete the whole Fig. 6 chain.")
    none = choose_case([echo])
    assert not none.full and none.qid == "q-echo" and "NO trace completes the chain" in none.note
    asked = choose_case([echo, good], dataset=table.loc[0, "dataset"], qid="q-echo")
    assert asked.qid == "q-echo" and asked.reached == 0 and "as asked" in asked.note
    elsewhere = choose_case([echo, good], dataset="musique", qid="2hop__1")
    assert (elsewhere.dataset, elsewhere.qid, elsewhere.reached) == ("musique", "2hop__1", 0)
    assert "has no KGIR-RAG trace of it" in elsewhere.note and "0 of 0" not in elsewhere.note
    assert choose_case([]).qid is None


def test_a_funnel_plugs_in_as_the_chain_function(fig6_case):
    good = fig6_case.output.to_json()
    other = variant(good, "q2")
    funnel = {"q1": (True, False, False), "q2": (True, True, True)}
    choice = choose_case([good, other], chain=lambda rec: funnel[rec["qid"]])
    assert choice.qid == "q2" and choice.full and choice.reached == len(CHAIN)
    stuck = choose_case([good], chain=lambda rec: funnel[rec["qid"]])
    assert ("goes furthest: the rewrite names a bridge entity of G_Ans, but the rewritten question's retrieval "
            "brings no gold passage up") in stuck.note and chain_clause(CHAIN[1], False) in stuck.note


def test_the_bridge_drawing_marks_the_path_and_fits_30_edges(fig6_case):
    view = bridge_view(fig6_case, max_edges=30)
    assert view.bridges == ["Compaq"]
    # Compaq is a seed too (whole-triple matching): the chain starts at the other seed, 1994
    assert [(t.head, t.relation, t.tail) for t in view.path] == [("Compaq", "was top PC maker of", "1994")]
    assert [(t.head, t.relation, t.tail) for t in view.answer_edges] == [("Hewlett-Packard", "merged with", "Compaq")]
    assert view.answers == ["Hewlett-Packard"] and len(view.triples) <= 30
    fig, ax = plt.subplots()
    drawn = draw_bridge(ax, view, title="Fig. 6")
    assert drawn["path"] == len(view.path) and drawn["edges"] == len(view.triples)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("bridge entity" in t for t in texts)
    fig.canvas.draw()
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1 - 1
    plt.close(fig)


def test_notebook_07s_bridge_drawing_is_legible_on_a_1280_and_a_1024_px_page(fig6_case):
    from kgir_lib import report
    from kgir_lib.notebook.case.display import draw_case

    fig = draw_case(fig6_case)
    png = report.figure_png(fig)
    plt.close(fig)
    assert min(report.figure_text_px(png, w) for w in report.FIGURE_FITS.values()) >= report.MIN_TEXT_PX


def test_nothing_to_draw_is_said_in_words(fig6_case):
    for r in fig6_case.rounds:
        r.subgraph.kept = []
    view = bridge_view(fig6_case)
    assert not view.triples and "nothing to draw" in view.note
    fig, ax = plt.subplots()
    assert draw_bridge(ax, view)["edges"] == 0
    assert any("nothing to draw" in t.get_text() for t in ax.texts)
    plt.close(fig)


def test_matches_frame_says_whether_an_entity_occurs_in_the_question(fig6_case):
    m = fig6_case.matches_frame(1)
    assert list(m.columns[:4]) == ["question entity", "source", "occurs in the question", "used as a seed name"]
    assert m.set_index("question entity")["occurs in the question"].to_dict() == {"PC maker": True, "1994": True}



def test_gold_chain_reads_the_funnel_against_the_gold_bridge(monkeypatch):
    """The funnel plugs in as notebook 07's chain: steps 2-5 of the funnel, in the round that went furthest;
    a question without a gold bridge takes no step."""
    import kgir_lib.eval.mechanism.bridges as bridges
    from _mech_traces import COMPAQ, record, rnd
    from kgir_lib.notebook.case.choice import GOLD_CHAIN, gold_chain

    monkeypatch.setattr(bridges, "load_bridges", lambda name, data_dir=None: {"q1": (COMPAQ,), "q2": (COMPAQ,)})
    chain = gold_chain(None, ["musique"])
    full = {**record("q1"), "dataset": "musique"}
    stuck = {**record("q2", rounds=[rnd(rewrite_retrieved=("pCompaq", "pApple"))]), "dataset": "musique"}
    orphan = {**record("q3"), "dataset": "musique"}
    assert chain.steps == GOLD_CHAIN
    assert chain(full) == (True, True, True, True)
    assert chain(stuck) == (True, True, False, False)
    assert chain(orphan) == (False, False, False, False)
    choice = choose_case([stuck, orphan, full], chain=chain)
    assert choice.qid == "q1" and choice.full and choice.steps == GOLD_CHAIN
    without = choose_case([stuck, orphan], chain=chain)
    assert without.qid == "q2" and ("the gold bridge entity is in G_Ans, the rewrite names it, but the rewritten "
                                    "question's retrieval D'_t does not find the next hop") in without.note
    loaded = []
    monkeypatch.setattr(bridges, "load_bridges", lambda name, data_dir=None: loaded.append(name) or {"q1": (COMPAQ,)})
    lazy = gold_chain(None)  # no dataset named: each record's own dataset's gold, read when first needed
    assert lazy({**record("q1"), "dataset": "hotpotqa"}) == (True, True, True, True) and loaded == ["hotpotqa"]
    lazy({**record("q1"), "dataset": "hotpotqa"})
    assert loaded == ["hotpotqa"]
