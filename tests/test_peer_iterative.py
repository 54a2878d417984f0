"""kgir_lib.eval.peer_iterative (the FlashRAG cross-check's measures) and the FlashRAG tools in benchmarks/peers.

Constructed inputs with exact expected values; the re-score of the committed cross-check runs in the main
environment with no peer environment and no model (the suite's dense searches replayed from their record, the LLM
answers from the committed response log). Checks that need the peer environment (benchmarks/peers/.venv-flashrag,
made by `bash benchmarks/peers/setup.sh flashrag`) are skipped when it is absent.
"""
from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path
from typing import Optional

import pandas as pd
import pytest

from kgir_lib.eval.peer_iterative import (MERGE_RULES, agreement, best_first, compare_question, crosscheck_sentence,
                                          distribution, flashrag_side, merge_rule_table, merged_lists, paired_tests,
                                          p_clause, reading_split, top_overlap)

from _scripts import load_peer, peer_python, runs_in_peer_env

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers"
PEER_PY = peer_python("flashrag")
COMMITTED = ROOT / "results" / "benchmarks" / "peers_flashrag.csv"


IRCOT_RECORD = {"qid": "q1", "question": "Q?", "thoughts": ["A is B.", "B is C. So the answer is: C."],
                "iterations": 2, "searches": [{"query": "Q?", "hits": [["g1", 0.9], ["a", 0.5]]},
                                              {"query": "A is B.", "hits": [["g2", 0.8], ["a", 0.6]]}],
                # FlashRAG's merge: max score a passage, ascending
                "final": [["a", 0.6], ["g2", 0.8], ["g1", 0.9]], "raw_pred": "A is B. B is C. So the answer is: C.",
                "pred": "C."}


def test_best_first_sorts_by_score_and_keeps_ties_in_list_order():
    assert best_first([["a", 0.6], ["g2", 0.8], ["g1", 0.9]]) == ["g1", "g2", "a"]
    assert best_first([["x", 0.5], ["y", 0.5], ["z", 0.7]]) == ["z", "x", "y"]
    assert top_overlap(["a", "b", "c"], ["c", "d", "a"], 2) == 0.0
    with pytest.raises(ValueError, match="'k'"):
        top_overlap(["a"], ["a"], 0)


def test_flashrag_side_reads_both_records():
    side = flashrag_side("ircot", IRCOT_RECORD)
    assert side == {"answer": "C.", "ranked": ["a", "g2", "g1"], "ranked_best_first": ["g1", "g2", "a"],
                    "iterations": 2, "retrievals": 2, "marked": True}
    it = flashrag_side("iter_retgen", {"pred": "Paris", "final": ["p", "q"], "iterations": 3,
                                       "rounds": [{}, {}, {}]})
    assert it == {"answer": "Paris", "ranked": ["p", "q"], "iterations": 3, "retrievals": 3}
    with pytest.raises(ValueError, match="'hyde'"):
        flashrag_side("hyde", {})


def test_merge_rules_on_constructed_retrievals():
    searches = IRCOT_RECORD["searches"]
    lists = merged_lists(searches)
    assert lists[MERGE_RULES[0]] == [p for p, _ in IRCOT_RECORD["final"]] == ["a", "g2", "g1"]   # FlashRAG's own
    assert lists[MERGE_RULES[1]] == ["g1", "g2", "a"]
    assert lists[MERGE_RULES[2]] == ["g1", "g2", "a"]                  # round-robin: 1st of each, then 2nd ...
    three = [{"hits": [["x", 0.9], ["y", 0.8], ["z", 0.7]]}, {"hits": [["w", 0.5], ["x", 0.95]]}]
    lists = merged_lists(three)
    assert lists[MERGE_RULES[0]] == ["w", "z", "y", "x"] and lists[MERGE_RULES[1]] == ["x", "y", "z", "w"]
    assert lists[MERGE_RULES[2]] == ["x", "w", "y", "z"]
    one = merged_lists([{"hits": [["b", 0.9], ["a", 0.1]]}])            # a single retrieval is never sorted
    assert one[MERGE_RULES[0]] == one[MERGE_RULES[1]] == one[MERGE_RULES[2]] == ["b", "a"]
    table = merge_rule_table({"side": [("q1", three), ("q2", [{"hits": [["x", 1.0]]}])]},
                             {"q1": ["w", "x"], "q2": ["x"]}, k=2).set_index("merge rule")
    assert list(table["questions"]) == [1, 1, 1]                         # q2 retrieved once: left out
    assert list(table["Recall@2"]) == [50.0, 50.0, 100.0]


def _suite(answer="C", ranked=("g1", "g2", "b", "c", "d"), iterations=1):
    return {"answer": answer, "ranked_pids": list(ranked), "iterations": iterations, "retrievals": iterations}


def test_compare_question_exact_values():
    row = compare_question(_suite(), flashrag_side("ircot", IRCOT_RECORD), ["C"], ["g1", "g2"])
    assert row["EM_suite"] == row["EM_flashrag"] == 100.0 and row["answer_norm_same"]   # "C." normalises to "c"
    assert row["R@5_suite"] == 100.0 and row["R@5_flashrag"] == 100.0   # three passages, both gold among them
    assert row["top5_overlap"] == 0.4 and not row["top5_same_set"] and not row["top5_same_order"]
    assert row["R@5_flashrag_best_first"] == 100.0 and row["top5_overlap_best_first"] == 0.4
    assert (row["iterations_suite"], row["iterations_flashrag"]) == (1, 2)
    assert row["flashrag_answer_marked"] and row["flashrag_list_merged"]
    # FlashRAG's ascending order puts its worst passage first: at k=1 only the best-first pool finds gold
    row1 = compare_question(_suite(), flashrag_side("ircot", IRCOT_RECORD), ["C"], ["g1", "g2"], k=1)
    assert row1["R@1_flashrag"] == 0.0 and row1["R@1_flashrag_best_first"] == 50.0 and row1["R@1_suite"] == 50.0
    wrong = compare_question(_suite(answer="the C river"), {**flashrag_side("ircot", IRCOT_RECORD),
                                                             "answer": "A is B. B is C."}, ["C river"], ["g9"])
    assert wrong["EM_suite"] == 100.0 and wrong["EM_flashrag"] == 0.0 and wrong["F1_flashrag"] == pytest.approx(
        100 * 2 * (1 / 5) * (1 / 2) / (1 / 5 + 1 / 2))     # one shared token: precision 1/5, recall 1/2
    assert wrong["answer_words_flashrag"] == 6 and wrong["R@5_suite"] == 0.0


def _rows():
    """Four IRCoT questions (suite right on three, FlashRAG on one) and two ITER-RETGEN ones."""
    rows = []
    for i, (em_s, em_f, r_s, r_f, same) in enumerate([(100, 0, 100, 50, False), (100, 0, 50, 50, True),
                                                      (100, 100, 50, 0, False), (0, 0, 0, 0, True)]):
        rows.append({"method": "ircot", "qid": f"q{i}", "EM_suite": em_s, "EM_flashrag": em_f, "F1_suite": em_s,
                     "F1_flashrag": em_f, "R@5_suite": r_s, "R@5_flashrag": r_f, "top5_overlap": 1.0 if same else 0.6,
                     "top5_same_set": same, "top5_same_order": same, "answer_norm_same": em_s == em_f,
                     "iterations_suite": 1, "iterations_flashrag": 1 + i % 3, "retrievals_suite": 1,
                     "retrievals_flashrag": 1 + i % 3, "answer_words_suite": 1, "answer_words_flashrag": 2 * i,
                     "top5_overlap_best_first": 0.8, "R@5_flashrag_best_first": 50.0,
                     "flashrag_list_merged": i % 3 > 0, "flashrag_answer_marked": i != 3})
    for i in range(2):
        rows.append({"method": "iter_retgen", "qid": f"q{i}", "EM_suite": 0, "EM_flashrag": 100, "F1_suite": 0,
                     "F1_flashrag": 100, "R@5_suite": 50, "R@5_flashrag": 50, "top5_overlap": 0.8,
                     "top5_same_set": False, "top5_same_order": False, "answer_norm_same": False,
                     "iterations_suite": 3, "iterations_flashrag": 3, "retrievals_suite": 3, "retrievals_flashrag": 3,
                     "answer_words_suite": 1, "answer_words_flashrag": 1})
    return pd.DataFrame(rows)


def test_paired_tests_exact_values_and_holm_inside_each_method():
    t = paired_tests(_rows()).set_index(["method", "metric"])
    em = t.loc[("IRCoT", "EM")]
    assert (em["n"], em["suite"], em["flashrag"], em["suite − flashrag"]) == (4, 75.0, 25.0, 50.0)
    assert em["detail"] == "suite only 2, FlashRAG only 0" and em["p"] == 0.5    # 2 * (1/2)^2
    r5 = t.loc[("IRCoT", "R@5")]
    assert r5["p"] == 0.5 and r5["detail"] == "2 questions differ"   # differences +50, +50: 2 of 4 sign sets as large
    assert list(t.loc["IRCoT"]["p (Holm)"]) == [1.0, 1.0, 1.0]       # 3 x 0.5 capped at 1, step-down monotone
    it = t.loc[("ITER-RETGEN", "EM")]
    assert (it["suite"], it["flashrag"], it["p"]) == (0.0, 100.0, 0.5)
    assert t.loc[("ITER-RETGEN", "R@5")]["p"] == 1.0                  # no difference at all


def test_agreement_counts_and_distributions():
    a = agreement(_rows()).set_index(["method", "measure"])
    assert a.loc[("IRCoT", "final top-5 same set, % of questions"), "both"] == 50.0
    assert a.loc[("IRCoT", "final top-5 overlap (FlashRAG's list in its order), mean %"), "both"] == 80.0
    assert a.loc[("IRCoT", "  generations: questions"), "flashrag"] == "1: 2, 2: 1, 3: 1"
    assert a.loc[("IRCoT", "LLM generations of the loop a question, mean"), "flashrag"] == 1.75
    assert a.loc[("IRCoT", "FlashRAG's list sorted ascending (a second retrieval merged), % of questions"),
                 "flashrag"] == 50.0
    assert a.loc[("IRCoT", "thoughts reaching 'So the answer is:', % of questions"), "flashrag"] == 75.0
    assert ("ITER-RETGEN", "Recall@5 of FlashRAG's pool best first") not in a.index
    same = a.loc[("IRCoT", "F1 on the 2 questions with the same final top-5 set, mean")]   # q1 and q3
    assert (same["suite"], same["flashrag"]) == (50.0, 0.0)
    assert not any("same final top-5 set, mean" in m for m in a.loc["ITER-RETGEN"].index)   # none the same
    assert distribution(pd.Series([3, 1, 3])) == "1: 1, 3: 2"


def test_reading_split_tables_the_three_readings_and_tests_the_reread_against_the_run():
    rows = _rows()
    it = rows["method"] == "iter_retgen"
    rows.loc[it, "EM_suite_reread"] = [100.0, 0.0]
    rows.loc[it, "F1_suite_reread"] = [100.0, 50.0]
    rows.loc[rows.index[it][0], "top5_same_set"] = True
    table, test = reading_split(rows)
    t = table.set_index("ITER-RETGEN read by")
    assert list(t["n"]) == [2, 2, 2] and list(t["EM"]) == [0.0, 50.0, 100.0] and list(t["F1"]) == [0.0, 75.0, 100.0]
    assert list(t["F1, same top-5 set"]) == [0.0, 100.0, 100.0] and list(t["n same top-5 set"]) == [1, 1, 1]
    assert (test["F1 re-read"], test["F1 as run"], test["re-read − as run"], test["questions differ"]) == (
        75.0, 0.0, 75.0, 2)
    assert test["p"] == 0.5   # differences +100, +50: 2 of the 4 sign assignments as large
    with pytest.raises(ValueError, match="re-read"):
        reading_split(_rows())


def test_the_reading_step_reads_each_last_retrieval_whole_writes_its_answers_and_then_makes_no_call(
        tmp_path, monkeypatch, make_llm):
    """``flashrag_compare.py reading`` with a scripted model: every passage of the last round's retrieval is in the
    prompt, whole and in order; the answers go beside the report with the call count; a second run makes no call."""
    import kgir_lib.llm
    from kgir_lib.config import load_config
    from kgir_lib.data import load_dataset

    cfg = load_config("local")
    ds = load_dataset("musique_train", cfg.data_path)
    pids = [p.pid for p in ds.corpus.passages[:12]]
    prompts = []

    def script(req):
        prompts.append(req.messages[-1][1])
        return "Answer: Paris"

    monkeypatch.setattr(kgir_lib.llm, "build_llm", lambda cfg, **kw: make_llm(script))
    work = tmp_path / "work"
    work.mkdir()
    records = [{"qid": f"q{i}", "question": f"Question {i}?",
                "searches": [{"query": "x", "hits": [[p, 0.1] for p in pids[:3]]},
                             {"query": "y", "hits": [[p, 1.0 - j / 10] for j, p in enumerate(pids[i:i + 10])]}]}
               for i in range(2)]
    (work / "suite_iter_retgen.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "benchmarks" / "peers_flashrag.md"
    compare, report = load_peer("flashrag_compare"), load_peer("flashrag_report")
    compare.run_reading(work, "local", "musique_train", out)
    meta, answers = report.read_reading(out.parent / report.READING)
    assert answers == {"q0": "Paris", "q1": "Paris"} and meta["calls_made"] == 2 and meta["passage_chars"] is None
    assert meta["context_passages"] == cfg.top_k == 10
    whole = {p.pid: p for p in ds.corpus.passages}
    for i, prompt in enumerate(prompts):
        at = [prompt.index(whole[p].text) for p in pids[i:i + 10]]   # every passage, whole, in retrieval order
        assert at == sorted(at)
    compare.run_reading(work, "local", "musique_train", out)
    assert len(prompts) == 2   # complete: no second call


def test_a_p_in_a_sentence_never_reads_p_equals_less_than():
    assert (p_clause(0.28), p_clause(0.00001), p_clause(0.0001)) == ("p = 0.28", "p < 0.0001", "p = 0.0001")


def test_crosscheck_sentence_words_the_rows():
    text = crosscheck_sentence(_rows())
    assert text == ("IRCoT: EM 75.0 (suite) against 25.0 (FlashRAG) on the same 4 questions (exact McNemar p = 0.5), "
                    "Recall@5 50.0 against 25.0 as FlashRAG ranks it (sign-flip p = 0.5) and 50.0 with its pool "
                    "best first, the same final top-5 passages on 2 of 4 "
                    "questions; ITER-RETGEN: EM 0.0 (suite) against 100.0 (FlashRAG) on the same 2 questions (exact "
                    "McNemar p = 0.5), Recall@5 50.0 against 50.0 (sign-flip p = 1), the same final top-5 passages "
                    "on 0 of 2 questions.")
    with pytest.raises(ValueError, match="lack"):
        crosscheck_sentence(_rows().drop(columns=["top5_same_set"]))


def test_search_server_request_and_response():
    ss = load_peer("search_server")
    assert ss.parse_search_request(b'{"queries": ["a", "b"], "k": 2}', 10) == (["a", "b"], 2)
    for body, field in ((b'{"queries": "a", "k": 2}', "'queries'"), (b'{"queries": ["a"], "k": 0}', "'k'"),
                        (b'{"queries": ["a"], "k": 11}', "'k'"), (b'{"queries": ["a"], "k": true}', "'k'"),
                        (b"[", "not JSON")):
        with pytest.raises(ValueError, match=field):
            ss.parse_search_request(body, 10)
    from kgir_lib.data import Passage

    passages = {"p1": Passage("p1", "T", "text")}
    assert ss.search_response([[("p1", 0.12345678)]], passages) == {"results": [[
        {"id": "p1", "contents": "T\ntext", "title": "T", "text": "text", "score": 0.123457}]]}


def test_search_server_answers_over_http_with_400_naming_the_field_and_404_elsewhere():
    """The search server's routes through the shared JSON handler, on a real socket."""
    import threading
    import urllib.error
    import urllib.request
    from http.server import HTTPServer

    from kgir_lib.data import Passage

    ss = load_peer("search_server")
    passages = {"p1": Passage("p1", "T", "text"), "p2": Passage("p2", "U", "más")}
    handler = ss.make_handler(lambda queries, k: [[("p2", 0.9), ("p1", 0.5)][:k] for _ in queries], passages)
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"

    def call(path: str, body: Optional[bytes] = None) -> tuple:
        try:
            with urllib.request.urlopen(urllib.request.Request(url + path, data=body), timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    try:
        assert call("/health") == (200, {"passages": 2})
        status, out = call("/search", b'{"queries": ["q"], "k": 1}')
        assert status == 200 and [d["id"] for d in out["results"][0]] == ["p2"] and out["results"][0][0]["text"] == "más"
        status, out = call("/search", b'{"queries": ["q"], "k": 3}')
        assert status == 400 and "'k'" in out["error"]["message"]
        assert call("/search", b"[1]")[0] == 400 and call("/nowhere")[0] == 404
    finally:
        server.shutdown()
        server.server_close()


def test_records_round_trip_plain_and_compressed_with_reproducible_bytes(tmp_path):
    rec = load_peer("records")
    rows = [{"qid": "q1", "hits": [["p1", 0.5]]}, {"qid": "q2", "text": "más"}]
    for name in ("a.jsonl", "sub/a.jsonl.gz"):
        rec.write_jsonl(tmp_path / name, rows)
        assert rec.read_jsonl(tmp_path / name) == rows
    first = (tmp_path / "sub/a.jsonl.gz").read_bytes()
    rec.write_jsonl(tmp_path / "sub/b.jsonl.gz", rows)
    assert (tmp_path / "sub/b.jsonl.gz").read_bytes() == first  # no time stamp in the gzip header
    (tmp_path / "blank.jsonl").write_text('{"a": 1}\n\n{"a": 2}\n', encoding="utf-8")
    assert rec.read_jsonl(tmp_path / "blank.jsonl") == [{"a": 1}, {"a": 2}]


def test_cache_proxy_keys_loads_and_answers_from_its_cache(tmp_path):
    cp = load_peer("llm_cache_proxy")
    req = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.0}
    assert cp.prepare(req) == {**req, "repeat_penalty": 1.0} and cp.prepare({**req, "repeat_penalty": 1.3})[
        "repeat_penalty"] == 1.3
    key = cp.request_key(cp.prepare(req))
    assert key == cp.request_key(dict(reversed(list(cp.prepare(req).items()))))    # key order does not matter
    cache = tmp_path / "c.jsonl"
    cache.write_text(json.dumps({"key": key, "response": {"choices": [{"message": {"content": "yo"}}]}}) + "\n"
                     + '{"key": "torn')                                            # a kill mid-write
    proxy = cp.CachingProxy("http://127.0.0.1:9", cache, cache_only=True)
    assert list(proxy.cache) == [key]
    status, body = proxy.chat(json.dumps(req).encode())
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "yo" and proxy.hits == 1
    status, _ = proxy.chat(json.dumps({**req, "temperature": 0.5}).encode())
    assert status == 503                                                           # a miss is never forwarded
    assert proxy.chat(b"not json")[0] == 400
    cache.write_text('{"broken\n{"key": "k", "response": {}}\n')
    with pytest.raises(ValueError, match="c.jsonl:1"):
        cp.load_cache(cache)


def test_cache_proxy_answers_from_its_seeds_and_writes_only_the_calls_it_made(tmp_path):
    """``--seed``: a seed file (gzip, as the committed answers are) answers a request it holds and is never written;
    a request it lacks is forwarded once and appended to the proxy's own file, which then holds only that call."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    cp = load_peer("llm_cache_proxy")
    req = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.0}
    seed = tmp_path / "seed.jsonl.gz"
    with gzip.open(seed, "wt") as fh:
        fh.write(json.dumps({"key": cp.request_key(cp.prepare(req)),
                             "response": {"choices": [{"message": {"content": "seeded"}}]}}) + "\n")
    forwarded = []

    class Upstream(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            forwarded.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            data = json.dumps({"choices": [{"message": {"content": "new"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cache = tmp_path / "own.jsonl"
        proxy = cp.CachingProxy(f"http://127.0.0.1:{server.server_address[1]}", cache, seeds=[seed])
        assert proxy.seeded == 1
        status, body = proxy.chat(json.dumps(req).encode())
        assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "seeded"
        assert not cache.exists() and forwarded == []
        other = {**req, "messages": [{"role": "user", "content": "hi again"}]}
        status, body = proxy.chat(json.dumps(other).encode())
        assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "new"
        assert forwarded == [cp.prepare(other)]
        assert [r["key"] for r in cp.load_cache(cache).values()] == [cp.request_key(cp.prepare(other))]
        assert proxy.chat(json.dumps(other).encode())[0] == 200 and len(forwarded) == 1   # now cached
    finally:
        server.shutdown()


def _kept_files(folder: Path, rep, n: Optional[int] = None) -> None:
    """The shim's files in ``folder``, made from the committed as-run IRCoT records and rows (the first ``n``
    questions): a shim's row whose every number must then read as the as-run IRCoT row's."""
    meta, recs = rep.read_outputs(COMMITTED.parent / rep.OUTPUTS)
    ircot = recs["ircot"][:n]
    kmeta = {**meta, "ircot_thoughts": "kept", "methods": ["ircot"], "command": "IRCOT_THOUGHTS=kept bash x.sh",
             "thoughts": sum(r["iterations"] for r in ircot), "calls": 7, "legs": 1}
    with gzip.open(folder / rep.KEPT_OUTPUTS, "wt", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(x) + "\n" for x in [{"meta": kmeta}] + [{"method": "ircot", **r} for r in ircot]))
    rows = pd.read_csv(COMMITTED, dtype={"qid": str})
    kept = rows[rows["method"] == "ircot"].head(n or len(rows)).assign(method="ircot_kept")
    kept.to_csv(folder / rep.KEPT_CSV, index=False)


@pytest.mark.skipif(not COMMITTED.exists(), reason="the cross-check has not been committed yet")
def test_the_report_shows_the_shims_row_beside_the_as_run_row_only_when_its_records_exist(tmp_path):
    """Without the shim's files the report is the committed one; with them (here the as-run IRCoT data under the
    shim's name) every as-run line stays, and each IRCoT line of the tables is there again, the same numbers under
    the shim's name; the caveat says the row is there, and the run's cost has its line."""
    rep = load_peer("flashrag_report")
    for name in (COMMITTED.name, rep.OUTPUTS, rep.READING, rep.SUITE):
        (tmp_path / name).write_bytes((COMMITTED.parent / name).read_bytes())
    base = rep.rebuild(tmp_path)
    if not (COMMITTED.parent / rep.KEPT_CSV).exists():   # (once the row is committed, the report holds it)
        assert base == COMMITTED.with_suffix(".md").read_text(encoding="utf-8")
    assert "IRCOT_THOUGHTS=kept bash benchmarks/peers/flashrag_crosscheck.sh" in base and "(shim) |" not in base
    _kept_files(tmp_path, rep)
    text = rep.rebuild(tmp_path)
    lines = text.splitlines()
    changed = [x for x in base.splitlines() if x not in lines]
    assert len(changed) == 1 and changed[0].startswith("**FlashRAG's IRCoT here is a configuration")
    name = "IRCoT, earlier thoughts kept (shim)"
    ircot_lines = [x for x in base.splitlines() if x.startswith("| IRCoT | ")]
    assert len(ircot_lines) == 3 + 13 + 3   # the paired tests, the agreement, the answers read another way
    for x in ircot_lines:
        assert x.replace("| IRCoT | ", f"| {name} | ", 1) in lines, x
    merged = [x for x in base.splitlines() if x.startswith("| FlashRAG's IRCoT | ")]
    assert len(merged) == 3 and all(x.replace("| FlashRAG's IRCoT |", f"| FlashRAG's {name} |") in lines
                                    for x in merged)
    assert f"The rows *{name}* are FlashRAG's IRCoT run again" in text and "on 100 of the 100 questions" in text
    assert "- The shim's IRCoT (earlier thoughts kept; `IRCOT_THOUGHTS=kept bash x.sh`), on 100 of the 100" in text
    assert f"The second FlashRAG IRCoT row in words: {name}: EM " in text


@pytest.mark.skipif(not COMMITTED.exists(), reason="the cross-check has not been committed yet")
def test_a_partial_shim_run_says_so_and_a_row_without_its_records_is_an_error(tmp_path):
    rep = load_peer("flashrag_report")
    for name in (COMMITTED.name, rep.OUTPUTS, rep.READING, rep.SUITE):
        (tmp_path / name).write_bytes((COMMITTED.parent / name).read_bytes())
    _kept_files(tmp_path, rep, n=4)
    text = rep.rebuild(tmp_path)
    assert "on 4 of the 100 questions (a partial run: its rows are over these 4 questions only)" in text
    assert "| IRCoT, earlier thoughts kept (shim) | EM | 4 |" in text
    (tmp_path / rep.KEPT_OUTPUTS).unlink()
    with pytest.raises(SystemExit, match="peers_flashrag_ircot_kept.jsonl.gz"):
        rep.rebuild(tmp_path)


def test_report_kept_refuses_a_run_that_did_not_keep_the_thoughts(tmp_path):
    rep = load_peer("flashrag_report")
    (tmp_path / "flashrag_meta.json").write_text(json.dumps({"flashrag": "0.1.2"}))
    with pytest.raises(SystemExit, match="flashrag_meta.json: field 'ircot_thoughts'"):
        rep.write_kept(tmp_path, tmp_path, "local", "musique_train", tmp_path / "r.md", "cmd")


@pytest.mark.skipif(not COMMITTED.exists(), reason="the cross-check has not been committed yet")
def test_rescore_reproduces_the_committed_cross_check_without_peer_environment(tmp_path, monkeypatch):
    """The re-score: this code's IRCoT and ITER-RETGEN, cache only from the committed response log (no LLM call),
    their dense searches replayed from the committed record (no encoder), against FlashRAG's committed records,
    give the committed per-question rows cell by cell."""
    monkeypatch.setenv("KGIR_LLM_CACHE_ONLY", "")  # the re-score sets it in this process; restored afterwards
    compare = load_peer("flashrag_compare")
    report = load_peer("flashrag_report")
    out = tmp_path / "benchmarks" / "peers_flashrag.md"
    out.parent.mkdir()
    for name in (report.OUTPUTS, report.READING):  # FlashRAG's records, the re-read of ITER-RETGEN's last round
        (out.parent / name).write_bytes((COMMITTED.parent / name).read_bytes())
    compare.run_suite(tmp_path / "work", "local", "musique_train", COMMITTED.parent / report.SEARCHES)
    meta = json.loads((tmp_path / "work" / "suite.meta.json").read_text())
    assert meta["llm_calls_made"] == 0 and meta["dense_search"].startswith("replayed")
    report.write_report(tmp_path / "work", "local", "musique_train", out, "test", rescore=True)
    assert out.with_suffix(".csv").read_text() == COMMITTED.read_text()
    assert "**Re-scored.**" in out.read_text() and not (out.parent / report.KEPT_CSV).exists()
    # the shim's row is re-scored too when its records are committed: here the as-run IRCoT records under its name,
    # so its rows are the as-run IRCoT rows under the method name ircot_kept
    _kept_files(out.parent, report)
    (out.parent / report.KEPT_CSV).unlink()
    report.write_report(tmp_path / "work", "local", "musique_train", out, "test", rescore=True)
    rows = pd.read_csv(COMMITTED, dtype={"qid": str})
    expected = rows[rows["method"] == "ircot"].assign(method="ircot_kept").reset_index(drop=True)
    kept = pd.read_csv(out.parent / report.KEPT_CSV, dtype={"qid": str})
    assert set(expected.columns) - set(kept.columns) == {"EM_suite_reread", "F1_suite_reread"}  # ITER-RETGEN's
    pd.testing.assert_frame_equal(kept, expected[list(kept.columns)], check_dtype=False)  # NaN-padded there


def test_committed_outputs_name_their_run():
    path = COMMITTED.parent / "peers_flashrag_outputs.jsonl.gz"
    if not path.exists():
        pytest.skip("the cross-check has not been committed yet")
    meta, recs = load_peer("flashrag_report").read_outputs(path)
    assert meta["flashrag"] == "0.1.2" and meta["model"] == "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
    assert meta["calls"] > 0 and meta["llm_seconds"] > 0
    rows = pd.read_csv(COMMITTED)
    assert {m: int((rows["method"] == m).sum()) for m in ("ircot", "iter_retgen")} == {
        m: len(recs[m]) for m in ("ircot", "iter_retgen")}


def test_read_outputs_names_a_bad_file(tmp_path):
    rep = load_peer("flashrag_report")
    with pytest.raises(SystemExit, match="no committed FlashRAG records"):
        rep.read_outputs(tmp_path / "none.jsonl.gz")
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as fh:
        fh.write(json.dumps({"method": "hyde"}) + "\n")
    with pytest.raises(SystemExit, match="bad.jsonl.gz:1"):
        rep.read_outputs(bad)


def test_setup_flashrag_help_installs_nothing():
    out = subprocess.run(["bash", str(PEERS / "setup.sh"), "flashrag", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "flashrag" in out.stdout and "installing" not in out.stdout


needs_peer = runs_in_peer_env("flashrag")


@needs_peer
def test_flashrag_ircot_template_becomes_one_user_message_without_previous_thoughts_in_the_peer_env():
    code = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
os.environ["TIKTOKEN_CACHE_DIR"] = sys.argv[2]
import flashrag_pipelines as fp
assert fp.chunks(11, 5) == [(0, 5), (5, 11)] and fp.chunks(10, 5) == [(0, 5), (5, 10)]
try:
    fp.chunks(4, 1)
except ValueError as e:
    assert "'chunk'" in str(e)
class A: pass
a = A(); a.model = "local-gguf"; a.llm_base_url = "http://127.0.0.1:9/v1"; a.max_input_len = 8192
a.dataset = "d"; a.topk = 2; a.search_url = "http://127.0.0.1:9"; a.ircot_max_iter = 3; a.iter_num = 3
a.max_tokens_ircot = 64; a.max_tokens_iter_retgen = 32
import pathlib, tempfile
ircot, iterative, retriever = fp.build(a, pathlib.Path(tempfile.mkdtemp()))
docs = [{"id": "p1", "contents": "T1\nfirst", "title": "T1", "text": "first"}]
msg = ircot.prompt_template.get_string(question="Q?", retrieval_result=docs, previous_gen="Earlier thought.")
it = iterative.prompt_template.get_string(question="Q?", retrieval_result=docs)
print(json.dumps({"ircot": msg, "iter": it, "same_retriever": iterative.retriever is retriever,
                  "max_iter": ircot.max_iter, "iter_num": iterative.iter_num}))
"""
    out = subprocess.run([str(PEER_PY), "-c", code, str(PEERS), str(PEERS / ".venv-flashrag" / "tiktoken_cache")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    [m] = got["ircot"]
    assert m["role"] == "user" and m["content"].endswith("Wikipedia Title: T1\nfirst\n\nQuestion: Q?\nThought:")
    assert "Earlier thought." not in m["content"]          # FlashRAG's OpenAI path leaves previous thoughts out
    assert [x["role"] for x in got["iter"]] == ["assistant", "user"]   # FlashRAG sends its system prompt as assistant
    assert "Doc 1(Title: T1) first" in got["iter"][0]["content"] and got["iter"][1]["content"] == "Question: Q?"
    assert got["same_retriever"] and (got["max_iter"], got["iter_num"]) == (3, 3)


@needs_peer
def test_the_shim_puts_step_ones_thought_in_step_twos_prompt_and_the_as_run_template_does_not_in_the_peer_env():
    """FlashRAG's own ``IRCOTPipeline.run_item`` with a scripted generator and retriever, once with the as-run
    template and once with the shim (``--ircot-thoughts kept``): the first prompt is the same on both (so the as-run
    answers answer it); from step 2 on the shim's prompt ends with the thoughts so far, appended as FlashRAG's other
    frameworks append ``previous_gen``, and the as-run prompt holds none of them."""
    code = r"""
import json, os, sys, pathlib, tempfile
sys.path.insert(0, sys.argv[1])
os.environ["TIKTOKEN_CACHE_DIR"] = sys.argv[2]
import flashrag_pipelines as fp
from flashrag.dataset import Item
class A: pass
def run(mode):
    a = A(); a.model = "local-gguf"; a.llm_base_url = "http://127.0.0.1:9/v1"; a.max_input_len = 8192
    a.dataset = "d"; a.topk = 1; a.search_url = "http://127.0.0.1:9"; a.ircot_max_iter = 3; a.iter_num = 3
    a.max_tokens_ircot = 64; a.max_tokens_iter_retgen = 32; a.ircot_thoughts = mode
    ircot, _, retriever = fp.build(a, pathlib.Path(tempfile.mkdtemp()))
    hits = {"Who?": ("p1", 0.9), "A is B.": ("p2", 0.8), "B is C.": ("p3", 0.7)}
    def post(queries, num):
        found = [hits[q] for q in queries]
        return ([[{"id": p, "contents": f"T{p}\nabout {p}", "title": f"T{p}", "text": f"about {p}"}] for p, _ in found],
                [[s] for _, s in found])
    retriever._post = post
    class Gen:
        prompts = []
        def generate(self, prompt):
            self.prompts.append(prompt)
            return [["A is B.", "B is C.", "So the answer is: C."][len(self.prompts) - 1]]
    ircot.generator = gen = Gen()
    item = Item({"id": "q", "question": "Who?", "golden_answers": []})
    ircot.run_item(item)
    return {"template": type(ircot.prompt_template).__name__, "prompts": gen.prompts}
print(json.dumps({m: run(m) for m in ("dropped", "kept")}))
"""
    out = subprocess.run([str(PEER_PY), "-c", code, str(PEERS), str(PEERS / ".venv-flashrag" / "tiktoken_cache")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert (got["dropped"]["template"], got["kept"]["template"]) == ("OneUserMessage", "KeptThoughts")
    dropped, kept = got["dropped"]["prompts"], got["kept"]["prompts"]
    assert len(dropped) == len(kept) == 3 and all(len(p) == 1 and p[0]["role"] == "user" for p in dropped + kept)
    assert kept[0] == dropped[0] and dropped[0][0]["content"].endswith("about p1\n\nQuestion: Who?\nThought:")
    ending = "Wikipedia Title: Tp1\nabout p1\n\nQuestion: Who?\nThought:"   # the pool ascending: the best last
    assert dropped[1][0]["content"].endswith(ending) and "A is B." not in dropped[1][0]["content"]
    assert kept[1][0]["content"] == dropped[1][0]["content"] + "A is B."
    assert kept[2][0]["content"] == dropped[2][0]["content"] + "A is B. B is C."
    assert "B is C." not in dropped[2][0]["content"]


def test_a_p_below_the_kept_decimals_reads_as_such_never_as_zero():
    from kgir_lib.eval.peer_iterative import p_value

    assert p_value(0.0) == "< 0.0001" and p_value(0.00004) == "< 0.0001"
    assert p_value(0.0123) == "0.012" and p_value(1.0) == "1"
