"""Cache-only mode: the regeneration command answers from the cache and never calls the backend."""
from __future__ import annotations

import pytest

from kgir_lib.llm import LLM, CacheMissError, ChatRequest, LLMCache, ScriptedBackend, build_llm, cache_only_mode


def test_cache_only_answers_from_cache_and_refuses_misses(tmp_path):
    cache = LLMCache(tmp_path / "llm.sqlite")
    backend = ScriptedBackend(lambda r: "Answer: Paris")
    warm = LLM(backend, cache, progress=False)
    req = ChatRequest.chat(None, "Capital of France?")
    warm.generate([req], stage="reader")
    assert len(backend.seen) == 1

    offline = LLM(backend, cache, progress=False, cache_only=True)
    assert offline.complete([req], stage="reader") == ["Answer: Paris"]
    assert len(backend.seen) == 1  # no new backend call
    with pytest.raises(CacheMissError, match="stage 'reader'"):
        offline.generate([req, ChatRequest.chat(None, "Capital of Spain?")], stage="reader")
    assert len(backend.seen) == 1


def test_cache_only_mode_follows_the_environment(monkeypatch, cfg):
    monkeypatch.delenv("KGIR_LLM_CACHE_ONLY", raising=False)
    assert not cache_only_mode()
    assert not build_llm(cfg, script=lambda r: "x").cache_only
    monkeypatch.setenv("KGIR_LLM_CACHE_ONLY", "1")
    assert cache_only_mode()
    assert build_llm(cfg, script=lambda r: "x").cache_only
