"""The deployable repair (kgir_lib.kgir.first_retrieval): D_1's top passages beside the new passages of D'_t, one
budget and order, as a composition of the paper's steps; the reflection and the reader read them."""
from __future__ import annotations

from kgir_lib.kgir import first_retrieval as fr
from kgir_lib.kgir.loop import PAPER
from kgir_lib.kgir.variants import KGIRRAG


def script(req):
    return {"kgir_ner": '{"named_entities": ["PC maker", "1994"]}',
            "kgir_rewrite": "Rewritten question: Which company merged with Compaq in 2002?",
            "kgir_reflect": "Reasoning: enough.\nAnswer: Hewlett-Packard", "kgir_reflect_verdict": "Answer: HP",
            "reader": "Answer: HP"}[req.prompt]


def test_first_and_new_takes_the_two_lists_in_turn_within_one_budget():
    assert fr.first_and_new(["a", "b", "c"], ["x", "y"], 4) == ["a", "x", "b", "y"]
    assert fr.first_and_new(["a", "b", "c"], ["x"], 4) == ["a", "x", "b", "c"]  # one runs out: the other fills
    assert fr.first_and_new(["a", "x"], ["x", "y"], 5) == ["a", "x", "y"]  # each passage once
    assert fr.first_and_new([], ["x", "y"], 1) == ["x"] and fr.first_and_new(["a"], [], 3) == ["a"]


def test_the_composition_changes_only_the_passages_step_and_the_reader_reads_them(tiny_workspace):
    steps = fr.FIRST_AND_NEW.steps
    assert [f for f in steps.__dataclass_fields__ if getattr(steps, f) is not getattr(PAPER, f)] == ["passages"]
    ws = tiny_workspace(script)
    q = ws.dataset.questions[0]
    [out] = fr.FirstAndNewKGIRRAG().run(ws, [q])
    [paper] = KGIRRAG().run(tiny_workspace(script), [q])
    r, p = out.trace["rounds"][0], paper.trace["rounds"][0]
    d1 = [x[0] for x in r["retrieved"]]
    n = ws.cfg.context_passages
    assert r["reflection_passages"] == fr.first_and_new(d1, p["reflection_passages"], n)
    assert r["final"]["context_pids"] == r["reflection_passages"]  # the reader reads P_t after G_Ans
    assert out.trace["method"] == fr.FIRST_AND_NEW.name and fr.FirstAndNewKGIRRAG().key == fr.KEY
    assert set(d1[:1]) <= set(r["final"]["context_pids"])  # D_1's best passage is shown, as the paper never does


def test_the_family_is_declared():
    assert fr.FAMILY == (("kgir", "EM"), ("kgir", "F1"), ("naive_rag", "EM"), ("naive_rag", "F1"))
