"""draw_subgraph on hand-made evidence subgraphs (kgir_lib.viz)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from kgir_lib.kg import Triple  # noqa: E402
from kgir_lib.subgraph import evidence_subgraph  # noqa: E402
from kgir_lib.viz import draw_subgraph, legend_handles, subgraph_edges  # noqa: E402

G = [
    Triple("Compaq", "was top PC maker of", "1994", "p1"),
    Triple("Compaq", "is a", "PC supplier", "p1"),
    Triple("Hewlett-Packard", "merged with", "Compaq", "p2"),
    Triple("Hewlett-Packard", "acquired", "Compaq", "p2"),
    Triple("1994", "year before", "PC supplier", "p3"),
]
W = {"was top PC maker of": 0.9, "is a": 0.3, "merged with": 0.8, "acquired": 0.6, "year before": 0.1}


def sub_for(entities, question="Who merged with Compaq?"):
    """The subgraph under the seed-star reading of G_tmp (these drawings are about stars around seeds)."""
    return evidence_subgraph(question, [], G, entities, lambda q, ts: [W[t.relation] for t in ts], reading="seed_star")


def test_subgraph_edges_merge_parallel_triples():
    sub = sub_for(["Compaq"])
    pairs = subgraph_edges(sub)
    assert pairs[("Compaq", "Hewlett-Packard")] == {"kept": True, "weight": 0.8,
                                                    "relations": ["merged with", "acquired"],
                                                    "label": "merged with (+1)"}
    assert set(pairs) == {("1994", "Compaq"), ("Compaq", "PC supplier"), ("Compaq", "Hewlett-Packard")}


def test_draw_subgraph_counts_kept_and_pruned():
    # seeds Compaq and 1994: the triangle Compaq-1994-PC supplier loses its lightest edge
    sub = sub_for(["Compaq", "1994"], "Was Compaq the top PC maker of 1994?")
    assert [t.relation for t in sub.pruned] == ["acquired", "year before"]
    fig, ax = plt.subplots()
    counts = draw_subgraph(ax, sub, title="test")
    # kept: 1994-Compaq, Compaq-PC supplier, HP-Compaq; pruned: HP-Compaq 'acquired' (arc), 1994-PC supplier
    assert counts == {"nodes": 4, "seeds": 2, "kept_edges": 3, "pruned_edges": 2}
    assert ax.get_title() == "test"
    ax.legend(handles=legend_handles())
    fig.canvas.draw()
    plt.close(fig)


def test_draw_empty_subgraph_writes_a_note():
    sub = sub_for(["Mona Lisa"], "Who painted the Mona Lisa?")
    fig, ax = plt.subplots()
    assert draw_subgraph(ax, sub) == {"nodes": 0, "seeds": 0, "kept_edges": 0, "pruned_edges": 0}
    assert any("G_tmp is empty" in t.get_text() for t in ax.texts)
    plt.close(fig)


def test_draw_equal_weights_does_not_fail():
    sub = evidence_subgraph("About Compaq?", [], G[:2], ["Compaq"], lambda q, ts: [0.5] * len(ts))
    fig, ax = plt.subplots()
    assert draw_subgraph(ax, sub, edge_labels=False)["kept_edges"] == 2
    plt.close(fig)


def test_render_trace_shows_every_round(tiny_workspace, tiny_dataset):
    from kgir_lib.methods.kgir import KGIRRAG, trace_table
    from kgir_lib.viz import render_trace

    def script(req):
        if req.prompt == "kgir_ner":
            return "Entities: 1994"
        if req.prompt == "kgir_rewrite":
            return "Which company did Compaq merge with in 2002?"
        if req.prompt == "kgir_reflect":
            return "Reasoning: no.\nMissing: the partner"
        return "Answer: HP"
    ws = tiny_workspace(script)
    outs = KGIRRAG(max_iterations=2).run(ws, tiny_dataset.questions)
    text = render_trace(outs[0].trace, tiny_dataset.corpus)
    assert text.count("**Round ") == 2 and "★ Compaq" in text
    assert "rewrite: *Which company did Compaq merge with in 2002?*" in text
    assert "missing: 'the partner'" in text and "reader (forced)" in text and "→ **HP**" in text
    row = trace_table(outs).iloc[0]
    assert (row["iterations"], row["answered_by"], row["llm_calls"], row["calls_kgir_final"]) == (2, "forced_reader", 7, 1)
    assert row["rewrite_malformed"] == 0 and row["G_Ans_triples"] > 0


def test_pick_drawable_prefers_pruned_and_legible():
    from kgir_lib.viz import pick_drawable

    pruned = sub_for(["Compaq"])                       # 3 pairs, one parallel edge pruned
    unpruned = evidence_subgraph("About Compaq?", [], G[:3], ["Compaq"], lambda q, ts: [0.5] * len(ts))
    tiny = evidence_subgraph("About Compaq?", [], G[:1], ["Compaq"], lambda q, ts: [0.5] * len(ts))
    assert pick_drawable([unpruned, tiny, pruned], n=3) == [2, 0]
    assert pick_drawable([unpruned, pruned], n=1, max_pairs=2) == []


def test_component_layout_does_not_depend_on_insertion_order():
    # G_tmp's triples can arrive in another order in another process; the drawn figure must not change
    import networkx as nx

    from kgir_lib.viz import component_layout

    edges = [("Compaq", "1994"), ("Compaq", "PC supplier"), ("Hewlett-Packard", "Compaq"), ("1994", "PC supplier"),
             ("Alabama", "Harper Lee"), ("Harper Lee", "To Kill a Mockingbird"), ("Monroeville", "Alabama")]
    a, b = nx.Graph(), nx.Graph()
    a.add_edges_from(edges)
    b.add_edges_from((v, u) for u, v in reversed(edges))
    pa, pb = component_layout(a), component_layout(b)
    assert pa.keys() == pb.keys()
    assert all(abs(pa[n][0] - pb[n][0]) < 1e-9 and abs(pa[n][1] - pb[n][1]) < 1e-9 for n in pa)
