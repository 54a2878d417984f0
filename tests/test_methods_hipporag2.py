"""HippoRAG 2-style retrieval: graph construction, seeds, PPR on hand-made graphs, recognition memory."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kgir_lib.kg import KnowledgeGraph, Triple
from kgir_lib.methods import HippoRAG2
from kgir_lib.methods.hipporag2 import (build_graph, enode, match_filtered, min_max, norm_phrase,
                                        phrase_seed_weights, pnode, ppr_ranking, synonym_pairs)

TRIPLES = [
    Triple("Eiffel Tower", "located in", "Paris", "p1"),
    Triple("Paris", "capital of", "France", "p1"),
    Triple("Lyon", "city in", "France", "p2"),
    Triple("Nice", "city in", "France", "p3"),
    Triple("Nice", "near", "Monaco", "p3"),
    Triple("Nice", "is near", "Monaco!", "p3"),  # same phrase pair after normalisation: one edge, weight 2
]
PIDS = ["p1", "p2", "p3", "p4"]  # p4: a passage without triples


def test_graph_has_phrase_passage_and_fact_edges():
    hg = build_graph(KnowledgeGraph(TRIPLES, PIDS), PIDS)
    g = hg.graph
    assert g.number_of_nodes() == 4 + 6  # passages + {eiffel tower, paris, france, lyon, nice, monaco}
    assert g[enode("nice")][enode("monaco")] == {"weight": 2.0, "kind": "fact"}
    assert g[pnode("p1")][enode("eiffel tower")]["kind"] == "context"
    assert set(g[pnode("p3")]) == {enode("nice"), enode("france"), enode("monaco")}
    assert g.degree(pnode("p4")) == 0
    assert hg.phrase_passages["france"] == 3 and hg.phrase_passages["paris"] == 1
    assert len(hg.facts) == 6 and hg.fact_texts[0] == "(Eiffel Tower, located in, Paris)"
    assert norm_phrase("  Monaco! ") == "monaco"


@pytest.mark.parametrize("seed,top", [("monaco", "p3"), ("eiffel tower", "p1"), ("lyon", "p2")])
def test_ppr_ranks_the_passage_next_to_the_seed_first(seed, top):
    hg = build_graph(KnowledgeGraph(TRIPLES, PIDS), PIDS)
    ranking = ppr_ranking(hg.graph, {enode(seed): 1.0}, PIDS, damping=0.5)
    assert ranking[0][0] == top
    assert [p for p, _ in ranking][-1] == "p4"  # unreachable, no reset mass
    assert sum(s for _, s in ranking) < 1.0


def test_ppr_needs_a_seed():
    hg = build_graph(KnowledgeGraph(TRIPLES, PIDS), PIDS)
    with pytest.raises(ValueError, match="seed"):
        ppr_ranking(hg.graph, {enode("nowhere"): 1.0}, PIDS, 0.5)


def test_phrase_seed_weights_divide_by_node_specificity_and_average():
    w = phrase_seed_weights([("nice", "near", "monaco"), ("nice", "city in", "france")], [1.0, 0.5],
                            {"nice": 1, "monaco": 1, "france": 3})
    assert w == pytest.approx({"nice": 0.75, "monaco": 1.0, "france": 0.5 / 3})


def test_min_max():
    assert min_max(np.array([2.0, 4.0, 3.0])).tolist() == [0.0, 1.0, 0.5]
    assert min_max(np.array([3.0, 3.0])).tolist() == [1.0, 1.0]


def test_synonym_pairs_above_threshold():
    b = np.array([0.9, np.sqrt(1 - 0.81)])
    mat = np.array([[1.0, 0.0], b, [0.0, 1.0]])
    pairs = synonym_pairs(["a", "b", "c"], mat, threshold=0.8, top_k=2)
    assert [(x, y) for x, y, _ in pairs] == [("a", "b")]
    assert pairs[0][2] == pytest.approx(0.9)
    hg = build_graph(KnowledgeGraph(TRIPLES, PIDS), PIDS, (["nice", "lyon"], np.array([[1.0, 0.0], [1.0, 0.0]])))
    assert hg.n_synonym_edges == 1 and hg.graph[enode("lyon")][enode("nice")]["kind"] == "synonym"


def test_match_filtered():
    cands = [("Compaq", "was top PC maker of", "1994"), ("Dell", "founded by", "Michael Dell")]
    assert match_filtered({"fact": [["compaq", "was top PC maker of", "1994"]]}, cands) == ([0], 0, False)
    assert match_filtered({"fact": [["Dell", "founded by", "Michael Del"]]}, cands) == ([1], 0, False)
    assert match_filtered({"fact": [["Apple", "made", "iPhone"], 7]}, cands) == ([], 2, False)
    assert match_filtered({"fact": []}, cands) == ([], 0, False)
    assert match_filtered(None, cands) == ([0, 1], 0, True)
    assert match_filtered(["(Dell, founded by, Michael Dell)"], cands) == ([1], 0, False)


# ----------------------------------------------------------------------------- the method
def filter_reply(facts):
    def script(req):
        if req.messages[-1][1].rstrip().endswith("Relevant facts:"):
            return json.dumps({"fact": facts}) if facts is not None else "I cannot decide."
        return "Answer: Hewlett-Packard"
    return script


def titles(ws, pids):
    return [ws.dataset.corpus[p].title for p in pids]


def test_hipporag2_seeds_ppr_with_the_kept_facts(tiny_workspace):
    ws = tiny_workspace(filter_reply([["Hewlett-Packard", "merged with", "Compaq"]]))
    [out] = HippoRAG2(synonymy=False).run(ws, ws.dataset.questions)
    assert titles(ws, out.ranked_pids[:2]) == ["Hewlett-Packard", "Compaq"]
    assert out.trace["kept"] == [["Hewlett-Packard", "merged with", "Compaq"]]
    assert len(out.trace["candidates"]) == 5 and out.trace["filter"] == "ok"
    assert out.usage.calls == 2 and out.answer == "Hewlett-Packard"
    prompt = ws.llm.backend.seen[0].messages[-1][1]
    assert '["Hewlett-Packard", "merged with", "Compaq"]' in prompt.split("Question:")[-1]


def test_seeding_a_different_fact_moves_its_passage_to_the_top(tiny_workspace):
    # (Apple, released, Macintosh) links weakly to the question (min-max score 0.26 of 8 facts) but,
    # once kept, its phrases carry far more reset mass than the dense passage seeds (x 0.05)
    ws = tiny_workspace(filter_reply([["Apple", "released", "Macintosh"]]))
    [out] = HippoRAG2(synonymy=False, link_top_k=8).run(ws, ws.dataset.questions)
    assert titles(ws, out.ranked_pids[:1]) == ["Apple"]
    q = ws.dataset.questions[0].question
    assert titles(ws, [p for p, _ in ws.dense.search([q], 6)[0]]).index("Apple") > 0


def test_no_kept_fact_falls_back_to_dense_retrieval(tiny_workspace):
    ws = tiny_workspace(filter_reply([]))
    [out] = HippoRAG2(synonymy=False).run(ws, ws.dataset.questions)
    q = ws.dataset.questions[0].question
    assert out.ranked_pids == [p for p, _ in ws.dense.search([q], ws.cfg.top_k)[0]]
    assert out.trace["fallback"].startswith("dense")


def test_malformed_filter_reply_keeps_every_candidate(tiny_workspace):
    ws = tiny_workspace(filter_reply(None))
    [out] = HippoRAG2(synonymy=False, link_top_k=3).run(ws, ws.dataset.questions)
    assert out.trace["filter"] == "malformed_kept_all" and len(out.trace["kept"]) == 3
    assert "fallback" not in out.trace


def test_without_the_filter_one_llm_call_and_batched_stages(tiny_workspace):
    ws = tiny_workspace(filter_reply([]))
    [out] = HippoRAG2(synonymy=False, recognition_filter=False).run(ws, ws.dataset.questions)
    assert out.usage.calls == 1 and out.trace["filter"] == "disabled"
    assert len(ws.llm.backend.seen) == 1


def test_graph_covers_the_whole_kg_and_is_rebuilt_when_it_grows(tiny_workspace):
    ws = tiny_workspace(filter_reply([]))
    m = HippoRAG2(synonymy=True)
    hg, facts = m.graph(ws, ws.kg)
    assert len(hg.facts) == len(ws.kg) and facts.shape == (len(ws.kg), ws.dense.encoder.dim)
    assert hg.graph.number_of_nodes() == len(ws.dataset.corpus) + len({norm_phrase(e) for e in ws.kg.entities()})
    pid = ws.dataset.corpus.pids[-1]
    ws.kg.add(pid, ws.kg.triples_of([pid]) + [Triple("Apple", "based in", "Cupertino", pid)])
    hg2, _ = m.graph(ws, ws.kg)
    assert hg2 is not hg and len(hg2.facts) == len(hg.facts) + 1
