"""kgir_lib: the helper library behind the KGIR-RAG / KG²RAG reproduction notebooks.

The public API (:mod:`kgir_lib.api`): ``from kgir_lib import KGIRPipeline, load_example`` indexes a
list of passages and answers questions with KGIR-RAG, each answer with its trace;
``from kgir_lib import PAPER, compose, register`` makes a composition of one's own steps a method of
the suite (:func:`kgir_lib.kgir.variants.compose`, :func:`kgir_lib.registry.register`).

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

# the public API: kgir_lib.api; a composition of one's own: the paper's steps (PAPER), compose and register
__all__ = ["KGIRPipeline", "load_example", "PAPER", "compose", "register"]


def __getattr__(name: str):
    """The public API's names, imported on first use, so ``import kgir_lib.config`` stays light (the
    package sits on the top layer of kgir_lib/README.md, above what it hands on)."""
    if name == "KGIRPipeline":
        from .api import KGIRPipeline
        return KGIRPipeline
    if name == "load_example":
        from .data import load_example
        return load_example
    if name == "PAPER":
        from .kgir.loop import PAPER
        return PAPER
    if name == "compose":
        from .kgir.variants import compose
        return compose
    if name == "register":
        from .registry import register
        return register
    raise AttributeError(f"module 'kgir_lib' has no attribute {name!r}")
