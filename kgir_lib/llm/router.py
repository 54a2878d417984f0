"""A second LLM for some stages: the paper extracts triples and question entities with Qwen2.5-72B for both
reader LLMs (KGIR-RAG §3.2), so on the Llama-3-8B profile extraction and NER go to another model.

:class:`RoutedLLM` has the :class:`~kgir_lib.llm.core.LLM` interface. Stages whose name starts with one of
``stages`` go to ``other``; everything else to ``main``. Both share one cache (keys include the model, so the
two models' answers never mix) and one usage record, so usage tables stay per stage as before.
"""
from __future__ import annotations

from typing import Optional, Sequence

from .core import LLM

# LightRAG's index calls and its question keywords are the same work as triple extraction and question NER.
KG_STAGES = ("extract", "kgir_ner", "lightrag_extract", "lightrag_gleaning", "lightrag_summary", "lightrag_keywords")


class RoutedLLM:
    """``main`` for every stage except those starting with one of ``stages``, which ``other`` answers."""

    def __init__(self, main: LLM, other: LLM, stages: Sequence[str] = KG_STAGES):
        self.main, self.other, self.stages = main, other, tuple(stages)
        other.usage = main.usage

    def route(self, stage: str) -> LLM:
        """The LLM that answers ``stage``."""
        return self.other if stage.startswith(self.stages) else self.main

    def generate(self, requests: Sequence, stage: str = "default", desc: Optional[str] = None) -> list:
        return self.route(stage).generate(requests, stage=stage, desc=desc)

    def complete(self, requests: Sequence, stage: str = "default") -> list:
        return [r.text for r in self.generate(requests, stage)]

    def __getattr__(self, name: str):
        return getattr(self.main, name)
