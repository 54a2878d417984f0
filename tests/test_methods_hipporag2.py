"""HippoRAG 2-style retrieval: graph construction, seeds, PPR on hand-made graphs, recognition memory."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kgir_lib.baselines.hipporag2 import HippoRAG2
from kgir_lib.kg import KnowledgeGraph, Triple
import networkx as nx

from kgir_lib.baselines.hippo_graph import fact_text, upstream_fold
from kgir_lib.baselines.hipporag2 import (PPRGraph, build_graph, enode, match_filtered, min_max, norm_phrase,
                                          phrase_seed_weights, pnode, ppr_ranking, synonym_neighbours, synonym_pairs,
                                          top_k_stable)

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
    # two triples on nice-monaco, each counted twice (upstream stores a fact edge in both directions)
    assert g[enode("nice")][enode("monaco")] == {"weight": 4.0, "kind": "fact"}
    assert g[enode("paris")][enode("france")]["weight"] == 2.0 and g[pnode("p1")][enode("paris")]["weight"] == 1.0
    assert g[pnode("p1")][enode("eiffel tower")]["kind"] == "context"
    assert set(g[pnode("p3")]) == {enode("nice"), enode("france"), enode("monaco")}
    assert g.degree(pnode("p4")) == 0
    assert hg.phrase_passages["france"] == 3 and hg.phrase_passages["paris"] == 1
    assert len(hg.facts) == 6 and hg.fact_texts[0] == "('eiffel tower', 'located in', 'paris')"
    assert hg.fact_raw[0] == ("Eiffel Tower", "located in", "Paris")  # what the filter is shown
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
    pairs = synonym_pairs(["alpha", "beta", "gamma"], mat, threshold=0.8, top_k=2)
    # alpha->beta and beta->alpha both found: the undirected edge sums the two directed cosines (upstream)
    assert [(x, y) for x, y, _ in pairs] == [("alpha", "beta")]
    assert pairs[0][2] == pytest.approx(1.8)
    hg = build_graph(KnowledgeGraph(TRIPLES, PIDS), PIDS, (["nice", "lyon"], np.array([[1.0, 0.0], [1.0, 0.0]])))
    assert hg.n_synonym_edges == 1 and hg.graph[enode("lyon")][enode("nice")]["kind"] == "synonym"


def test_synonym_neighbours_follow_upstream_rules():
    """Upstream add_synonymy_edges: k-NN top_k (self included), cosine >= threshold, > 2 alphanumerics, cap."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=16)
    base /= np.linalg.norm(base)
    vecs = []
    for i in range(8):  # 8 near-copies of one direction: all pairwise cosines > 0.8
        v = base + 0.05 * rng.normal(size=16)
        vecs.append(v / np.linalg.norm(v))
    far = np.eye(16)[0] - base * base[0]
    vecs.append(far / np.linalg.norm(far))  # orthogonal to base: no synonym
    mat = np.asarray(vecs)
    names = [f"phrase {i}" for i in range(7)] + ["x1", "lonely phrase"]  # "x1": 2 alphanumerics, never a query
    nb = synonym_neighbours(names, mat, threshold=0.8, top_k=2047)
    assert 7 not in nb and 8 not in nb and set(nb) == set(range(7))
    assert all(7 in [j for j, _ in nb[i]] for i in range(7))  # but "x1" can be another phrase's synonym
    sims = mat @ mat.T
    for i, found in nb.items():
        assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
        assert len(found) == 7 and i not in [j for j, _ in found]
        assert all(s == pytest.approx(sims[i, j]) for j, s in found)
    capped = synonym_neighbours(names, mat, threshold=0.8, top_k=2047, max_neighbours=3)
    assert all(len(f) == 3 and f == nb[i][:3] for i, f in capped.items())
    small_k = synonym_neighbours(names, mat, threshold=0.8, top_k=3)  # self + 2 others in the k-NN list
    assert all(len(f) == 2 for f in small_k.values())
    assert synonym_neighbours(names, mat, threshold=0.999, top_k=2047) == {}


def test_phrase_seeds_keep_the_link_top_k_heaviest():
    """Upstream get_top_k_weights: only the linking_top_k heaviest phrases stay seeds."""
    facts = [("a", "r", "b"), ("c", "r", "d"), ("e", "r", "f")]
    occurs = {"a": 1, "b": 2, "c": 1, "d": 4, "e": 1, "f": 1}
    full = phrase_seed_weights(facts, [0.9, 0.6, 0.3], occurs)
    assert len(full) == 6
    top = phrase_seed_weights(facts, [0.9, 0.6, 0.3], occurs, top_k=3)
    assert top == pytest.approx({"a": 0.9, "c": 0.6, "b": 0.45})
    tie = phrase_seed_weights([("a", "r", "b")], [0.5], {"a": 1, "b": 1}, top_k=1)
    assert tie == {"a": 0.5}  # tie: the phrase named first


def test_link_top_k_caps_the_phrase_seeds_in_the_method(tiny_workspace):
    ws = tiny_workspace(filter_reply(None))
    [out] = HippoRAG2(synonymy=False, link_top_k=4, recognition_filter=False).run(ws, ws.dataset.questions)
    assert len(out.trace["kept"]) == 4
    assert 0 < len(out.trace["seed_phrases"]) <= 4


def test_hipporag2_settings_come_from_the_config(tiny_workspace):
    ws = tiny_workspace(filter_reply([]))
    for key, value in (("hipporag2_synonymy", True), ("hipporag2_link_top_k", 3),
                       ("hipporag2_synonym_threshold", 0.9), ("hipporag2_synonym_top_k", 50)):
        setattr(ws.cfg, key, value)
    st = HippoRAG2().settings(ws)
    assert st == {"synonymy": True, "link_top_k": 3, "phrase_top_k": 3, "synonym_threshold": 0.9,
                  "synonym_top_k": 50}
    assert HippoRAG2(link_top_k=7, synonymy=False).settings(ws)["link_top_k"] == 7
    ws.cfg.hipporag2_synonymy = None
    assert HippoRAG2().settings(ws)["synonymy"] is (ws.cfg.llm_backend in ("openai", "vllm"))


def test_config_holds_the_hipporag2_fields():
    from kgir_lib.config import load_config

    cfg = load_config("sample", hipporag2_synonymy=True, hipporag2_link_top_k=5)
    assert cfg.hipporag2_synonymy is True and cfg.hipporag2_link_top_k == 5
    assert cfg.hipporag2_synonym_threshold == 0.8 and cfg.hipporag2_synonym_top_k == 2047


# ----------------------------------------------------------------------------- PPR built once per graph
def random_graph(seed: int, n_phr: int = 40, n_pas: int = 15) -> tuple:
    rng = np.random.default_rng(seed)
    g = nx.Graph()
    pids = [f"p{i}" for i in range(n_pas)]
    g.add_nodes_from(pnode(p) for p in pids)
    for _ in range(90):
        a, b = rng.integers(0, n_phr, 2)
        if a != b:
            g.add_edge(enode(f"e{a}"), enode(f"e{b}"), weight=float(rng.integers(1, 4)))
    for p in pids[:-2]:  # the last two passages have no edge (dangling)
        for e in rng.integers(0, n_phr, 3):
            g.add_edge(pnode(p), enode(f"e{e}"), weight=1.0)
    return g, pids


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ppr_graph_equals_networkx_pagerank(seed):
    """The cached operator reproduces networkx.pagerank (the old per-question call) to 1e-12."""
    g, pids = random_graph(seed)
    rng = np.random.default_rng(seed + 10)
    ppr = PPRGraph(g)
    nodes = [n for n in g if n.startswith("entity:")]
    pers_list = []
    for _ in range(3):
        pers = {nodes[i]: float(rng.random()) for i in rng.choice(len(nodes), 4, replace=False)}
        pers.update({pnode(p): 0.05 * float(rng.random()) for p in pids})
        pers_list.append(pers)
    resets = np.zeros((len(ppr), len(pers_list)))
    for j, pers in enumerate(pers_list):
        for node, w in pers.items():
            resets[ppr.index[node], j] = w
    batch = ppr.run(resets, 0.5)
    for j, pers in enumerate(pers_list):
        ref = nx.pagerank(g, alpha=0.5, personalization=pers, weight="weight", max_iter=200, tol=1e-10)
        np.testing.assert_allclose(batch[:, j], [ref[n] for n in ppr.nodes], rtol=0, atol=1e-12)
        np.testing.assert_allclose(ppr.run(resets[:, j], 0.5), batch[:, j], rtol=0, atol=1e-15)
        old = sorted(((p, ref[pnode(p)]) for p in pids), key=lambda x: -x[1])  # the old ranking
        new = ppr_ranking(ppr, pers, pids, 0.5)
        assert [p for p, _ in new] == [p for p, _ in old]
        assert ppr_ranking(g, pers, pids, 0.5) == new  # an nx.Graph is accepted too
    with pytest.raises(ValueError, match="seed"):
        ppr.run(np.zeros(len(ppr)), 0.5)


def test_hipporag_graph_builds_its_ppr_operator_once():
    hg = build_graph(KnowledgeGraph(TRIPLES, PIDS), PIDS)
    assert hg.ppr is hg.ppr and len(hg.ppr) == hg.graph.number_of_nodes()


def test_top_k_stable_equals_a_full_stable_sort():
    rng = np.random.default_rng(3)
    for n, k in ((50, 5), (50, 50), (7, 10), (200, 1)):
        x = rng.integers(0, 6, n).astype(np.float32)  # many ties
        assert top_k_stable(x, k).tolist() == np.argsort(-x, kind="stable")[:k].tolist()


def test_match_filtered():
    cands = [("Compaq", "was top PC maker of", "1994"), ("Dell", "founded by", "Michael Dell")]
    assert match_filtered({"fact": [["compaq", "was top PC maker of", "1994"]]}, cands) == ([0], 0, False)
    assert match_filtered({"fact": [["Dell", "founded by", "Michael Del"]]}, cands) == ([1], 0, False)
    # as upstream: an invented fact keeps the most similar candidate (no cutoff); a non-fact is unmatched
    assert match_filtered({"fact": [["Apple", "made", "iPhone"], 7]}, cands) == ([0], 1, False)
    assert match_filtered({"fact": [["Dell", "born in", "Texas"]]}, cands) == ([1], 0, False)
    assert match_filtered({"fact": []}, cands) == ([], 0, False)
    assert match_filtered(None, cands) == ([], 0, True)
    assert match_filtered(["(Dell, founded by, Michael Dell)"], cands) == ([1], 0, False)


# ----------------------------------------------------------------------------- the method
def filter_reply(facts):
    def script(req):
        if req.prompt == "hipporag2_filter":
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


def test_malformed_filter_reply_keeps_no_fact_and_falls_back_to_dense(tiny_workspace):
    # upstream's DSPyFilter: a reply it cannot parse yields no fact, and retrieve() then ranks by dense scores
    ws = tiny_workspace(filter_reply(None))
    [out] = HippoRAG2(synonymy=False, link_top_k=3).run(ws, ws.dataset.questions)
    assert out.trace["filter"] == "malformed" and out.trace["kept"] == []
    assert out.trace["fallback"].startswith("dense") and len(out.trace["candidates"]) == 3


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


def test_filter_budget_comes_from_the_profile(tiny_workspace):
    """The recognition-memory filter's max_tokens is the profile's, not a constant."""
    ws = tiny_workspace(filter_reply([["Hewlett-Packard", "merged with", "Compaq"]]))
    ws.cfg.max_tokens_hipporag2_filter = 512
    HippoRAG2(synonymy=False).run(ws, ws.dataset.questions)
    filt = [r for r in ws.llm.backend.seen if r.prompt == "hipporag2_filter"]
    assert len(filt) == 1 and filt[0].max_tokens == 512


def test_facts_are_embedded_in_upstreams_text_form():
    # upstream embeds str(tuple) of its processed triple: lower case, non-ASCII-alphanumerics to spaces,
    # ends stripped, inner runs of spaces kept
    assert fact_text("Key West, Florida", "located in", "U.S.") == "('key west  florida', 'located in', 'u s')"
    assert fact_text("Zürich", "is", "city") == "('z rich', 'is', 'city')"
    assert fact_text("a", "b", "c") == str(tuple(upstream_fold(x) for x in ("a", "b", "c")))
    assert upstream_fold(" O'Brien ") == "o brien"


def test_ranking_given_the_filters_facts_equals_the_methods_own(tiny_workspace):
    kept = [["Hewlett-Packard", "merged with", "Compaq"]]
    ws = tiny_workspace(filter_reply(kept))
    m = HippoRAG2(synonymy=False)
    rankings, infos, _, _ = m.retrieve(ws, ws.dataset.questions)
    given, missing = m.rank_given_facts(ws, ws.dataset.questions, [infos[0]["kept"]])
    assert given == rankings and missing == [[]]
    # upstream's kept facts arrive lower-cased with punctuation as spaces: the same fact of the graph
    upstream_form, _ = m.rank_given_facts(ws, ws.dataset.questions, [[["hewlett packard", "merged with", "compaq"]]])
    assert upstream_form == rankings


def test_ranking_given_unknown_facts_is_dense_and_names_them(tiny_workspace):
    ws = tiny_workspace(filter_reply([]))
    rankings, missing = HippoRAG2(synonymy=False).rank_given_facts(ws, ws.dataset.questions,
                                                                   [[["Nobody", "wrote", "Nothing"]]])
    q = ws.dataset.questions[0].question
    assert rankings[0] == ws.dense.search([q], ws.cfg.top_k)[0] and missing == [[["Nobody", "wrote", "Nothing"]]]
