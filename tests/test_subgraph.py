"""Algorithm 1 step by step on hand-made graphs whose answer is known (kgir_lib.kgir.subgraph)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kgir_lib.kg import KnowledgeGraph, Triple
from kgir_lib.kg.mst import maximum_spanning_tree, seed_components
from kgir_lib.kgir.entity_matching import (char_ngrams, match_entities, ngram_similarity, seeds_of, singular,
                                           triple_matches)
from kgir_lib.kgir.seeds import entities_in_question, ground_entities, ner_requests, ner_usable, parse_entities
from kgir_lib.eval.algorithm1 import rebuild_subgraph, subgraph_row
from kgir_lib.kgir.subgraph import (build_subgraphs, edge_weights, evidence_subgraph, format_triples, question_triples,
                                    resolve_weighting, retrieve, seed_graph)

from conftest import BagOfWordsEncoder


def T(h, r, t, pid="p1"):
    return Triple(h, r, t, pid)


def fixed_weights(table):
    """weight_fn from a {(head, relation, tail): weight} table."""
    return lambda question, triples: [table[(t.head, t.relation, t.tail)] for t in triples]


# ---------------------------------------------------------------- n-grams (eq. 5)
def test_char_ngrams_pads_and_normalises():
    assert char_ngrams("Ab", 3) == {" ab", "ab "}
    assert char_ngrams("A", 3) == {" a "}
    assert char_ngrams("  ", 3) == set()
    assert char_ngrams("Ab") == {" ab", "ab "}                   # trigrams by default
    assert char_ngrams("Ab", 1) == {" ", "a", "b"}               # n = 1 is allowed
    with pytest.raises(ValueError, match="'ngram_n': must be >= 1, got 0"):
        char_ngrams("Ab", 0)
    assert char_ngrams("Hewlett-Packard", 3) == char_ngrams("hewlett packard", 3)
    with pytest.raises(ValueError, match="ngram_n"):
        char_ngrams("abc", 0)


def test_ngram_similarity_is_dice_of_trigram_sets():
    def dice(a, b):
        return ngram_similarity(a, b, method="dice")

    assert dice("abc", "abc") == 1.0
    # " abc " -> {" ab", "abc", "bc "}; " abd " -> {" ab", "abd", "bd "}: 2*1/6
    assert dice("abc", "abd") == pytest.approx(1 / 3)
    assert dice("xyz", "abc") == 0.0
    assert dice("", "abc") == 0.0
    assert dice("Hewlett-Packard", "Hewlett Packard") == 1.0
    assert dice("Compaq", "compaq.") == 1.0


def test_overlap_len_accepts_a_length_ratio_of_exactly_rho():
    """"rome" (4 characters) against "romeo" (5): the ratio 4 / 5 is exactly LENGTH_RATIO 0.8, which passes;
    the trigram overlap is 3 of Rome's 4 (" ro", "rom", "ome"). "romeos" (6) gives 4 / 6 < 0.8: rejected."""
    assert ngram_similarity("Rome", "Romeo", method="overlap_len") == 0.75
    assert ngram_similarity("Romeo", "Rome", method="overlap_len") == 0.75
    assert ngram_similarity("Rome", "Romeos", method="overlap_len") == 0.0
    assert ngram_similarity("Rome", "Romeos", method="overlap") == 0.75


def test_ngram_similarity_uses_n_for_both_names():
    """Bigrams (n = 2): " ab " gives {" a", "ab", "b "}, " abc " gives {" a", "ab", "bc", "c "}; Dice 2 * 2 / 7.
    (Trigrams of "ab" and bigrams of "abc" would share nothing.)"""
    assert ngram_similarity("ab", "abc", n=2, method="dice") == 4 / 7
    assert ngram_similarity("abc", "ab", n=2, method="dice") == 4 / 7

@pytest.mark.parametrize("word, expected", [
    ("bus", "bus"), ("gas", "gas"),       # three letters or fewer: kept
    ("cars", "car"), ("maps", "map"),     # four letters: the final -s dropped
    ("ties", "tie"),                      # -ies in four letters: only the -s goes
    ("spies", "spy"), ("treaties", "treaty"),  # -ies in five or more: -y
    ("boss", "boss"), ("class", "class"),  # -ss is not a plural
])
def test_singular_by_word_length(word, expected):
    assert singular(word) == expected

def test_match_entities_threshold_order_and_no_match():
    ents = ["Compaq", "Compaq Computer", "Hewlett-Packard", "IBM"]
    m = match_entities(["compaq", "Lenovo"], ents, n=3, threshold=0.5)
    assert [e for e, _ in m["compaq"]] == ["Compaq", "Compaq Computer"]
    assert m["compaq"][0][1] == 1.0
    assert m["compaq"][1][1] == pytest.approx(ngram_similarity("compaq", "Compaq Computer"), abs=1e-6)
    assert m["Lenovo"] == []
    assert [e for e, _ in match_entities(["compaq"], ents, threshold=0.9)["compaq"]] == ["Compaq"]
    assert seeds_of(m) == ["Compaq", "Compaq Computer"]
    with pytest.raises(ValueError, match="ngram_threshold"):
        match_entities(["a"], ents, threshold=1.5)


# ---------------------------------------------------------------- NER (eq. 4)
@pytest.mark.parametrize("text, expected", [
    ("Entities: Compaq; 1994", ["Compaq", "1994"]),
    ('{"named_entities": ["Compaq", "HP", "compaq"]}', ["Compaq", "HP"]),
    ('["Alan Turing"]', ["Alan Turing"]),
    ("Compaq, 2002\nsomething else", ["Compaq", "2002"]),
    ("- Compaq\n", ["Compaq"]),
    ("Entities: none", []),
    ("", []),
    (None, []),
    ("{broken", ["{broken"]),
    ("The answer is: Germany; Germany", ["Germany"]),
    ("Question: Who wrote Brand?\nEntities: Brand; Henrik Ibsen", ["Brand", "Henrik Ibsen"]),
    ('{"named_entities": []}', []),                 # JSON that names no entity: none, not the JSON text
    ('{"named_entities": "Compaq"}', ["Compaq"]),   # one entity as a string
    ("[]", []),
    ('{"entities": ["Dell", "IBM"]}', ["Dell", "IBM"]),                # the other key a model writes
    ('{"named_entities": [], "entities": ["Dell"]}', []),            # named_entities, when present, decides
    ('[1994, "Compaq", {"name": "HP"}]', ["1994", "Compaq"]),          # numbers are names; objects are not
    ('[{"name": "HP"}]', []),                                         # a JSON list naming nothing: none
    ("Entities: Compaq; compaq; HP", ["Compaq", "HP"]),               # a duplicate is skipped, not the end
    ("  \n \t\n", []),                                               # only white space
    ("Entities: " + "x" * 120 + "; " + "y" * 121, ["x" * 120]),      # names longer than 120 characters dropped
    ('"Compaq"', ["Compaq"]), ("(Compaq)", ["Compaq"]), ("[Compaq].", ["Compaq"]),  # quotes, brackets, a full stop
])
def test_parse_entities_is_tolerant(text, expected):
    assert parse_entities(text) == expected


def test_ner_requests_one_per_question_with_versioned_prompt():
    reqs = ner_requests(["Who founded Dell?", "Where is Paris?"])
    assert len(reqs) == 2
    roles = [r for r, _ in reqs[0].messages]
    n_examples = (len(roles) - 2) // 2
    assert n_examples >= 2 and roles == ["system"] + ["user", "assistant"] * n_examples + ["user"]  # chat turns
    assert reqs[0].messages[-1] == ("user", "Question: Who founded Dell?")
    for _, reply in reqs[0].messages[2:-1:2]:  # every example reply parses and is usable
        assert parse_entities(reply)
    assert reqs[0].json_schema["required"] == ["named_entities"]


def test_ground_entities_drops_entities_not_in_question():
    q = "Which company merged in 2002 with the top PC maker of 1994?"
    assert ground_entities(["Titanic", "1994", "PC maker", "Alan Turing"], q) == ["1994", "PC maker"]
    # more than half of the content words must occur in the question
    assert ground_entities(["top PC", "company Titanic", "maker of Mockingbird Lane"], q) == ["top PC"]


def test_entities_in_question_longest_first_whole_words():
    ents = ["Compaq", "Compaq Computer", "Computer", "of", "PC", "Apple"]
    q = "Who bought Compaq Computer, the maker of the PC?"
    # 'Computer' lies inside the chosen 'Compaq Computer'; 'of' is a stop word; 'PC' is too short
    assert entities_in_question(q, ents) == ["Compaq Computer"]
    assert entities_in_question("Who founded Applebee's?", ["Apple"]) == []


# ---------------------------------------------------------------- G_q, G_tmp, components (eq. 3, 5, 6)
def test_question_triples_follow_retrieval_order():
    a, b = T("A", "r", "B", "p1"), T("C", "r", "D", "p2")
    kg = KnowledgeGraph([a, b], ["p1", "p2", "p3"])
    assert question_triples(kg, ["p2", "p3", "p1"]) == [b, a]


def test_seed_graph_keeps_edges_adjacent_to_seeds():
    ts = [T("A", "r1", "B"), T("B", "r2", "C"), T("C", "r3", "D"), T("A", "r1", "B")]
    g = seed_graph(ts, {"a": [("A", 1.0)], "d": [("D", 1.0)]})
    assert g == [T("A", "r1", "B"), T("C", "r3", "D")]  # duplicates once, B-C not adjacent to a seed
    assert seed_graph(ts, {"x": []}) == []


def test_seed_components_disconnected_and_shared():
    g = [T("A", "r", "B"), T("C", "r", "B"), T("X", "r", "Y")]
    comps = seed_components(g, ["A", "X", "C", "missing"])
    assert [c.seeds for c in comps] == [["A", "C"], ["X"]]
    assert comps[0].nodes == ["A", "B", "C"] and comps[0].triples == g[:2]
    assert comps[1].triples == [g[2]]
    assert seed_components([], ["A"]) == []


# ---------------------------------------------------------------- MST (eq. 7)
def test_mst_drops_lightest_edge_of_a_cycle():
    ts = [T("A", "r", "B"), T("B", "r", "C"), T("A", "r", "C")]
    assert maximum_spanning_tree(ts, [0.9, 0.8, 0.1]) == [0, 1]
    assert maximum_spanning_tree(ts, [0.1, 0.8, 0.9]) == [1, 2]


def test_mst_parallel_edges_keep_heaviest():
    ts = [T("A", "born in", "B"), T("A", "lives in", "B"), T("B", "r", "C")]
    assert maximum_spanning_tree(ts, [0.2, 0.7, 0.5]) == [1, 2]


def test_mst_ties_keep_input_order_and_skip_self_loops():
    ts = [T("A", "r1", "B"), T("A", "r2", "B"), T("B", "r", "C"), T("C", "r", "A"), T("A", "self", "A")]
    assert maximum_spanning_tree(ts, [0.5] * 5) == [0, 2]
    assert maximum_spanning_tree(list(reversed(ts)), [0.5] * 5) == [1, 2]  # (C,A) then (B,C)
    assert maximum_spanning_tree([], []) == []
    with pytest.raises(ValueError, match="weights"):
        maximum_spanning_tree(ts, [1.0])


def test_mst_forest_on_disconnected_input():
    ts = [T("A", "r", "B"), T("X", "r", "Y"), T("Y", "r", "Z"), T("X", "r", "Z")]
    assert maximum_spanning_tree(ts, [0.1, 0.3, 0.2, 0.9]) == [0, 1, 3]


# ---------------------------------------------------------------- whole Algorithm 1
def _star_graph():
    # seed "Compaq" with a parallel edge to HP, a triangle through PC supplier, and an unrelated edge
    return [
        T("Compaq", "was top PC maker of", "1994", "p1"),
        T("Compaq", "is a", "PC supplier", "p1"),
        T("Hewlett-Packard", "merged with", "Compaq", "p2"),
        T("Hewlett-Packard", "acquired", "Compaq", "p2"),
        T("Hewlett-Packard", "is a", "PC supplier", "p3"),
        T("Dell", "founded by", "Michael Dell", "p4"),
    ]


WEIGHTS = {("Compaq", "was top PC maker of", "1994"): 0.9, ("Compaq", "is a", "PC supplier"): 0.3,
           ("Hewlett-Packard", "merged with", "Compaq"): 0.8, ("Hewlett-Packard", "acquired", "Compaq"): 0.6,
           ("Hewlett-Packard", "is a", "PC supplier"): 0.4, ("Dell", "founded by", "Michael Dell"): 0.95}


def test_evidence_subgraph_known_answer():
    g = _star_graph()
    q = "Which company merged in 2002 with the top PC maker of 1994?"
    sub = evidence_subgraph(q, [("p1", 0.5)], g, ["Compaq"], weight_fn=fixed_weights(WEIGHTS))
    # "Compaq" is not in the question -> grounding drops it -> fallback to graph entities in the question
    assert sub.used_fallback and sub.fallback_reason == "no_entities"
    assert sub.E_q == ["1994"]
    sub = evidence_subgraph("Who merged with Compaq?", [("p1", 0.5)], g, ["Compaq"], weight_fn=fixed_weights(WEIGHTS),
                            reading="seed_star")
    assert not sub.used_fallback and sub.E_q == ["Compaq"] and sub.seeds == ["Compaq"]
    assert sub.G_tmp == g[:4]  # HP-PC supplier and Dell are not adjacent to the seed
    assert len(sub.components) == 1
    # parallel HP-Compaq edges: the heavier 'merged with' stays; no cycle otherwise
    assert sub.kept == [g[0], g[1], g[2]]
    assert sub.pruned == [g[3]]
    assert sub.evidence_pids() == ["p1", "p2"]
    assert [t.relation for t in sub.ranked_evidence()] == ["was top PC maker of", "merged with", "is a"]
    json.dumps(sub.to_dict())


def test_passages_reading_connects_the_retrieved_passages_and_prunes_cycles():
    """Reading "passages": G_tmp = every triple of G_q; the seed's component B_i reaches HP's other edge, and
    the MST drops the cycle edge (Compaq, is a, PC supplier) that the seed-star reading keeps."""
    g = _star_graph()
    star = evidence_subgraph("Who merged with Compaq?", [], g, ["Compaq"], weight_fn=fixed_weights(WEIGHTS),
                             reading="seed_star")
    sub = evidence_subgraph("Who merged with Compaq?", [], g, ["Compaq"], weight_fn=fixed_weights(WEIGHTS))
    assert sub.reading == "passages" and sub.G_tmp == g
    assert [c.seeds for c in sub.components] == [["Compaq"]] and len(sub.components[0].triples) == 5
    # Kruskal: 0.9 C-1994, 0.8 HP-C, (0.6 parallel), 0.4 HP-PC supplier, (0.3 closes the cycle)
    assert sub.kept == [g[0], g[2], g[4]] and sub.pruned == [g[1], g[3]]
    assert star.kept == [g[0], g[1], g[2]] and star.pruned == [g[3]]
    assert sub.removal == pytest.approx(2 / 5) and star.removal == pytest.approx(1 / 4)
    assert g[5] not in sub.weights  # Dell's component holds no seed: not weighted, not kept
    with pytest.raises(ValueError, match="G_tmp reading"):
        evidence_subgraph("Who merged with Compaq?", [], g, ["Compaq"], weight_fn=fixed_weights(WEIGHTS),
                          reading="both")


def test_config_default_reading_is_passages(cfg):
    assert cfg.gtmp_reading == "passages"


def test_evidence_subgraph_disconnected_seeds_give_one_tree_each():
    g = _star_graph()
    sub = evidence_subgraph("Did Compaq and Michael Dell meet?", [], g, ["Compaq", "Michael Dell"],
                            weight_fn=fixed_weights(WEIGHTS), threshold=0.5, method="dice")
    # "Dell" is a name variant of "Michael Dell" at Dice 0.5 (8 of 16 trigrams), so both seed one component
    assert [c.seeds for c in sub.components] == [["Compaq"], ["Michael Dell", "Dell"]]
    assert g[5] in sub.kept and g[3] in sub.pruned
    assert len(sub.kept) == 4


def test_evidence_subgraph_no_matched_entity_is_empty():
    g = _star_graph()
    sub = evidence_subgraph("Who painted the Mona Lisa?", [], g, ["Mona Lisa"], weight_fn=fixed_weights(WEIGHTS))
    assert sub.E_q == [] and sub.used_fallback and sub.fallback_reason == "no_match"
    assert sub.G_tmp == g and sub.components == [] and sub.kept == [] and sub.pruned == []  # no seed, no B_i
    assert sub.evidence_pids() == []
    sub = evidence_subgraph("Who painted the Mona Lisa?", [], g, ["Mona Lisa"], weight_fn=fixed_weights(WEIGHTS),
                            fallback_on_no_match=False)
    assert sub.E_q == ["Mona Lisa"] and not sub.used_fallback and sub.kept == []


def test_evidence_subgraph_tie_prefers_earlier_triple():
    g = [T("A", "r1", "B", "p1"), T("A", "r2", "B", "p2")]
    sub = evidence_subgraph("What about A?", [], g, ["A"], weight_fn=lambda q, ts: [0.5] * len(ts))
    assert sub.kept == [g[0]] and sub.pruned == [g[1]]


# ---------------------------------------------------------------- weights
def test_edge_weights_modes():
    ts = [T("Compaq", "merged with", "HP", "p1"), T("Dell", "founded by", "Michael Dell", "p2")]
    enc = BagOfWordsEncoder()
    w = edge_weights("Compaq merged with HP", ts, "cosine", encoder=enc)
    assert w[0] == pytest.approx(1.0, abs=1e-5) and w[1] == pytest.approx(0.0, abs=1e-6)
    qv = enc.encode(["Dell founded by Michael Dell"])[0]
    w2 = edge_weights("ignored", ts, "cosine", encoder=enc, question_vector=qv)
    assert w2[1] > w2[0]
    assert edge_weights("q", ts, "passage", passage_scores={"p1": 0.7}) == [0.7, 0.0]

    class FakeReranker:
        def score(self, pairs):
            return [float(len(b)) for _, b in pairs]
    assert edge_weights("q", ts, "reranker", reranker=FakeReranker()) == [float(len("Compaq merged with HP")),
                                                                          float(len("Dell founded by Michael Dell"))]
    assert edge_weights("q", [], "cosine") == []
    with pytest.raises(ValueError, match="reranker"):
        edge_weights("q", ts, "reranker")
    with pytest.raises(ValueError, match="unknown edge weighting"):
        edge_weights("q", ts, "pagerank")
    assert resolve_weighting(None, None) == "cosine"
    assert resolve_weighting("auto", object()) == "reranker"
    with pytest.raises(ValueError):
        resolve_weighting("nope", None)


def test_format_triples_dedupes_and_caps():
    ts = [T("A", "r", "B", "p1"), T("A", "r", "B", "p2"), T("C", "r", "D", "p1")]
    assert format_triples(ts) == "(A, r, B)\n(C, r, D)"
    assert format_triples(ts, 1) == "(A, r, B)"
    assert format_triples([]) == "(none)"


# ---------------------------------------------------------------- batched entry point
def test_build_subgraphs_one_ner_call_for_all_queries(tiny_workspace, tiny_dataset):
    def script(req):
        user = req.messages[-1][1]
        if "Compaq" in user.rsplit("Question:", 1)[-1]:
            return "Entities: Compaq"
        return "nothing useful"
    ws = tiny_workspace(script)
    queries = [tiny_dataset.questions[0].question, "Which company did Compaq merge with in 2002?",
               "Who founded Dell?"]
    subs, results = build_subgraphs(ws, queries, top_k=3)
    assert len(subs) == len(results) == 3
    assert ws.llm.usage.stage("kgir_ner").calls == 3
    assert len(ws.llm.backend.seen) == 3
    q1, q2, q3 = subs
    # q1: the NER reply is useless -> fallback to graph entities in the question ("2002", "1994")
    assert q1.used_fallback and set(q1.E_q) == {"1994", "2002"} and not q2.used_fallback
    assert q2.E_q == ["Compaq"] and "Compaq" in q2.seeds
    assert q2.G_tmp == list(dict.fromkeys(q2.G_q))  # the default reading: every triple of D_q
    assert set(q2.kept) | set(q2.pruned) == {t for c in q2.components for t in c.triples}
    (star,), _ = build_subgraphs(ws, queries[1:2], top_k=3, reading="seed_star")
    assert {(t.head, t.relation, t.tail) for t in star.G_tmp} <= {
        ("Compaq", "was top PC maker of", "1994"), ("Compaq", "is a", "PC supplier"),
        ("Hewlett-Packard", "merged with", "Compaq")}
    # the profile's rule judges sameness: "Dell" is not "Michael Dell" (a containment rule would match both)
    assert q3.used_fallback and q3.E_q == ["Dell"] and q3.seeds == ["Dell"]
    assert rebuild_subgraph(ws, q3, threshold=0.8, method="overlap").seeds == ["Dell", "Michael Dell"]
    assert [p for p, _ in q1.retrieved] == [p for p, _ in retrieve(ws, [queries[0]], 3)[0]]
    # a second build hits the LLM cache, with the same result
    subs2, results2 = build_subgraphs(ws, queries, top_k=3)
    assert all(r.cached for r in results2)
    assert [s.to_dict() for s in subs2] == [s.to_dict() for s in subs]


def test_build_subgraphs_extracts_missing_passages_first(tiny_workspace, tiny_dataset):
    calls = []
    ws = tiny_workspace(lambda req: "Entities: Compaq")
    ws.ensure_kg = lambda pids: calls.append(list(pids))
    build_subgraphs(ws, ["Who merged with Compaq?"], top_k=2)
    assert len(calls) == 1 and len(calls[0]) == 2


def test_build_subgraphs_empty_and_bad_k(tiny_workspace):
    ws = tiny_workspace(lambda req: "")
    assert build_subgraphs(ws, []) == ([], [])
    with pytest.raises(ValueError, match="top_k"):
        retrieve(ws, ["q"], 0)


def test_subgraph_row_counts_each_step_and_gold_survival():
    g = _star_graph()
    sub = evidence_subgraph("Who merged with Compaq?", [("p1", 0.5), ("p2", 0.4), ("p4", 0.3)], g, ["Compaq"],
                            weight_fn=fixed_weights(WEIGHTS), reading="seed_star")
    row = subgraph_row(sub, ["p2", "p4", "p9"])
    assert row == {"D_q": 3, "G_q": 6, "E_q": 1, "fallback": False, "seeds": 1, "G_tmp": 4, "components": 1,
                   "G_Ans": 3, "pruned": 1, "seeded": True, "gold": 3, "gold_in_D_q": 2, "gold_in_G_tmp": 1,
                   "gold_in_G_Ans": 1}



def test_subgraph_row_counts_gold_in_g_tmp_from_g_tmp_s_own_sources():
    """Reading "passages": G_tmp is all of G_q (sources p1-p4), G_Ans keeps the triples of p1, p2 and p3
    (test_passages_reading_...). Of the gold passages p3, p4 and p9, p3 and p4 are behind a G_tmp edge, only p3
    behind a G_Ans edge (p4's Dell triple holds no seed), and p9 was not retrieved."""
    g = _star_graph()
    sub = evidence_subgraph("Who merged with Compaq?", [("p1", 0.5), ("p3", 0.4), ("p4", 0.3)], g, ["Compaq"],
                            weight_fn=fixed_weights(WEIGHTS))
    row = subgraph_row(sub, ["p3", "p4", "p9"])
    assert (row["gold_in_D_q"], row["gold_in_G_tmp"], row["gold_in_G_Ans"]) == (2, 2, 1)
    assert (row["G_tmp"], row["G_Ans"], row["pruned"]) == (6, 3, 2)

def test_rebuild_subgraph_reuses_ner_without_llm_calls(tiny_workspace):
    ws = tiny_workspace(lambda req: "Entities: Compaq")
    (sub,), _ = build_subgraphs(ws, ["Who merged with Compaq?"], top_k=6)
    calls = ws.llm.usage.total().calls
    same = rebuild_subgraph(ws, sub)
    assert same.to_dict() == sub.to_dict()
    strict = rebuild_subgraph(ws, sub, threshold=1.0)
    assert strict.seeds == ["Compaq"] and set(strict.kept) <= set(sub.G_q)
    by_passage = rebuild_subgraph(ws, sub, weighting="passage")
    assert by_passage.weighting == "passage"
    comp = [t for c in by_passage.components for t in c.triples]
    assert {t: w for t, w in by_passage.weights.items()} == {t: dict(sub.retrieved)[t.pid] for t in comp}
    assert ws.llm.usage.total().calls == calls


# ---------------------------------------------------------------- matching (eq. 5) and whole-triple matching
def test_similarity_methods_on_the_pairs_dice_gets_wrong():
    pairs = [("Compaq", "Compaq Computer Corporation"), ("Paris", "Paris Hilton")]
    dice = [ngram_similarity(a, b, method="dice") for a, b in pairs]
    assert dice[0] == pytest.approx(12 / 29) and dice[1] == pytest.approx(0.588, abs=1e-3)  # Dice at 0.5 misses the first, matches the second
    assert ngram_similarity(*pairs[0], method="overlap") == 1.0
    assert ngram_similarity(*pairs[0], method="containment") == 1.0
    assert ngram_similarity("Paris", "Paris Hilton", method="containment") == 1.0
    assert ngram_similarity("Hewlett-Packard", "Packard Bell", method="containment") == 0.5
    assert ngram_similarity("Hewlett-Packard", "HP", method="containment") == 0.0
    with pytest.raises(ValueError, match="matching method"):
        ngram_similarity("a", "b", method="jaccard")
    m = match_entities(["Compaq"], ["Compaq Computer Corporation", "IBM"], threshold=0.8, method="overlap")
    assert m == {"Compaq": [("Compaq Computer Corporation", 1.0)]}
    assert match_entities(["Compaq"], ["Compaq Computer Corporation"], threshold=0.5, method="dice")["Compaq"] == []


def test_whole_triple_matching_of_a_description():
    """'PC maker of 1994' names no node, but all its content words occur in (Compaq, was top PC maker of,
    1994): its head and tail become seeds, without the fallback (the Fig. 6 failure of the old matcher)."""
    g = _star_graph()
    q = "Which company merged in 2002 with the top PC maker of 1994?"
    sub = evidence_subgraph(q, [], g, ["PC maker of 1994"], weight_fn=fixed_weights(WEIGHTS))
    assert not sub.used_fallback and sub.matched_by_triple == ["PC maker of 1994"]
    assert sub.seeds == ["1994", "Compaq"]
    assert ("Compaq", "was top PC maker of", "1994") in {(t.head, t.relation, t.tail) for t in sub.kept}
    old = evidence_subgraph(q, [], g, ["PC maker of 1994"], weight_fn=fixed_weights(WEIGHTS), match_triples=False)
    assert old.used_fallback and old.fallback_reason == "no_match"


def test_compare_readings_side_by_side(tiny_workspace, tiny_dataset):
    """Notebook 03's table: both readings on the same D_q, G_q and NER reply, no LLM call."""
    from kgir_lib.eval.algorithm1 import compare_readings

    ws = tiny_workspace(lambda req: '{"named_entities": ["Compaq"]}')
    (sub,), _ = build_subgraphs(ws, ["Who merged with Compaq in 2002?"], top_k=6)
    calls = ws.llm.usage.total().calls
    table = compare_readings(ws, [sub], [tiny_dataset.questions[0].gold_pids])
    assert list(table.index) == ["passages", "seed_star"]
    # tiny KG: Compaq's component = {Compaq, 1994, PC supplier, Hewlett-Packard, 2002}, 4 triples, a tree
    assert table.loc["passages", "component triples"] == 4 and table.loc["passages", "G_Ans"] == 4
    assert table.loc["seed_star", "G_tmp"] == 3 and table.loc["passages", "G_tmp"] == 8
    assert table.loc["passages", "MST removal %"] == 0.0
    assert table.loc["passages", "gold survival %"] == 100.0
    assert ws.llm.usage.total().calls == calls


def test_seed_star_tree_drops_the_edge_closing_a_cycle_through_shared_neighbours():
    """Two seeds with two neighbours in common form a cycle in the union of their stars, so the seed_star
    reading can prune an edge that is neither parallel nor between two seeds (the docstring's claim)."""
    g = [T("Apple", "founded by", "Steve Jobs"), T("Apple", "based in", "Cupertino"),
         T("NeXT", "founded by", "Steve Jobs"), T("NeXT", "based in", "Cupertino")]
    w = {(t.head, t.relation, t.tail): x for t, x in zip(g, (0.9, 0.8, 0.7, 0.1))}
    sub = evidence_subgraph("Did Apple and NeXT share a founder?", [], g, ["Apple", "NeXT"], weight_fn=fixed_weights(w),
                            reading="seed_star")
    assert sorted(sub.seeds) == ["Apple", "NeXT"] and sub.G_tmp == g
    assert sub.kept == g[:3] and sub.pruned == [g[3]]  # the lightest edge of the 4-cycle


@pytest.mark.parametrize("reply, usable", [
    ('{"named_entities": ["Compaq"]}', True),
    ('{"entities": ["Compaq"]}', True),                       # the other key a model uses
    ('["Compaq"]', True),                                      # a bare JSON list
    ('{"named_entities": ["Mona Lisa"]}', False),             # a name the question does not hold
    ('{"named_entities": "Compaq"}', False),                  # not a list
    ("Entities: Compaq", False),                              # parsed by the fallback, not as intended
    ('{"named_entities": [null, {"a": 1}]}', False),         # no name among the values
    ("", False), (None, False),
])
def test_ner_usable_only_for_a_json_list_with_a_name_the_question_holds(reply, usable):
    assert ner_usable(reply, "Who merged with Compaq, none of them?") is usable


def test_names_without_characters_have_no_similarity():
    """Punctuation only normalises to nothing: no n-grams, similarity 0 (not a division by zero)."""
    assert ngram_similarity("!!!", "???", method="dice") == 0.0
    assert ngram_similarity("!!!", "???", method="overlap_len") == 0.0


def test_parse_entities_never_raises_on_a_reply_that_is_not_text():
    assert parse_entities(5) == [] and parse_entities(["Compaq"]) == []


def test_match_entities_known_values():
    """Similarities rounded to 6 decimals, best first, ties by name; n = 3 by default; a threshold of 0 allowed."""
    names = ["Hewlett-Packard Company", "Packard Hewlett", "Hewlett Packard Inc", "Packard", "Hewlett"]
    assert match_entities(["Hewlett Packard"], names, threshold=0.0, method="dice") == {"Hewlett Packard": [
        ("Packard Hewlett", 0.933333), ("Hewlett Packard Inc", 0.882353), ("Hewlett-Packard Company", 0.789474),
        ("Hewlett", 0.636364), ("Packard", 0.636364)]}
    assert match_entities(["Hewlett Packard"], names, threshold=0.0, method="tokens") == {"Hewlett Packard": [
        ("Packard Hewlett", 1.0), ("Hewlett Packard Inc", 0.666667), ("Hewlett-Packard Company", 0.666667),
        ("Hewlett", 0.5), ("Packard", 0.5)]}
    pair = ["Compaq", "Compaq Computer Corporation"]
    assert match_entities(["Compaq Computer"], pair, threshold=0.0, method="dice") == {"Compaq Computer": [
        ("Compaq Computer Corporation", 0.685714), ("Compaq", 0.666667)]}                      # character 3-grams
    assert match_entities(["Compaq Computer"], pair, n=4, threshold=0.0, method="dice") == {"Compaq Computer": [
        ("Compaq Computer Corporation", 0.666667), ("Compaq", 0.588235)]}


def test_triple_matches_known_values():
    """Eq. 5 against whole triples: every content word of the question entity in ``head relation tail`` (an equal
    set counts), head and tail at similarity 1.0; entities matched already are kept and do not stop the rest."""
    T = [Triple("Compaq", "was top PC maker of", "1994", "p1"), Triple("Dell", "was a PC maker of", "1994", "p2"),
         Triple("Apple", "made", "Mac", "p3"), Triple("Zeta", "maker", "Alpha", "p4")]
    out = triple_matches(["Mac", "PC maker of 1994", "Zeta maker Alpha", "Nothing here"], T, {"Mac": [("Apple", 0.9)]})
    assert out == {"Mac": [("Apple", 0.9)], "PC maker of 1994": [("1994", 1.0), ("Compaq", 1.0), ("Dell", 1.0)],
                   "Zeta maker Alpha": [("Alpha", 1.0), ("Zeta", 1.0)], "Nothing here": []}
