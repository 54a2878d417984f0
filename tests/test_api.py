"""The public API (kgir_lib.api): KGIR-RAG over a list of passages, each answer with its trace.

The block of docs/api.md runs as it stands, on the sample profile's embedded models with its committed response log
and no model call; the pipeline is the registry's method over the indexed passages (same requests, same
outputs); variants, compositions of one's own and bad input.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from kgir_lib import KGIRPipeline, load_example
from kgir_lib.api import passages_of
from kgir_lib.config import PROJECT_ROOT, ConfigError
from kgir_lib.kg.store import total_drops
from kgir_lib.kgir.loop import PAPER
from kgir_lib.kgir.steps import Retrieve
from kgir_lib.llm import LLM, ScriptedBackend
from kgir_lib.registry import build_method

from conftest import BagOfWordsEncoder
from _request_log import _mixed

BLOCK = re.compile(r"<!-- api block: tests/test_api.py runs it -->\n```python\n(.*?)```", re.S)


API_DOC = PROJECT_ROOT / "docs" / "api.md"  # the public API's page, which holds the block


def api_block() -> str:
    return BLOCK.search(API_DOC.read_text(encoding="utf-8")).group(1)


def test_the_api_block_is_short_and_imports_only_the_package():
    code = api_block()
    assert len(code.strip().splitlines()) <= 10
    assert code.startswith("from kgir_lib import KGIRPipeline, load_example\n")


@pytest.mark.slow
def test_the_api_block_runs_as_it_stands(tmp_path):
    """The block, verbatim, in a fresh results folder holding only the sample profile's committed response log,
    cache-only (a request missing from the log is an error): it answers as notebook 07's first free-question run
    (results/sample/tables/07_free_question_runs.csv) with no model call."""
    results = tmp_path / "results"
    (results / "sample").mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / "results" / "sample" / "llm_responses.jsonl.gz", results / "sample")
    script = tmp_path / "block.py"
    script.write_text(api_block(), encoding="utf-8")
    env = {**os.environ, "KGIR_RESULTS_DIR": str(results), "KGIR_FIGURES_DIR": str(tmp_path / "figures"),
           "KGIR_LLM_CACHE_ONLY": "1"}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    answer, answered_by, rewrite = [x.strip() for x in done.stdout.strip().splitlines()[-1].split("|")]
    run1 = pd.read_csv(PROJECT_ROOT / "results" / "sample" / "tables" / "07_free_question_runs.csv").iloc[0]
    assert run1["run"].startswith("run 1: KGIR-RAG")
    assert (answer, rewrite) == (run1["answer"], run1["round-1 rewrite"]) and answered_by


def test_the_api_page_says_what_the_block_prints_and_why_from_the_committed_tables():
    """The sentence under the block quotes the sample run's line (run 1 of notebook 07's free question: its answer,
    the reflection ending the loop, its round-1 rewrite, the question unchanged), the oracle rewrite's answer, the
    next hop's rank, and the local model's answer, each as the committed tables have it."""
    text = API_DOC.read_text(encoding="utf-8")
    after = " ".join(text.split("<!-- api block: tests/test_api.py runs it -->", 1)[1].split("```", 2)[2]
                     .split("\n\n")[1].split())
    sample = pd.read_csv(PROJECT_ROOT / "results" / "sample" / "tables" / "07_free_question_runs.csv")
    local = pd.read_csv(PROJECT_ROOT / "results" / "local" / "tables" / "07_free_question_runs.csv")
    run1, oracle = sample.iloc[0], sample.iloc[1]
    assert run1["round-1 rewrite"] == load_example("figure6")["question"]  # the question unchanged
    assert f"`{run1['answer']} | reflection | {run1['round-1 rewrite']}`, a wrong answer" in after
    assert run1["EM"] == 0 and oracle["run"].startswith("run 2: oracle rewrite") and oracle["EM"] == 0
    assert f"Handed the ideal rewrite, this model still answers {oracle['answer']}" in after
    assert run1["next hop's rank in D_1"] == 2 and "Hewlett-Packard passage ranks second" in after
    assert bool(run1["reflection read it (P_1)"]) and bool(run1["in the reader's context"])
    assert local.iloc[0]["answer"] == "Hewlett-Packard" and local.iloc[0]["EM"] == 1
    assert "1.5B model answers the same question on the same passages Hewlett-Packard" in after


# ---------------------------------------------------------------- the pipeline is the method over the passages
@pytest.fixture
def passages(tiny_dataset):
    return [(p.title, p.text) for p in tiny_dataset.corpus.passages]


def script(req) -> str:
    """Extraction replies one fact of the passage's title; every other stage as the request fixture's mixed
    script (tests/_request_log.py)."""
    if req.prompt == "kg_extract":
        title = req.messages[-1][1].split("\n", 1)[0].strip()
        return f"{title} | is a | company"
    return _mixed(req)


def pipeline(cfg, script=script, **kw) -> KGIRPipeline:
    llm = LLM(ScriptedBackend(script), None, progress=False)
    return KGIRPipeline(cfg, llm=llm, encoder=BagOfWordsEncoder(), **kw)


def logged(llm) -> list:
    calls: list = []
    inner = llm.generate

    def generate(requests, stage="default", desc=None):
        calls.extend((stage, r.payload()) for r in requests)
        return inner(requests, stage=stage, desc=desc)
    llm.generate = generate
    return calls


def test_index_then_answer_is_the_registry_method_over_the_passages(cfg, passages, tiny_dataset):
    """Extraction of every passage first (§2.1), then the method's requests and outputs as the registry's
    method gives them on the pipeline's workspace."""
    question = tiny_dataset.questions[0].question
    rag = pipeline(cfg)
    calls = logged(rag.llm)
    rag.index(passages)
    n_extract = len(calls)
    assert n_extract == len(passages) and {s for s, _ in calls} == {"extract"}
    assert len(rag.workspace.kg) > 0 and rag.workspace.dataset.name == "passages"
    [out] = rag.answer([question])
    assert out.trace["question"] == question and out.trace["rounds"] and out.answer == "HP"
    assert out.trace["method"] == "KGIR-RAG" and rag.workspace.dataset.questions[0].qid == out.qid
    again = pipeline(cfg)
    calls2 = logged(again.llm)
    again.index(passages)
    [q] = again.answer([question])  # the registry's method on the same workspace, on the same question
    [direct] = build_method("kgir").run(again.workspace, [again.workspace.dataset.questions[0]])
    assert calls2[n_extract:len(calls)] == calls[n_extract:]  # the same requests, in the same order
    assert json.dumps(direct.trace, sort_keys=True) == json.dumps(q.trace, sort_keys=True)


def test_a_variant_or_a_composition_of_ones_own(cfg, passages, tiny_dataset):
    question = tiny_dataset.questions[0].question
    [no_rewrite] = pipeline(cfg, variant="no_rewrite").index(passages).answer([question])
    assert no_rewrite.trace["method"] == "KGIR-RAG w/o rewrite" and "rewrite" not in no_rewrite.trace["rounds"][0]

    class FirstPassageOnly(Retrieve):
        """A retriever of one's own: D_t is the first passage, whatever the query."""
        def __call__(self, run, queries):
            first = run.ws.dataset.corpus.passages[0].pid
            return [[(first, 1.0)] for _ in queries]

    rag = pipeline(cfg, steps=dataclasses.replace(PAPER, retrieve=FirstPassageOnly()))
    [own] = rag.index(passages).answer([question])
    assert [p for p, _ in own.trace["rounds"][0]["retrieved"]] == [rag.workspace.dataset.corpus.passages[0].pid]
    assert own.trace["variant"] == "own_steps" and own.trace["method"] == "KGIR-RAG (own steps)"
    oracle = pipeline(cfg, method=build_method("kgir_oracle_context", max_iterations=1))
    assert oracle.method.key == "kgir_oracle_context"


@pytest.mark.parametrize("call, match", [
    (lambda rag: rag.answer(["q?"]), "index"),
    (lambda rag: rag.index("not a list"), "parameter 'passages': a list"),
    (lambda rag: rag.index([("t", "")]), "parameter 'passages': item 0 needs"),
    (lambda rag: rag.index([("t", "x")]).answer([""]), "parameter 'questions': item 0"),
])
def test_bad_input_is_named(cfg, call, match):
    with pytest.raises(ValueError, match=match):
        call(pipeline(cfg))


def test_bad_settings_are_named(cfg):
    with pytest.raises(ValueError, match="parameter 'variant'"):
        pipeline(cfg, variant="no_graph")
    with pytest.raises(ValueError, match="parameter 'steps'"):
        pipeline(cfg, steps="paper")
    with pytest.raises(ValueError, match="parameter 'method'"):
        pipeline(cfg, method=build_method("ircot"))


def test_the_example_is_the_shipped_figure6():
    ex = load_example("figure6")
    assert ex["question"] and len(ex["passages"]) == 6 and ex["answers"]


# ---------------------------------------------------------------- the API's edges
def test_a_bare_string_is_not_a_list_of_questions(cfg, passages):
    rag = pipeline(cfg).index(passages)
    calls = logged(rag.llm)
    with pytest.raises(ValueError, match=r"parameter 'questions': a list of questions, got str 'Where\?'"):
        rag.answer("Where?")
    assert calls == [] and rag.workspace.dataset.questions == []  # refused before any model call


@pytest.mark.parametrize("setting, value, match", [
    ("top_k", 0, r"setting 'top_k': must be"), ("max_iterations", -3, r"setting 'max_iterations': must be"),
    ("temperature", float("nan"), r"setting 'temperature': must be a finite number"),
    ("reflection_passages", "some", r"setting 'reflection_passages': unknown value 'some'"),
])
def test_settings_over_a_config_are_checked_as_a_profile_s(cfg, setting, value, match):
    with pytest.raises(ConfigError, match=match):
        pipeline(cfg, **{setting: value})
    with pytest.raises(ConfigError, match=f"'{setting}'"):  # and over a profile's name
        KGIRPipeline("ci", **{setting: value})


def test_a_config_is_validated_whatever_form_it_comes_in(cfg):
    assert pipeline(cfg, top_k=4, max_iterations=2).cfg.top_k == 4
    with pytest.raises(ConfigError, match="'top_k'"):
        pipeline(dataclasses.replace(cfg, top_k=0))  # a Config built past the checks


def test_an_unknown_setting_is_called_a_setting(cfg):
    for make in (lambda: pipeline(cfg, tpo_k=4), lambda: KGIRPipeline("ci", tpo_k=4)):
        with pytest.raises(ConfigError, match="setting 'tpo_k'") as caught:
            make()
        assert "papermill" not in str(caught.value)


def test_variant_method_and_steps_are_one_choice(cfg):
    with pytest.raises(ValueError, match="parameters 'variant' and 'steps': give one of"):
        pipeline(cfg, variant="no_rewrite", steps=PAPER)
    with pytest.raises(ValueError, match="parameters 'variant' and 'method'"):
        pipeline(cfg, variant="full", method=build_method("kgir"))


def test_a_prompt_cut_to_fit_the_model_is_reported_by_the_index(cfg, passages):
    """A backend that cuts a prompt to fit its context counts it (the embedded model's, tests/test_llm_llamacpp.py);
    the index report says how many extraction prompts were cut, and a warning says so."""
    class Cutting(ScriptedBackend):
        prompts_cut = 0

        def run(self, requests, on_result):
            self.prompts_cut += sum(len(r.messages[-1][1]) > 2000 for r in requests)
            return super().run(requests, on_result)

    long = ("Long", "A passage of two hundred kilobytes. " * 6000)
    rag = KGIRPipeline(cfg, llm=LLM(Cutting(script), None, progress=False), encoder=BagOfWordsEncoder())
    with pytest.warns(UserWarning, match="index: 1 extraction prompt"):
        rag.index([*passages, long])
    assert rag.index_report == {"passages": 7, "triples": len(rag.workspace.kg), "prompts_cut": 1,
                                "drops": dict(total_drops(rag.workspace.kg))}
    assert pipeline(cfg).index(passages).index_report["prompts_cut"] == 0


def test_a_lone_surrogate_in_a_passage_becomes_the_replacement_character():
    with pytest.warns(UserWarning, match=r"item 1 .*1 lone UTF-16 surrogate\(s\) replaced by U\+FFFD"):
        ps = passages_of([("A", "plain"), ("B", "half \ud800 a pair")])
    assert ps[1].text == "half \ufffd a pair" and len(ps[1].pid) == 16
