"""kgir_lib: the helper library behind the KGIR-RAG / KG²RAG reproduction notebooks.

One module per stage: ``config`` (profiles, run directory), ``data`` (HippoRAG
layout loaders), ``llm`` (one batched, cached LLM interface), ``retrieval``
(dense cosine top-k, BM25, reranker), ``kg`` (knowledge graph: extraction,
parsing, storage), ``subgraph`` (KGIR-RAG Algorithm 1), ``rewrite`` (Algorithm 2
and reflection), ``methods`` (baselines and KG²RAG), ``metrics`` and ``report``.
"""
__version__ = "0.1.0"
