"""LightRAG's index of one dataset: which passages, how it is built, where it is cached, what it cost.

**Pool.** The passages the graph methods index (KG²RAG, HippoRAG 2 and KGIR-RAG read ``ws.kg``): the
questions' dense top-``k`` passages are extracted into the run's graph if they are not yet
(``ws.kg_for``, on demand, as HippoRAG 2 does), and the pool is every passage that graph holds, in corpus
order (:func:`index_pool`): notebook 01's passages plus those top-``k`` passages (a method run starts from
notebook 01's graph, :meth:`~kgir_lib.methods.base.Workspace.method_view`); on musique_train, whose
published graph covers the corpus, all 1,890 passages.

**Modes** (``cfg.lightrag_index``):

- ``suite_graph`` (the CPU profiles' default): LightRAG's custom-KG insertion of the suite's own graph of
  the pool (:mod:`kgir_lib.baselines.lightrag_graph` says how chunks, entities, relationships and their
  descriptions are made), so indexing calls no LLM. LightRAG's retrieval then runs over the same triples every
  graph method uses: a stated deviation (LightRAG's retrieval and context, not its extraction).
- ``native`` (the paper profiles' default): LightRAG's own pipeline (``ainsert``: chunking, its
  entity/relation extraction prompt with one gleaning, its merges and description summaries), every LLM call
  through the suite's LLM and cache (:class:`~kgir_lib.baselines.lightrag_bridge.LLMBridge`, stages
  ``lightrag_extract``, ``lightrag_gleaning``, ``lightrag_summary``).

**Cache.** ``<run>/cache/lightrag/<dataset>/<mode>/``: LightRAG's storages (``store/<workspace>/``, a LightRAG
workspace of its own per build) and ``index.json`` (the fingerprint, counts and the build's LLM cost), written
last. The fingerprint covers the mode, the pool, the suite graph of the pool (``suite_graph``) or the LLM and its
budgets (``native``), the encoder, the tokenizer and LightRAG's version: a different pool (another base graph or
other questions) rebuilds the index; a build cut short has no ``index.json`` and is rebuilt, its LLM calls
answered by the suite's cache.

**LightRAG's settings** are passed explicitly from ``lightrag.constants`` (its defaults), so LightRAG's
environment variables (``TOP_K``, ``MAX_GLEANING``, ...) and any ``.env`` file cannot change them; its own
LLM cache is off, its LLM timeout is a day (the suite's backend bounds each call: ``llm_timeout_s``).
"""
from __future__ import annotations

import atexit
import hashlib
import json
import logging
import shutil
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Optional, Sequence

from ..config.fields import LIGHTRAG_INDEXES as INDEX_MODES
from ..llm import LLMUsage
from .lightrag_bridge import INDEX_STAGES, TOKENIZER_NAME, LLMBridge, LoopThread, embedding_function

INSTALL_HINT = ("LightRAG is not installed: install the 'peers' extra of pyproject.toml with pip --no-deps "
                "(scripts/setup.sh does)")
# Texts LightRAG hands the embedder at once: the encoder sorts them by length and batches them itself
# (``embed_batch_size``), so long batches waste less padding than LightRAG's default of 10.
EMBED_BATCH = 1024
_OPEN: dict = {}  # index directory -> the open LightRAGIndex (one LightRAG instance per dataset and process)


class _WarningCounter(logging.Handler):
    """LightRAG's warnings, counted by their first words instead of printed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[" ".join(record.getMessage().split()[:6])] += 1


WARNINGS = _WarningCounter()


def import_lightrag():
    """The ``lightrag`` package, its logger quietened first (warnings go to :data:`WARNINGS`)."""
    log = logging.getLogger("lightrag")
    if WARNINGS not in log.handlers:
        log.addHandler(WARNINGS)  # before the import: LightRAG adds its console handler only to a bare logger
    log.propagate = False
    logging.getLogger("nano-vectordb").setLevel(logging.WARNING)
    try:
        import lightrag
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    for handler in [h for h in log.handlers if h is not WARNINGS]:  # its console handler, if it was imported first
        log.removeHandler(handler)
    log.setLevel(logging.WARNING)
    return lightrag


def index_mode(cfg) -> str:
    mode = getattr(cfg, "lightrag_index", "suite_graph")
    if mode not in INDEX_MODES:
        raise ValueError(f"parameter 'lightrag_index': unknown mode {mode!r} ({' | '.join(INDEX_MODES)})")
    return mode


def index_pool(ws, questions: Sequence, k: int) -> list:
    """The graph methods' passage pool (module docstring), in corpus order."""
    hits = ws.dense.search([q.question for q in questions], k) if questions else []
    kg = ws.kg_for(list(dict.fromkeys(p for row in hits for p, _ in row)))
    done = kg.extracted
    return [p for p in ws.dataset.corpus.pids if p in done]


def index_dir(cfg, dataset: str, mode: str) -> Path:
    """Where the ``mode`` index of ``dataset`` is cached (the two modes never replace each other)."""
    return cfg.run_dir / "cache" / "lightrag" / dataset / mode


def _settings() -> dict:
    """LightRAG's defaults for every setting this suite relies on, read from ``lightrag.constants``."""
    from lightrag import constants as c

    return dict(top_k=c.DEFAULT_TOP_K, chunk_top_k=c.DEFAULT_CHUNK_TOP_K,
                max_entity_tokens=c.DEFAULT_MAX_ENTITY_TOKENS, max_relation_tokens=c.DEFAULT_MAX_RELATION_TOKENS,
                max_total_tokens=c.DEFAULT_MAX_TOTAL_TOKENS, related_chunk_number=c.DEFAULT_RELATED_CHUNK_NUMBER,
                kg_chunk_pick_method=c.DEFAULT_KG_CHUNK_PICK_METHOD, entity_extract_max_gleaning=c.DEFAULT_MAX_GLEANING,
                force_llm_summary_on_merge=c.DEFAULT_FORCE_LLM_SUMMARY_ON_MERGE,
                summary_max_tokens=c.DEFAULT_SUMMARY_MAX_TOKENS, summary_context_size=c.DEFAULT_SUMMARY_CONTEXT_SIZE,
                summary_length_recommended=c.DEFAULT_SUMMARY_LENGTH_RECOMMENDED,
                cosine_better_than_threshold=c.DEFAULT_COSINE_THRESHOLD,
                max_source_ids_per_entity=c.DEFAULT_MAX_SOURCE_IDS_PER_ENTITY,
                max_source_ids_per_relation=c.DEFAULT_MAX_SOURCE_IDS_PER_RELATION,
                max_file_paths=c.DEFAULT_MAX_FILE_PATHS)


def _digest(obj) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:16]


class LightRAGIndex:
    """LightRAG over one dataset's pool, built or loaded from the cache (module docstring). Build with
    :func:`open_index`; :meth:`query` runs LightRAG's retrieval for one question."""

    def __init__(self, ws, mode: str, pool: Sequence[str]):
        lightrag = import_lightrag()
        from lightrag.constants import GRAPH_FIELD_SEP
        from lightrag.utils import normalize_entity_name

        from .lightrag_graph import custom_kg

        self.ws, self.mode, self.pool = ws, mode, list(pool)
        self.directory = index_dir(ws.cfg, ws.dataset.name, mode)
        self.payload: Any = None  # the suite graph as LightRAG's custom KG, and where each record came from
        self.sources: Any = None
        self.drops: dict = {}
        if mode == "suite_graph":
            self.payload, self.sources, self.drops = custom_kg(ws.kg, self.pool, ws.dataset.corpus,
                                                               normalize_entity_name, GRAPH_FIELD_SEP)
        enc = ws.dense.encoder
        parts = {"mode": mode, "pool": self.pool, "lightrag": lightrag.__version__, "tokenizer": TOKENIZER_NAME,
                 "encoder": getattr(enc, "cache_name", enc.model_name), "settings": _settings()}
        if mode == "suite_graph":
            parts["graph"] = _digest(self.payload)
        else:
            parts.update(llm=self.extractor_id(), budgets=self.budgets())
        self.fingerprint = _digest(parts)
        self.manifest: dict = {}
        self.built = False  # whether open() built the index (else it was read from the cache)
        self.rag: Any = None  # the LightRAG instance, once open
        self.loop: Optional[LoopThread] = None

    def extractor_id(self) -> str:
        """The model that answers LightRAG's index calls (the KG model where the profile routes them to one)."""
        llm = getattr(self.ws.llm, "inner", self.ws.llm)
        return llm.route("lightrag_extract").model_id if hasattr(llm, "route") else self.ws.llm.model_id

    def budgets(self) -> dict:
        cfg = self.ws.cfg
        extract = cfg.max_tokens("lightrag_extract")  # (LightRAG sets no budget; one field for its index calls)
        return {"lightrag_extract": extract, "lightrag_gleaning": extract, "lightrag_summary": extract,
                "lightrag_keywords": cfg.max_tokens("lightrag_keywords")}

    # ------------------------------------------------------------------ build or load
    def open(self) -> "LightRAGIndex":
        """Load the cached index if its ``index.json`` has this fingerprint, else build it (module docstring);
        a failed build leaves no ``index.json`` and closes what it opened."""
        stored = self.read_manifest()
        fresh = stored.get("fingerprint") == self.fingerprint and stored.get("complete")
        if not fresh:
            (self.directory / "index.json").unlink(missing_ok=True)
            shutil.rmtree(self.directory / "store", ignore_errors=True)
        # LightRAG keeps every open instance's data in process-wide dicts keyed by workspace: a workspace of its
        # own per build keeps two datasets, or a failed build and its retry, apart.
        self.workspace = stored["workspace"] if fresh else f"w{self.fingerprint}_{uuid.uuid4().hex[:8]}"
        self.loop = LoopThread()
        self.bridge = LLMBridge(self.ws.llm, self.budgets(), self.ws.cfg.max_new_tokens)
        try:
            self.rag = self.loop.run(self._start())
            self.built = not fresh
            if fresh:
                self.manifest = stored
            else:
                t0, before = time.perf_counter(), Counter(WARNINGS.counts)
                counts = self.loop.run(self._build_suite_graph() if self.mode == "suite_graph"
                                       else self._build_native())
                self.manifest = self._manifest(counts, time.perf_counter() - t0, Counter(WARNINGS.counts) - before)
                self._write_manifest()
        except BaseException:
            self.close()
            raise
        return self

    async def _start(self):
        from lightrag import LightRAG

        from .lightrag_bridge import lightrag_tokenizer

        s = _settings()
        cfg, enc = self.ws.cfg, self.ws.dense.encoder
        pool = set(self.pool)
        known = {p.content: v for p, v in zip(self.ws.dense.passages, self.ws.dense.embeddings) if p.pid in pool}
        roles = {role: {"func": self.bridge.role_func(role), "max_async": max(1, cfg.llm_max_concurrency),
                        "timeout": 86_400} for role in ("extract", "keyword", "query")}
        cos = s.pop("cosine_better_than_threshold")
        rag = LightRAG(working_dir=str(self.directory / "store"), workspace=self.workspace,
                       llm_model_func=self.bridge.role_func("other"),
                       role_llm_configs=roles, llm_model_name=self.ws.llm.model_id,
                       llm_model_max_async=max(1, cfg.llm_max_concurrency), default_llm_timeout=86_400,
                       embedding_func=embedding_function(enc, known, self.ws.dense.embeddings.shape[1]),
                       embedding_batch_num=EMBED_BATCH, default_embedding_timeout=86_400,
                       tokenizer=lightrag_tokenizer(), enable_llm_cache=False,
                       enable_llm_cache_for_entity_extract=False,
                       vector_db_storage_cls_kwargs={"cosine_better_than_threshold": cos},
                       cosine_better_than_threshold=cos, **s)
        await rag.initialize_storages()
        return rag

    async def _build_suite_graph(self) -> dict:
        from lightrag.utils import compute_mdhash_id, sanitize_text_for_encoding

        from .lightrag_graph import write_sources

        rag = self.rag
        await rag.ainsert_custom_kg(self.payload)
        chunk_id = {c["source_id"]: compute_mdhash_id(sanitize_text_for_encoding(c["content"]), prefix="chunk-")
                    for c in self.payload["chunks"]}
        stored = await rag.text_chunks.get_by_ids(list(chunk_id.values()))
        lost = [p for p, s in zip(chunk_id, stored) if s is None]
        if lost:
            raise RuntimeError(f"LightRAG did not store the chunks of {len(lost)} passage(s), e.g. {lost[:3]}: "
                               f"cannot map its retrieval back to passages ({self.directory})")
        several = await write_sources(rag, self.sources, chunk_id)
        return {"chunks": len(self.payload["chunks"]), "entities": len(self.payload["entities"]),
                "relationships": len(self.payload["relationships"]), "dropped_triples": dict(self.drops), **several}

    async def _build_native(self) -> dict:
        from lightrag.base import DocStatus

        from .lightrag_graph import parse_stats

        rag, corpus = self.rag, self.ws.dataset.corpus
        if self.pool:
            await rag.ainsert([corpus[p].content for p in self.pool], ids=[f"doc-{p}" for p in self.pool],
                              file_paths=list(self.pool))
        failed = await rag.doc_status.get_docs_by_statuses([DocStatus.FAILED])
        if failed:  # an exception, not a malformed reply (those are parsed as far as they go): the LLM could not answer
            first = next(iter(failed.values()))
            raise RuntimeError(f"LightRAG could not index {len(failed)} of {len(self.pool)} passages of "
                               f"{self.ws.dataset.name!r} (first error: {first.error_msg}); the index is not saved and "
                               f"is rebuilt next time, every answered LLM call from the cache")
        status = await rag.doc_status.get_status_counts()
        nodes = await rag.chunk_entity_relation_graph.get_all_nodes()
        edges = await rag.chunk_entity_relation_graph.get_all_edges()
        docs = await rag.doc_status.get_docs_by_statuses([DocStatus.PROCESSED])
        outputs = [r.result.text for r in self.bridge.records if r.stage in INDEX_STAGES[:2]]
        return {"chunks": sum(int(d.chunks_count or 0) for d in docs.values()), "entities": len(nodes),
                "relationships": len(edges),
                "documents": {str(k): int(v) for k, v in status.items() if v}, "parse": await parse_stats(outputs)}

    # ------------------------------------------------------------------ manifest
    def read_manifest(self) -> dict:
        path = self.directory / "index.json"
        try:
            return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        except (OSError, ValueError):
            return {}

    def _manifest(self, counts: dict, seconds: float, warnings: Counter) -> dict:
        stages: dict = {}
        for r in self.bridge.records:
            stages.setdefault(r.stage, LLMUsage()).add(r.result)
        total = LLMUsage()
        for u in stages.values():
            total.calls += u.calls
            total.cache_hits += u.cache_hits
            total.prompt_tokens += u.prompt_tokens
            total.completion_tokens += u.completion_tokens
            total.seconds += u.seconds
            total.truncated += u.truncated
        return {"fingerprint": self.fingerprint, "complete": True, "workspace": self.workspace,
                "dataset": self.ws.dataset.name, "mode": self.mode,
                "passages": len(self.pool), "llm": self.extractor_id() if self.mode == "native" else None,
                "encoder": self.ws.dense.encoder.model_name, "tokenizer": TOKENIZER_NAME, **counts,
                "build_seconds": seconds, "llm_usage": total.to_dict(),
                "llm_stages": {k: v.to_dict() for k, v in stages.items()}, "warnings": dict(warnings)}

    def _write_manifest(self) -> None:
        path = self.directory / "index.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.manifest, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(path)

    # ------------------------------------------------------------------ query
    def query(self, question: str, **param) -> dict:
        """LightRAG's retrieval for ``question`` with ``only_need_context=True`` (``aquery_llm``): its structured
        data (entities, relationships, chunks) and the context string it would hand its own LLM."""
        from lightrag import QueryParam

        if self.loop is None:
            raise RuntimeError(f"the LightRAG index {self.directory} is not open (open() it first)")
        return self.loop.run(self.rag.aquery_llm(question, QueryParam(only_need_context=True, **param)))

    def close(self) -> None:
        if self.loop is not None:
            try:
                if self.rag is not None:
                    self.loop.run(self.rag.finalize_storages())
            finally:
                self.loop.close()
                self.loop = None


def close_all() -> None:
    """Close every open index (its storages and its loop)."""
    for index in list(_OPEN.values()):
        index.close()
    _OPEN.clear()


@atexit.register
def _close_at_exit() -> None:
    try:
        close_all()
    except Exception:  # noqa: BLE001 (at exit every index is on disk already; nothing is left to save)
        pass


def open_index(ws, mode: str, pool: Sequence[str]) -> LightRAGIndex:
    """The dataset's index for ``pool``: the one already open in this process if it matches, else the cached
    one if its fingerprint matches, else built now."""
    index = LightRAGIndex(ws, mode, pool)
    key = str(index.directory)
    held = _OPEN.get(key)
    if held is not None and held.fingerprint == index.fingerprint and held.loop is not None:
        return held
    if held is not None:
        held.close()
    _OPEN[key] = index.open()
    return _OPEN[key]


def index_manifest(cfg, dataset: str) -> Optional[dict]:
    """The manifest of the LightRAG index behind this run's LightRAG traces of ``dataset`` (the meta of
    ``traces/lightrag/``, else ``traces/lightrag_naive/``, in the profile's index mode), else the cached index's
    ``index.json``, else ``None``."""
    from ..traces import read_meta, trace_file

    mode = index_mode(cfg)
    for key in ("lightrag", "lightrag_naive"):
        meta = read_meta(trace_file(cfg.run_dir, key, dataset)) or {}
        m = meta.get("lightrag_index")
        if m and m.get("mode") == mode:
            return m
    path = index_dir(cfg, dataset, mode) / "index.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def indexing_table(cfg, datasets: Sequence[str], suite_indexing=None):
    """Per dataset, the indexing cost of the suite's graph (``suite_indexing``: notebook 05's
    ``suite.indexing``, the extraction requests read back from the LLM cache) beside LightRAG's index (its
    index): passages, LLM calls, prompt and completion tokens and LLM seconds, in total and a passage.

    LightRAG's index is read from the trace meta of the run that queried it (:func:`index_manifest`), else
    from the cache's ``index.json``. A dataset without either (LightRAG not run) has no LightRAG row."""
    import pandas as pd

    rows = []
    for d in datasets:
        if suite_indexing is not None and d in getattr(suite_indexing, "index", ()):
            s = suite_indexing.loc[d]
            rows.append({"dataset": d, "index": "suite graph (KG²RAG, HippoRAG 2, KGIR-RAG)", "source": s["source"],
                         "passages": s["passages_extracted"], "LLM calls": s["extract_calls_found"],
                         "prompt tokens": s["extract_prompt_tokens"],
                         "completion tokens": s["extract_completion_tokens"], "LLM seconds": s["extract_seconds"]})
        m = index_manifest(cfg, d)
        if m:
            u = m["llm_usage"]
            source = (f"LightRAG's extraction ({m['llm']})" if m["mode"] == "native"
                      else "the suite graph inserted as LightRAG's custom KG (no LLM call)")
            rows.append({"dataset": d, "index": f"LightRAG ({m['mode']})", "source": source, "passages": m["passages"],
                         "LLM calls": u["calls"], "prompt tokens": u["prompt_tokens"],
                         "completion tokens": u["completion_tokens"], "LLM seconds": u["seconds"],
                         "build wall seconds": m["build_seconds"]})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    n = df["passages"].where(df["passages"] > 0)
    for col in ("LLM calls", "prompt tokens", "completion tokens", "LLM seconds"):
        df[f"{col} / passage"] = df[col] / n
    return df.set_index(["dataset", "index"])
