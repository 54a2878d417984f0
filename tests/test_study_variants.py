"""The study variants of KGIR-RAG (kgir_lib.kgir.study): oracles handed the gold chain, and two of ours.

Known answers on the tiny Fig. 6 workspace with a scripted LLM: what each oracle supplies, which LLM calls it
saves, what the reflection and the reader read; and that the paper's method and its Table 7 variants still send
exactly the requests they sent before the study variants existed (tests/fixtures/kgir_requests.json).
"""
from __future__ import annotations

import dataclasses
import os

import pandas as pd
import pytest

from kgir_lib.config import PROJECT_ROOT
from kgir_lib.data import Question
from kgir_lib.gold import (RELATION_QUESTIONS, Bridge, GoldHop, bridge_aliases, hop_question, ideal_rewrite,
                            names_answer, substitute)
from kgir_lib.kgir.first_retrieval import KEY as FIRST_AND_NEW_KEY
from kgir_lib.kgir.rewrite import rewrite_requests
from kgir_lib.kgir.study import (bridge_rewrite_requests, hop_entities, oracle_entities, oracle_plan,
                                 parse_bridge_rewrite)
from kgir_lib.kgir.variants import STUDY_VARIANTS, KGIRRAG, StudyKGIRRAG
from kgir_lib.methods.reader import format_passages, reader_request
from kgir_lib.registry import LABELS, build_method

from conftest import SHARED_DATA
from _request_log import (EVERY_KEY, EXISTING_VARIANTS, OUTPUTS, expand, intern, load_fixture, record_every,
                          record_requests, write_fixture)

IDEAL = "Which company merged with Compaq in 2002?"


def kind(req) -> str:
    return {"kgir_ner": "ner", "kgir_rewrite": "rewrite", "kgir_bridge_rewrite": "rewrite", "kgir_reflect": "reflect",
            "kgir_reflect_verdict": "verdict", "reader": "reader"}[req.prompt]


def script(rewrite="Rewritten question: Who founded Dell?", reflect="Reasoning: enough.\nAnswer: Hewlett-Packard"):
    replies = {"ner": '{"named_entities": ["PC maker", "1994"]}', "rewrite": rewrite, "reflect": reflect,
               "verdict": "Answer: HP", "reader": "Answer: HP"}
    return lambda req: replies[kind(req)]


def logged(ws) -> list:
    """Wraps ``ws.llm.generate``: the returned list fills with (stage, [request, ...]) of every call."""
    calls: list = []
    inner = ws.llm.generate

    def generate(requests, stage="default", desc=None):
        calls.append((stage, list(requests)))
        return inner(requests, stage=stage, desc=desc)
    ws.llm.generate = generate
    return calls


def stages(calls) -> list:
    return [(stage, len(reqs)) for stage, reqs in calls]


def payloads(calls) -> list:
    return [(stage, [r.payload() for r in reqs]) for stage, reqs in calls]


@pytest.fixture
def pids(tiny_dataset):
    return {p.title: p.pid for p in tiny_dataset.corpus.passages}


@pytest.fixture
def musique_q(tiny_dataset, pids):
    """The Fig. 6 question with a MuSiQue-style gold chain: hop 1 answers Compaq, hop 2 refers to it as #1."""
    base = tiny_dataset.questions[0]
    hops = (GoldHop("Which company was the top PC maker of 1994?", "Compaq", pids["Compaq"], "Compaq"),
            GoldHop("Which company merged with #1 in 2002?", "Hewlett-Packard", pids["Hewlett-Packard"],
                    "Hewlett-Packard"))
    return dataclasses.replace(base, gold_hops=hops,
                               gold_bridges=(Bridge("Compaq", bridge_aliases("Compaq"), (pids["Hewlett-Packard"],)),))


@pytest.fixture
def named_q(tiny_dataset, pids):
    """A MuSiQue-style question over the tiny corpus whose first sub-question names its paragraph's title (IBM)
    and whose second names none (its "company" is a word of the graph, not a gold entity)."""
    hops = (GoldHop("Who bought the PC business of IBM?", "Lenovo", pids["IBM"], "IBM"),
            GoldHop("What kind of company is #1?", "Chinese technology company", pids["Lenovo"], "Lenovo"))
    return Question("n1", "What kind of company bought the PC business of IBM?", ("Chinese technology company",),
                    (pids["IBM"], pids["Lenovo"]), "tiny", 2, hops,
                    (Bridge("Lenovo", bridge_aliases("Lenovo"), (pids["Lenovo"],)),))


@pytest.fixture
def hotpot_q(tiny_dataset, pids):
    """A HotpotQA-style comparison question: hops without sub-questions, no bridge."""
    return Question("h1", "Which was founded first, Dell or Apple?", ("Apple",), (pids["Dell"], pids["Apple"]),
                    "tiny", 2, (GoldHop("", "", pids["Dell"], "Dell"), GoldHop("", "", pids["Apple"], "Apple Inc.")), ())


# ---------------------------------------------------------------- the requests every variant sends
def test_existing_variants_send_the_requests_they_sent_before(tiny_workspace, tiny_dataset):
    """Every request of KGIR-RAG and its Table 7 variants (three scripts, two questions), cache hits included,
    equals the one captured before the study variants were added: the committed response logs still answer them."""
    got = record_requests(tiny_workspace, tiny_dataset.questions[0])
    want = load_fixture()
    assert sorted(f"{v}/{s}" for v in EXISTING_VARIANTS for s in ("answer", "missing_then_answer", "malformed")) \
        == sorted(got) == sorted(k for k in want if k != "every")
    for key in got:
        assert got[key] == want[key], key


def test_every_variant_sends_the_recorded_requests_and_returns_the_recorded_traces(tiny_workspace, tiny_dataset,
                                                                                   pids):
    """Every KGIR-RAG registry key (the paper's method, Table 7, forced rounds, every study variant) under five
    scripts, and the paper's method under eight settings, on five questions with and without gold: the requests
    (in order, cache hits included) and what each run returned equal the recorded ones
    (tests/fixtures/kgir_requests.json, kgir_outputs.json; the module docstring of tests/_request_log.py)."""
    requests, outputs = record_every(tiny_workspace, tiny_dataset.questions[0], pids)
    if os.environ.get("KGIR_WRITE_REQUEST_FIXTURE"):
        write_fixture({**{k: v for k, v in load_fixture().items() if k != "every"}, "every": intern(requests)})
        write_fixture(outputs, OUTPUTS)
    want, want_out = expand(load_fixture()["every"]), load_fixture(OUTPUTS)
    assert sorted(requests) == sorted(want) == sorted(want_out)
    assert {k.split("/")[1] for k in requests if k.startswith("every/")} == set(EVERY_KEY) == \
        {k for k in LABELS if k.startswith("kgir")} - {FIRST_AND_NEW_KEY}  # the repair: tests/test_first_retrieval.py
    kinds = {stage for log in requests.values() for stage, _ in log}
    assert kinds == {"kgir_ner", "kgir_rewrite", "kgir_reflect", "kgir_reflect_verdict", "kgir_final"}
    for key in want:
        assert requests[key] == want[key], key
        assert outputs[key] == want_out[key], key


# ---------------------------------------------------------------- the gold chain read for each step
def test_ideal_rewrite_of_hand_built_decompositions():
    h = lambda q, a: GoldHop(q, a, "p", "t")  # noqa: E731
    assert ideal_rewrite((h("Which company was the top PC maker of 1994?", "Compaq"),
                          h("Which company merged with #1 in 2002?", "Hewlett-Packard"))) == IDEAL
    three = (h("Aschenbrödel >> composer", "Johann Strauss II"), h("#1 >> country of citizenship", "Austria"),
             h("Who was in charge of #2 ?", "Karl Renner"))
    assert ideal_rewrite(three) == "Who was in charge of Austria?"
    assert ideal_rewrite(three[:2]) == "What is the country of citizenship of Johann Strauss II?"
    assert ideal_rewrite((h("Midway >> located in", "White County"), h("q", "Arkansas"),
                          h("Midway (near Pleasant Plains), #1 , #2 >> country", "U.S."))) == \
        "Which country is Midway (near Pleasant Plains), White County, Arkansas in?"
    assert hop_question("Rutgers University >> instance of") == "What is Rutgers University an instance of?"
    assert hop_question("Humboldt Peak (Colorado ) >> part of") == "What is Humboldt Peak (Colorado) part of?"
    assert hop_question("#1 >> shares border with") == "What shares a border with #1?"
    # a relation the table does not word: the generic template, without "of" after a final preposition
    assert hop_question("Kassel >> twinned with") == "What is the twinned with Kassel?"
    assert hop_question("Kassel >> mayor") == "What is the mayor of Kassel?"
    assert hop_question("how many publix stores are in North Carolina") == "How many publix stores are in North Carolina?"
    assert substitute("in #3", ["a", "b"]) is None
    assert ideal_rewrite((h("q", "a"),)) is None and ideal_rewrite((h("", ""), h("", ""))) is None


def test_ideal_rewrite_naming_the_answer_is_not_applied(musique_q):
    """A rewrite naming the final answer (or an alias: the part before a comma, as whole words) hands the
    retrieval the answer: the oracle plan says so and gives no rewrite."""
    assert names_answer("Where are the badlands located in North Dakota?", ["western North Dakota", "North Dakota"])
    assert names_answer("Which entity is Consulate General of the United States, Frankfurt located in?",
                        ["Frankfurt am Main", "Frankfurt"])
    assert not names_answer("Which company merged with Compaq in 2002?", ["Hewlett-Packard", "HP"])
    assert not names_answer("Who founded Dellwood?", ["Dell"])  # whole words only
    hops = (musique_q.gold_hops[0], GoldHop("Which company merged with #1, later HP, in 2002?", "Hewlett-Packard",
                                            "p", "Hewlett-Packard"))
    plan = oracle_plan(dataclasses.replace(musique_q, gold_hops=hops), ("rewrite",))
    assert plan["rewrite"] is None
    assert plan["not_applied"] == {"rewrite": "the ideal rewrite names the final answer"}
    assert oracle_plan(musique_q, ("rewrite",)) == {"parts": ["rewrite"], "not_applied": {}, "rewrite": IDEAL}


def test_hop_entities_rule():
    assert hop_entities(GoldHop("Hello Love >> performer", "Hank Snow", "p", "Hello Love (song)"), "") == \
        ["Hello Love"]
    assert hop_entities(GoldHop("#1 at the 1920 Summer Olympics >> country", "x", "p", "t"), "") == \
        ["1920 Summer Olympics"]
    assert hop_entities(GoldHop("Midway (near Pleasant Plains), #2 , #1 >> country", "x", "p", "t"), "") == \
        ["Midway (near Pleasant Plains)"]
    assert hop_entities(GoldHop("#1 >> spouse", "x", "p", "t"), "") == []
    # a sub-question naming its paragraph's title (here without the parenthesis), nothing else: its other
    # words ("first president") are no gold entity
    assert hop_entities(GoldHop("What river does Tekezé River turn into?", "x", "p", "Tekezé River (Africa)"),
                        "") == ["Tekezé River"]
    assert hop_entities(GoldHop("Who was the first president of #1 ?", "x", "p", "APA"), "") == []
    # HotpotQA: the supporting title when the question names it, nothing else
    assert hop_entities(GoldHop("", "", "p", "Compaq (company)"), "Who bought Compaq?") == ["Compaq"]
    assert hop_entities(GoldHop("", "", "p", "Presario"), "Who bought Compaq?") == []


# ---------------------------------------------------------------- the oracles in the loop
def test_oracle_rewrite_is_exactly_the_substituted_last_sub_question(tiny_workspace, musique_q):
    ws = tiny_workspace(script())
    calls = logged(ws)
    [o] = build_method("kgir_oracle_rewrite", max_iterations=2).run(ws, [musique_q])
    r = o.trace["rounds"][0]
    assert r["rewrite"] == {"raw": "", "question": IDEAL, "malformed": False, "unchanged": False, "form": "oracle",
                            "bridge": None}
    assert stages(calls) == [("kgir_ner", 1), ("kgir_reflect", 1), ("kgir_final", 1)]  # no rewrite call
    assert [p for p, _ in r["rewrite_retrieved"]] == [p for p, _ in ws.dense.search([IDEAL], ws.cfg.top_k)[0]]
    assert IDEAL in calls[1][1][0].messages[-1][1]  # the reflection reads the ideal rewrite
    assert o.trace["oracle"] == {"parts": ["rewrite"], "not_applied": {}, "rewrite": IDEAL}


def test_oracle_rewrite_only_in_round_one(tiny_workspace, musique_q):
    ws = tiny_workspace(script(reflect="Reasoning: no.\nMissing: the partner"))
    calls = logged(ws)
    [o] = build_method("kgir_oracle_rewrite", max_iterations=2).run(ws, [musique_q])
    assert stages(calls) == [("kgir_ner", 1), ("kgir_reflect", 1), ("kgir_ner", 1), ("kgir_rewrite", 1),
                             ("kgir_reflect", 1), ("kgir_final", 1)]
    assert o.trace["rounds"][1]["query"] == IDEAL and "form" not in o.trace["rounds"][1]["rewrite"]


def test_oracle_seeds_skip_ner_and_seed_the_gold_entities(tiny_workspace, named_q):
    ws = tiny_workspace(script())
    calls = logged(ws)
    [o] = build_method("kgir_oracle_seeds").run(ws, [named_q])
    assert "kgir_ner" not in [c for c, _ in stages(calls)]
    sub = o.trace["rounds"][0]["subgraph"]
    # hop 1 names its paragraph's title; hop 2 names none
    assert sub["E_q"] == sub["llm_entities"] == ["IBM"] and not sub["used_fallback"]
    assert sub["seeds"] == ["IBM"] and o.trace["rounds"][0]["ner_raw"] is None
    assert "ner" not in o.trace["rounds"][0]["usable"] and "kgir_ner" not in o.trace["llm"]
    assert o.trace["oracle"]["seeds"] == [["IBM"]] and o.trace["oracle"]["not_applied"] == {}
    full = KGIRRAG().run(tiny_workspace(script()), [named_q])[0].trace
    assert "kgir_ner" in full["llm"] and full["rounds"][0]["ner_raw"]  # the full method asks NER: what the oracle replaces


def test_oracle_seeds_with_no_gold_entity_run_ner_and_say_so(tiny_workspace, musique_q):
    """Neither sub-question of the Fig. 6 chain names its paragraph's title: no gold entity, so NER runs as in
    the full method and the trace says the oracle did not apply (no graph word stands in)."""
    assert oracle_entities(musique_q) == []
    ws = tiny_workspace(script())
    calls = logged(ws)
    [o] = build_method("kgir_oracle_seeds").run(ws, [musique_q])
    assert ("kgir_ner", 1) in stages(calls)
    assert o.trace["oracle"]["seeds"] == [None]
    assert o.trace["oracle"]["not_applied"] == {"seeds": "the gold names no entity"}


def test_oracle_seeds_are_not_grounded_in_a_later_query(tiny_workspace, named_q):
    """Round 2's query is the rewrite; the gold entities are used as given, though it names neither."""
    assert oracle_entities(named_q) == ["IBM"]
    ws = tiny_workspace(script(rewrite="Rewritten question: Who founded Dell?", reflect="Missing: x"))
    [o] = build_method("kgir_oracle_seeds", max_iterations=2).run(ws, [named_q])
    r2 = o.trace["rounds"][1]
    assert r2["query"] == "Who founded Dell?" and r2["subgraph"]["E_q"] == ["IBM"]


def test_oracle_next_hop_reaches_the_reflection_and_the_reader(tiny_workspace, musique_q, pids, cfg):
    ws = tiny_workspace(script())
    ws.cfg = dataclasses.replace(cfg, top_k=2)
    hp = pids["Hewlett-Packard"]
    [plain] = KGIRRAG().run(ws, [musique_q])
    assert hp not in plain.trace["rounds"][0]["reflection_passages"]  # without the oracle it is not read
    calls = logged(ws)
    [o] = build_method("kgir_oracle_next_hop").run(ws, [musique_q])
    r = o.trace["rounds"][0]
    assert r["reflection_passages"][0] == hp and len(r["reflection_passages"]) <= ws.cfg.context_passages
    assert r["reflection_passages"][1:] == plain.trace["rounds"][0]["reflection_passages"][:ws.cfg.context_passages - 1]
    hp_text = "In 2002 Hewlett-Packard merged with Compaq."
    reflect = [reqs[0] for stage, reqs in calls if stage == "kgir_reflect"][0]
    reader = [reqs[0] for stage, reqs in calls if stage == "kgir_final"][0]
    assert hp_text in reflect.messages[-1][1] and hp_text in reader.messages[-1][1]
    assert hp in r["final"]["context_pids"] and o.trace["oracle"]["next_hop_pids"] == [hp]


def test_oracle_context_reader_sees_exactly_the_gold_passages(tiny_workspace, musique_q, tiny_dataset):
    ws = tiny_workspace(script())
    calls = logged(ws)
    [o] = build_method("kgir_oracle_context").run(ws, [musique_q])
    assert stages(calls) == [("kgir_final", 1)]
    gold = format_passages(ws.passages(musique_q.gold_pids), ws.cfg.passage_chars)
    reader = calls[0][1][0]
    assert reader.payload() == reader_request(musique_q.question, gold, ws.cfg.max_tokens("reader")).payload()
    assert o.answer == "HP" and o.trace["no_retrieval"]
    assert o.trace["rounds"][0]["final"]["context_pids"] == list(musique_q.gold_pids)
    assert o.trace["oracle"]["context_pids"] == list(musique_q.gold_pids)
    others = [p for p in tiny_dataset.corpus.passages if p.pid not in musique_q.gold_pids]
    assert not any(p.text in reader.messages[-1][1] for p in others)


def test_context_oracle_without_gold_runs_the_full_method(tiny_workspace, musique_q):
    nogold = dataclasses.replace(musique_q, qid="q0", gold_pids=())
    ws = tiny_workspace(script())
    calls = logged(ws)
    outs = build_method("kgir_oracle_context").run(ws, [nogold, musique_q])
    assert [o.qid for o in outs] == ["q0", "q1"]
    assert outs[0].trace["oracle"]["not_applied"] == {"context": "no gold passages"}
    assert "no_retrieval" not in outs[0].trace and outs[0].trace["rounds"][0]["rewrite"]
    assert stages(calls) == [("kgir_ner", 1), ("kgir_rewrite", 1), ("kgir_reflect", 1), ("kgir_final", 1),
                             ("kgir_final", 1)]


def test_cumulative_oracles_combine_their_steps(tiny_workspace, named_q, pids):
    ws = tiny_workspace(script())
    calls = logged(ws)
    [o] = build_method("kgir_oracle_seeds_rewrite_next_hop").run(ws, [named_q])
    assert stages(calls) == [("kgir_reflect", 1), ("kgir_final", 1)]
    r = o.trace["rounds"][0]
    assert r["subgraph"]["E_q"] == ["IBM"] and r["rewrite"]["question"] == "What kind of company is Lenovo?"
    assert r["reflection_passages"][0] == pids["Lenovo"]
    assert o.trace["oracle"]["parts"] == ["seeds", "rewrite", "next_hop"]


def test_hotpot_question_without_bridge_runs_as_the_full_method(tiny_workspace, hotpot_q):
    """No sub-questions and no bridge: the rewrite and next-hop oracles do not apply; the question asks exactly
    the full method's requests, and the trace says why."""
    def run(key):
        ws = tiny_workspace(script())
        calls = logged(ws)
        [o] = build_method(key, max_iterations=2).run(ws, [hotpot_q])
        return payloads(calls), o.trace
    full, _ = run("kgir")
    for key, part, reason in (("kgir_oracle_rewrite", "rewrite", "no sub-questions (HotpotQA): no ideal rewrite"),
                              ("kgir_oracle_next_hop", "next_hop", "no gold bridge")):
        got, trace = run(key)
        assert got == full and trace["oracle"]["not_applied"] == {part: reason}, key
    # the seeds oracle reads the supporting titles the question names: Dell ("Apple Inc." is not named whole)
    _, trace = run("kgir_oracle_seeds")
    assert trace["oracle"]["seeds"] == [["Dell"]] * len(trace["rounds"])


# ---------------------------------------------------------------- ours: the bridge rewrite, all of D'_t
@pytest.mark.parametrize("text, bridge, question", [
    ("Bridge: Compaq\nQuestion: Which company merged with Compaq in 2002?", "Compaq", IDEAL),
    (" bridge entity: \"Compaq\".\nRewritten question: Which company merged with Compaq in 2002", "Compaq", IDEAL),
    ("Question: Which company merged with Compaq in 2002?", None, IDEAL),
    ("Bridge: none\nQuestion: Which company merged in 2002 with the top PC maker of 1994?", None,
     "Which company merged in 2002 with the top PC maker of 1994?"),
    ("Bridge: Compaq", "Compaq", None),
    ("(Compaq, merged with, HP)", None, None),
    ("", None, None),
    (None, None, None),
])
def test_parse_bridge_rewrite(text, bridge, question):
    got = parse_bridge_rewrite(text)
    assert (got.bridge, got.question, got.malformed) == (bridge, question, question is None)


def test_bridge_rewrite_request_has_the_rewrites_inputs():
    hist = [{"rewrite": "Which company did Compaq merge with?", "missing": "the year"}]
    [a] = bridge_rewrite_requests(["q?"], ["Triples:\n(A, r, B)"], [hist])
    [b] = rewrite_requests(["q?"], ["Triples:\n(A, r, B)"], [hist])
    assert a.prompt == "kgir_bridge_rewrite" and a.messages[-1] == b.messages[-1]
    assert [r for r, _ in a.messages] == ["system", "user", "assistant", "user"]
    assert a.messages[2] == ("assistant", "Bridge: Mount Panorama Circuit\nQuestion: What is the length of Mount "
                                          "Panorama Circuit?")
    assert parse_bridge_rewrite(a.messages[2][1]).bridge == "Mount Panorama Circuit"
    assert (a.max_tokens, a.stop) == (b.max_tokens, b.stop)


def test_bridge_rewrite_in_the_loop_counts_malformed_and_keeps_the_query(tiny_workspace, musique_q):
    replies = iter(["Bridge: Compaq\nQuestion: Which company merged with Compaq in 2002?", "Bridge: Compaq",
                    "I do not know"])
    ws = tiny_workspace(lambda req: next(replies) if req.prompt == "kgir_bridge_rewrite"
                        else script(reflect="Missing: x")(req))
    method = build_method("kgir_bridge_rewrite", max_iterations=3)
    [o] = method.run(ws, [musique_q])
    rw = [r["rewrite"] for r in o.trace["rounds"]]
    assert [x["question"] for x in rw] == [IDEAL, IDEAL, IDEAL]  # malformed replies keep the query
    assert [(x["form"], x["bridge"], x["malformed"]) for x in rw] == [("bridge", "Compaq", False),
                                                                     ("bridge", "Compaq", True), ("bridge", None, True)]
    assert method.stats["rewrite_malformed"] == 2 and method.stats["bridge_missing"] == 1
    assert [r["usable"]["rewrite"] for r in o.trace["rounds"]] == [True, False, False]
    assert "oracle" not in o.trace and o.trace["llm"]["kgir_rewrite"]["calls"] == 3


def test_all_passages_is_the_full_method_under_the_all_rule(tiny_workspace, musique_q, cfg):
    small = dataclasses.replace(cfg, top_k=3)  # D_1 holds only part of the six passages: "new" and "all" differ
    ws = tiny_workspace(script())
    ws.cfg = small
    calls = logged(ws)
    build_method("kgir_all_passages").run(ws, [musique_q])
    ws2 = tiny_workspace(script())
    ws2.cfg = dataclasses.replace(small, reflection_passages="all")
    calls2 = logged(ws2)
    KGIRRAG().run(ws2, [musique_q])
    assert payloads(calls) == payloads(calls2)
    ws3 = tiny_workspace(script())
    ws3.cfg = small
    calls3 = logged(ws3)
    KGIRRAG().run(ws3, [musique_q])
    assert payloads(calls3) != payloads(calls)  # the rule changes what the reflection reads


# ---------------------------------------------------------------- the loader stores the gold chain
def _para(i, title, text):
    return {"idx": i, "title": title, "paragraph_text": text, "is_supporting": True}


def test_loader_stores_the_gold_chain(tmp_path):
    import json

    from kgir_lib.data import DataError, load_dataset, passage_id

    paras = [("Compaq", "Compaq was the top PC maker of 1994."), ("Hewlett-Packard", "HP merged with Compaq in 2002.")]
    rec = {"id": "2hop__1", "question": "Which company merged in 2002 with the top PC maker of 1994?",
           "answer": "Hewlett-Packard", "answer_aliases": ["HP"],
           "paragraphs": [_para(i, t, x) for i, (t, x) in enumerate(paras)],
           "question_decomposition": [
               {"question": "Which company was the top PC maker of 1994?", "answer": "Compaq", "paragraph_support_idx": 0},
               {"question": "Which company merged with #1 in 2002?", "answer": "Hewlett-Packard",
                "paragraph_support_idx": 1}]}
    folder = tmp_path / "mq"
    folder.mkdir()
    (folder / "mq_corpus.json").write_text(json.dumps([{"title": t, "text": x} for t, x in paras]))
    (folder / "mq.json").write_text(json.dumps([rec]))
    [q] = load_dataset("mq", tmp_path).questions
    p = [passage_id(t, x) for t, x in paras]
    assert q.gold_hops == (GoldHop("Which company was the top PC maker of 1994?", "Compaq", p[0], "Compaq"),
                           GoldHop("Which company merged with #1 in 2002?", "Hewlett-Packard", p[1], "Hewlett-Packard"))
    assert q.gold_bridges == (Bridge("Compaq", ("compaq",), (p[1],), hop=1),)
    assert ideal_rewrite(q.gold_hops) == IDEAL
    rec["question_decomposition"][1]["paragraph_support_idx"] = 7
    (folder / "mq.json").write_text(json.dumps([rec]))
    with pytest.raises(DataError, match=r"mq\.json: record 0: hop 2: 'paragraph_support_idx' 7"):
        load_dataset("mq", tmp_path)
    assert Question("q", "q?", ("a",), (), "d").gold_hops == () == Question("q", "q?", ("a",), (), "d").gold_bridges


@pytest.mark.skipif(not (SHARED_DATA / "musique_train").is_dir(), reason="no shared data")
def test_real_gold_chains():
    from kgir_lib.data import load_dataset

    mq = load_dataset("musique_train", SHARED_DATA).questions
    assert all(len(q.gold_hops) == q.hops and {h.pid for h in q.gold_hops} <= set(q.gold_pids) for q in mq)
    rewrites = [ideal_rewrite(q.gold_hops) for q in mq]
    assert all(r and r.endswith("?") and "#" not in r and ">>" not in r for r in rewrites)
    # every knowledge-base relation of the shipped MuSiQue samples is worded by its own template
    relations = {h.question.split(">>", 1)[1].strip().lower() for name in ("musique_train", "musique")
                 for q in load_dataset(name, SHARED_DATA).questions for h in q.gold_hops if ">>" in h.question}
    assert len(relations) == 44 and relations <= set(RELATION_QUESTIONS)
    # two ideal rewrites name the answer (an alias enters the retrieval query): not applied
    named = sorted(q.qid for q, r in zip(mq, rewrites) if names_answer(r, q.answers))
    assert named == ["2hop__317733_558469", "2hop__42998_81842"]
    assert sum(not oracle_entities(q) for q in mq) == 13  # no gold entity: the seeds oracle does not apply
    hp = load_dataset("hotpotqa", SHARED_DATA).questions
    assert all([h.pid for h in q.gold_hops] == list(q.gold_pids) and not any(h.question for h in q.gold_hops)
               for q in hp)
    assert sum(bool(q.gold_bridges) for q in hp) == 26 and all(ideal_rewrite(q.gold_hops) is None for q in hp)


def test_attribution_methods_come_from_the_profile():
    from kgir_lib.config import ConfigError, load_config
    from kgir_lib.registry import STUDY_METHODS, check_method_keys
    from kgir_lib.runner import validate

    assert {load_config(p).attribution_methods is None for p in ("sample", "ci")} == {True}  # every one
    local = load_config("local")  # the variants its committed log answers in full, on the datasets it names
    assert local.attribution_scope == ["musique_train", "hotpotqa"]
    keys = STUDY_METHODS if local.attribution_methods is None else local.attribution_methods
    table = pd.read_csv(PROJECT_ROOT / "results" / "local" / "tables" / "04_step_attribution.csv")
    assert sorted(zip(table["dataset"], table["key"])) == sorted(
        (d, k) for d in local.attribution_scope for k in ["kgir", *keys])
    assert STUDY_METHODS == [spec.key for spec in STUDY_VARIANTS.values()]
    check_method_keys([], "attribution_methods", STUDY_METHODS)  # none: allowed
    with pytest.raises(ConfigError, match="attribution_methods.*kgir"):
        check_method_keys(["kgir"], "attribution_methods", STUDY_METHODS)  # the paper's method is not a study variant
    with pytest.raises(ConfigError, match="attribution_methods"):
        validate("ci", {"attribution_methods": ["kgir_oracle_seedz"]})


def test_study_rounds_round_trip_through_the_round_record(tiny_workspace, musique_q):
    import json

    from kgir_lib.kgir.rounds import LoopRound

    for key in ("kgir_oracle_seeds_rewrite_next_hop", "kgir_bridge_rewrite", "kgir_oracle_context"):
        [o] = build_method(key).run(tiny_workspace(script(rewrite="Bridge: Compaq\nQuestion: " + IDEAL)), [musique_q])
        rounds = json.loads(json.dumps(o.trace))["rounds"]
        back = [json.loads(json.dumps(LoopRound.from_dict(r).to_dict())) for r in rounds]
        assert [{k: v for k, v in b.items() if k != "subgraph"} for b in back] == \
            [{k: v for k, v in r.items() if k != "subgraph"} for r in rounds], key


def test_the_gold_seed_rule_admits_every_part_beside_a_reference_named_or_not():
    """What the seeds oracle takes from a ``X >> relation`` hop, exactly: the whole subject when it has no #k
    reference, else every part between its references, stripped of stop words: a name or a common noun alike."""
    from kgir_lib.gold import GoldHop
    from kgir_lib.kgir.study import hop_entities

    def hop(text):
        return GoldHop(text, "", "", "")

    assert hop_entities(hop("Siege of Cassel >> location"), "") == ["Siege of Cassel"]
    assert hop_entities(hop("#1 at the 1920 Summer Olympics >> country"), "") == ["1920 Summer Olympics"]
    assert hop_entities(hop("Arrondissement of #1 >> country"), "") == ["Arrondissement"]  # a noun, admitted
    assert hop_entities(hop("#1 Courthouse >> located in"), "") == ["Courthouse"]
    assert hop_entities(hop("Representative of #1 , #2 >> country"), "") == ["Representative"]
    assert hop_entities(hop("#1 >> country"), "") == []
