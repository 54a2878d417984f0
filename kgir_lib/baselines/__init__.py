"""The methods KGIR-RAG is compared with (paper §3.3.1), each behind :class:`kgir_lib.methods.base.MethodBase`.

Naive Gen / Naive RAG (:mod:`~kgir_lib.baselines.naive`), BM25 and Dense (:mod:`~kgir_lib.baselines.retrievers`),
IRCoT, ITER-RETGEN, HyDE, KG²RAG (:mod:`~kgir_lib.baselines.kg2rag`, with its ablations), HippoRAG 2
(:mod:`~kgir_lib.baselines.hipporag2`; its graph and PPR operator: :mod:`~kgir_lib.baselines.hippo_graph`) and
LightRAG, the ``lightrag-hku`` package run through the suite (:mod:`~kgir_lib.baselines.lightrag_method`; its
index :mod:`~kgir_lib.baselines.lightrag_index`, the suite graph in its form :mod:`~kgir_lib.baselines.lightrag_graph`,
the suite's LLM, encoder and tokenizer handed to it :mod:`~kgir_lib.baselines.lightrag_bridge`).
Every one answers through the shared reader and ranks by the one rule of :mod:`kgir_lib.methods.context`.
"""
