"""What every compared method shares (KGIR-RAG §3.3.1), below the methods themselves.

- :mod:`~kgir_lib.methods.base`: :class:`MethodBase` (one ``run(ws, questions)`` per method; its knobs),
  :class:`MethodOutput`, :class:`Workspace`;
- :mod:`~kgir_lib.methods.reader`: the one answer prompt and parser every method uses;
- :mod:`~kgir_lib.methods.context`: the reader's context and the final ranked list, one rule for all.

The methods are :mod:`kgir_lib.kgir` (the paper's) and :mod:`kgir_lib.baselines`; :mod:`kgir_lib.registry` lists
them all. Every method is batch-first (each stage is one ``ws.llm.generate`` call over the open questions).
"""
