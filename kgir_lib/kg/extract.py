"""LLM triple extraction, one call a passage, batched, cached and incremental (METHOD.md §1).

Prompt: ``prompts/kg_extract.txt``, after KG²RAG §3.1 (Fig. 3): a single call a
passage with two worked examples, asking for the informative triples of the
text and no words of our own. HippoRAG's alternative (NER, then triples
conditioned on the entities) costs two calls a passage; on a CPU the single
call halves the indexing time. The output format is ``head ## relation ## tail``
lines, which a 135M-parameter model follows more reliably than JSON; the parser
(:mod:`kgir_lib.kg.parse`) accepts JSON and other shapes too, for larger models.

All passages of one update go to :meth:`LLM.generate` in one batch; the LLM
cache makes a rerun free and an interrupted run resume where it stopped.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional, Sequence

from ..data import Dataset, Passage, Question
from ..llm import LLM, ChatRequest
from ..prompts import load_prompt
from .graph import KnowledgeGraph, Triple
from .parse import parse_triples
from .store import record_drops

PROMPT = "kg_extract"
MAX_TOKENS = 150  # ~8 short triples; SmolLM2 rambles past that
STOP = ("\nPassage:", "Passage:")


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
    """One chat request a passage (title + text), greedy, stopping before a new example."""
    prompt = load_prompt(PROMPT)
    out = []
    for p in passages:
        system, user = prompt.render(passage=p.content)
        out.append(ChatRequest.chat(system, user, max_tokens=max_tokens, temperature=0.0, stop=STOP))
    return out


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
