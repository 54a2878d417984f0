"""KG²RAG as its authors' code runs it (kgir_lib.baselines.kg2rag_code): each stage on constructed inputs whose
result is worked out by hand from the code's rules, the trees against networkx, and (in the peer environment
only, ``benchmarks/peers/.venv-kg2rag``) every stage against the authors' post-processors on random inputs."""
from __future__ import annotations

import gzip
import hashlib
import json
import random
import subprocess
from pathlib import Path

import networkx as nx
import pytest

from kgir_lib.baselines.kg2rag_code import run_code
from kgir_lib.baselines.kg2rag_code_chunks import ChunkIndex, code_setting, expand_by_titles, group_by_title
from kgir_lib.baselines.kg2rag_code_organise import (QUERY, OrderedMultiGraph, candidate_text, fill_as_code,
                                                     ngram_overlap, organise_as_code, question_graph, tree_sources)
from kgir_lib.data import Passage
from kgir_lib.kg import KnowledgeGraph, Triple

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers"
PEER_PY = PEERS / ".venv-kg2rag" / "bin" / "python"
CHECKOUT = PEERS / ".venv-kg2rag" / "src" / "KG2RAG"


def make_index(chunks, facts, wiring="hotpotqa") -> ChunkIndex:
    """``chunks``: ``[(pid, title, text)]``; ``facts``: ``{pid: [(h, r, t), ...]}``."""
    passages = [Passage(pid, title, text) for pid, title, text in chunks]
    kg = KnowledgeGraph([Triple(h, r, t, pid) for pid, fs in facts.items() for h, r, t in fs],
                        [pid for pid, _, _ in chunks])
    return ChunkIndex(passages, kg, wiring)


def scripted(scores: dict):
    """A reranker that scores a text by the first key of ``scores`` it starts with (0 for none)."""
    def score(question, texts):
        return [next((v for k, v in scores.items() if t.startswith(k)), 0.0) for t in texts]
    return score


# ---------------------------------------------------------------------------- 1. expansion
EXPANSION_CHUNKS = [("p0", "A", "a0"), ("p1", "A", "a1"), ("p2", "B", "b"), ("p3", "C", "c"), ("p4", "D", "d"),
                    ("p5", "E", "e"), ("p6", "F", "f"), ("p7", "G", "g")]
EXPANSION_FACTS = {"p0": [("A", "r", "B")], "p1": [("A", "r", "G")], "p2": [("B", "r", "C")],
                   "p3": [("C", "r", "D")], "p5": [("E", "r", "x")]}


def test_expansion_walks_page_titles_one_hop():
    """Seeds A, E, F (scores .8, .6, .2): highly related = the two best means, A and E; the seeds' triples name B
    (scored .8); the hop reaches C (through B's chunk) and G (through A's other chunk). Every chunk of a reached
    title with triples is added, scored (.8 + mean seed score) / 2; G has no chunk with triples (not in the code's
    doc2kg), so its chunk is not; D is two hops away; F is a seed title that is not highly related."""
    index = make_index(EXPANSION_CHUNKS, EXPANSION_FACTS)
    exp = expand_by_titles(index, [("p0", 0.8), ("p5", 0.6), ("p6", 0.2)])
    assert exp.highly_related == ["A", "E"]
    assert exp.related == ["B", "A", "E", "F", "C", "G"]
    avg = (0.8 + 0.6 + 0.2) / 3
    assert [p for p, _ in exp.added] == ["p2", "p1", "p3"]  # equal scores: the order they were found
    assert [round(s, 9) for _, s in exp.added] == [round((0.8 + avg) / 2, 9)] * 3


def test_expansion_repeated_title_in_the_top_half_is_highly_related():
    """A is met twice among the first 5 // 2 = 2 seeds, so it is highly related although its mean (.3) is not
    among the two best (B .9, C .8): its other chunk a2 is added. D (mean .1) is a plain seed title: its other
    chunk d1 stays out. a0 and a1 have no triple, so A's chunks in the code's doc2kg are a2 alone."""
    chunks = [("a0", "A", "x"), ("a1", "A", "y"), ("a2", "A", "z"), ("b0", "B", "x"), ("c0", "C", "x"),
              ("d0", "D", "x"), ("d1", "D", "y")]
    facts = {"a2": [("A", "r", "q")], "d1": [("D", "r", "q")], "b0": [("B", "r", "q")], "c0": [("C", "r", "q")]}
    index = make_index(chunks, facts)
    seeds = [("a0", 0.3), ("a1", 0.3), ("b0", 0.9), ("c0", 0.8), ("d0", 0.1)]
    exp = expand_by_titles(index, seeds)
    assert exp.highly_related == ["A", "B", "C"]
    avg = sum(s for _, s in seeds) / 5
    assert exp.added == [("a2", pytest.approx((0.6 + avg) / 3))]
    assert [p for p, _ in expand_by_titles(index, [seeds[0], seeds[2], seeds[1], *seeds[3:]]).added] == []


def test_expansion_of_no_seed_is_empty():
    index = make_index(EXPANSION_CHUNKS, EXPANSION_FACTS)
    exp = expand_by_titles(index, [])
    assert (exp.added, exp.highly_related, exp.related) == ([], [], [])


# ---------------------------------------------------------------------------- 2. organisation
def test_ngram_overlap_follows_the_codes_rule():
    assert ngram_overlap("Barack Obama", "Who is barack obama's wife?") == pytest.approx(1.0)
    assert ngram_overlap("Obama", "Who is Michelle?") == pytest.approx(0.01 / 3.01)
    assert ngram_overlap("ab", "xab") == pytest.approx(1.0)   # n shrinks to the shorter length
    assert ngram_overlap("", "abc") == 0.0


ORG_CHUNKS = [("p0", "T0", "t0"), ("p1", "T1", "t1"), ("p2", "T2", "t2"), ("p3", "T3", "t3"), ("p4", "T4", "t4")]
ORG_FACTS = {"p0": [("a", "r", "b"), ("b", "r", "c")], "p1": [("c", "r", "d")], "p2": [("x", "r", "y")],
             "p3": [("z", "r", "z")]}
ORG_NODES = [("p0", 0.9), ("p1", 0.5), ("p2", 0.7), ("p3", 0.3), ("p4", 0.2)]
ORG_SCORES = {"T2": 0.9, "T0": 0.5, "T3": 0.1}  # the tree of {x, y} first, then {a, b, c, d}, then the loop


def test_organisation_takes_components_largest_first_and_stops_at_the_first_overflow():
    index = make_index(ORG_CHUNKS, ORG_FACTS)
    org = organise_as_code(index, ORG_NODES, "qqqq", scripted(ORG_SCORES), 2, use_tpt=False)
    assert org.candidates == [["p0", "p0", "p1"], ["p2"], ["p3"]]  # a chunk once per tree edge
    assert org.texts[0] == "T0: t0T0: t0T1: t1"
    assert (org.kept, org.path) == ([("p2", 0.7)], "trees")  # {p2} fits; {p0, p1, p2} > 2 ends the selection
    org = organise_as_code(index, ORG_NODES, "qqqq", scripted(ORG_SCORES), 4, use_tpt=False)
    assert [p for p, _ in org.kept] == ["p0", "p1", "p2", "p3"]  # retrieval order, not rank order


def test_fill_reads_the_rest_scores_as_indices_into_every_chunk():
    """With k = 10, four chunks are taken (< 5): the code scores the rest (p4 alone) and reads its best index 0
    as nodes[0] = p0, already taken, so p4 is never added."""
    index = make_index(ORG_CHUNKS, ORG_FACTS)
    org = organise_as_code(index, ORG_NODES, "qqqq", scripted(ORG_SCORES), 10, use_tpt=False)
    assert org.path == "trees+fill" and [p for p, _ in org.kept] == ["p0", "p1", "p2", "p3"]
    assert fill_as_code(ORG_NODES, {"p2"}, [0.1, 0.9, 0.5, 0.2], 3) == {"p2", "p1", "p3"}  # nodes[1], nodes[2]


def test_no_candidate_ranks_the_chunks_alone_in_score_order():
    index = make_index(ORG_CHUNKS, {})
    org = organise_as_code(index, ORG_NODES, "qqqq", scripted({"T3": 0.8, "T1": 0.6}), 2, use_tpt=False)
    assert org.path == "no candidates" and [p for p, _ in org.kept] == ["p3", "p1"]


def test_mentions_join_co_occurrence_edges_and_spread_along_mentioned_relations():
    """'Paris' and 'capital' are in the question: the triple (France, capital, Paris) carries the mention to
    France; the two mentioned entities not yet adjacent ('Paris' and the title 'Louvre') get a weight-0 edge."""
    index = make_index([("p0", "Louvre", "x"), ("p1", "Seine", "y")],
                       {"p0": [("France", "capital", "Paris")], "p1": [("Seine", "flows", "Lyon")]})
    g, mentioned, rels = question_graph(index, [("p0", 0.5), ("p1", 0.4)], "Is the Louvre in Paris, the capital?")
    assert mentioned == ["Louvre", "Paris", "France"] and rels == ["capital"]
    assert [(u, v, s, w) for u, v, s, w in g.edges if s == QUERY] == [("Louvre", "Paris", QUERY, 0.0),
                                                                      ("Louvre", "France", QUERY, 0.0)]


def test_candidate_text_accumulates_the_facts_as_the_code_does():
    index = make_index(ORG_CHUNKS, ORG_FACTS)
    facts = "a has/is r b, b has/is r c"
    assert candidate_text(index, ["p0", "p0"], use_tpt=True) == (
        f"T0: t0 Relational facts: {facts}.T0: t0 Relational facts: {facts}{facts}.")
    assert candidate_text(index, ["p4"], use_tpt=True) == "T4: t4"


# ---------------------------------------------------------------------------- 3. grouping
def test_grouping_by_title_in_order_of_first_appearance():
    chunks = [("a0", "A", "x"), ("b0", "B", "x"), ("a1", "A", "y")]
    nodes = [("a1", 0.5), ("b0", 0.4), ("a0", 0.3)]
    assert [p for p, _ in group_by_title(make_index(chunks, {}, "hotpotqa"), nodes)] == ["a0", "a1", "b0"]
    assert [p for p, _ in group_by_title(make_index(chunks, {}, "musique"), nodes)] == ["a1", "a0", "b0"]


def test_wiring_and_chunk_ids():
    index = make_index([("a0", "A", "x"), ("b0", "B", "x"), ("a1", "A", "y")], {}, "musique")
    assert [index.chunk_id(p) for p in ("a0", "b0", "a1")] == ["0##A##0", "1##B##0", "2##A##1"]
    assert code_setting("musique_train").use_tpt and not code_setting("hotpotqa").use_tpt
    with pytest.raises(ValueError, match="unknown wiring"):
        make_index([], {}, "2wiki")


# ---------------------------------------------------------------------------- trees against networkx
class GraphOrder:
    """networkx's show_nodes without its ``nodes`` attribute (as the cross-check's insertion-order run)."""

    def __init__(self, nodes):
        self._nodes = set(nodes)

    def __call__(self, node):
        return node in self._nodes


def random_edges(rng: random.Random, n_nodes: int, n_edges: int) -> list:
    names = [f"n{i}" for i in range(n_nodes)]
    return [(rng.choice(names), rng.choice(names), f"c{rng.randrange(6)}", rng.choice([0.1, 0.5, 0.5, 0.9]))
            for _ in range(n_edges)]


@pytest.mark.parametrize("seed", range(30))
def test_tree_sources_are_networkx_maximum_spanning_tree_edges_in_order(seed, monkeypatch):
    """On random multigraphs with parallel edges, self-loops and tied weights: every component's candidate is
    the sources of ``nx.maximum_spanning_tree(G.subgraph(component)).edges`` in networkx's order, with the
    subgraph's node order made the graph's (networkx uses a set's order for a component under half the graph)."""
    monkeypatch.setattr(nx.filters, "show_nodes", GraphOrder)
    rng = random.Random(seed)
    edges = random_edges(rng, rng.randrange(2, 12), rng.randrange(1, 20))
    g, G = OrderedMultiGraph(), nx.MultiGraph()
    for u, v, s, w in edges:
        g.add_edge(u, v, s, w)
        G.add_edge(u, v, source=s, weight=w)
    comps = g.components()
    assert [set(c) for c in comps] == sorted(nx.connected_components(G), key=len, reverse=True)
    for comp in comps:
        if len(comp) > 1:
            mst = nx.maximum_spanning_tree(G.subgraph(comp), weight="weight")
            assert tree_sources(g, comp) == [d["source"] for _, _, d in mst.edges(data=True)]


# ---------------------------------------------------------------------------- the authors' code itself
def hashed_scores(table: dict):
    """A reranker that scores a text by its hash (both sides read the same numbers through ``table``)."""
    def score(question, texts):
        out = [int(hashlib.sha1(t.encode()).hexdigest()[:6], 16) / 2 ** 24 for t in texts]
        table.update({(question, t): s for t, s in zip(texts, out)})
        return out
    return score


def random_corpus(rng: random.Random) -> tuple:
    titles = [f"Title {c}" for c in "ABCDEFGH"]
    chunks, facts = [], {}
    for i in range(rng.randrange(12, 30)):
        pid, title = f"p{i}", rng.choice(titles)
        chunks.append((pid, title, f"text {i}"))
        if rng.random() < 0.8:
            ents = titles + ["Paris", "river", "war"]
            facts[pid] = [(rng.choice(ents), rng.choice(["born in", "part of", "capital"]), rng.choice(ents))
                          for _ in range(rng.randrange(1, 4))]
    return chunks, facts


QUESTIONS = ["Where was Title A born, in Paris?", "Which war is part of Title C?", "capital of zzz",
             "Title B and Title D: which river?"]


@pytest.mark.slow  # runs the authors' code in the peer environment
@pytest.mark.skipif(not (PEER_PY.exists() and CHECKOUT.exists()),
                    reason="peer environment absent (bash benchmarks/peers/setup.sh kg2rag)")
@pytest.mark.parametrize("wiring", ["hotpotqa", "musique"])
def test_every_stage_is_the_authors_code_with_the_hash_order_taken_out(wiring, tmp_path):
    """Random chunks, triples, seeds and questions: kg2rag_code's three stages are those of the authors'
    post-processors run with insertion order (``kg2rag_upstream.py run --order insertion``), chunk for chunk."""
    rng = random.Random(7)
    use_tpt = code_setting("musique_train" if wiring == "musique" else "hotpotqa").use_tpt
    for corpus in range(3):
        chunks, facts = random_corpus(rng)
        index = make_index(chunks, facts, wiring)
        k, table = rng.randrange(2, 7), {}
        questions, expected = [], {}
        for i in range(25):
            seeds = [(p, round(rng.uniform(0.1, 0.9), 2)) for p, _, _ in rng.sample(chunks, k)]
            question = rng.choice(QUESTIONS)
            res = run_code(index, seeds, question, hashed_scores(table), k, use_tpt)
            expected[f"q{i}"] = {"expanded": [index.chunk_id(p) for p, _ in res["expansion"].added],
                                 "organised": [index.chunk_id(p) for p, _ in res["organisation"].kept],
                                 "final": [index.chunk_id(p) for p, _ in res["final"]]}
            questions.append({"qid": f"q{i}", "question": question,
                              "seeds": [[index.chunk_id(p), s] for p, s in seeds]})
        key = (lambda p: str(index.seq[p])) if wiring == "hotpotqa" else (lambda p: f"{index.idx[p]}##{index.seq[p]}")
        case = {"dataset": f"random{corpus}", "wiring": wiring, "use_tpt": use_tpt, "top_k": k,
                "chunks": [[index.chunk_id(p), t, key(p), index.text[p]] for p, t, _ in chunks],
                "facts": {index.chunk_id(p): [list(f) for f in fs] for p, fs in index.facts.items()},
                "questions": questions}
        inputs, scores, out = tmp_path / "in.json.gz", tmp_path / "scores.jsonl", tmp_path / "out.jsonl"
        with gzip.open(inputs, "wt", encoding="utf-8") as fh:
            json.dump(case, fh)
        scores.write_text("".join(json.dumps({"q": q, "t": t, "s": s}) + "\n" for (q, t), s in table.items()))
        subprocess.run([str(PEER_PY), str(PEERS / "kg2rag_upstream.py"), "run", "--checkout", str(CHECKOUT),
                        "--inputs", str(inputs), "--scores", str(scores), "--order", "insertion", "--out", str(out)],
                       check=True, capture_output=True, text=True)
        for rec in map(json.loads, out.read_text().splitlines()):
            assert rec["error"] is None
            got = {s: [x[0] if isinstance(x, list) else x for x in rec[s]] for s in ("expanded", "organised", "final")}
            assert got == expected[rec["qid"]], (corpus, rec["qid"])
