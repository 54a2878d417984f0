"""Wiring for notebooks: config → LLM, dataset, indexes and knowledge graph in one :class:`Workspace`.

Knowledge graph per dataset (KGIR-RAG §2.1), stored in ``<run>/kg/<dataset>/``:

- a dataset that ships published OpenIE output (``musique_train``) imports it
  (real GPT-3.5 triples for every passage);
- otherwise notebook 01 extracts triples with the profile's LLM for a bounded
  set of passages (``extract_max_passages``; ``null`` = all), and methods extract
  further passages on demand, incrementally, when they first retrieve them
  (:attr:`Workspace.ensure_kg`). Every extraction call goes through the LLM cache.
  Each method run starts from notebook 01's passages (the graph's base) and sees only its own on-demand
  passages besides (:meth:`Workspace.method_view`); the stored graph is the union of all of them.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence

from .config import Config
from .data import Dataset, load_dataset
from .kg.extract import build_kg, open_graph, raw_outputs, update_kg
from .kg.graph import KnowledgeGraph
from .kg.store import kg_dir, load_base, openie_file, save_kg
from .llm import LLM, LLMUsage, build_llm
from .methods.base import Workspace
from .retrieval import DenseIndex, Encoder, Reranker

_RERANKERS: dict = {}


def dense_index(cfg: Config, dataset: Dataset, progress: bool = True, encoder=None) -> DenseIndex:
    """Dense index over the whole corpus with the profile's encoder (or ``encoder``); embeddings cached, the
    cache seeded from the committed embeddings when it lacks them (:mod:`kgir_lib.embedding_seed`). The profile's
    encoder also keeps every later call (questions, triple texts) in the run's cache
    (:class:`~kgir_lib.encoder_calls.RememberedCalls`), seeded like the corpus embeddings from the committed calls
    of the main job, so a rerun computing what a run before it computed, or a fresh clone's main job, loads no
    model."""
    from .embedding_seed import committed_dirs, seed_cache
    from .encoder_calls import CALLS_FILE, RememberedCalls
    from .retrieval import embedding_cache_file

    cache_dir = cfg.run_dir / "cache" / "embeddings"
    if encoder is None:
        seed_cache(cache_dir / CALLS_FILE, committed_dirs(cfg))
    enc = encoder or RememberedCalls(Encoder(cfg.embed_model, cfg.embed_batch_size, max_length=cfg.embed_max_length),
                                     cache_dir / CALLS_FILE)
    seed_cache(embedding_cache_file(cache_dir, enc, [p.content for p in dataset.corpus.passages]), committed_dirs(cfg))
    return DenseIndex(dataset.corpus.passages, enc, cache_dir, progress=progress)


def open_kg(cfg: Config, dataset: Dataset, llm: Optional[LLM], store: bool = True) -> tuple:
    """The dataset's KG (stored, else imported, else empty: :func:`kgir_lib.kg.extract.open_graph`) and an
    ``ensure(pids)`` that extracts missing passages.

    ``store=False``: an empty graph that lives in memory only (a user-supplied corpus, notebook 07).
    """
    directory = kg_dir(cfg, dataset.name)
    kg = open_graph(cfg, dataset).kg if store else KnowledgeGraph()

    def ensure(pids: Sequence[str]) -> None:
        missing = kg.missing(pids)
        if missing and llm is not None:
            update_kg(kg, llm, [dataset.corpus[p] for p in missing], max_tokens=cfg.max_tokens("extract"))
            if store:
                save_kg(kg, directory)

    return kg, ensure


def reranker(cfg: Config) -> Optional[Reranker]:
    if not cfg.reranker_model:
        return None
    if cfg.reranker_model not in _RERANKERS:
        _RERANKERS[cfg.reranker_model] = Reranker(cfg.reranker_model)
    return _RERANKERS[cfg.reranker_model]


def workspace(cfg: Config, name, llm: Optional[LLM] = None, *, progress: bool = True, encoder=None,
              store: bool = True) -> Workspace:
    """Everything a method needs for dataset ``name`` (a name in the data directory, or a :class:`Dataset`).

    ``encoder`` replaces the profile's encoder; ``store=False`` keeps the KG in memory (see :func:`open_kg`).
    """
    llm = llm or build_llm(cfg, progress=progress)
    ds = name if isinstance(name, Dataset) else load_dataset(name, cfg.data_path)
    dense = dense_index(cfg, ds, progress, encoder)
    if store and ds.name in cfg.extract_datasets:
        build_base(cfg, ds, llm, dense)
    kg, ensure = open_kg(cfg, ds, llm, store=store)
    base = load_base(kg_dir(cfg, ds.name)) if store else None
    if store and base is None and openie_file(cfg, ds.name) is None:
        base = []  # notebook 01 extracts no pool for it: each run extracts what it reads
    return Workspace(cfg=cfg, dataset=ds, llm=llm, dense=dense, kg=kg,
                     reranker=reranker(cfg), ensure_kg=ensure, kg_base=tuple(base) if base is not None else None)


def build_base(cfg: Config, dataset: Dataset, llm: LLM, dense: DenseIndex) -> bool:
    """Build notebook 01's graph of ``dataset`` (:func:`kgir_lib.kg.extract.build_kg`: its extraction pool, stored
    with its base) when the run directory lacks it; True if it was built here.

    A notebook rerun alone on a fresh clone (``--only 04``; the graph is not committed) then starts every method
    run from the graph the main job's run of it starts from, so its traces' fingerprints match the committed ones
    and are read back, instead of running every method from an empty base. The extraction calls (answered by the
    cache, filled from the response log) are notebook 01's: they are left out of ``llm``'s usage, so the notebook's
    usage record is the same whether notebook 01 ran before it or not."""
    directory = kg_dir(cfg, dataset.name)
    if load_base(directory) is not None or openie_file(cfg, dataset.name) is not None:
        return False
    before = llm.usage.snapshot()
    try:
        build_kg(cfg, dataset, llm, dense)
    finally:
        llm.usage.stages = {k: LLMUsage(**v) for k, v in before.items()}
    return True


def fresh_view(ws: Workspace) -> Workspace:
    """The workspace a notebook reads the graph through outside a method run (notebook 03's Algorithm 1), as it
    reads it in a fresh clone: :meth:`Workspace.method_view` (notebook 01's graph and the passages this notebook
    needs), and the extraction calls of needed passages that the stored graph already held (a later notebook of an
    earlier run extracted them) asked of the cache too, as notebook 01 asks for its pool
    (:func:`kgir_lib.kg.extract.build_kg`). The graph the notebook shows and the calls it counts are then the same
    on every run of the main job, whatever the stored graph held when it started."""
    view = ws.method_view()
    if view is ws or view.ensure_kg is None:
        return ws
    extend, stored = view.ensure_kg, ws.kg

    def ensure(pids: Sequence[str]) -> None:
        pids = list(pids)
        have = stored.extracted
        held = [p for p in view.kg.missing(pids) if p in have]  # (before ``extend`` adds the others)
        extend(pids)
        if held:
            raw_outputs(ws.llm, [ws.dataset.corpus[p] for p in held], ws.cfg.max_tokens("extract"))

    return replace(view, ensure_kg=ensure)
