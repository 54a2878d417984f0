"""Known answers of the numbers the notebooks report, on hand-made inputs small enough to work out by hand.

Each test pins a number (or a ranked list) that a plausible one-line slip in the library would change:
notebook 03's comparison of the two G_tmp readings (paper §2.2, Algorithm 1, eqs. 5-7: MST removal %,
gold-passage survival %), the per-question subgraph summary's ``seeded`` flag (the seed-match rate),
KGIR-RAG's and KG²RAG's final ranked lists (Recall@k, Table 6), and HippoRAG 2's personalized PageRank
(HippoRAG 2 §3: damping 0.5, a reset vector of phrase seeds and scaled passage scores).
"""
from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from kgir_lib.baselines.hipporag2 import HippoRAG2
from kgir_lib.baselines.hippo_graph import fact_text
from kgir_lib.baselines.hipporag2 import build_graph, enode, pnode, ppr_rankings
from kgir_lib.baselines.kg2rag import KG2RAG
from kgir_lib.config import load_config
from kgir_lib.data import Corpus, Dataset, Passage, Question
from kgir_lib.kg import KnowledgeGraph, Triple
from kgir_lib.kgir.entity_matching import triple_text
from kgir_lib.kgir.variants import KGIRRAG
from kgir_lib.eval.algorithm1 import compare_readings, subgraph_row
from kgir_lib.kgir.subgraph import evidence_subgraph
from kgir_lib.methods.base import Workspace
from kgir_lib.retrieval import DenseIndex

QUESTION = "hand-made question"


class LookupEncoder:
    """The question is axis 0; a listed text is ``s·e0 + sqrt(1 - s²)·e_i``, so its cosine with the question is
    exactly ``s``; any other text is orthogonal to the question (axis ``dim - 1``)."""

    model_name = "lookup-known-answers"
    batch_size = 8
    dim = 24

    def __init__(self, cosines: dict, question: str = QUESTION):
        eye = np.eye(self.dim)
        self.table = {question: eye[0]}
        for i, (text, s) in enumerate(cosines.items(), 1):
            self.table[text] = s * eye[0] + np.sqrt(1.0 - s * s) * eye[i]

    def encode(self, texts, progress=False):
        other = np.eye(self.dim)[self.dim - 1]
        return np.asarray([self.table.get(t, other) for t in texts], dtype=np.float32).reshape(len(texts), self.dim)


def passages_of(pids) -> list:
    return [Passage(p, p, f"text of {p}") for p in pids]


def content(pid: str) -> str:
    """What the dense index embeds for a passage made by :func:`passages_of` (title, newline, text)."""
    return f"{pid}\ntext of {pid}"


def make_ws(cfg, make_llm, script, pids, triples, cosines, question=QUESTION, reranker=None) -> Workspace:
    ps = passages_of(pids)
    ds = Dataset("hand", [Question("h1", question, ("answer",), tuple(pids[:2]), "hand", 2)], Corpus(ps))
    dense = DenseIndex(ps, LookupEncoder(cosines, question), progress=False)
    return Workspace(cfg=cfg, dataset=ds, llm=make_llm(script), dense=dense, kg=KnowledgeGraph(triples, pids),
                     reranker=reranker)


# ---------------------------------------------------------------- notebook 03: the two G_tmp readings
RETRIEVED = [("pA", 0.9), ("pB", 0.8), ("pC", 0.5), ("pD", 0.7)]  # D_q; "passage" weighting: an edge's weight
G_Q = [Triple("Compaq", "merged with", "HP", "pA"),
       Triple("HP", "sold to", "Dell", "pB"),
       Triple("Dell", "bought", "Compaq", "pC"),   # closes the cycle Compaq-HP-Dell with the lightest edge
       Triple("IBM", "sold to", "Lenovo", "pD")]   # a component of its own


def hand_subgraph(question: str, entity: str):
    scores = dict(RETRIEVED)
    return evidence_subgraph(question, RETRIEVED, G_Q, [entity], weight_fn=lambda q, ts: [scores[t.pid] for t in ts],
                             weighting="passage")


def test_compare_readings_pools_removal_over_component_triples_and_gold_over_g_ans(tiny_workspace):
    """Question 1 seeds Compaq: its component is the 3-cycle, the tree drops (Dell, bought, Compaq);
    gold pA, pC, pD: only pA is the source of a kept triple (pC's triple was pruned, pD's is outside the
    seed's component). Question 2 seeds IBM: a one-triple tree, gold pD kept.

    passages reading: G_tmp 4 + 4, component triples 3 + 1, G_Ans 2 + 1 -> removal 1/4 = 25 %
    (pooled, not the mean of 33.3 % and 0 %), gold 1 + 1 of 3 + 1 -> survival 50 %.
    seed_star reading: G_tmp = the seed's edges, 2 + 1, all kept (no cycle left) -> removal 0 %;
    gold pA, pC + pD -> survival 75 %.
    """
    ws = tiny_workspace(lambda req: pytest.fail("compare_readings makes no LLM call"))
    subs = [hand_subgraph("Who merged with Compaq?", "Compaq"), hand_subgraph("Who did IBM sell to?", "IBM")]
    assert subs[0].seeds == ["Compaq"] and subs[1].seeds == ["IBM"]
    table = compare_readings(ws, subs, [["pA", "pC", "pD"], ["pD"]])
    row = table.loc["passages"]
    assert (row["G_tmp"], row["component triples"], row["G_Ans"]) == (8, 4, 3)
    assert (row["gold in D_q"], row["gold in G_Ans"]) == (4, 2)
    assert row["MST removal %"] == pytest.approx(25.0) and row["gold survival %"] == pytest.approx(50.0)
    star = table.loc["seed_star"]
    assert (star["G_tmp"], star["component triples"], star["G_Ans"]) == (3, 3, 3)
    assert (star["gold in D_q"], star["gold in G_Ans"]) == (4, 3)
    assert star["MST removal %"] == 0.0 and star["gold survival %"] == pytest.approx(75.0)


# ---------------------------------------------------------------- notebook 03: the per-question summary
def test_subgraph_row_seeded_means_a_matched_seed_even_when_the_tree_keeps_nothing():
    """A seed whose only triple is a self-loop: matched (seeded), but the spanning tree keeps no edge."""
    loop = [Triple("Compaq", "is", "Compaq", "p1")]
    sub = evidence_subgraph("What is Compaq?", [("p1", 0.5)], loop, ["Compaq"], weight_fn=lambda q, ts: [1.0] * len(ts))
    assert sub.seeds == ["Compaq"] and sub.kept == [] and sub.pruned == loop
    row = subgraph_row(sub, ["p1"])
    assert (row["seeds"], row["G_Ans"], row["seeded"]) == (1, 0, True)
    # an entity that matched nothing (no fallback): E_q is not empty, yet no seed
    none = evidence_subgraph("What is Acme?", [], loop, ["Acme"], weight_fn=lambda q, ts: [1.0] * len(ts),
                             fallback_on_no_match=False)
    assert none.E_q == ["Acme"] and subgraph_row(none)["seeded"] is False


# ---------------------------------------------------------------- KGIR-RAG's ranked list (Table 6)
class TripleReranker:
    """Scores an edge by its triple text from a fixed table (what the reranker weighting of Algorithm 1 reads)."""

    def __init__(self, scores: dict):
        self.scores = scores

    def score(self, pairs):
        return [self.scores[text] for _, text in pairs]


def kgir_script(req) -> str:
    if req.prompt == "kgir_ner":
        return "Entities: Alpha"
    if req.prompt == "kgir_rewrite":
        return "Who was born in Delta?"
    return "Reasoning: Alpha founded Beta.\nAnswer: Beta"  # the reflection (and any reader) answers at once


def test_kgir_ranked_list_orders_evidence_passages_by_their_best_edge(cfg, make_llm):
    """pA holds the heaviest edge (0.9) and the lightest (0.1), pB one edge of 0.5: by best edge pA comes
    first, then pB, then the rest of the retrieval (pC, no triple). All three edges form one tree around
    the seed Alpha, so G_Ans keeps them all."""
    kg = [Triple("Alpha", "founded", "Beta", "pA"), Triple("Alpha", "likes", "Gamma", "pA"),
          Triple("Beta", "born in", "Delta", "pB")]
    weights = {triple_text(kg[0]): 0.9, triple_text(kg[1]): 0.1, triple_text(kg[2]): 0.5}
    ws = make_ws(cfg, make_llm, kgir_script, ["pA", "pB", "pC"], kg,
                 {content("pA"): 0.3, content("pB"): 0.2, content("pC"): 0.6}, question="Who founded Alpha?",
                 reranker=TripleReranker(weights))
    [out] = KGIRRAG(max_iterations=1, edge_weight="reranker").run(ws, ws.dataset.questions)
    (rnd,) = out.trace["rounds"]
    assert {tuple(x[:3]): x[4] for x in rnd["subgraph"]["G_Ans"]} == {
        ("Alpha", "founded", "Beta"): 0.9, ("Alpha", "likes", "Gamma"): 0.1, ("Beta", "born in", "Delta"): 0.5}
    assert out.answer == "Beta"
    assert out.ranked_pids == ["pA", "pB", "pC"]


# ---------------------------------------------------------------- KG²RAG's ranked list (Table 6)
def test_kg2rag_ranked_list_is_context_then_organised_list_then_remaining_seeds(cfg, make_llm, tmp_path):
    """Seeds pA, pB, pC (cosine 0.9, 0.8, 0.5); one hop from X, Y, Z adds (Z, r4, W) of pD. The tree drops
    (X, r3, Z) of pC; its DFS text is pA, pB, pD = the organised list (budget 3). The reader sees the first
    two (pA, pB); the ranked list continues with the organised pD, then the seed pC left out."""
    cfg = load_config("ci", results_dir=str(tmp_path / "r"), figures_dir=str(tmp_path / "f"),
                      llm_backend="scripted", context_passages=2)
    kg = [Triple("X", "r1", "Y", "pA"), Triple("Y", "r2", "Z", "pB"), Triple("X", "r3", "Z", "pC"),
          Triple("Z", "r4", "W", "pD")]
    cos = {"pA": 0.9, "pB": 0.8, "pC": 0.5, "pD": 0.3}
    ws = make_ws(cfg, make_llm, lambda req: "Answer: W", list(cos), kg, {content(p): s for p, s in cos.items()})
    [out] = KG2RAG(top_k=3, m_hops=1, budget=3).run(ws, ws.dataset.questions)
    assert [p for p, _ in out.trace["seeds"]] == ["pA", "pB", "pC"]
    assert out.trace["organised_pids"] == ["pA", "pB", "pD"] and out.trace["context_pids"] == ["pA", "pB"]
    assert out.ranked_pids == ["pA", "pB", "pD", "pC"]


# ---------------------------------------------------------------- HippoRAG 2's personalized PageRank
HIPPO_KG = [Triple("Paris", "capital of", "France", "p1"), Triple("Lyon", "city in", "France", "p2"),
            Triple("Nice", "near", "Monaco", "p3")]  # p4: a passage without triples
# keyed by the text a fact is embedded as (upstream's form, hippo_graph.fact_text)
FACT_COSINE = {fact_text("Paris", "capital of", "France"): 0.9, fact_text("Lyon", "city in", "France"): 0.5,
               fact_text("Nice", "near", "Monaco"): 0.1}
PASSAGE_COSINE = {"p1": 0.2, "p2": 0.6, "p3": 0.8, "p4": 0.4}


def hand_graph() -> nx.Graph:
    """HippoRAG 2's graph of HIPPO_KG written out: fact edges weigh 2 a triple, passage-phrase edges 1."""
    g = nx.Graph()
    g.add_nodes_from(["P1", "P2", "P3", "P4"])
    for a, b in (("paris", "france"), ("lyon", "france"), ("nice", "monaco")):
        g.add_edge(a, b, weight=2.0)
    for p, phrases in (("P1", ("paris", "france")), ("P2", ("lyon", "france")), ("P3", ("nice", "monaco"))):
        for ph in phrases:
            g.add_edge(p, ph, weight=1.0)
    return g


def hand_reset() -> dict:
    """The reset vector for the kept facts (Paris, capital of, France) and (Lyon, city in, France).

    Link scores, min-max over the three facts' cosines 0.9 / 0.5 / 0.1: 1.0 and 0.5. Phrase seed = fact
    score / passages naming the phrase, averaged over its facts: paris 1/1, lyon 0.5/1, france (1/2 + 0.5/2)/2.
    Passage nodes: min-max of the dense cosines 0.2 / 0.6 / 0.8 / 0.4, times 0.05.
    """
    return {"paris": 1.0, "lyon": 0.5, "france": 0.375,
            "P2": 0.05 * 2 / 3, "P3": 0.05, "P4": 0.05 * 1 / 3}


def test_hipporag2_ppr_is_pagerank_with_damping_half_and_the_hand_made_reset(cfg, make_llm):
    def script(req):
        if req.prompt == "hipporag2_filter":
            return json.dumps({"fact": [["Paris", "capital of", "France"], ["Lyon", "city in", "France"]]})
        return "Answer: France"
    ws = make_ws(cfg, make_llm, script, list(PASSAGE_COSINE), HIPPO_KG,
                 {**FACT_COSINE, **{content(p): s for p, s in PASSAGE_COSINE.items()}})
    [out] = HippoRAG2(synonymy=False).run(ws, ws.dataset.questions)
    assert out.trace["filter"] == "ok" and len(out.trace["kept"]) == 2
    ref = nx.pagerank(hand_graph(), alpha=0.5, personalization=hand_reset(), weight="weight", tol=1e-13)
    expected = sorted(((p, ref[p.upper()]) for p in PASSAGE_COSINE), key=lambda x: -x[1])
    got = out.trace["ranking"]
    assert [p for p, _ in got] == [p for p, _ in expected]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], rtol=0, atol=1e-6)
    assert out.ranked_pids == [p for p, _ in expected]


def test_ppr_rankings_reset_vector_is_phrase_seeds_plus_scaled_min_max_dense_scores():
    """ppr_rankings for two questions at once (and one a block) against networkx with the reset written out."""
    hg = build_graph(KnowledgeGraph(HIPPO_KG, list(PASSAGE_COSINE)), list(PASSAGE_COSINE))
    names = {pnode(p): p.upper() for p in PASSAGE_COSINE}
    names.update({enode(ph): ph for ph in ("paris", "france", "lyon", "nice", "monaco")})
    seeds = [{"paris": 1.0, "lyon": 0.5, "france": 0.375}, {"monaco": 2.0, "nice": 0.0}]
    dense = np.array([[0.2, 0.6, 0.8, 0.4], [0.5, 0.5, 0.1, 0.9]])
    resets = [hand_reset(),
              {"monaco": 2.0, "P1": 0.05 * 0.5, "P2": 0.05 * 0.5, "P4": 0.05}]  # nice: weight 0, not a seed
    g = nx.relabel_nodes(hg.graph, names)
    for block in (8, 1):
        got = ppr_rankings(hg, seeds, dense, list(PASSAGE_COSINE), passage_node_weight=0.05, damping=0.5,
                           block=block)
        for ranking, reset in zip(got, resets):
            ref = nx.pagerank(g, alpha=0.5, personalization=reset, weight="weight", tol=1e-13)
            expected = sorted(((p, ref[p.upper()]) for p in PASSAGE_COSINE), key=lambda x: -x[1])
            assert [p for p, _ in ranking] == [p for p, _ in expected]
            np.testing.assert_allclose([s for _, s in ranking], [s for _, s in expected], rtol=0, atol=1e-9)
    top2 = ppr_rankings(hg, seeds[1:], dense[1:], list(PASSAGE_COSINE), 0.05, 0.5, k=2)[0]
    assert [p for p, _ in top2] == [p for p, _ in got[1][:2]]
