"""Control flow of the non-graph baselines (Naive Gen/RAG, BM25, dense, IRCoT, ITER-RETGEN, HyDE)
with a scripted LLM over the tiny Compaq/HP workspace."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kgir_lib.baselines.hyde import HyDE
from kgir_lib.baselines.ircot import IRCoT
from kgir_lib.baselines.ircot import parse_step
from kgir_lib.baselines.iter_retgen import IterRetGen
from kgir_lib.baselines.iter_retgen import next_query
from kgir_lib.baselines.naive import NaiveGen, NaiveRAG
from kgir_lib.baselines.retrievers import BM25Retriever, DenseRetriever
from kgir_lib.data import Dataset, Question
from kgir_lib.methods.context import final_ranking, interleave
from kgir_lib.registry import DEFAULT_METHODS, LABELS, METHODS, build_method
from kgir_lib.retrieval import BM25Index

Q2 = "Who founded Dell in 1984?"


def kind(req) -> str:
    """Which prompt a request comes from (the prompt file's name, not its wording)."""
    return req.prompt if req.prompt in ("ircot", "iter_retgen", "hyde", "reader") else "other"


def question_of(req) -> str:
    user = req.messages[-1][1]
    return user.rsplit("Question:", 1)[1].splitlines()[0].strip()


def recorded(ws):
    """Wrap ``ws.llm.generate`` to record ``(stage, number of requests)`` of every call."""
    log = []
    inner = ws.llm.generate

    def generate(requests, stage="default", desc=None):
        log.append((stage, len(requests)))
        return inner(requests, stage=stage, desc=desc)

    ws.llm.generate = generate
    return log


def two_questions(ws):
    q1 = ws.dataset.questions[0]
    dell = next(p.pid for p in ws.dataset.corpus.passages if p.title == "Dell")
    q2 = Question("q2", Q2, ("Michael Dell",), (dell,), "tiny", 1)
    return dataclasses.replace(ws, dataset=Dataset("tiny", [q1, q2], ws.dataset.corpus)), [q1, q2]


def context_titles(req) -> list:
    """Titles of the passages in a reader/ircot prompt's last 'Passages:' block."""
    user = req.messages[-1][1]
    block = user.rsplit("Passages:\n", 1)[1].split("\n\nQuestion:")[0]
    return [b.split("\n", 1)[0] for b in block.split("\n\n")]


def titles(ws, pids):
    return [ws.dataset.corpus[p].title for p in pids]


# ----------------------------------------------------------------------------- helpers and registry
def test_final_ranking_and_interleave():
    assert final_ranking(["b", "a"], ["a", "c", "b", "d"]) == ["b", "a", "c", "d"]
    assert interleave([["a", "b", "c"], ["d", "a"], ["e"]]) == ["a", "d", "e", "b", "c"]
    assert interleave([]) == []


def test_registry_builds_every_default_method_with_its_label():
    assert set(DEFAULT_METHODS) <= set(METHODS)
    for key in DEFAULT_METHODS:
        m = build_method(key)
        assert m.name == LABELS[key]
        assert getattr(m, "key") == key
    assert build_method("kg2rag", m_hops=2).m_hops == 2
    with pytest.raises(KeyError, match="unknown method 'nope'"):
        build_method("nope")


# ----------------------------------------------------------------------------- naive
def test_naive_gen_answers_closed_book_without_retrieval(tiny_workspace):
    ws = tiny_workspace(lambda req: "Answer: Hewlett-Packard")
    log = recorded(ws)
    [out] = NaiveGen().run(ws, ws.dataset.questions)
    assert out.answer == "Hewlett-Packard"
    assert out.ranked_pids == [] and out.trace["no_retrieval"] is True
    assert log == [("naive_gen", 1)] and out.usage.calls == 1
    assert "Passages:" not in ws.llm.backend.seen[0].messages[-1][1]


def test_naive_rag_reads_the_dense_top_passages_in_one_batched_call(tiny_workspace):
    ws = tiny_workspace(lambda req: "Answer: " + ("Michael Dell" if "Dell" in question_of(req) else "HP"))
    ws, qs = two_questions(ws)
    log = recorded(ws)
    outs = NaiveRAG().run(ws, qs)
    assert log == [("naive_rag_reader", 2)]
    assert [o.answer for o in outs] == ["HP", "Michael Dell"]
    for o, q, req in zip(outs, qs, ws.llm.backend.seen):
        top = [p for p, _ in ws.dense.search([q.question], ws.cfg.top_k)[0]]
        assert o.ranked_pids == top
        assert o.trace["context_pids"] == top[: ws.cfg.context_passages]
        assert context_titles(req) == titles(ws, top[: ws.cfg.context_passages])
        assert o.usage.calls == 1


def test_dense_retriever_is_naive_rag_with_the_workspace_encoder(tiny_workspace):
    ws = tiny_workspace(lambda req: "Answer: HP")
    a = NaiveRAG().run(ws, ws.dataset.questions)[0]
    b = DenseRetriever().run(ws, ws.dataset.questions)[0]
    assert (a.answer, a.ranked_pids) == (b.answer, b.ranked_pids)
    assert b.usage.cache_hits == 1  # the identical reader request is a cache hit


def test_bm25_retriever_ranks_by_bm25(tiny_workspace):
    ws = tiny_workspace(lambda req: "Answer: HP")
    q = ws.dataset.questions[0]
    [out] = BM25Retriever(top_k=3).run(ws, [q])
    expected = [p for p, _ in BM25Index(ws.dataset.corpus.passages).search([q.question], 3)[0]]
    assert out.ranked_pids == expected
    assert context_titles(ws.llm.backend.seen[0]) == titles(ws, expected)


# ----------------------------------------------------------------------------- IRCoT
@pytest.mark.parametrize("text,expected", [
    ("Compaq was the top PC maker. Then more text.\nignored", ("Compaq was the top PC maker.", None)),
    ("HP merged with Compaq. So the answer is: Hewlett-Packard.", ("HP merged with Compaq. So the answer is: "
                                                                   "Hewlett-Packard.", "Hewlett-Packard")),
    ("the answer is HP", ("the answer is HP", "HP")),
    ("  \n", ("", None)),
])
def test_parse_step(text, expected):
    assert parse_step(text) == expected


def ircot_script(answer_at: dict):
    """IRCoT steps: sentence i of a question; the answer marker at step ``answer_at[question]``."""
    def script(req):
        k = kind(req)
        if k == "reader":
            return "Answer: Hewlett-Packard"
        q = question_of(req)
        cot = req.messages[-1][1].rsplit("Reasoning so far:", 1)[1].split("\n")[0].strip()
        step = 1 if cot == "(none)" else cot.count(".") + 1
        if step >= answer_at.get(q, 99):
            return "So the answer is: Hewlett-Packard."
        return f"Step {step} says Compaq was the top PC maker of 1994."
    return script


def test_ircot_stops_at_the_answer_marker(tiny_workspace):
    ws = tiny_workspace(ircot_script({"Which company merged in 2002 with the top PC maker of 1994?": 2}))
    log = recorded(ws)
    searched = []
    inner = ws.dense.search
    ws.dense.search = lambda qs, k: (searched.append(list(qs)), inner(qs, k))[1]
    [out] = IRCoT(max_steps=3).run(ws, ws.dataset.questions)
    assert log == [("ircot_reason", 1), ("ircot_reason", 1), ("ircot_reader", 1)]
    assert out.usage.calls == 3
    assert out.trace["stop"] == "answer" and out.trace["cot_answer"] == "Hewlett-Packard"
    q = ws.dataset.questions[0].question
    assert searched == [[q], ["Step 1 says Compaq was the top PC maker of 1994."]]
    r0 = [p for p, _ in inner([q], ws.cfg.top_k)[0]]
    r1 = [p for p, _ in inner(["Step 1 says Compaq was the top PC maker of 1994."], ws.cfg.top_k)[0]]
    assert out.ranked_pids == interleave([r0, r1])
    assert out.trace["context_pids"] == interleave([r0, r1])[: ws.cfg.context_passages]


def test_ircot_runs_to_the_step_cap_and_batches_open_questions(tiny_workspace):
    ws = tiny_workspace(ircot_script({Q2: 1}))  # q2 answers at once, q1 never
    ws, qs = two_questions(ws)
    log = recorded(ws)
    outs = IRCoT(max_steps=3).run(ws, qs)
    assert log == [("ircot_reason", 2), ("ircot_reason", 1), ("ircot_reason", 1), ("ircot_reader", 2)]
    assert [o.trace["stop"] for o in outs] == ["max_steps", "answer"]
    assert [o.usage.calls for o in outs] == [4, 2]
    assert [len(o.trace["retrievals"]) for o in outs] == [4, 1]
    assert [o.answer for o in outs] == ["Hewlett-Packard", "Hewlett-Packard"]


def test_ircot_stops_when_a_sentence_repeats(tiny_workspace):
    ws = tiny_workspace(lambda req: "Answer: HP" if kind(req) == "reader" else "Compaq was big. Then.")
    log = recorded(ws)
    [out] = IRCoT(max_steps=5).run(ws, ws.dataset.questions)
    assert log == [("ircot_reason", 1), ("ircot_reason", 1), ("ircot_reader", 1)]
    assert out.trace["stop"] == "repeated" and out.trace["cot"] == ["Compaq was big."]
    assert len(out.trace["retrievals"]) == 2


def test_ircot_default_step_cap_comes_from_the_config(tiny_workspace):
    ws = tiny_workspace(ircot_script({}))
    log = recorded(ws)
    IRCoT().run(ws, ws.dataset.questions)
    assert [s for s, _ in log].count("ircot_reason") == ws.cfg.ircot_max_steps


# ----------------------------------------------------------------------------- ITER-RETGEN
def test_iter_retgen_makes_exactly_t_generations_and_retrievals(tiny_workspace):
    gens = {}

    def script(req):
        if kind(req) == "reader":
            return "Answer: Hewlett-Packard"
        n = gens[question_of(req)] = gens.get(question_of(req), 0) + 1
        return f"Guess {n}: Compaq merged. So the answer is: HP."
    ws = tiny_workspace(script)
    ws, qs = two_questions(ws)
    log = recorded(ws)
    searched = []
    inner = ws.dense.search
    ws.dense.search = lambda q, k: (searched.append(list(q)), inner(q, k))[1]
    outs = IterRetGen(rounds=3).run(ws, qs)
    assert log == [("iter_retgen_generate", 2), ("iter_retgen_generate", 2), ("iter_retgen_reader", 2)]
    assert len(searched) == 3 and all(len(s) == 2 for s in searched)
    q1 = qs[0].question
    assert searched[0][0] == q1
    assert searched[1][0] == f"{q1} Guess 1: Compaq merged. So the answer is: HP."
    assert searched[2][0] == next_query(q1, "Guess 2: Compaq merged. So the answer is: HP.")
    for o, q in zip(outs, searched[2]):
        assert o.usage.calls == 3 and len(o.trace["rounds"]) == 3
        assert o.ranked_pids == [p for p, _ in inner([q], ws.cfg.top_k)[0]]
        assert o.answer == "Hewlett-Packard"


def test_iter_retgen_with_one_round_is_naive_rag(tiny_workspace):
    ws = tiny_workspace(lambda req: "Answer: HP")
    a = IterRetGen(rounds=1).run(ws, ws.dataset.questions)[0]
    b = NaiveRAG().run(ws, ws.dataset.questions)[0]
    assert (a.answer, a.ranked_pids) == (b.answer, b.ranked_pids)
    with pytest.raises(ValueError, match="iter_retgen_rounds"):
        IterRetGen(rounds=0).run(ws, ws.dataset.questions)


# ----------------------------------------------------------------------------- HyDE
HYPO = "Lenovo bought the PC business of IBM in 2005."


def hyde_script(req):
    return HYPO if kind(req) == "hyde" else "Answer: Lenovo"


def test_hyde_retrieves_with_the_hypothetical_passage_embedding(tiny_workspace):
    ws = tiny_workspace(hyde_script)
    log = recorded(ws)
    [out] = HyDE(include_query=False, top_k=4).run(ws, ws.dataset.questions)
    assert out.ranked_pids == [p for p, _ in ws.dense.search([HYPO], 4)[0]]
    assert titles(ws, out.ranked_pids[:1]) == ["IBM"]
    q = ws.dataset.questions[0].question
    assert out.ranked_pids != [p for p, _ in ws.dense.search([q], 4)[0]]  # not the question's retrieval
    assert log == [("hyde_generate", 1), ("hyde_reader", 1)] and out.usage.calls == 2
    assert out.trace["hypothetical_passage"] == HYPO


def test_hyde_averages_passage_and_question_embeddings(tiny_workspace):
    ws = tiny_workspace(hyde_script)
    q = ws.dataset.questions[0]
    [out] = HyDE(top_k=6).run(ws, [q])
    enc = ws.dense.encoder
    v = enc.encode([HYPO])[0] + enc.encode([q.question])[0]
    v /= np.linalg.norm(v)
    assert out.ranked_pids == [p for p, _ in ws.dense.search_vectors(v[None, :], 6)[0]]


def test_hyde_with_an_empty_passage_falls_back_to_the_question(tiny_workspace):
    ws = tiny_workspace(lambda req: "" if kind(req) == "hyde" else "Answer: HP")
    q = ws.dataset.questions[0]
    [out] = HyDE(top_k=6).run(ws, [q])
    assert out.ranked_pids == [p for p, _ in ws.dense.search([q.question], 6)[0]]


# ---------------------------------------------------------------------------- one name per knob
def test_every_knob_is_a_config_field_and_a_parameter():
    """A method's knob is named as the Config field it overrides (without the method's prefix)."""
    from dataclasses import fields as dc_fields

    from kgir_lib.config import Config

    config_fields = {f.name for f in dc_fields(Config)}
    for key in METHODS:
        method = build_method(key)
        params = {f.name for f in dc_fields(method)}
        assert set(method.knobs) <= params, key
        for knob, field_name in method.knobs.items():
            assert field_name in config_fields and field_name.endswith(knob), (key, knob, field_name)
        if key != "naive_gen":  # every method that retrieves names its depth top_k
            assert method.knobs.get("top_k") == "top_k", key


def test_a_knob_is_checked_by_the_configs_rule_and_filled_from_the_profile(tiny_workspace):
    from kgir_lib.baselines.kg2rag import KG2RAG
    from kgir_lib.config import ConfigError
    from kgir_lib.kgir.variants import KGIRRAG

    ws = tiny_workspace(lambda req: "Answer: HP")
    for make, match in [(lambda: NaiveRAG(top_k=0),
                         r"NaiveRAG parameter 'top_k' \(the profile's 'top_k'\): must be >= 1 and <= 1000000, got 0"),
                        (lambda: KG2RAG(m_hops=-1), r"'m_hops' \(the profile's 'kg2rag_m_hops'\): must be >= 0"),
                        (lambda: KGIRRAG(ngram_threshold=1.5), r"'ngram_threshold'.*must be >= 0 and <= 1"),
                        (lambda: IRCoT(top_k=2.5), "'top_k'.*whole number"),
                        (lambda: IterRetGen(rounds="many"), "'rounds'.*iter_retgen_rounds.*a number")]:
        with pytest.raises(ConfigError, match=match):
            make()
    assert IterRetGen(rounds=2.0).rounds == 2 and isinstance(IterRetGen(rounds=2.0).rounds, int)
    ircot = IRCoT()
    assert (ircot.setting(ws, "max_steps"), ircot.setting(ws, "top_k")) == (ws.cfg.ircot_max_steps, ws.cfg.top_k)
    assert IRCoT(max_steps=1).setting(ws, "max_steps") == 1
    assert KG2RAG(m_hops=0).setting(ws, "m_hops") == 0  # 0 hops is KG²RAG's own ablation (the config allows it too)
