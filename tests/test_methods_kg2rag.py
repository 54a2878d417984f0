"""KG²RAG on hand-made graphs: expansion, maximum spanning trees, DFS text order, tree ranking, budget."""
from __future__ import annotations

import numpy as np
import pytest

from kgir_lib.baselines import kg2rag as kg2rag_module
from kgir_lib.baselines.kg2rag import KG2RAG
from kgir_lib.baselines.kg2rag import (TripleAdjacency, dfs_edges, expand, fill_budget, max_spanning_forest,
                                       tree_passages, tree_triples_text)
from kgir_lib.baselines.naive import NaiveRAG
from kgir_lib.data import Corpus, Dataset, Passage, Question
from kgir_lib.kg import KnowledgeGraph, Triple
from kgir_lib.methods.base import Workspace
from kgir_lib.retrieval import DenseIndex

QUESTION = "hand-made question"
# passage -> cosine with the question (the edge weight of its triples)
SCORES = {"pA": 0.9, "pB": 0.8, "pC": 0.5, "pD": 0.3, "pE": 0.1, "pF": 0.05}


class LookupEncoder:
    """Question = axis 0; passage i = s·e0 + sqrt(1-s²)·e_{i+1}, so cos(question, passage) = s exactly."""

    model_name = "lookup-test"
    batch_size = 8
    dim = 16

    def __init__(self, scores):
        self.table = {QUESTION: np.eye(self.dim)[0]}
        for i, (pid, s) in enumerate(scores.items()):
            self.table[f"{pid}\ntext of {pid}"] = s * np.eye(self.dim)[0] + np.sqrt(1 - s * s) * np.eye(self.dim)[i + 1]

    def encode(self, texts, progress=False):
        out = [self.table.get(t, np.eye(self.dim)[self.dim - 1]) for t in texts]  # unknown text: orthogonal
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)


T1 = Triple("X", "r1", "Y", "pA")
T2 = Triple("Y", "r2", "Z", "pB")
T3 = Triple("X", "r3", "Z", "pC")  # closes the triangle X-Y-Z with the lightest edge
T4 = Triple("Z", "r4", "W", "pD")
T5 = Triple("U", "r5", "V", "pE")  # another component
T6 = Triple("W", "r6", "Q", "pF")  # two hops from the seeds


@pytest.fixture
def lookup_ws(cfg, make_llm):
    def make(script=lambda req: "Answer: W", reranker=None):
        passages = [Passage(p, p, f"text of {p}") for p in SCORES]
        q = Question("h1", QUESTION, ("W",), ("pA", "pD"), "hand", 2)
        ds = Dataset("hand", [q], Corpus(passages))
        dense = DenseIndex(passages, LookupEncoder(SCORES), progress=False)
        kg = KnowledgeGraph([T1, T2, T3, T4, T5, T6], list(SCORES))
        return Workspace(cfg=cfg, dataset=ds, llm=make_llm(script), dense=dense, kg=kg, reranker=reranker)
    return make


# ----------------------------------------------------------------------------- pure steps
def test_expansion_adds_the_triples_one_hop_from_the_seed_entities():
    graph = [T1, T2, T3, T4, T5, T6]
    assert expand(graph, [T1], 0) == [T1]
    assert expand(graph, [T1], 1) == [T1, T3, T2]          # X's triples, then Y's
    assert {t.pid for t in expand(graph, [T1], 1)} - {"pA"} == {"pB", "pC"}
    assert expand(graph, [T1, T2], 1) == [T1, T2, T3, T4]  # Z reached -> Z-W; not W-Q, not U-V
    assert expand(graph, [T1, T2], 2) == [T1, T2, T3, T4, T6]
    with pytest.raises(ValueError, match="kg2rag_m_hops"):
        expand(graph, [T1], -1)


def test_maximum_spanning_forest_keeps_the_heaviest_acyclic_edges():
    edges = [(T1, 0.9), (T2, 0.8), (T3, 0.5), (T4, 0.3), (T5, 0.95)]
    trees = max_spanning_forest(edges)
    assert trees == [[(T5, 0.95)], [(T1, 0.9), (T2, 0.8), (T4, 0.3)]]  # T3 closes a cycle: dropped
    # parallel edges: the heavier one is kept; equal weights: the earlier one
    a1, a2 = Triple("A", "r", "B", "p1"), Triple("B", "s", "A", "p2")
    assert max_spanning_forest([(a1, 0.2), (a2, 0.7)]) == [[(a2, 0.7)]]
    assert max_spanning_forest([(a1, 0.5), (a2, 0.5)]) == [[(a1, 0.5)]]
    assert max_spanning_forest([(Triple("A", "r", "A", "p"), 1.0)]) == []


def test_dfs_starts_at_the_heaviest_edge_and_goes_deep_first():
    xy, yz, xw, wv = (Triple("X", "a", "Y", "p1"), Triple("Y", "b", "Z", "p2"), Triple("X", "c", "W", "p3"),
                      Triple("W", "d", "V", "p4"))
    tree = max_spanning_forest([(xw, 3.0), (wv, 2.0), (xy, 5.0), (yz, 4.0)])[0]
    order = dfs_edges(tree)
    assert [t for t, _ in order] == [xy, yz, xw, wv]  # breadth-first would give xy, xw, yz, wv
    assert tree_passages(order) == ["p1", "p2", "p3", "p4"]
    assert tree_triples_text(order).splitlines()[0] == "(X, a, Y)"
    assert dfs_edges([]) == []


def test_fill_budget_takes_trees_in_order_then_the_fallback():
    assert fill_budget([["p1", "p2"], ["p2", "p3", "p4"]], 3) == ["p1", "p2", "p3"]
    assert fill_budget([["p1", "p2"], ["p2", "p3", "p4"]], 10, ["p5", "p1"]) == ["p1", "p2", "p3", "p4", "p5"]
    assert fill_budget([], 2, ["s1", "s2", "s3"]) == ["s1", "s2"]


# ----------------------------------------------------------------------------- the method
def test_full_kg2rag_on_the_hand_made_graph(lookup_ws):
    ws = lookup_ws()
    [out] = KG2RAG(top_k=2, m_hops=1, budget=3).run(ws, ws.dataset.questions)
    t = out.trace
    assert [p for p, _ in t["seeds"]] == ["pA", "pB"]
    assert t["expanded_pids"] == ["pC", "pD"]            # one hop from X, Y, Z
    assert t["n_trees"] == 1
    assert t["trees"][0]["triples"] == ["(X, r1, Y)", "(Y, r2, Z)", "(Z, r4, W)"]  # MST drops (X, r3, Z)
    assert t["organised_pids"] == ["pA", "pB", "pD"]      # DFS text order, pC filtered out
    assert out.ranked_pids == ["pA", "pB", "pD"]
    assert out.usage.calls == 1 and out.answer == "W"
    reader = ws.llm.backend.seen[0].messages[-1][1]
    assert reader.index("text of pA") < reader.index("text of pB") < reader.index("text of pD")
    assert "text of pC" not in reader


def test_budget_cuts_the_organised_text_and_seeds_fill_a_short_one(lookup_ws):
    ws = lookup_ws()
    assert KG2RAG(top_k=2, budget=2).run(ws, ws.dataset.questions)[0].trace["organised_pids"] == ["pA", "pB"]
    ws = lookup_ws()
    ws.kg.remove(list(SCORES))  # no triple at all: the organised list is the seeds
    [out] = KG2RAG(top_k=3, budget=10).run(ws, ws.dataset.questions)
    assert out.trace["organised_pids"] == ["pA", "pB", "pC"]
    assert out.trace["filled_from_seeds"] == ["pA", "pB", "pC"]


def test_ablations(lookup_ws):
    ws = lookup_ws()
    no_exp = KG2RAG("no_expansion", top_k=2, budget=10).run(ws, ws.dataset.questions)[0]
    assert no_exp.trace["expanded_pids"] == [] and no_exp.trace["organised_pids"] == ["pA", "pB"]
    no_org = KG2RAG("no_organisation", top_k=2, budget=2).run(ws, ws.dataset.questions)[0]
    assert no_org.trace["organised_pids"] == ["pA", "pB", "pC", "pD"]  # by s(q, c); no budget, no MST
    assert "trees" not in no_org.trace
    naive = NaiveRAG(top_k=2).run(ws, ws.dataset.questions)[0]
    assert no_org.trace["context_pids"][:2] == naive.trace["context_pids"]
    with pytest.raises(ValueError, match="unknown variant"):
        KG2RAG("nope")
    assert [KG2RAG(v).name for v in ("full", "no_expansion", "no_organisation")] == [
        "KG²RAG", "KG²RAG w/o expansion", "KG²RAG w/o organisation"]


class FixedReranker:
    def __init__(self, scores):
        self.scores, self.seen = scores, []

    def score(self, pairs):
        self.seen.extend(pairs)
        return [self.scores.get(text, 0.0) for _, text in pairs]


def test_trees_are_ranked_by_the_reranker_on_their_triple_text(lookup_ws):
    rr = FixedReranker({"(U, r5, V)": 0.99})
    ws = lookup_ws(reranker=rr)
    [out] = KG2RAG(top_k=5, m_hops=0, budget=10).run(ws, ws.dataset.questions)
    # seeds pA..pE: trees {X-Y-Z-W} (heavy) and {U-V}; the reranker puts U-V first
    assert out.trace["organised_pids"] == ["pE", "pA", "pB", "pD", "pC"]
    assert {text for _, text in rr.seen} == {"(U, r5, V)", "(X, r1, Y)\n(Y, r2, Z)\n(Z, r4, W)"}
    assert all(q == QUESTION for q, _ in rr.seen)


def test_without_reranker_trees_are_ranked_by_encoder_cosine(lookup_ws):
    ws = lookup_ws()
    method = KG2RAG()
    # the lookup encoder maps unknown texts to an axis orthogonal to the question: cosine 0
    assert method.tree_scores(ws, [(QUESTION, "(U, r5, V)")]) == [0.0]
    ws.dense.encoder.table["(U, r5, V)"] = np.eye(16)[0]
    assert method.tree_scores(ws, [(QUESTION, "(U, r5, V)")]) == pytest.approx([1.0])


def test_seed_passages_are_extracted_on_demand(lookup_ws):
    ws = lookup_ws()
    asked = []
    ws.ensure_kg = lambda pids: asked.append(list(pids))
    KG2RAG(top_k=2).run(ws, ws.dataset.questions)
    assert asked == [["pA", "pB"]]


# ----------------------------------------------------------------------------- adjacency built once per graph
def legacy_expand(graph_triples, seed_triples, m):
    """The expansion as it was before the cached adjacency: the whole graph's adjacency rebuilt per call."""
    from collections import defaultdict

    adjacency = defaultdict(list)
    for t in graph_triples:
        adjacency[t.head].append(t)
        if t.tail != t.head:
            adjacency[t.tail].append(t)
    out = dict.fromkeys(seed_triples)
    frontier = list(dict.fromkeys(e for t in seed_triples for e in (t.head, t.tail)))
    reached = set(frontier)
    for _ in range(m):
        nxt = []
        for e in frontier:
            for t in adjacency.get(e, ()):
                out.setdefault(t, None)
                for x in (t.head, t.tail):
                    if x not in reached:
                        reached.add(x)
                        nxt.append(x)
        frontier = nxt
    return list(out)


@pytest.mark.parametrize("seed", [0, 1])
def test_cached_adjacency_expands_exactly_as_before(seed):
    rng = np.random.default_rng(seed)
    ents = [f"E{i}" for i in range(60)]
    graph = [Triple(ents[a], f"r{i}", ents[b], f"p{i % 25}")
             for i, (a, b) in enumerate(rng.integers(0, 60, (200, 2)))]
    graph += graph[:5] + [Triple("E1", "self", "E1", "p0")]  # duplicates and a self-loop
    adj = TripleAdjacency(graph)
    for m in (0, 1, 2):
        for _ in range(5):
            seeds = [graph[i] for i in rng.choice(len(graph), 4, replace=False)]
            assert expand(adj, seeds, m) == legacy_expand(graph, seeds, m) == expand(graph, seeds, m)


def test_adjacency_is_built_once_per_graph_and_rebuilt_when_it_changes(lookup_ws, monkeypatch):
    built = []

    class Counting(TripleAdjacency):
        def __init__(self, triples):
            built.append(len(triples))
            super().__init__(triples)

    monkeypatch.setattr(kg2rag_module, "TripleAdjacency", Counting)
    ws = lookup_ws()
    method = KG2RAG(top_k=2)
    qs = ws.dataset.questions
    first = method.run(ws, qs * 3)  # three questions, one adjacency
    assert built == [6]
    method.run(ws, qs)
    assert built == [6]
    # a thinned copy with the same number of triples (robustness study) gets its own adjacency
    ws.kg.add("pF", [Triple("W", "r7", "Q2", "pF")])
    second = method.run(ws, qs)
    assert built == [6, 6]
    assert first[0].trace["organised_pids"] == second[0].trace["organised_pids"]
