"""LLM triple extraction, one call a passage, batched, cached and incremental (KGIR-RAG §2.1).

Prompt: ``prompts/kg_extract.txt``, after KG²RAG §3.1 (Fig. 3): a single call a
passage with two worked examples, asking for the facts of the text in its own
words. HippoRAG's alternative (NER, then triples conditioned on the entities)
costs two calls a passage; on a CPU the single call halves the indexing time.
The output format is ``subject | relation | object`` lines and the examples are
sent as earlier chat turns: with SmolLM2-135M this gave the most well-formed
triples of the variants we tried (one user message holding the examples; ``##``
separators; JSON constrained by a schema, which was also slower). The parser
(:mod:`kgir_lib.kg.parse`) accepts JSON and the other shapes too, for larger models.

All passages of one update go to :meth:`LLM.generate` in one batch; the LLM
cache makes a rerun free and an interrupted run resume where it stopped.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Sequence

from ..data import Dataset, Passage, Question, sample_questions
from ..llm import LLM
from ..llm.prompts import chat
from .graph import KnowledgeGraph, Triple
from .openie import import_openie
from .parse import CUT_REPLY, parse_triples
from .store import (drops_of, is_stored, kg_dir, load_kg, openie_file, record_drops, save_base, save_kg,
                    total_drops)

PROMPT = "kg_extract"
MAX_TOKENS = 256  # default budget when no profile is given; runs use cfg.max_tokens("extract") (paper: 1024)


@dataclass
class ExtractionReport:
    """What one extraction batch produced."""

    triples: dict = field(default_factory=dict)       # pid -> list[Triple]
    drops: Counter = field(default_factory=Counter)   # reason -> count, over the batch
    n_passages: int = 0
    n_unparseable: int = 0                            # passages whose output had no triple shape at all
    n_truncated: int = 0                              # replies cut at the token budget (parse.CUT_REPLY)
    drops_by_pid: dict = field(default_factory=dict)  # pid -> Counter
    raw: dict = field(default_factory=dict)           # pid -> LLM output text
    new_calls: int = 0                                # requests that were not cache hits
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0                              # backend time of the new calls

    @property
    def n_triples(self) -> int:
        return sum(len(ts) for ts in self.triples.values())


def extraction_requests(passages: Sequence[Passage], max_tokens: int = MAX_TOKENS) -> list:
    """One chat request a passage: system, the two example turns of the prompt file, then title + text; greedy.

    The passage goes in as a value, after the turns are read, so a passage holding "Passage:",
    "Triples:" or braces cannot change the turns."""
    return [chat(PROMPT, {"passage": p.content}, max_tokens=max_tokens, temperature=0.0) for p in passages]


def extract_triples(llm: LLM, passages: Sequence[Passage], stage: str = "extract",
                    max_tokens: int = MAX_TOKENS) -> ExtractionReport:
    """Extract ``(h, r, t, c)`` for every passage in one batched call (KGIR-RAG eq. 1)."""
    passages = list({p.pid: p for p in passages}.values())
    report = ExtractionReport(n_passages=len(passages))
    if not passages:
        return report
    results = llm.generate(extraction_requests(passages, max_tokens), stage=stage,
                           desc=f"extract triples ({len(passages)} passages)")
    for p, res in zip(passages, results):
        kept, drops = parse_triples(res.text)
        drops[CUT_REPLY] += int(res.truncated)  # the reply hit max_tokens: what followed the cut is lost
        report.n_truncated += int(res.truncated)
        report.triples[p.pid] = [Triple(h, r, t, p.pid) for h, r, t in kept]
        report.drops_by_pid[p.pid] = drops
        report.drops.update(drops)
        report.raw[p.pid] = res.text
        report.n_unparseable += int(not kept and drops["unparseable"] > 0)
        report.prompt_tokens += res.prompt_tokens
        report.completion_tokens += res.completion_tokens
        if not res.cached:
            report.new_calls += 1
            report.seconds += res.seconds
    return report


def update_kg(kg: KnowledgeGraph, llm: LLM, passages: Sequence[Passage], stage: str = "extract",
              max_tokens: int = MAX_TOKENS) -> ExtractionReport:
    """Incremental update: extract only the passages not yet in ``kg.extracted``, then add them.

    Passages already processed cost nothing (not even a cache lookup); removing
    passages is :meth:`KnowledgeGraph.remove`.
    """
    done = kg.extracted
    todo = [p for p in {p.pid: p for p in passages}.values() if p.pid not in done]
    report = extract_triples(llm, todo, stage=stage, max_tokens=max_tokens)
    for p in todo:
        kg.add(p.pid, report.triples[p.pid])
    record_drops(kg, report.drops_by_pid)
    return report


def extraction_pool(ds: Dataset, dense, questions: Sequence[Question], top_k: int,
                    cap: Optional[int]) -> list:
    """Which passages notebook 01 extracts when the corpus is not extracted whole.

    The union of the dense top-``top_k`` passages of ``questions`` (Algorithm 1, step 1:
    exactly the passages whose triples form ``G_q``), in rank order: every
    question's rank-1 passage first, then every rank-2 passage, ..., so a ``cap``
    keeps the passages most likely to be used. ``cap=None`` means the whole corpus.
    Passages outside the pool are extracted later, on demand (``Workspace.kg_for``).
    """
    if cap is None:
        return list(ds.corpus.pids)
    if cap < 0:
        raise ValueError(f"parameter 'extract_max_passages': must be >= 0 or null, got {cap}")
    hits = dense.search([q.question for q in questions], top_k) if questions else []
    pool: dict = {}
    for rank in range(top_k):
        for row in hits:
            if rank < len(row):
                pool.setdefault(row[rank][0], None)
    return list(pool)[:cap]


def raw_outputs(llm: LLM, passages: Sequence[Passage], max_tokens: int, stage: str = "extract") -> dict:
    """The extraction output text of ``passages`` (``pid -> text``), answered by the cache after a run.

    ``max_tokens`` must be the budget the graph was built with (``cfg.max_tokens("extract")``): it is part
    of the request, so another budget would miss the cache and call the LLM again."""
    results = llm.generate(extraction_requests(passages, max_tokens=max_tokens), stage=stage)
    return {p.pid: r.text for p, r in zip(passages, results)}


@dataclass
class KGBuild:
    """One dataset's graph as notebook 01 built it."""

    dataset: str
    source: str                  # "openie" (imported published extraction) or "llm"
    kg: KnowledgeGraph           # the passages this build covers (Table 3 describes exactly these)
    drops: Counter
    pool: list                   # passages the LLM route extracted (in pool order); [] for an import
    report: Optional[ExtractionReport] = None  # this run's extraction (new passages only)
    stored_passages: int = 0     # passages in the stored KG (may include on-demand extractions of later notebooks)


def build_sentence(cfg, build: KGBuild) -> str:
    """What :func:`build_kg` did for one dataset, in one line (notebook 01 §2): the published file it imported or
    the pool of passages it extracted, and the triples and passages of the graph. Nothing in it depends on what an
    earlier execution stored, so a rerun prints the same line."""
    published = openie_file(cfg, build.dataset)
    what = (f"imported {published.name}" if build.source == "openie" and published is not None
            else f"extracted the pool of {len(build.pool)} passages")
    return f"{build.dataset}: {what}; {len(build.kg)} triples from {len(build.kg.extracted)} passages"


class OpenedKG(NamedTuple):
    """A dataset's graph as :func:`open_graph` found it: ``how`` is ``"stored"``, ``"imported"`` or ``"empty"``;
    ``drops`` the parser drops by reason (an import's own count, with its document-level reasons)."""

    kg: KnowledgeGraph
    how: str
    drops: Counter


def open_graph(cfg, ds: Dataset) -> OpenedKG:
    """The one rule for opening ``ds``'s knowledge graph (KGIR-RAG §2.1): the graph stored in
    ``<run>/kg/<dataset>/`` (:func:`~kgir_lib.kg.store.kg_dir`), else the published OpenIE imported and stored
    (:func:`~kgir_lib.kg.store.openie_file`; cheap and deterministic), else an empty graph."""
    directory = kg_dir(cfg, ds.name)
    if is_stored(directory):
        kg = load_kg(directory)
        return OpenedKG(kg, "stored", total_drops(kg))
    published = openie_file(cfg, ds.name)
    if published is not None:
        kg, drops = import_openie(published, ds.corpus)
        save_kg(kg, directory)
        return OpenedKG(kg, "imported", drops)
    return OpenedKG(KnowledgeGraph(), "empty", Counter())


def build_kg(cfg, ds: Dataset, llm: Optional[LLM], dense=None) -> KGBuild:
    """Build and store ``ds``'s KG for notebook 01 (KGIR-RAG §2.1), in ``<run>/kg/<dataset>/``.

    The graph is opened by the one rule of :func:`open_graph`. A dataset that ships HippoRAG's OpenIE output
    (:func:`~kgir_lib.kg.store.openie_file`) is complete as opened (``source = "openie"``). Any other dataset:
    the extraction pool (:func:`extraction_pool` over the profile's sampled questions and ``cfg.top_k``,
    capped at ``cfg.extract_max_passages``) is extracted incrementally with ``llm`` into the opened graph: a
    rerun finds every passage already processed and makes no LLM call. The pool is recorded as the graph's
    base (``base.json``, :func:`~kgir_lib.kg.store.save_base`): every method run starts from it. The calls of
    pooled passages the stored graph already held are asked of the cache too (answered there, no model call), so
    ``llm``'s usage counts the whole pool whether this run extracted it or found it stored (notebook 01's usage
    record is then the same on a rerun).
    """
    if openie_file(cfg, ds.name) is not None:
        kg, _, drops = open_graph(cfg, ds)
        return KGBuild(ds.name, "openie", kg, drops, [], None, len(kg.extracted))
    if llm is None or dense is None:
        raise ValueError(f"dataset {ds.name!r} has no published OpenIE file: building its KG needs an LLM and a "
                         f"dense index")
    kg = open_graph(cfg, ds).kg
    questions = sample_questions(ds.questions, cfg.n_questions, cfg.seed)
    pool = extraction_pool(ds, dense, questions, cfg.top_k, cfg.extract_max_passages)
    earlier = [ds.corpus[p] for p in pool if p in kg.extracted]
    report = update_kg(kg, llm, [ds.corpus[p] for p in pool], max_tokens=cfg.max_tokens("extract"))
    if earlier:  # the pool's calls the stored graph answered, asked of the cache: llm's usage is the pool's
        raw_outputs(llm, earlier, cfg.max_tokens("extract"))  # whatever the graph held when this ran
    save_kg(kg, kg_dir(cfg, ds.name))
    save_base(kg_dir(cfg, ds.name), kg, pool)
    sub = kg.subset(pool)
    in_pool = set(pool)
    by_pid = {p: c for p, c in drops_of(kg).items() if p in in_pool}
    record_drops(sub, by_pid)
    drops = Counter()
    for c in by_pid.values():
        drops.update(c)
    return KGBuild(ds.name, "llm", sub, drops, pool, report, len(kg.extracted))
