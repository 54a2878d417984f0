"""Every stage's generation budget comes from the profile; truncations are counted."""
from __future__ import annotations

import pytest

from kgir_lib.baselines.hyde import HyDE
from kgir_lib.baselines.ircot import IRCoT
from kgir_lib.baselines.iter_retgen import IterRetGen
from kgir_lib.baselines.naive import NaiveGen, NaiveRAG
from kgir_lib.config import load_config
from kgir_lib.kgir.variants import KGIRRAG
from kgir_lib.llm import LLM, ChatRequest, ChatResult, ScriptedBackend
from kgir_lib.llm.core import infer_finish_reason
from kgir_lib.methods.base import Workspace
from kgir_lib.retrieval import DenseIndex

from conftest import BagOfWordsEncoder

PAPER = {"extract": 1024, "ner": 128, "rewrite": 128, "reflect": 512, "reader": 64, "hyde": 512, "ircot": 128,
         "iter_retgen": 256, "hipporag2_filter": 512}


def test_paper_profile_budgets():
    cfg = load_config("paper")
    assert {stage: cfg.max_tokens(stage) for stage in PAPER} == PAPER
    assert cfg.max_tokens("some_other_stage") == cfg.max_new_tokens == 512


def _paper_workspace(tmp_path, tiny_dataset, tiny_kg, script):
    cfg = load_config("paper", llm_backend="scripted", reranker_model=None, results_dir=str(tmp_path))
    llm = LLM(ScriptedBackend(script), None, progress=False)
    dense = DenseIndex(tiny_dataset.corpus.passages, BagOfWordsEncoder(), progress=False)
    return Workspace(cfg=cfg, dataset=tiny_dataset, llm=llm, dense=dense, kg=tiny_kg)


def test_paper_profile_requests_carry_the_budgets(tmp_path, tiny_dataset, tiny_kg):
    def script(req):
        if req.prompt == "kgir_ner":
            return '{"named_entities": ["1994"]}'
        if req.prompt == "kgir_rewrite":
            return "Rewritten question: Which company did Compaq merge with in 2002?"
        if req.prompt.startswith("kgir_reflect"):  # the paper profile's is kgir_reflect_paper (Fig. 5)
            return "Reasoning: x\nMissing: y"
        return "Answer: HP"
    ws = _paper_workspace(tmp_path, tiny_dataset, tiny_kg, script)
    KGIRRAG(max_iterations=1).run(ws, tiny_dataset.questions)
    seen = {req.max_tokens for req in ws.llm.backend.seen}
    assert seen == {PAPER["ner"], PAPER["reflect"], PAPER["reader"]}  # rewrite and NER share 128
    stages = {}
    for req in ws.llm.backend.seen:
        key = {"kgir_ner": "ner", "kgir_rewrite": "rewrite", "kgir_reflect_paper": "reflect"}.get(req.prompt, "reader")
        stages[key] = req.max_tokens
    assert stages == {"ner": 128, "rewrite": 128, "reflect": 512, "reader": 64}
    for method, budget in ((NaiveRAG(), 64), (NaiveGen(), 64), (HyDE(), 512), (IRCoT(max_steps=1), 128),
                           (IterRetGen(rounds=2), 256)):
        ws = _paper_workspace(tmp_path, tiny_dataset, tiny_kg, lambda req: "Answer: HP")
        method.run(ws, tiny_dataset.questions)
        budgets = sorted({r.max_tokens for r in ws.llm.backend.seen})
        assert budget in budgets and set(budgets) <= {budget, 64}, (method.name, budgets)


def test_extraction_budget_from_the_profile(tmp_path, tiny_dataset, tiny_kg):
    from kgir_lib.pipeline import open_kg

    cfg = load_config("paper", llm_backend="scripted", results_dir=str(tmp_path))
    llm = LLM(ScriptedBackend(lambda req: "A | r | B"), None, progress=False)
    kg, ensure = open_kg(cfg, tiny_dataset, llm)
    ensure([tiny_dataset.corpus.passages[0].pid])
    assert [r.max_tokens for r in llm.backend.seen] == [1024]


def test_truncated_completions_are_counted_per_stage():
    words = " ".join(["w"] * 10)  # the scripted backend counts words as tokens
    llm = LLM(ScriptedBackend(lambda req: words), None, progress=False)
    res = llm.generate([ChatRequest.chat(None, "a", max_tokens=10), ChatRequest.chat(None, "b", max_tokens=11)],
                       stage="extract")
    assert [r.finish_reason for r in res] == ["length", "stop"] and [r.truncated for r in res] == [True, False]
    assert llm.usage.stage("extract").truncated == 1
    assert llm.usage.table().loc["total", "truncated"] == 1


def test_backend_finish_reason_wins_over_the_token_count():
    req = ChatRequest.chat(None, "a", max_tokens=5)
    assert infer_finish_reason(ChatResult("x", 0, 9, finish_reason="stop"), req) == "stop"
    assert infer_finish_reason(ChatResult("x", 0, 1, finish_reason="length"), req) == "length"
    assert infer_finish_reason(ChatResult("x", 0, 5), req) == "length"
    assert infer_finish_reason(ChatResult("x", 0, 4), req) == "stop"


def test_cache_hits_keep_the_truncation_count(tmp_path):
    from kgir_lib.llm import LLMCache

    llm = LLM(ScriptedBackend(lambda req: "a b c"), LLMCache(tmp_path / "c.sqlite"), progress=False)
    llm.generate([ChatRequest.chat(None, "q", max_tokens=3)], stage="s")
    again = llm.generate([ChatRequest.chat(None, "q", max_tokens=3)], stage="s")
    assert again[0].cached and again[0].truncated and llm.usage.stage("s").truncated == 2


@pytest.mark.parametrize("stage", list(PAPER))
def test_sample_budgets_are_positive(stage):
    assert load_config("sample").max_tokens(stage) >= 16
