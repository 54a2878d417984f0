"""The registry of every compared method (KGIR-RAG §3.3.1): key -> factory, display labels, notebook 05's order.

:data:`METHODS` maps a registry key to a factory; :func:`build_method` builds one
(``build_method("kg2rag", m_hops=2)``); :data:`DEFAULT_METHODS` is notebook 05's
order; :func:`check_method_keys` checks the config's ``eval_methods`` against it.
:func:`register` adds a researcher's composition (:func:`kgir_lib.kgir.variants.compose`) under its key, with no
edit here; the runner's ``--composition`` hands one to every notebook's kernel (``$KGIR_COMPOSITIONS``, read
when this module is imported: :func:`register_from_environment`).
The registry sits above the methods it lists (:mod:`kgir_lib.kgir`, :mod:`kgir_lib.baselines`);
what they share (:class:`~kgir_lib.methods.base.MethodBase`, the reader, the context rule) sits below them.
"""
from __future__ import annotations

import os
from typing import Iterable, Optional

from .baselines.hipporag2 import HippoRAG2
from .baselines.hyde import HyDE
from .baselines.ircot import IRCoT
from .baselines.iter_retgen import IterRetGen
from .baselines.kg2rag import KG2RAG
from .baselines.kg2rag_code import KG2RAGCode
from .baselines.lightrag_method import LightRAGMethod
from .baselines.naive import NaiveGen, NaiveRAG
from .baselines.retrievers import BM25Retriever, DenseRetriever
from .config import ConfigError
from .kgir.first_retrieval import FIRST_AND_NEW, FirstAndNewKGIRRAG
from .kgir.variants import STUDY_VARIANTS, VARIANTS, KGIRRAG, OwnKGIRRAG, StudyKGIRRAG, Variant
from .methods.base import MethodBase

COMPOSITIONS_ENV = "KGIR_COMPOSITIONS"  # "file.py:NAME;module:NAME": compositions the runner's kernels register


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
    "kg2rag_code": KG2RAGCode,  # KG²RAG as its authors' code runs it (benchmarks/peers/kg2rag_crosscheck.sh)
    "hipporag2": HippoRAG2,
    # KGIR-RAG, its Table 7 ablations and the forced rounds (a study beside the method, notebook 06, not in
    # notebook 05): the rows of kgir_lib.kgir.variants.VARIANTS that KGIRRAG runs
    **{VARIANTS[v].key: _variant(KGIRRAG, v) for v in ("full", "no_subgraph", "no_reflection", "no_rewrite",
                                                         "forced")},
    "lightrag": _variant(LightRAGMethod, "hybrid"),
    "lightrag_naive": _variant(LightRAGMethod, "naive"),  # a check of LightRAG's vector search against Naive RAG
    # study variants of KGIR-RAG (notebook 04's step attribution; kgir_lib.kgir.variants): oracles and two of ours
    **{spec.key: _variant(StudyKGIRRAG, v) for v, spec in STUDY_VARIANTS.items()},
    # a deployable repair of ours (kgir_lib.kgir.first_retrieval): D_1's top passages beside the new passages of
    # D'_t; a composition of the paper's steps beside the method, listed where a profile names it
    FIRST_AND_NEW.key: FirstAndNewKGIRRAG,
}

# Display names of the registry keys (each built method's ``name``); a run's tables are indexed by
# :func:`method_label`, which names what a setting changes (LightRAG's index).
LABELS: dict = {
    "naive_gen": "Naive Gen", "naive_rag": "Naive RAG", "bm25": "BM25", "dense": "Dense",
    "ircot": "IRCoT", "iter_retgen": "ITER-RETGEN", "hyde": "HyDE", "kg2rag": "KG²RAG",
    "kg2rag_no_expansion": "KG²RAG w/o expansion", "kg2rag_no_organisation": "KG²RAG w/o organisation",
    "kg2rag_code": "KG²RAG (authors' code)",
    "hipporag2": "HippoRAG 2", "lightrag": "LightRAG (hybrid; shared reader)",
    "lightrag_naive": "LightRAG (naive; shared reader)",
    **{row.key: row.name for row in VARIANTS.values()},  # KGIR-RAG and its variants: their table
    FIRST_AND_NEW.key: FIRST_AND_NEW.name,
}
# What each KGIR-RAG composition outside the paper's table of variants does (the table's rows describe themselves:
# kgir_lib.kgir.variants.describe).
DESCRIPTIONS: dict = {FIRST_AND_NEW.key: FIRST_AND_NEW.description}
# Notebook 04's step attribution (kgir_lib.eval.mechanism.step_attribution): the oracle variants, then ours.
STUDY_METHODS: list = [spec.key for spec in STUDY_VARIANTS.values()]



# Notebook 05's order: the paper's groups (§3.3.1), the ablations, then LightRAG. Each run starts from
# notebook 01's graph (Workspace.method_view), so the order changes no method's output.
DEFAULT_METHODS: list = ["naive_gen", "naive_rag", "bm25", "dense", "ircot", "iter_retgen", "hyde",
                         "kg2rag", "kg2rag_code", "hipporag2", "kgir", "kg2rag_no_expansion", "kg2rag_no_organisation",
                         "kgir_no_subgraph", "kgir_no_reflection", "kgir_no_rewrite", "lightrag", "lightrag_naive"]


def register(composition: Variant) -> str:
    """Make a researcher's composition (:func:`kgir_lib.kgir.variants.compose`) a method of the suite under its
    key: :func:`build_method`, the labels of the tables, ``eval_methods`` and the paired tests then take it as
    any registered method. The same composition registered again (its key, name and description: the file
    read a second time) replaces the first; another under a taken key is refused. Returns the key."""
    if not isinstance(composition, Variant) or composition.kind != "own":
        raise ValueError(f"register: a composition of kgir_lib.compose(...), got {type(composition).__name__}")
    key = composition.key
    made = METHODS.get(key)
    if made is not None:
        before = getattr(made, "composition", None)
        words = (composition.name, composition.description)
        if before is None or (before.name, before.description) != words:
            raise ValueError(f"register: the key {key!r} is taken (by {LABELS.get(key, key)!r}): give the "
                             f"composition another key")

    def make(**kw):
        return OwnKGIRRAG(composition=composition, **kw)
    make.composition = composition  # type: ignore[attr-defined]
    METHODS[key] = make
    LABELS[key] = composition.name
    return key


def load_composition(spec: str) -> Variant:
    """The composition ``spec`` names: ``path/to/file.py:NAME`` or ``package.module:NAME`` (the attribute
    ``NAME`` of that file or module); a ``ValueError`` names the spec and what is wrong."""
    import importlib
    import importlib.util
    from pathlib import Path

    where, sep, name = str(spec).rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise ValueError(f"composition {spec!r}: give it as path/to/file.py:NAME or package.module:NAME")
    try:
        if where.endswith(".py"):
            path = Path(where).resolve()
            if not path.is_file():
                raise ValueError(f"composition {spec!r}: no file {path}")
            loader = importlib.util.spec_from_file_location(f"kgir_composition_{path.stem}", path)
            assert loader is not None and loader.loader is not None
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except ImportError as exc:
        raise ValueError(f"composition {spec!r}: cannot import {where}: {exc}") from None
    if not hasattr(module, name):
        raise ValueError(f"composition {spec!r}: {where} defines no {name}")
    composition = getattr(module, name)
    if not isinstance(composition, Variant) or composition.kind != "own":
        raise ValueError(f"composition {spec!r}: {name} is a {type(composition).__name__}, not a composition "
                         f"of kgir_lib.compose(...)")
    return composition


def register_from_environment() -> list:
    """Register the compositions ``$KGIR_COMPOSITIONS`` names (``;``-separated specs, :func:`load_composition`):
    how the runner hands a researcher's compositions to every notebook's kernel. Returns their keys."""
    specs = [s for s in os.environ.get(COMPOSITIONS_ENV, "").split(";") if s.strip()]
    return [register(load_composition(s.strip())) for s in specs]


def build_method(name: str, **kw) -> MethodBase:
    """The method registered as ``name`` (a key of :data:`METHODS`), with constructor overrides ``kw``."""
    if name not in METHODS:
        raise KeyError(f"unknown method {name!r} (known: {', '.join(METHODS)})")
    return METHODS[name](**kw)


def check_method_keys(keys: Optional[Iterable[str]], field: str = "eval_methods",
                      known: Optional[Iterable[str]] = None) -> None:
    """``keys`` (the config's ``eval_methods``; ``None`` = every method) must be registry keys of :data:`METHODS`
    (of ``known`` when given, and may then be empty: the config's ``attribution_methods``, :data:`STUDY_METHODS`).

    Checked where methods are built (notebooks 04 and 05, the runner's validation), not in :mod:`kgir_lib.config`,
    which sits below the methods it configures."""
    if keys is None:
        return
    keys, allowed = list(keys), list(METHODS if known is None else known)
    unknown = [m for m in keys if m not in allowed]
    if unknown or (not keys and known is None):
        raise ConfigError(f"parameter {field!r}: unknown or no method keys {unknown} (known: {', '.join(allowed)})")


def method_label(key: str, cfg) -> str:
    """The row label of method ``key`` in a run with config ``cfg`` (:meth:`MethodBase.label`): :data:`LABELS`,
    except where a setting changes what the method is (LightRAG over the suite's graph: "LightRAG (hybrid;
    suite graph; shared reader)"). ``cfg`` needs only the fields the labels read (``lightrag_index``)."""
    method = build_method(key)
    return method.label(cfg) if hasattr(method, "label") else LABELS[key]


register_from_environment()  # the runner's compositions, in every kernel that builds methods
