"""A second LLM for extraction and NER (paper §3.2: Qwen2.5-72B extracts for both reader LLMs)."""
from __future__ import annotations

import pytest

from kgir_lib.config import ConfigError, load_config
from kgir_lib.llm import LLM, ChatRequest, LLMCache, RoutedLLM, ScriptedBackend, build_llm


def _req(text: str) -> ChatRequest:
    return ChatRequest(messages=(("user", text),), max_tokens=8)


def test_routed_stages_go_to_the_second_model_and_share_usage_and_cache(tmp_path):
    cache = LLMCache(tmp_path / "llm.sqlite")
    reader = LLM(ScriptedBackend(lambda r: "reader says", "reader"), cache, progress=False)
    kg = LLM(ScriptedBackend(lambda r: "kg says", "kg"), cache, progress=False)
    llm = RoutedLLM(reader, kg)
    assert [r.text for r in llm.generate([_req("q")], stage="kgir_ner")] == ["kg says"]
    assert [r.text for r in llm.generate([_req("p")], stage="extract")] == ["kg says"]
    assert [r.text for r in llm.generate([_req("q")], stage="kgir_rewrite")] == ["reader says"]
    assert llm.complete([_req("q")], stage="naive_rag_reader") == ["reader says"]
    assert set(llm.usage.stages) == {"kgir_ner", "extract", "kgir_rewrite", "naive_rag_reader"}
    assert llm.usage is reader.usage is kg.usage and llm.model_id == reader.model_id
    # one cache, keyed by model: the same request to the two models are two entries
    assert llm.generate([_req("q")], stage="kgir_ner")[0].cached
    assert llm.generate([_req("q")], stage="kgir_rewrite")[0].cached


def test_build_llm_routes_only_when_a_kg_model_is_configured(tmp_path, monkeypatch):
    monkeypatch.setenv("KGIR_RESULTS_DIR", str(tmp_path))
    script = lambda r: "x"  # noqa: E731
    plain = build_llm(load_config("ci", llm_backend="scripted"), script=script, progress=False)
    assert isinstance(plain, LLM)
    routed = build_llm(load_config("ci", llm_backend="scripted", kg_llm_model="other"), script=script, progress=False)
    assert isinstance(routed, RoutedLLM) and routed.other.model_id == "scripted:other"


def test_kg_model_on_the_openai_backend_needs_its_url():
    with pytest.raises(ConfigError, match="kg_llm_base_urls"):
        load_config("paper", kg_llm_model="Qwen/Qwen2.5-72B-Instruct")
    cfg = load_config("paper_llama3")
    assert cfg.kg_llm_model == "Qwen/Qwen2.5-72B-Instruct" and cfg.kg_llm_base_urls
