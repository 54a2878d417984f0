"""What every compared method shares, and the registry of them all (KGIR-RAG §3.3.1).

- :mod:`~kgir_lib.methods.base`: :class:`MethodBase` (one ``run(ws, questions)`` per method), :class:`MethodOutput`,
  :class:`Workspace`;
- :mod:`~kgir_lib.methods.reader`: the one answer prompt and parser every method uses;
- :mod:`~kgir_lib.methods.context`: the reader's context and the final ranked list, one rule for all;
- :mod:`~kgir_lib.methods.registry`: every method by registry key (:func:`build_method`), above the methods
  themselves (:mod:`kgir_lib.kgir`, :mod:`kgir_lib.baselines`).

Every method is batch-first (each stage is one ``ws.llm.generate`` call over the open questions).
"""
