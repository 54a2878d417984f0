"""Every compared method behind one interface (KGIR-RAG §3.3.1).

Every method inherits :class:`kgir_lib.methods.base.MethodBase`: a display ``name``, a registry
``key``, and ``run(ws, questions) -> list[MethodOutput]``: questions in; answers, the final ranked
passage list (Recall@k) and per-question LLM usage + a trace out. Every method
is batch-first (each stage is one ``ws.llm.generate`` call over the open
questions) and answers through the shared reader (:mod:`kgir_lib.reader`).

**Final ranked list, the same rule for all** (:func:`retrievers.final_ranking`):
the passages in the reader's context, in context order, then the method's
remaining candidates in its own order. Each class docstring names its context
and candidates.

:data:`METHODS` maps a registry key to a factory; :func:`build_method` builds one
(``build_method("kg2rag", m_hops=2)``); :data:`DEFAULT_METHODS` is notebook 05's
order.
"""
from __future__ import annotations

from ..llm import LLMUsage
from ..traces import read_traces, write_traces
from .base import Method, MethodBase, MethodOutput, Workspace
from .hipporag2 import HippoRAG2
from .hyde import HyDE
from .ircot import IRCoT
from .iter_retgen import IterRetGen
from .kg2rag import KG2RAG
from .kgir import KGIRRAG
from .naive import NaiveGen, NaiveRAG
from .retrievers import BM25Retriever, DenseRetriever, final_ranking


def _variant(cls, variant: str):
    """A registry factory: ``cls`` with ``variant`` fixed."""
    def make(**kw):
        return cls(variant=variant, **kw)
    return make


METHODS: dict = {
    "naive_gen": NaiveGen,
    "naive_rag": NaiveRAG,
    "bm25": BM25Retriever,
    "dense": DenseRetriever,
    "ircot": IRCoT,
    "iter_retgen": IterRetGen,
    "hyde": HyDE,
    "kg2rag": _variant(KG2RAG, "full"),
    "kg2rag_no_expansion": _variant(KG2RAG, "no_expansion"),
    "kg2rag_no_organisation": _variant(KG2RAG, "no_organisation"),
    "hipporag2": HippoRAG2,
    "kgir": _variant(KGIRRAG, "full"),
    "kgir_no_subgraph": _variant(KGIRRAG, "no_subgraph"),
    "kgir_no_reflection": _variant(KGIRRAG, "no_reflection"),
    "kgir_no_rewrite": _variant(KGIRRAG, "no_rewrite"),
    "kgir_forced": _variant(KGIRRAG, "forced"),  # a study beside the method (notebook 06), not in notebook 05
}

# Display names of the registry keys (tables are indexed by these; equal to each built method's ``name``).
LABELS: dict = {
    "naive_gen": "Naive Gen", "naive_rag": "Naive RAG", "bm25": "BM25", "dense": "Dense",
    "ircot": "IRCoT", "iter_retgen": "ITER-RETGEN", "hyde": "HyDE", "kg2rag": "KG²RAG",
    "kg2rag_no_expansion": "KG²RAG w/o expansion", "kg2rag_no_organisation": "KG²RAG w/o organisation",
    "hipporag2": "HippoRAG 2", "kgir": "KGIR-RAG", "kgir_no_subgraph": "KGIR-RAG w/o subgraph",
    "kgir_no_reflection": "KGIR-RAG w/o reflection", "kgir_no_rewrite": "KGIR-RAG w/o rewrite",
    "kgir_forced": "KGIR-RAG (forced rounds)",
}

# Notebook 05's order: the paper's groups (§3.3.1), then the ablations.
DEFAULT_METHODS: list = ["naive_gen", "naive_rag", "bm25", "dense", "ircot", "iter_retgen", "hyde",
                         "kg2rag", "hipporag2", "kgir", "kg2rag_no_expansion", "kg2rag_no_organisation",
                         "kgir_no_subgraph", "kgir_no_reflection", "kgir_no_rewrite"]


def build_method(name: str, **kw) -> Method:
    """The method registered as ``name`` (a key of :data:`METHODS`), with constructor overrides ``kw``."""
    if name not in METHODS:
        raise KeyError(f"unknown method {name!r} (known: {', '.join(METHODS)})")
    return METHODS[name](**kw)


__all__ = ["METHODS", "LABELS", "DEFAULT_METHODS", "build_method", "Method", "MethodBase", "MethodOutput", "LLMUsage",
           "Workspace", "read_traces", "write_traces", "final_ranking", "NaiveGen", "NaiveRAG", "BM25Retriever",
           "DenseRetriever", "IRCoT", "IterRetGen", "HyDE", "KG2RAG", "HippoRAG2", "KGIRRAG"]
