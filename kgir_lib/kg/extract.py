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
from typing import Optional, Sequence

from ..data import Dataset, Passage, Question
from ..llm import LLM
from ..prompts import chat
from .graph import KnowledgeGraph, Triple
from .parse import parse_triples
from .store import drops_of, load_kg, record_drops, save_kg

PROMPT = "kg_extract"
MAX_TOKENS = 256  # default budget when no profile is given; runs use cfg.max_tokens("extract") (paper: 1024)


@dataclass
class ExtractionReport:
    """What one extraction batch produced."""

    triples: dict = field(default_factory=dict)       # pid -> list[Triple]
    drops: Counter = field(default_factory=Counter)   # reason -> count, over the batch
    n_passages: int = 0
    n_unparseable: int = 0                            # passages whose output had no triple shape at all
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


def extraction_pool(ds: Dataset, dense, questions: Sequence[Question], k: int,
                    cap: Optional[int]) -> list:
    """Which passages notebook 01 extracts when the corpus is not extracted whole.

    The union of the dense top-``k`` passages of ``questions`` (Algorithm 1, step 1:
    exactly the passages whose triples form ``G_q``), in rank order: every
    question's rank-1 passage first, then every rank-2 passage, ..., so a ``cap``
    keeps the passages most likely to be used. ``cap=None`` means the whole corpus.
    Passages outside the pool are extracted later, on demand (``Workspace.kg_for``).
    """
    if cap is None:
        return list(ds.corpus.pids)
    if cap < 0:
        raise ValueError(f"parameter 'extract_max_passages': must be >= 0 or null, got {cap}")
    hits = dense.search([q.question for q in questions], k) if questions else []
    pool: dict = {}
    for rank in range(k):
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


def build_kg(cfg, ds: Dataset, llm: Optional[LLM], dense=None) -> KGBuild:
    """Build and store ``ds``'s KG for notebook 01 (KGIR-RAG §2.1), in ``<run>/kg/<dataset>/``.

    A dataset that ships HippoRAG's OpenIE output (``pipeline.openie_file``) is
    imported (it is cheap and deterministic, so it is redone every run). Any
    other dataset: the stored KG (if any) is loaded and the extraction pool
    (:func:`extraction_pool` over the profile's sampled questions, capped at
    ``cfg.extract_max_passages``) is extracted incrementally with ``llm``: a rerun
    finds every passage already processed and makes no LLM call.
    """
    from ..data import sample_questions
    from ..pipeline import kg_dir, openie_file
    from .openie import import_openie

    directory = kg_dir(cfg, ds.name)
    published = openie_file(cfg, ds.name)
    if published is not None:
        kg, drops = import_openie(published, ds.corpus)
        save_kg(kg, directory)
        return KGBuild(ds.name, "openie", kg, drops, [], None, len(kg.extracted))
    if llm is None or dense is None:
        raise ValueError(f"dataset {ds.name!r} has no published OpenIE file: building its KG needs an LLM and a "
                         f"dense index")
    kg = load_kg(directory) if (directory / "triples.parquet").exists() else KnowledgeGraph()
    questions = sample_questions(ds.questions, cfg.n_questions, cfg.seed)
    pool = extraction_pool(ds, dense, questions, cfg.top_k, cfg.extract_max_passages)
    report = update_kg(kg, llm, [ds.corpus[p] for p in pool], max_tokens=cfg.max_tokens("extract"))
    save_kg(kg, directory)
    sub = kg.subset(pool)
    in_pool = set(pool)
    by_pid = {p: c for p, c in drops_of(kg).items() if p in in_pool}
    record_drops(sub, by_pid)
    drops: Counter = Counter()
    for c in by_pid.values():
        drops.update(c)
    return KGBuild(ds.name, "llm", sub, drops, pool, report, len(kg.extracted))
