"""KGIR-RAG's loop (Algorithm 2 + reflection) driven by a scripted LLM whose replies pick each branch."""
from __future__ import annotations

import dataclasses
import json

import pytest

from kgir_lib.data import Dataset, Question
from kgir_lib.kgir.steps import hand_to_reader
from kgir_lib.kgir.variants import KGIRRAG
from kgir_lib.kgir.rewrite import (FINAL_NOTE, evidence_block, format_history, parse_reflection, parse_rewrite,
                                   reflection_requests, rewrite_requests, verdict_request, with_verdict)
from kgir_lib.eval.mechanism.loop_tables import seed_match_rate, trace_row, usable_counts, usable_table
from kgir_lib.kgir.rounds import LoopRound
from kgir_lib.kgir.state import LoopState, ranked_list, reflection_passages
from kgir_lib.traces import read_traces, write_traces

Q_CASE = "Which company merged in 2002 with the top PC maker of 1994?"
PAPER_KINDS = ("full", "no_subgraph", "no_reflection", "no_rewrite", "forced")  # the variants KGIRRAG runs
REWRITE = "Which company did Compaq merge with in 2002?"


STAGE_OF_PROMPT = {"kgir_ner": "ner", "kgir_rewrite": "rewrite", "kgir_reflect": "reflect",
                   "kgir_reflect_verdict": "verdict", "reader": "reader"}


def stage_of(req) -> str:
    """Which stage a request belongs to, by the prompt file it was built from (not by its wording)."""
    if req.prompt not in STAGE_OF_PROMPT:
        raise AssertionError(f"unknown prompt: {req.prompt}")
    return STAGE_OF_PROMPT[req.prompt]


def last_question(req) -> str:
    return req.messages[-1][1].rsplit("Question:", 1)[-1].split("\n", 1)[0].strip()


def make_script(reflect, ner="Entities: Compaq; 1994", rewrite=None, verdict="Missing: the merger partner"):
    """Script: NER -> ``ner``, rewrite -> ``rewrite(req)`` (default REWRITE-ish), reflect -> ``reflect(req)``,
    verdict turn -> ``verdict``, reader -> 'HP (reader)'."""
    rewrite = rewrite or (lambda req: f"{REWRITE} [{last_question(req)[:12]}]")

    def script(req):
        kind = stage_of(req)
        if kind == "ner":
            return ner
        if kind == "rewrite":
            return rewrite(req)
        if kind == "reflect":
            return reflect(req)
        if kind == "verdict":
            return verdict
        return "Answer: HP (reader)"
    return script


class CallLog:
    """Wraps ``llm.generate`` to record (stage, number of requests) of every call."""

    def __init__(self, llm):
        self.calls = []
        inner = llm.generate

        def generate(requests, stage="default", desc=None):
            self.calls.append((stage, len(requests)))
            return inner(requests, stage=stage, desc=desc)
        llm.generate = generate


def run(ws, questions, **kw):
    log = CallLog(ws.llm)
    method = KGIRRAG(**kw)
    outs = method.run(ws, questions)
    return method, outs, log


def answer_at_once(req):
    return "Reasoning: Compaq merged with Hewlett-Packard.\nAnswer: Hewlett-Packard"


def never(req):
    return "Reasoning: not enough.\nMissing: the merger partner"


# ---------------------------------------------------------------- branches of the loop
def test_answer_at_once(tiny_workspace, tiny_dataset):
    """The reflection says "answer" in round 1: the shared reader words the answer from what the reflection
    read (the profile's kgir_answer_source "reader"); the reflection's own answer stays in the trace."""
    ws = tiny_workspace(make_script(answer_at_once))
    method, outs, log = run(ws, tiny_dataset.questions)
    assert log.calls == [("kgir_ner", 1), ("kgir_rewrite", 1), ("kgir_reflect", 1), ("kgir_final", 1)]
    o = outs[0]
    assert o.answer == "HP (reader)" and o.trace["answered_by"] == "reflection"
    assert (o.trace["answer_source"], o.trace["reflection_answer"]) == ("reader", "Hewlett-Packard")
    assert o.trace["iterations_used"] == 1
    assert o.usage.calls == 4
    assert o.trace["llm"].keys() == {"kgir_ner", "kgir_rewrite", "kgir_reflect", "kgir_final"}
    r = o.trace["rounds"][0]
    assert r["query"] == Q_CASE and r["rewrite"]["question"].startswith(REWRITE)
    assert r["reflection"]["answerable"] and not r["reflection"]["final"]
    # "Compaq" is not in the question: grounding keeps only "1994"
    assert r["subgraph"]["llm_entities"] == ["Compaq", "1994"] and r["subgraph"]["E_q"] == ["1994"]
    assert r["subgraph"]["G_Ans"] and not r["subgraph"]["used_fallback"]
    assert method.stats["forced_answers"] == 0 and method.stats["subgraphs"] == 1
    reader = [x for x in ws.llm.backend.seen if stage_of(x) == "reader"][0]
    context = reader.messages[-1][1]
    shown = [ws.dataset.corpus[p] for p in r["reflection_passages"]]
    assert all(f"({h}, {rel}, {tl})" in context for h, rel, tl, _, _ in r["subgraph"]["G_Ans"])
    assert all(f"{p.title}\n" in context for p in shown)
    assert o.trace["rounds"][0]["final"]["context_pids"] == r["reflection_passages"]


def test_new_passages_and_reader_context_by_hand(tiny_workspace, tiny_dataset, cfg):
    """top_k 3, one context passage. D_1 = [Hewlett-Packard, Apple, Compaq]; the rewrite about Dell and IBM's PC
    business retrieves D'_1 = [IBM, Dell, Hewlett-Packard]: new to the round are IBM and Dell, of which the first
    context_passages = 1 is kept (IBM). The reader reads the evidence first, then those passages: G_Ans's
    triples, then IBM; w/o subgraph, the best passage of D_1 (Hewlett-Packard) stands in for G_Ans, then IBM."""
    rewrite = "Who founded Dell, and which Chinese technology company did IBM sell its PC business to?"
    ws = tiny_workspace(make_script(answer_at_once, rewrite=lambda req: f"Rewritten question: {rewrite}"))
    ws = dataclasses.replace(ws, cfg=dataclasses.replace(cfg, context_passages=1))
    title = {p.title: p.pid for p in tiny_dataset.corpus.passages}
    _, outs, _ = run(ws, tiny_dataset.questions, top_k=3, max_iterations=1)
    r = outs[0].trace["rounds"][0]
    assert [p for p, _ in r["retrieved"]] == [title["Hewlett-Packard"], title["Apple"], title["Compaq"]]
    assert [p for p, _ in r["rewrite_retrieved"]] == [title["IBM"], title["Dell"], title["Hewlett-Packard"]]
    assert r["new_passages"] == r["reflection_passages"] == r["final"]["context_pids"] == [title["IBM"]]
    reader = [x for x in ws.llm.backend.seen if stage_of(x) == "reader"][-1].messages[-1][1]
    context = reader.rsplit("Passages:\n", 1)[1]
    assert context.startswith("(Hewlett-Packard, merged in, 2002)\n") and "\n\nIBM\nIBM sold" in context
    _, outs, _ = run(ws, tiny_dataset.questions, top_k=3, max_iterations=1, variant="no_subgraph")
    r = outs[0].trace["rounds"][0]
    assert r["final"]["context_pids"] == [title["Hewlett-Packard"], title["IBM"]]
    reader = [x for x in ws.llm.backend.seen if stage_of(x) == "reader"][-1].messages[-1][1]
    context = reader.rsplit("Passages:\n", 1)[1]
    assert context.startswith("Hewlett-Packard\nIn 2002 Hewlett-Packard merged")
    assert context.count("In 2002 Hewlett-Packard merged") == 1  # the stand-in passages are read once, as passages


def test_answer_source_reflection_keeps_the_reflections_answer(tiny_workspace, tiny_dataset, cfg):
    ws = tiny_workspace(make_script(answer_at_once))
    ws.cfg = dataclasses.replace(cfg, kgir_answer_source="reflection")
    _, outs, log = run(ws, tiny_dataset.questions)
    assert log.calls == [("kgir_ner", 1), ("kgir_rewrite", 1), ("kgir_reflect", 1)]
    assert outs[0].answer == "Hewlett-Packard" and outs[0].trace["answer_source"] == "reflection"


def test_missing_then_answer(tiny_workspace, tiny_dataset):
    def reflect(req):
        return answer_at_once(req) if "Earlier rewrite 1" in req.messages[-1][1] else never(req)
    ws = tiny_workspace(make_script(reflect))
    _, outs, log = run(ws, tiny_dataset.questions, max_iterations=3)
    assert log.calls == [("kgir_ner", 1), ("kgir_rewrite", 1), ("kgir_reflect", 1)] * 2 + [("kgir_final", 1)]
    t = outs[0].trace
    assert t["iterations_used"] == 2 and t["answered_by"] == "reflection" and outs[0].answer == "HP (reader)"
    assert t["reflection_answer"] == "Hewlett-Packard"
    q1 = t["rounds"][0]["rewrite"]["question"]
    assert t["rounds"][1]["query"] == q1  # round 2 retrieves and builds its subgraph with the rewrite
    assert t["history"] == [{"rewrite": q1, "missing": "the merger partner"}]
    assert outs[0].usage.calls == 7


def test_never_answers_until_the_cap_then_forced(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(make_script(never))
    method, outs, log = run(ws, tiny_dataset.questions, max_iterations=3)
    assert log.calls == [("kgir_ner", 1), ("kgir_rewrite", 1), ("kgir_reflect", 1)] * 3 + [("kgir_final", 1)]
    t = outs[0].trace
    assert t["iterations_used"] == 3 and t["answered_by"] == "forced_reader"
    assert outs[0].answer == "HP (reader)"
    assert [r["reflection"]["final"] for r in t["rounds"]] == [False, False, True]
    reflects = [r for r in ws.llm.backend.seen if stage_of(r) == "reflect"]
    assert [FINAL_NOTE.strip() in r.messages[-1][1] for r in reflects] == [False, False, True]
    assert t["rounds"][-1]["final"]["forced"] and method.stats["forced_answers"] == 1
    assert len(t["history"]) == 2


def test_max_iterations_defaults_to_profile(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(make_script(never))
    _, outs, _ = run(ws, tiny_dataset.questions)
    assert outs[0].trace["iterations_used"] == ws.cfg.max_iterations == 2


def test_stages_batched_across_open_questions(tiny_workspace, tiny_dataset):
    """Three questions: A answers at once, B in round 2, C never: one generate call per stage per round."""
    base = tiny_dataset.questions[0]
    qs = [Question(f"q{x}", f"{base.question} ({x})", base.answers, base.gold_pids, "tiny", 2) for x in "ABC"]

    def reflect(req):
        user = req.messages[-1][1]
        if "(A)" in user or ("(B)" in user and "Earlier rewrite 1" in user):
            return answer_at_once(req)
        return never(req)

    def script(req):
        if stage_of(req) == "rewrite":  # keep the question's tag in the rewrite
            return f"{REWRITE} {last_question(req)[-3:]}"
        return make_script(reflect)(req)
    ws = tiny_workspace(script)
    _, outs, log = run(ws, qs, max_iterations=3)
    assert log.calls == [("kgir_ner", 3), ("kgir_rewrite", 3), ("kgir_reflect", 3),
                         ("kgir_ner", 2), ("kgir_rewrite", 2), ("kgir_reflect", 2),
                         ("kgir_ner", 1), ("kgir_rewrite", 1), ("kgir_reflect", 1),
                         ("kgir_final", 3)]
    assert [o.trace["iterations_used"] for o in outs] == [1, 2, 3]
    assert [o.trace["answered_by"] for o in outs] == ["reflection", "reflection", "forced_reader"]
    assert [o.usage.calls for o in outs] == [4, 7, 10]
    assert sum(o.usage.calls for o in outs) == ws.llm.usage.total().calls


# ---------------------------------------------------------------- ablations (paper Table 7)
def test_no_subgraph_rewrites_from_passages(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(make_script(never))
    _, outs, log = run(ws, tiny_dataset.questions, variant="no_subgraph", max_iterations=2)
    assert log.calls == [("kgir_rewrite", 1), ("kgir_reflect", 1)] * 2 + [("kgir_final", 1)]
    t = outs[0].trace
    rewrites = [r for r in ws.llm.backend.seen if stage_of(r) == "rewrite"]
    for req, rnd in zip(rewrites, t["rounds"]):
        user = req.messages[-1][1]
        assert user.startswith(rnd["evidence"]) and "Triples:" not in user
        top = ws.dataset.corpus[rnd["retrieved"][0][0]]
        assert rnd["evidence"].startswith(f"Passages:\n{top.title}\n{top.text}")
    assert "subgraph" not in t["rounds"][0]
    d2 = [[p for p, _ in r["rewrite_retrieved"]] for r in t["rounds"]]
    assert outs[0].ranked_pids == ranked_list({}, d2, [p for p, _ in t["rounds"][0]["retrieved"]])


def test_no_reflection_one_rewrite_one_retrieval(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(make_script(answer_at_once))
    _, outs, log = run(ws, tiny_dataset.questions, variant="no_reflection", max_iterations=3)
    assert log.calls == [("kgir_ner", 1), ("kgir_rewrite", 1), ("kgir_final", 1)]
    t = outs[0].trace
    assert t["answered_by"] == "reader" and outs[0].answer == "HP (reader)" and t["iterations_used"] == 1
    reader = [r for r in ws.llm.backend.seen if stage_of(r) == "reader"][0]
    # the reader gets the original question, G_Ans_1 and the top passages of D'_1
    assert last_question(reader) == Q_CASE
    user = reader.messages[-1][1]
    kept = t["rounds"][0]["subgraph"]["G_Ans"]
    assert kept and all(f"({h}, {r}, {tl})" in user for h, r, tl, _, _ in kept)
    top = [p for p, _ in t["rounds"][0]["rewrite_retrieved"]][:ws.cfg.context_passages]
    assert all(f"{ws.dataset.corpus[p].title}\n" in user for p in top)
    others = [p for p, _ in t["rounds"][0]["rewrite_retrieved"]][ws.cfg.context_passages:]
    assert not any(f"Passages:\n{ws.dataset.corpus[p].title}\n" in user for p in others)
    assert "rewrite_retrieved" in t["rounds"][0] and "reflection" not in t["rounds"][0]


def test_no_rewrite_answers_from_first_subgraph(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(make_script(answer_at_once))
    _, outs, log = run(ws, tiny_dataset.questions, variant="no_rewrite")
    assert log.calls == [("kgir_ner", 1), ("kgir_final", 1)]
    t = outs[0].trace
    reader = [r for r in ws.llm.backend.seen if stage_of(r) == "reader"][0]
    assert last_question(reader) == Q_CASE
    kept = t["rounds"][0]["subgraph"]["G_Ans"]
    assert kept and all(f"({h}, {r}, {tl})" in reader.messages[-1][1] for h, r, tl, _, _ in kept)
    assert "rewrite" not in t["rounds"][0]


def test_names_and_validation():
    assert {KGIRRAG(v).name for v in PAPER_KINDS} == {"KGIR-RAG", "KGIR-RAG w/o subgraph",
                                                   "KGIR-RAG w/o reflection", "KGIR-RAG w/o rewrite",
                                                   "KGIR-RAG (forced rounds)"}
    with pytest.raises(ValueError, match="variant"):
        KGIRRAG("no_graph")
    with pytest.raises(ValueError, match="max_iterations"):
        KGIRRAG(max_iterations=0)
    with pytest.raises(ValueError, match="ngram_threshold"):
        KGIRRAG(ngram_threshold=2.0)
    with pytest.raises(ValueError, match="edge weighting"):
        KGIRRAG(edge_weight="pagerank")


# ---------------------------------------------------------------- malformed output, ranked list, traces
def test_malformed_replies_are_counted_not_fatal(tiny_workspace, tiny_dataset):
    def script(req):
        return {"ner": "???", "rewrite": "", "reflect": "I think so", "verdict": "Yes.", "reader": ""}[stage_of(req)]
    ws = tiny_workspace(script)
    method, outs, _ = run(ws, tiny_dataset.questions, max_iterations=2)
    t = outs[0].trace
    assert method.stats["rewrite_malformed"] == 2 and method.stats["reflection_malformed"] == 2
    assert method.stats["verdict_turns"] == 2 and method.stats["verdict_turns_malformed"] == 2
    assert t["rounds"][0]["reflection"]["verdict_raw"] == "Yes."
    assert method.stats["ner_fallbacks"] == 2
    assert t["rounds"][0]["rewrite"]["malformed"] and t["rounds"][0]["rewrite"]["question"] == Q_CASE
    assert t["rounds"][1]["query"] == Q_CASE  # a malformed rewrite keeps the question
    assert t["rounds"][0]["reflection"]["malformed"] and t["answered_by"] == "forced_reader"
    assert outs[0].answer == ""


def test_a_reply_without_verdict_gets_one_verdict_turn(tiny_workspace, tiny_dataset):
    """The format repair: a reasoning-only reflection is followed by the verdict turn, whose answer counts."""
    reasoning = "Reasoning: Compaq merged with Hewlett-Packard in 2002."
    ws = tiny_workspace(make_script(lambda req: reasoning, verdict="Answer: Hewlett-Packard"))
    method, outs, log = run(ws, tiny_dataset.questions, max_iterations=3)
    t = outs[0].trace
    assert ("kgir_reflect_verdict", 1) in log.calls and outs[0].trace["reflection_answer"] == "Hewlett-Packard"
    assert t["answered_by"] == "reflection" and t["iterations_used"] == 1
    ref = t["rounds"][0]["reflection"]
    assert (ref["raw"], ref["verdict_raw"], ref["malformed"]) == (reasoning, "Answer: Hewlett-Packard", False)
    assert ref["reasoning"] == "Compaq merged with Hewlett-Packard in 2002."
    assert t["rounds"][0]["usable"]["reflect"] is False and t["rounds"][0]["usable"]["reflect_verdict"] is True
    assert method.stats["verdict_turns"] == 1 and method.stats["verdict_turns_malformed"] == 0


def test_verdict_request_continues_the_conversation():
    first = reflection_requests(["q?"], ["e"], [[]], ["p"], final=[False])[0]
    req = verdict_request(first, "  Reasoning: e says nothing.\n", final=False)
    assert req.messages[:len(first.messages)] == first.messages
    assert req.messages[len(first.messages)] == ("assistant", "Reasoning: e says nothing.")
    role, ask = req.messages[-1]
    assert role == "user" and '"Answer: <short answer>"' in ask and '"Missing: <the fact still needed>"' in ask
    assert not ask.endswith(FINAL_NOTE.rstrip())
    assert verdict_request(first, "", final=True).messages[-1][1].endswith(FINAL_NOTE.rstrip())
    assert verdict_request(first, "", final=True).messages[-2] == ("assistant", "(no reply)")
    assert (req.max_tokens, req.stop, req.prompt) == (32, ("\n\n",), "kgir_reflect_verdict")
    base = parse_reflection("Reasoning: the merger was in 2002.")
    assert base.malformed
    fixed = with_verdict(base, "Answer: HP.")
    assert (fixed.answerable, fixed.answer, fixed.reasoning, fixed.malformed) == (True, "HP", base.reasoning, False)
    assert with_verdict(base, "Missing: the partner").missing == "the partner"
    assert with_verdict(base, "I do not know") is base


def test_ranked_list_known_answer():
    """The ranked list: G_Ans passages by best weight, then D'_1..D'_T interleaved by round, then D_1."""
    evidence = {"e1": 0.2, "e2": 0.9}
    rewrites = [["a1", "a2", "e1", "a3"], ["b1", "a1", "b2"]]
    first = ["d1", "a2", "d2", "b2"]
    assert ranked_list(evidence, rewrites, first) == ["e2", "e1", "a1", "b1", "a2", "b2", "a3", "d1", "d2"]
    # the rewrite reaches the top 5 even when D_1 alone would fill it (the old list: e2, e1, d1, a2, d2, ...)
    assert "b1" in ranked_list(evidence, rewrites, first)[:5]
    assert ranked_list({}, [], first) == first


def ranked_list_inputs(trace: dict) -> tuple:
    """From a trace, what ranked_list reads: each passage's best G_Ans edge weight over the rounds, and each
    round's D'_t ids."""
    best: dict = {}
    for r in trace["rounds"]:
        for _h, _rel, _tail, pid, w in r["subgraph"]["G_Ans"]:
            best[pid] = max(best.get(pid, -1e9), w)
    return best, [[p for p, _ in r["rewrite_retrieved"]] for r in trace["rounds"]]


def test_ranked_list_in_the_loop(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(make_script(never))
    _, outs, _ = run(ws, tiny_dataset.questions, max_iterations=2)
    t = outs[0].trace
    best, d2 = ranked_list_inputs(t)
    assert outs[0].ranked_pids == ranked_list(best, d2, [p for p, _ in t["rounds"][0]["retrieved"]])
    assert set(outs[0].ranked_pids[:2]) == set(tiny_dataset.questions[0].gold_pids)


def test_reflection_passages_rules():
    """"new" (§2.4): only the passages of D'_t not in D_t, the top of D'_t only when none is new; "all": D'_t."""
    assert reflection_passages(["a", "b", "c"], ["c", "x", "a", "y"], 3) == ["x", "y"]
    assert reflection_passages(["a", "b"], ["a", "b"], 2) == ["a", "b"]  # nothing new: never blind
    assert reflection_passages(["a"], ["x", "y", "z"], 2) == ["x", "y"]
    assert reflection_passages(["a", "b", "c"], ["c", "x", "a", "y"], 3, "all") == ["c", "x", "a"]
    with pytest.raises(ValueError, match="reflection_passages"):
        reflection_passages(["a"], ["b"], 1, "some")


def test_empty_subgraph_rewrites_from_passages_and_reflection_sees_them(tiny_workspace, tiny_dataset):
    """NER finds nothing that matches (G_Ans empty) and the rewrite returns the question: the rewrite and the
    reflection see the best passages of D_t, never '(none)'."""
    script = make_script(never, ner='{"named_entities": ["Mona Lisa"]}',
                         rewrite=lambda req: f"Rewritten question: {last_question(req)}")
    ws = tiny_workspace(script)
    q = Question("q2", "Who painted the Mona Lisa?", ("Leonardo",), (), "tiny", 1)
    method, outs, _ = run(ws, [q], max_iterations=1)
    r = outs[0].trace["rounds"][0]
    assert r["subgraph"]["G_Ans"] == [] and r["evidence_source"] == "passages"
    assert r["evidence"].startswith("Passages:\n") and method.stats["empty_subgraph_rounds"] == 1
    assert r["rewrite"]["unchanged"] and r["new_passages"] == []
    assert r["reflection_passages"] == [p for p, _ in r["rewrite_retrieved"]][:ws.cfg.context_passages]
    reflect = [x for x in ws.llm.backend.seen if stage_of(x) == "reflect"][0]
    top = ws.dataset.corpus[r["reflection_passages"][0]]
    assert f"{top.title}\n{top.text}" in reflect.messages[-1][1]
    off = KGIRRAG(passages_when_empty=False)
    outs2 = off.run(tiny_workspace(script), [q])
    assert outs2[0].trace["rounds"][0]["evidence"] == "Triples:\n(none)"


def test_usable_outputs_and_seed_rate_in_traces(tiny_workspace, tiny_dataset):
    """Per-stage usable counts and the seed-match rate come from the traces."""
    def script(req):
        return {"ner": '{"named_entities": ["PC maker", "1994"]}', "rewrite": "Rewritten question: " + REWRITE,
                "reflect": "Reasoning: no.", "verdict": "Missing: the partner", "reader": "Answer: HP"}[stage_of(req)]
    ws = tiny_workspace(script)
    _, outs, _ = run(ws, tiny_dataset.questions, max_iterations=2)
    counts = usable_counts([o.trace for o in outs])
    # round 2's query is the rewrite, which names neither "PC maker" nor "1994": grounded away, not usable
    assert counts["ner"] == {"outputs": 2, "usable": 1, "truncated": 0}
    assert counts["rewrite"]["usable"] == 2 and counts["reflect"] == {"outputs": 2, "usable": 0, "truncated": 0}
    # the scripted verdict turn names the missing fact both times
    assert counts["reflect_verdict"] == {"outputs": 2, "usable": 2, "truncated": 0}
    assert counts["reader"] == {"outputs": 1, "usable": 1, "truncated": 0}
    assert seed_match_rate([o.trace for o in outs]) == 1.0
    table = usable_table(outs)
    assert table.loc["reflect", "usable %"] == 0.0 and table.loc["ner", "usable %"] == 50.0
    assert list(table.index) == ["ner", "rewrite", "reflect", "reflect_verdict", "reflect, after verdict turn",
                                 "reader"]
    assert table.loc["reflect, after verdict turn", ["outputs", "usable"]].tolist() == [2, 2]
    row = trace_row(outs[0].trace)
    assert row["rounds_with_seed"] == 2 and row["subgraph_rounds"] == 2


def test_traces_are_json_and_roundtrip(tiny_workspace, tiny_dataset, tmp_path):
    ws = tiny_workspace(make_script(never))
    _, outs, _ = run(ws, tiny_dataset.questions, max_iterations=2)
    path = write_traces(outs, tmp_path / "traces" / "kgir" / "tiny.trace.jsonl")
    back = read_traces(path)
    assert back[0]["trace"]["rounds"][0]["subgraph"]["seeds"]
    assert back[0]["usage"]["calls"] == 7
    assert json.loads(json.dumps(outs[0].trace)) == back[0]["trace"]
    for r in back[0]["trace"]["rounds"]:
        assert {"iteration", "query", "retrieved", "subgraph", "evidence", "rewrite", "rewrite_retrieved",
                "new_passages", "reflection"} <= set(r)


def test_reruns_hit_the_cache_with_identical_outputs(tiny_workspace, tiny_dataset):
    ws = tiny_workspace(make_script(never))
    _, first, _ = run(ws, tiny_dataset.questions, max_iterations=2)
    _, second, _ = run(ws, tiny_dataset.questions, max_iterations=2)
    assert second[0].usage.cache_hits == second[0].usage.calls == 7
    assert second[0].answer == first[0].answer and second[0].ranked_pids == first[0].ranked_pids


# ---------------------------------------------------------------- prompt builders and parsers
def test_parse_rewrite():
    assert parse_rewrite(" What is the length of Mount Panorama Circuit?\nmore") == \
        "What is the length of Mount Panorama Circuit?"
    assert parse_rewrite("Rewritten question: Who founded Dell") == "Who founded Dell?"
    assert parse_rewrite('"Which company did Compaq merge with?"') == "Which company did Compaq merge with?"
    assert parse_rewrite("") is None and parse_rewrite(None) is None and parse_rewrite("??") is None
    assert parse_rewrite("x" * 400) is None
    # SmolLM2 habits: copying a triple, echoing the question before the marked rewrite, a statement
    assert parse_rewrite("(Seattle, experienced, snowfall)\n(Seattle, receives, rain)") is None
    assert parse_rewrite("Question: What country was the author of Brand a citizen of?\n"
                         "Rewritten question: What is the country of Henrik Ibsen?") == "What is the country of Henrik Ibsen?"
    assert parse_rewrite("Harris W. Fawell is a graduate of North Central College.") is None
    assert parse_rewrite("(a, b, c)\nWhere was Henrik Ibsen born?") == "Where was Henrik Ibsen born?"
    assert parse_rewrite("What is the school in the historical school in the historical school in the historical "
                         "school?") is None


@pytest.mark.parametrize("text, answerable, answer, missing, malformed", [
    ("The author is Harper Lee.\nAnswer: Alabama.", True, "Alabama", None, False),
    ("Reasoning: no airport given.\nMissing: airports in Alabama", False, None, "airports in Alabama", False),
    ("Answer: unknown", False, None, "unknown", False),
    ("Answer: not enough information", False, None, "not enough information", False),
    ("Answer:", False, None, None, False),
    ("Missing: x\nAnswer: y", False, None, "x", False),
    ("The answer is: Africa.\n\nThe answer is: Africa.", True, "Africa", None, False),
    ("Harper Lee wrote it.\nMissing information: airports", False, None, "airports", False),
    ("The typical snowfall is 12 inches.", False, None, None, True),
    ("I have no idea", False, None, None, True),
    ("", False, None, None, True),
    (None, False, None, None, True),
])
def test_parse_reflection(text, answerable, answer, missing, malformed):
    r = parse_reflection(text)
    assert (r.answerable, r.answer, r.missing, r.malformed) == (answerable, answer, missing, malformed)


def test_parse_reflection_keeps_reasoning():
    r = parse_reflection(" Harper Lee wrote it.\nHer hometown is Alabama.\nAnswer: Alabama")
    assert r.reasoning == "Harper Lee wrote it. Her hometown is Alabama."


REPLY_CUE = 'Reply with a "Reasoning:" line, then an "Answer:" or a "Missing:" line.'  # prompt v5


def test_request_builders():
    hist = [{"rewrite": "Which company did Compaq merge with?", "missing": "the year"}]
    assert format_history([]) == ""
    assert format_history(hist, "orig?") == ("Original question: orig?\nEarlier rewrite 1: Which company did Compaq "
                                             "merge with?\nStill missing after it: the year\n")
    rw = rewrite_requests(["q?"], [evidence_block("(A, r, B)")], [hist])[0]
    assert [r for r, _ in rw.messages] == ["system", "user", "assistant", "user"]
    assert rw.messages[-1][1] == ("Triples:\n(A, r, B)\nEarlier rewrite 1: Which company did Compaq merge with?\n"
                                  "Still missing after it: the year\nQuestion: q?")
    # the paper's Fig. 4 example, as an earlier turn
    assert rw.messages[2] == ("assistant", "Rewritten question: What is the length of Mount Panorama Circuit?")
    assert parse_rewrite(rw.messages[2][1]) == "What is the length of Mount Panorama Circuit?"
    rf = reflection_requests(["q2?"], [evidence_block(passages_text="P\ntext\n\nP2\ntext2")], [[]], ["(none)"],
                             final=[True], originals=["q?"])[0]
    assert [r for r, _ in rf.messages] == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert rf.messages[-1][1] == ("Passages:\nP\ntext\n\nP2\ntext2\nRetrieved passages:\n(none)\nOriginal question: q?\n"
                                  "Question: q2?\n" + REPLY_CUE + "\n" + FINAL_NOTE.rstrip())
    # the paper's Fig. 5 examples: one answerable, one naming the missing fact; both parse
    ex1, ex2 = parse_reflection(rf.messages[2][1]), parse_reflection(rf.messages[6][1])
    assert not parse_reflection(rf.messages[4][1]).answerable  # the MuSiQue-train example: a hop is missing
    assert (ex1.answerable, ex1.answer) == (True, "Alabama")
    assert (ex2.answerable, ex2.missing) == (False, "airports in Alabama")
    assert "To Kill a Mockingbird" in rf.messages[5][1]
    not_final = reflection_requests(["q?"], ["e"], [[]], ["p"], final=[False])[0]
    assert not_final.messages[-1][1].endswith("Question: q?\n" + REPLY_CUE)
    assert all(text.endswith(REPLY_CUE) for role, text in rf.messages[1:-1] if role == "user")
    with pytest.raises(ValueError):
        rewrite_requests(["a"], [], [])
    with pytest.raises(ValueError):
        reflection_requests(["a"], ["e"], [[]], ["p"], final=[])


def test_degenerate_detects_loops():
    from kgir_lib.kgir.rewrite import degenerate

    assert degenerate("the school in the school in the school in the school")
    assert not degenerate("What is the length of Mount Panorama Circuit?")


# ---------------------------------------------------------------- one round record
def test_round_record_round_trips_and_reads_old_traces(tiny_workspace, tiny_dataset):
    from kgir_lib.kgir.rounds import LoopRound, trace_rounds

    ws = tiny_workspace(make_script(never))
    for variant in PAPER_KINDS:
        [o] = KGIRRAG(variant=variant, max_iterations=2).run(ws, tiny_dataset.questions)
        rounds = json.loads(json.dumps(o.trace))["rounds"]
        back = [json.loads(json.dumps(LoopRound.from_dict(r).to_dict())) for r in rounds]
        same = ("G_Ans", "pruned", "seeds", "E_q", "llm_entities", "matches", "used_fallback")  # the trace keeps
        for r, b in zip(rounds, back):  # G_Ans and the pruned triples, not all of G_q / G_tmp
            assert {k: v for k, v in b.items() if k != "subgraph"} == {k: v for k, v in r.items() if k != "subgraph"}
            assert ("subgraph" in b) == ("subgraph" in r), variant
            assert {k: b["subgraph"][k] for k in same} == {k: r["subgraph"][k] for k in same} if "subgraph" in r else True
    old = {"iteration": 1, "query": "q?", "retrieved": [["p1", 0.5]],  # a round written before usable/truncated,
           "subgraph": {"G_Ans": [["A", "r", "B", "p1", 0.9]], "pruned": [], "seeds": ["A"]},  # P_t, evidence_source
           "rewrite": {"raw": "x", "question": "q2?", "malformed": False},
           "rewrite_retrieved": [["p2", 0.4]], "new_passages": ["p2"],
           "reflection": {"answerable": False, "missing": "m", "reasoning": "r"}}
    [r] = trace_rounds({"trace": {"rounds": [old]}})
    assert (r.rewrite, r.seeds, [t.head for t in r.G_Ans], r.verdict(), r.reflection_passages) == \
        ("q2?", ["A"], ["A"], "missing", ["p2"])
    assert r.usable == {} and r.final is None and r.evidence_source is None


def test_every_method_inherits_the_base_with_class_level_names():
    from kgir_lib.methods.base import MethodBase
    from kgir_lib.registry import LABELS, METHODS, build_method
    from kgir_lib.baselines.kg2rag import KG2RAG

    for key in METHODS:
        m = build_method(key)
        assert isinstance(m, MethodBase) and (m.key, m.name) == (key, LABELS[key])
        assert "name" not in m.params() and "key" not in m.params()
    assert KGIRRAG.name is not None and isinstance(vars(KG2RAG)["name"], property)  # per variant, from a class table


# ---------------------------------------------------------------- profile settings and the forced-rounds study
def test_no_rewrite_with_empty_subgraph_reads_the_same_stand_in_passages(tiny_workspace):
    """w/o rewrite with an empty G_Ans reads the best passages of D_1, as the full method's rewrite and
    reflection do, not "(none)"."""
    script = make_script(never, ner='{"named_entities": ["Mona Lisa"]}')
    q = Question("q2", "Who painted the Mona Lisa?", ("Leonardo",), (), "tiny", 1)
    ws = tiny_workspace(script)
    _, outs, _ = run(ws, [q], variant="no_rewrite")
    r = outs[0].trace["rounds"][0]
    n = ws.cfg.context_passages
    assert r["evidence_source"] == "passages" and r["evidence_pids"] == [p for p, _ in r["retrieved"][:n]]
    reader = [x for x in ws.llm.backend.seen if stage_of(x) == "reader"][0]
    top = ws.dataset.corpus[r["evidence_pids"][0]]
    assert f"{top.title}\n{top.text}" in reader.messages[-1][1] and "(none)" not in reader.messages[-1][1]
    assert r["final"]["context_pids"] == r["evidence_pids"]


def test_evidence_cap_is_the_profiles_and_its_binding_is_counted(tiny_workspace, tiny_dataset, cfg):
    ws = tiny_workspace(make_script(answer_at_once))
    ws.cfg = dataclasses.replace(cfg, max_evidence_triples=1)
    method, outs, _ = run(ws, tiny_dataset.questions)
    r = outs[0].trace["rounds"][0]
    assert r["evidence_triples"] == len({(h, rel, t) for h, rel, t, _, _ in r["subgraph"]["G_Ans"]}) > 1
    assert r["evidence_shown"] == 1 and sum(ln.startswith("(") for ln in r["evidence"].splitlines()) == 1
    assert method.stats["evidence_capped_rounds"] == 1
    ws2 = tiny_workspace(make_script(answer_at_once))
    ws2.cfg = dataclasses.replace(cfg, max_evidence_triples=None)
    method2, outs2, _ = run(ws2, tiny_dataset.questions)
    r2 = outs2[0].trace["rounds"][0]
    assert r2["evidence_shown"] == r2["evidence_triples"] and method2.stats["evidence_capped_rounds"] == 0


def test_reflect_prompt_is_the_profiles(tiny_workspace, tiny_dataset, cfg):
    ws = tiny_workspace(make_script(answer_at_once))
    ws.cfg = dataclasses.replace(cfg, reflect_prompt="kgir_reflect_paper")
    STAGE_OF_PROMPT["kgir_reflect_paper"] = "reflect"
    try:
        run(ws, tiny_dataset.questions)
    finally:
        del STAGE_OF_PROMPT["kgir_reflect_paper"]
    assert [x.prompt for x in ws.llm.backend.seen if x.prompt.startswith("kgir_reflect")] == ["kgir_reflect_paper"]


def test_forced_rounds_ignore_the_stop_and_answer_every_round(tiny_workspace, tiny_dataset):
    """The forced-rounds study: the reflection answers at once, yet all rounds run, and the reader answers at
    each (one batched call per round); the method's answer is the last round's."""
    answers = iter(["A1", "A2", "A3"])

    def script(req):
        return f"Answer: {next(answers)}" if stage_of(req) == "reader" else make_script(answer_at_once)(req)
    ws = tiny_workspace(script)
    method, outs, log = run(ws, tiny_dataset.questions, variant="forced", max_iterations=3)
    assert log.calls == [("kgir_ner", 1), ("kgir_rewrite", 1), ("kgir_reflect", 1), ("kgir_final", 1)] * 3
    t = outs[0].trace
    # (round 3 reads the same context as round 2 here, so its reader request is a cache hit: "A2" again)
    assert t["round_answers"] == [r["final"]["answer"] for r in t["rounds"]] == ["A1", "A2", "A2"]
    assert outs[0].answer == "A2" and t["answered_by"] == "reader"
    assert all(r["reflection"]["answerable"] for r in t["rounds"]) and len(t["history"]) == 2
    assert t["rounds"][1]["query"] == t["rounds"][0]["rewrite"]["question"]
    assert method.key == "kgir_forced" and method.stats["forced_answers"] == 0


def test_trace_row_counts_the_rounds_where_the_evidence_cap_binds(tiny_workspace, tiny_dataset, cfg):
    ws = tiny_workspace(make_script(never))
    ws.cfg = dataclasses.replace(cfg, max_evidence_triples=1)
    method, outs, _ = run(ws, tiny_dataset.questions, max_iterations=2)
    row = trace_row(outs[0].trace)
    assert row["evidence_capped_rounds"] == method.stats["evidence_capped_rounds"] == 2


# ---------------------------------------------------------------- what the loop records: stats, truncation, stages
def test_stats_and_truncation_flags_by_hand(tiny_workspace, tiny_dataset, cfg):
    """One round, every reply usable: no malformed reply, no fallback, one subgraph with a seed. The rewrite's
    budget is 3 tokens and its reply longer, so the rewrite (and only it) is recorded as truncated."""
    ws = tiny_workspace(make_script(answer_at_once))
    ws = dataclasses.replace(ws, cfg=dataclasses.replace(cfg, max_tokens_rewrite=3))
    method, outs, _ = run(ws, tiny_dataset.questions, max_iterations=1)
    r = outs[0].trace["rounds"][0]
    assert r["truncated"] == {"ner": False, "rewrite": True, "reflect": False, "reader": False}
    assert {k: method.stats[k] for k in ("subgraphs", "rounds_with_seed", "ner_fallbacks", "rewrite_malformed",
                                         "reflection_malformed")} == {"subgraphs": 1, "rounds_with_seed": 1,
                                                                      "ner_fallbacks": 0, "rewrite_malformed": 0,
                                                                      "reflection_malformed": 0}
    script = make_script(never, ner='{"named_entities": ["Mona Lisa"]}')
    q = Question("q2", "Who painted the Mona Lisa?", ("Leonardo",), (), "tiny", 1)
    method, _, _ = run(tiny_workspace(script), [q], max_iterations=1)
    assert (method.stats["ner_fallbacks"], method.stats["rounds_with_seed"]) == (1, 0)


def test_the_verdict_turn_continues_the_reflection_with_its_budget(tiny_workspace, tiny_dataset, cfg):
    """The verdict turn quotes the first reply, carries the last round's note in the last round, has the
    verdict budget, is accounted as its own stage and recorded with the reflection as final."""
    reasoning = "Reasoning: Compaq merged with Hewlett-Packard in 2002."
    ws = tiny_workspace(make_script(lambda req: reasoning, verdict="Answer: Hewlett-Packard"))
    ws = dataclasses.replace(ws, cfg=dataclasses.replace(cfg, max_tokens_verdict=7, max_tokens_reflect=150))
    _, outs, _ = run(ws, tiny_dataset.questions, max_iterations=1)
    [reflect] = [x for x in ws.llm.backend.seen if stage_of(x) == "reflect"]
    [turn] = [x for x in ws.llm.backend.seen if stage_of(x) == "verdict"]
    assert reflect.max_tokens == 150 and turn.max_tokens == 7
    assert turn.messages[:len(reflect.messages)] == reflect.messages
    assert turn.messages[len(reflect.messages)] == ("assistant", reasoning)
    assert FINAL_NOTE.strip() in turn.messages[-1][1]
    t = outs[0].trace
    assert t["llm"]["kgir_reflect_verdict"]["calls"] == 1 and t["rounds"][0]["reflection"]["final"] is True
    assert t["rounds"][0]["truncated"]["reflect_verdict"] is False
    assert f"Original question: {Q_CASE}" in reflect.messages[-1][1]  # the reflection reads the rewritten one


def test_the_method_s_threshold_and_edge_weight_reach_algorithm_1(tiny_workspace):
    """The profile's threshold is 0.7; the method's 0.5 lets "Dell" also match "Michael Dell" (Jaccard 1/2 of
    content words), and its edge weight "passage" is the one the subgraph records."""
    q = Question("q3", "Who founded Dell?", ("Michael Dell",), (), "tiny", 1)
    script = make_script(answer_at_once, ner='{"named_entities": ["Dell"]}')
    ws = tiny_workspace(script)
    assert ws.cfg.ngram_threshold == 0.7
    _, outs, _ = run(ws, [q], max_iterations=1)
    assert outs[0].trace["rounds"][0]["subgraph"]["seeds"] == ["Dell"]
    _, outs, _ = run(tiny_workspace(script), [q], max_iterations=1, ngram_threshold=0.5, edge_weight="passage")
    sub = outs[0].trace["rounds"][0]["subgraph"]
    assert sub["seeds"] == ["Dell", "Michael Dell"] and sub["weighting"] == "passage"


def test_reflection_passages_rule_is_the_profile_s(tiny_workspace, tiny_dataset, cfg):
    """With the rule "all" the reflection reads the top of D'_1 even where it repeats D_1 (Hewlett-Packard)."""
    rewrite = "Who founded Dell, and which Chinese technology company did IBM sell its PC business to?"
    ws = tiny_workspace(make_script(answer_at_once, rewrite=lambda req: f"Rewritten question: {rewrite}"))
    ws = dataclasses.replace(ws, cfg=dataclasses.replace(cfg, context_passages=3, reflection_passages="all"))
    _, outs, _ = run(ws, tiny_dataset.questions, top_k=3, max_iterations=1)
    r = outs[0].trace["rounds"][0]
    assert r["reflection_passages"] == [p for p, _ in r["rewrite_retrieved"]] and len(r["new_passages"]) == 2
    with pytest.raises(ValueError, match=r"unknown rule 'some' \(new \| all\)"):
        reflection_passages(["a"], ["b"], 1, "some")


def test_forced_rounds_answer_is_the_last_round_s(tiny_workspace, tiny_dataset):
    """Each round's rewrite retrieves other passages, so the reader's context, and with it its answer, differs by
    round: the forced run's answer is round 3's."""
    rewrites = iter(["Who founded Dell?", "What did Apple release in 1984?", "Who bought the PC business of IBM?"])

    def script(req):
        if stage_of(req) == "reader":
            return f"Answer: context of {len(req.messages[-1][1])} characters"
        if stage_of(req) == "rewrite":
            return f"Rewritten question: {next(rewrites)}"
        return make_script(never)(req)
    _, outs, _ = run(tiny_workspace(script), tiny_dataset.questions, variant="forced", max_iterations=3)
    answers = outs[0].trace["round_answers"]
    assert len(answers) == 3 and len(set(answers)) == 3 and outs[0].answer == answers[-1]


def test_evidence_weights_keep_each_passage_s_best_edge_and_rank_by_it():
    """G_Ans triples from p1 (0.2, then 0.6) and p2 (0.9): p2 ranks first; then D'_1, then D_1."""
    from kgir_lib.kg import Triple
    from kgir_lib.kgir.state import LoopState

    a, b, c = Triple("A", "r", "B", "p1"), Triple("C", "r", "D", "p2"), Triple("E", "r", "F", "p1")
    s = LoopState(q=Question("q", "?", (), (), "d", 1), query="?")
    s.keep_evidence_weights([a, b], {a: 0.2, b: 0.9})
    s.keep_evidence_weights([c], {c: 0.6})
    s.rewrite_retrievals, s.first_retrieval = [["p3", "p1"]], ["p4"]
    assert s.evidence_weights == {"p1": 0.6, "p2": 0.9}
    assert s.ranked_pids() == ["p2", "p1", "p3", "p4"]


def test_ranked_list_ends_with_the_first_round_s_retrieval(tiny_workspace, tiny_dataset):
    """Two rounds with top_k 2 and rewrites that retrieve other passages: the list ends with D_1, not D_2."""
    rewrites = iter(["Which company did IBM sell its PC business to?", "Is Lenovo a Chinese technology company?"])

    def script(req):
        if stage_of(req) == "rewrite":
            return f"Rewritten question: {next(rewrites)}"
        return make_script(never)(req)
    method, outs, _ = run(tiny_workspace(script), tiny_dataset.questions, top_k=2, max_iterations=2)
    t = outs[0].trace
    best, d2 = ranked_list_inputs(t)
    d_1, d_2 = ([p for p, _ in r["retrieved"]] for r in t["rounds"])
    assert ranked_list(best, d2, d_1) != ranked_list(best, d2, d_2)  # the case tells the two apart
    assert outs[0].ranked_pids == ranked_list(best, d2, d_1)
    assert method.stats["questions"] == 1


def test_passages_are_cut_to_passage_chars_for_every_stage(tiny_workspace, tiny_dataset, cfg):
    ws = tiny_workspace(make_script(answer_at_once))
    ws = dataclasses.replace(ws, cfg=dataclasses.replace(cfg, passage_chars=12))
    _, outs, _ = run(ws, tiny_dataset.questions, variant="no_subgraph", max_iterations=1)
    reader = [x for x in ws.llm.backend.seen if stage_of(x) == "reader"][-1].messages[-1][1]
    assert "In 2002 ..." in reader and "In 2002 Hewlett-Packard" not in reader  # cut at a word, marked


def test_no_reflection_reads_the_top_context_passages_of_d_prime_1(tiny_workspace, tiny_dataset, cfg):
    ws = tiny_workspace(make_script(answer_at_once))
    ws = dataclasses.replace(ws, cfg=dataclasses.replace(cfg, context_passages=2))
    _, outs, _ = run(ws, tiny_dataset.questions, variant="no_reflection")
    r = outs[0].trace["rounds"][0]
    assert r["final"]["context_pids"] == [p for p, _ in r["rewrite_retrieved"]][:2]
    assert len(r["rewrite_retrieved"]) > 2


def test_trace_fields_of_a_full_run(tiny_workspace, tiny_dataset):
    _, outs, _ = run(tiny_workspace(make_script(answer_at_once)), tiny_dataset.questions)
    t, q = outs[0].trace, tiny_dataset.questions[0]
    assert {k: t[k] for k in ("method", "variant", "qid", "question", "answer", "answered_by")} == {
        "method": "KGIR-RAG", "variant": "full", "qid": q.qid, "question": q.question, "answer": "HP (reader)",
        "answered_by": "reflection"}
    assert t["usage"]["calls"] == 4 and t["rounds"][0]["evidence_source"] == "subgraph"
    assert (t["gold_answers"], t["gold_pids"]) == (list(q.answers), list(q.gold_pids))


def test_a_reader_context_with_nothing_to_read_says_none(tiny_workspace):
    """Passages standing in for an empty G_Ans, and no passage of D'_t to add: the reader reads "(none)", not an
    empty string; with a passage the context is that passage alone."""
    ws = tiny_workspace(make_script(answer_at_once))
    q = Question("q", "Which company?", ("x",), (), "t")
    states = [LoopState(q=q, query=q.question), LoopState(q=q, query=q.question)]
    rounds = [LoopRound(iteration=1, query=q.question, retrieved=[], evidence_source="passages"),
              LoopRound(iteration=1, query=q.question, retrieved=[], evidence_source="passages")]
    pid = ws.dataset.corpus.passages[0].pid
    run = KGIRRAG().start(ws, len(states))
    for s, r, passages in zip(states, rounds, [[], [pid]]):
        hand_to_reader(run, s, r, passages)
    assert (states[0].final_context, states[0].final_pids) == ("(none)", [])
    p = ws.dataset.corpus.passages[0]
    assert states[1].final_pids == [pid] and states[1].final_context.startswith(p.title + "\n")


class RecordingBar:
    made: list = []

    def __init__(self, **kw):
        self.kw, self.updates, self.closed = kw, [], False
        RecordingBar.made.append(self)

    def update(self, n):
        self.updates.append(n)

    def close(self):
        self.closed = True


@pytest.mark.parametrize("progress, n_questions, disabled", [(True, 2, False), (False, 2, True), (True, 0, True)])
def test_the_rounds_progress_bar(tiny_workspace, tiny_dataset, monkeypatch, progress, n_questions, disabled):
    """One bar over the loop's rounds (total T, named after the method, not left on screen), advanced once a
    round while questions are open; off when the LLM's progress is off or there is no question."""
    monkeypatch.setattr("kgir_lib.kgir.loop.tqdm", RecordingBar)
    RecordingBar.made = []
    ws = tiny_workspace(make_script(never))
    monkeypatch.setattr(ws.llm, "progress", progress, raising=False)
    run(ws, tiny_dataset.questions[:n_questions], max_iterations=2)
    [bar] = RecordingBar.made
    assert bar.kw == {"total": 2, "desc": "KGIR-RAG rounds", "disable": disabled, "leave": False}
    assert bar.updates == ([1, 1] if n_questions else []) and bar.closed
