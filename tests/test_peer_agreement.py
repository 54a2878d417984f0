"""kgir_lib.eval.peer_agreement (the HippoRAG 2 cross-check's measures) and the peer tools in benchmarks/peers.

The comparison logic runs in the main environment. Checks that need the peer environment
(benchmarks/peers/.venv-hipporag, made by benchmarks/peers/setup.sh) are skipped when it is absent.
"""
from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kgir_lib.data import Corpus, Passage
from kgir_lib.baselines.hippo_graph import fact_text, upstream_fold
from kgir_lib.eval.peer_agreement import (Side, compare_question, fact_key, graph_agreement, phrase_key, pids_of_docs,
                                     set_agreement, side_by_side, summary, top_overlap)

from _scripts import load_peer, peer_python, runs_in_peer_env

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers"
PEER_PY = peer_python("hipporag")


def test_phrase_key_folds_like_upstream_text_processing():
    assert phrase_key("  Neville A. Stanton ") == "neville a stanton"
    assert phrase_key("São Paulo") == "s o paulo"          # non-ASCII letters become spaces upstream
    assert phrase_key("snake_case--x") == "snake case x"
    assert fact_key(["U.S.", "Capital of", "D.C."]) == ("u s", "capital of", "d c")
    with pytest.raises(ValueError, match="3 parts"):
        fact_key(["a", "b"])


def test_overlaps_and_set_agreement():
    assert top_overlap(["a", "b", "c", "d", "e", "x"], ["e", "d", "q", "a", "z"], 5) == 0.6
    assert top_overlap(["a"], ["b"], 1) == 0.0
    with pytest.raises(ValueError, match="'k'"):
        top_overlap(["a"], ["a"], 0)
    assert set_agreement([], []) == 1.0
    assert set_agreement([("a",)], [("a",), ("b",)]) == 0.5


def test_pids_of_docs_maps_content_and_names_unknown_passages():
    corpus = Corpus([Passage("p1", "T1", "one"), Passage("p2", "T2", "two")])
    assert pids_of_docs(["T2\ntwo", "T1\none"], corpus) == ["p2", "p1"]
    with pytest.raises(KeyError, match="not in the corpus"):
        pids_of_docs(["T3\nthree"], corpus)


def _sides():
    suite = Side(ranked=["g1", "a", "b", "c", "d", "g2"], candidates=[["X", "r", "Y"], ["Y", "s", "Z"]],
                 kept=[["X", "r", "Y"]], answer="Paris ")
    upstream = Side(ranked=["a", "g1", "b", "c", "e"], candidates=[["x", "r", "y"], ["y", "s", "z."]],
                    kept=[["x", "r", "y"], ["y", "s", "z"]], answer="paris")
    return suite, upstream


def test_compare_question_exact_values():
    suite, upstream = _sides()
    row = compare_question(suite, upstream, ["Paris"], ["g1", "g2"], k=5, injected=["g1", "a", "b", "c", "d"])
    assert row["top5_overlap"] == 0.8
    assert not row["top5_same_set"] and not row["top5_same_order"]
    assert row["candidates_same"] and row["candidates_jaccard"] == 1.0   # same facts after folding
    assert row["kept_jaccard"] == 0.5 and not row["kept_same"]
    assert (row["n_kept_suite"], row["n_kept_upstream"]) == (1, 2)
    assert not row["all_kept_suite"] and row["all_kept_upstream"]   # upstream kept both of its candidates
    assert not row["answer_exact_same"] and row["answer_norm_same"]
    assert row["EM_suite"] == row["EM_upstream"] == 100.0
    assert row["R@2_suite"] == 50.0 and row["R@2_upstream"] == 50.0 and row["R@2_same"]
    assert row["R@5_suite"] == 50.0 and row["R@5_upstream"] == 50.0
    assert row["injected_top5"] == 1.0 and row["injected_top5_same_order"]


def test_summary_rates_and_means():
    suite, upstream = _sides()
    rows = pd.DataFrame([compare_question(suite, upstream, ["Paris"], ["g1", "g2"]),
                         compare_question(suite, suite, ["Rome"], ["g1", "g2"])])
    table = summary(rows).set_index("measure")
    assert table.loc["top-5 passage overlap, mean %", "value"] == 90.0
    assert table.loc["top-5 same order, % of questions", "value"] == 50.0
    assert table.loc["kept facts identical, % of questions", "value"] == 50.0
    assert table.loc["answer exact string agreement, %", "n"] == 2
    same_cands = table.loc["kept facts identical, of the questions with identical candidates, %"]
    assert (same_cands["value"], same_cands["n"]) == (50.0, 2)  # both rows have identical candidates
    sides = side_by_side(rows).set_index("measure")
    assert sides.loc["EM", "suite"] == 50.0 and sides.loc["EM", "upstream"] == 50.0   # Rome is wrong twice
    assert sides.loc["kept facts a question", "upstream"] == 1.5 and sides.loc["Recall@5", "n"] == 2
    assert sides.loc["every candidate kept, % of questions", "upstream"] == 50.0
    assert "top-5 overlap given the suite's kept facts (upstream graph + PPR), mean %" not in table.index


def test_graph_agreement_folds_keys_and_compares_weights():
    suite = {("New York", "U.S."): 2.0, ("a", "b"): 4.0, ("only", "suite"): 2.0}
    upstream = {("u s", "new york"): 2.0, ("b", "a"): 2.0, ("x", "y"): 2.0, ("z", "z"): 2.0}
    out = graph_agreement(suite, upstream)
    assert out == {"suite_edges": 3, "upstream_edges": 3, "shared": 2, "only_suite": 1, "only_upstream": 1,
                   "shared_equal_weight": 1}


def test_embed_server_request_and_base64_response():
    es = load_peer("embed_server")
    texts, model, fmt = es.parse_request(json.dumps({"input": "hi", "model": "m", "encoding_format": "base64"}).encode())
    assert (texts, model, fmt) == (["hi"], "m", "base64")
    with pytest.raises(ValueError, match="'input'"):
        es.parse_request(b'{"input": [1, 2]}')
    with pytest.raises(ValueError, match="not JSON"):
        es.parse_request(b"{")
    vecs = np.array([[0.5, -0.25], [1.0, 0.0]], dtype=np.float32)
    body = es.embedding_response(vecs, "m", "base64")
    back = [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in body["data"]]
    assert np.array_equal(np.stack(back), vecs) and [d["index"] for d in body["data"]] == [0, 1]
    assert es.embedding_response(vecs, "m")["data"][0]["embedding"] == [0.5, -0.25]


def test_upstream_driver_reads_musique_and_names_bad_records(tmp_path):
    up = load_peer("hipporag2_upstream")
    rec = {"id": "q1", "question": "Q?", "answer": "A", "answer_aliases": ["a1"],
           "paragraphs": [{"title": "T", "paragraph_text": "x", "is_supporting": True},
                          {"title": "U", "paragraph_text": "y", "is_supporting": False}]}
    path = tmp_path / "d.json"
    path.write_text(json.dumps([rec]))
    assert up.load_questions(path) == [{"id": "q1", "question": "Q?", "answers": ["A", "a1"], "gold_docs": ["T\nx"]}]
    path.write_text(json.dumps([{"id": "q2"}]))
    with pytest.raises(SystemExit, match="record 0"):
        up.load_questions(path)


needs_peer = runs_in_peer_env("hipporag")


@needs_peer
def test_phrase_key_matches_upstream_text_processing_in_the_peer_env():
    samples = ["Neville A. Stanton", "São Paulo", "  a  b ", "U.S.", "x_y", "Ölund (band)", "O'Brien", 'say "hi"']
    code = ("import json, sys; from hipporag.utils.misc_utils import text_processing as tp; s = json.loads(sys.argv[1]); "
            "print(json.dumps([[tp(x) for x in s], [str(tuple(tp([a, 'r', b]))) for a, b in zip(s, s[1:])]]))")
    out = subprocess.run([str(PEER_PY), "-c", code, json.dumps(samples)], capture_output=True, text=True,
                         env={"PYTHONPATH": str(PEERS / "stubs")}, check=True, timeout=300)
    folded, facts = json.loads(out.stdout)
    assert folded == [upstream_fold(s) for s in samples]
    assert [" ".join(u.split()) for u in folded] == [phrase_key(s) for s in samples]
    assert facts == [fact_text(a, "r", b) for a, b in zip(samples, samples[1:])]  # what upstream embeds


def test_unanswered_question_has_no_answer_measures_but_keeps_retrieval():
    suite, upstream = _sides()
    row = compare_question(suite, Side(upstream.ranked, upstream.candidates, upstream.kept, None), ["Paris"],
                           ["g1", "g2"])
    assert np.isnan(row["EM_suite"]) and np.isnan(row["EM_upstream"]) and np.isnan(row["answer_exact_same"])
    assert row["R@5_upstream"] == 50.0 and row["top5_overlap"] == 0.8
    rows = pd.DataFrame([row, compare_question(suite, suite, ["Rome"], ["g1", "g2"])])
    table, sides = summary(rows).set_index("measure"), side_by_side(rows).set_index("measure")
    assert sides.loc["EM", "n"] == 1 and sides.loc["EM", "suite"] == 0.0
    assert table.loc["top-5 passage overlap, mean %", "n"] == 2


def test_seeded_agreement_rows_enter_the_summary():
    from kgir_lib.eval.peer_agreement import seeded_agreement

    suite, upstream = _sides()
    row = {**compare_question(suite, upstream, ["Paris"], ["g1"]), **seeded_agreement(["a", "g1", "b", "c", "x"],
                                                                                        upstream.ranked)}
    assert row["seeded_top5"] == 0.8 and not row["seeded_top5_same_order"]
    table = summary(pd.DataFrame([row])).set_index("measure")
    assert table.loc["top-5 overlap, the suite's graph + PPR given upstream's kept facts, mean %", "value"] == 80.0


@needs_peer
def test_ppr_matches_upstreams_igraph_prpack_in_the_peer_env():
    """Upstream runs igraph's PRPACK on an undirected graph holding each fact edge once per direction; the
    suite's power iteration on one summed edge (a dangling node's mass back along the reset vector) agrees."""
    import networkx as nx

    from kgir_lib.baselines.hippo_graph import PPRGraph

    parallel = [[0, 1, 2.0], [1, 0, 2.0], [1, 2, 1.0], [2, 0, 1.0], [2, 3, 4.0]]  # node 4: no edge
    reset = [0.5, 0.0, 0.0, 0.1, 0.4]
    code = ("import igraph as ig, json, sys; e, r = json.loads(sys.argv[1]); "
            "g = ig.Graph(n=5, edges=[(a, b) for a, b, _ in e], directed=False); g.es['weight'] = [w for *_, w in e]; "
            "print(json.dumps(g.personalized_pagerank(vertices=range(5), damping=0.5, directed=False, "
            "weights='weight', reset=r, implementation='prpack')))")
    out = subprocess.run([str(PEER_PY), "-c", code, json.dumps([parallel, reset])], capture_output=True, text=True,
                         env={"PYTHONPATH": str(PEERS / "stubs")}, check=True, timeout=300)
    g = nx.Graph()
    g.add_nodes_from(range(5))
    for a, b, w in parallel:
        g.add_edge(a, b, weight=g.get_edge_data(a, b, {}).get("weight", 0.0) + w)
    ours = PPRGraph(g).run(np.array(reset), 0.5, tol=1e-14, max_iter=1000)
    assert np.allclose(ours, json.loads(out.stdout), atol=1e-9)


def test_rescore_question_scores_the_suite_against_upstreams_recorded_scores():
    """A re-score (no upstream run) keeps the rules of compare_question for what it can compute."""
    from kgir_lib.eval.peer_agreement import rescore_question

    suite, upstream = _sides()
    full = compare_question(suite, upstream, ["Paris"], ["g1", "g2"])
    recorded = {c: full[c] for c in ("answer_upstream", "EM_upstream", "F1_upstream", "R@2_upstream", "R@5_upstream",
                                     "n_kept_upstream", "all_kept_upstream", "fallback_upstream")}
    row = rescore_question(suite, recorded, ["Paris"], ["g1", "g2"])
    assert {k: row[k] for k in row} == {k: full[k] for k in row}  # every measure it has equals the full row's
    assert "top5_overlap" not in row and "kept_same" not in row
    unanswered = rescore_question(suite, {**recorded, "answer_upstream": float("nan")}, ["Paris"], ["g1", "g2"])
    assert np.isnan(unanswered["EM_suite"]) and np.isnan(unanswered["answer_norm_same"])
    assert unanswered["R@5_same"] and unanswered["answer_upstream"] is None
    with pytest.raises(KeyError, match="R@5_upstream"):
        rescore_question(suite, {k: v for k, v in recorded.items() if k != "R@5_upstream"}, ["Paris"], ["g1"])


def _report_rows(**extra) -> pd.DataFrame:
    base = {"R@5_suite": [100.0, 50.0, 0.0], "R@5_upstream": [100.0, 100.0, 0.0], "R@5_same": [True, False, True],
            "EM_suite": [100.0, 0.0, np.nan], "EM_upstream": [0.0, 0.0, np.nan]}
    return pd.DataFrame({**base, **extra})


def test_crosscheck_sentence_words_the_rows():
    from kgir_lib.eval.peer_agreement import crosscheck_sentence

    assert crosscheck_sentence(_report_rows()) == (
        "The suite's HippoRAG 2 reaches Recall@5 50.0 against upstream's 66.7 on the same 3 questions, with the same "
        "Recall@5 on 2 of them (EM 50.0 against 0.0 on the 2 both answered).")
    rows = _report_rows(seeded_top5_same_order=[True, True, False], injected_top5_same_order=[True, False, False],
                        links_now_same=[True, True, True], upstream_record=["the cross-check committed at abc"] * 3)
    assert crosscheck_sentence(rows).endswith(
        "; given the same kept facts, the suite's graph + PPR seeded with upstream's kept facts returns upstream's "
        "top-5 passages in upstream's order on 2 of 3 questions and upstream's seeded with the suite's returns the "
        "suite's on 1; the suite's query-to-fact linking finds upstream's top-5 candidate facts on 3 (seeded runs "
        "and linking check as measured by the cross-check committed at abc, not re-run).")
    with pytest.raises(ValueError, match="R@5_same"):
        crosscheck_sentence(_report_rows().drop(columns="R@5_same"))


def test_rescore_reads_the_committed_upstream_scores_and_carries_the_graph_line(tmp_path):
    report = load_peer("hipporag2_report")
    csv = tmp_path / "peers.csv"
    cols = {c: [1.0] for c in ("EM_upstream", "F1_upstream", "R@2_upstream", "R@5_upstream", "n_kept_upstream")}
    pd.DataFrame({"qid": ["q1"], "answer_upstream": ["x"], "all_kept_upstream": [True], "fallback_upstream": [False],
                  "seeded_top5_same_order": [True], "top5_overlap": [0.8], **cols}).to_csv(csv, index=False)
    committed = report.committed_upstream(csv)
    assert list(committed.index) == ["q1"] and "seeded_top5_same_order" in committed
    assert "top5_overlap" not in committed  # a measure of the old suite side is not carried
    assert committed["upstream_record"].iloc[0].startswith("the cross-check committed at ")
    pd.DataFrame({"qid": ["q1"], "EM_upstream": [1.0]}).to_csv(csv, index=False)
    with pytest.raises(SystemExit, match="lacks upstream's per-question columns"):
        report.committed_upstream(csv)
    full = "# r\n\n## Graphs\n\nSuite: 3 nodes. Upstream: 4 nodes.\n\n## Upstream's LLM stages\n\n- x\n"
    assert report.carried_graphs(full) == "Suite: 3 nodes. Upstream: 4 nodes."
    again = f"## Graphs\n\nSuite (this code): 3 nodes.\n\n{report.CARRIED_GRAPHS}Suite: 3 nodes. Upstream: 4.\n"
    assert report.carried_graphs(again) == "Suite: 3 nodes. Upstream: 4."
    assert report.carried_graphs("# no graphs\n") == ""
