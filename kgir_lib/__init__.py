"""kgir_lib: the helper library behind the KGIR-RAG / KG²RAG reproduction notebooks.

One module per stage: ``config`` (profiles, run directory), ``data`` (HippoRAG
layout loaders), ``llm`` (one batched, cached LLM interface), ``retrieval``
(dense cosine top-k, BM25, reranker), ``kg`` (knowledge graph: extraction,
parsing, storage), ``subgraph`` (KGIR-RAG Algorithm 1), ``rewrite`` (Algorithm 2
and reflection), ``methods`` (baselines and KG²RAG), ``metrics`` and ``report``.
"""
__version__ = "0.1.0"

import os as _os

# OpenMP threads (llama.cpp's and torch's) sleep instead of spinning when idle. Read once, when the
# first OpenMP runtime loads, so it is set here, before any model library is imported. On a small
# shared CPU, spinning threads starve each other: SmolLM2 ran 3-10x slower under contention without it.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
