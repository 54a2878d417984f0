"""kgir_lib: the helper library behind the KGIR-RAG / KG²RAG reproduction notebooks.

Packages by layer (``kgir_lib/README.md``: the paper's sections mapped to modules, and the layers): ``config``
(the one config object, profiles, run directory), ``data`` and ``llm`` (one batched, cached LLM interface),
``retrieval`` and ``kg`` (the knowledge graph), ``methods`` (what every method shares), ``kgir`` (KGIR-RAG,
Algorithms 1-2), ``baselines`` (the compared methods), ``registry`` (all of them by key), ``eval`` (scores,
tables, claims, studies, the mechanism in the traces), ``notebook`` (what the notebooks show) and ``runner``
(the main job).
"""
__version__ = "0.1.0"

import os as _os

# OpenMP threads (llama.cpp's and torch's) sleep instead of spinning when idle. Read once, when the
# first OpenMP runtime loads, so it is set here, before any model library is imported. On a small
# shared CPU, spinning threads starve each other: SmolLM2 ran 3-10x slower under contention without it.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
