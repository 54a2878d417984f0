"""What every method shares: the workspace it runs in and the output it returns.

A method takes a :class:`Workspace` (config, one dataset, the LLM, the dense and
BM25 indexes, the knowledge graph) and a list of questions, and returns one
:class:`MethodOutput` per question: the answer, the final ranked passage list
(for Recall@k; each method documents how it builds it), a trace, and the LLM
usage attributed to that question.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Protocol, Sequence

from ..config import Config
from ..data import Dataset, Passage, Question
from ..kg import KnowledgeGraph
from ..llm import LLM, ChatResult
from ..retrieval import BM25Index, DenseIndex, Reranker


@dataclass
class QuestionUsage:
    """LLM usage attributed to one question (summed over its requests)."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def add(self, result: ChatResult) -> None:
        self.calls += 1
        self.cache_hits += int(result.cached)
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.seconds += result.seconds


@dataclass
class MethodOutput:
    qid: str
    answer: str
    ranked_pids: list
    usage: QuestionUsage = field(default_factory=QuestionUsage)
    trace: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Workspace:
    """Everything a method needs for one dataset. Build it with :func:`kgir_lib.pipeline.workspace`."""

    cfg: Config
    dataset: Dataset
    llm: LLM
    dense: DenseIndex
    kg: KnowledgeGraph
    bm25: Optional[BM25Index] = None
    reranker: Optional[Reranker] = None
    ensure_kg: Optional[Callable[[Sequence[str]], None]] = None  # extracts passages not yet in the KG

    def passages(self, pids: Sequence[str]) -> list:
        return [self.dataset.corpus[p] for p in pids]

    def kg_for(self, pids: Sequence[str]) -> KnowledgeGraph:
        """The KG after making sure ``pids`` have been extracted (on-demand, incremental)."""
        if self.ensure_kg is not None:
            self.ensure_kg(pids)
        return self.kg

    def get_bm25(self) -> BM25Index:
        if self.bm25 is None:
            self.bm25 = BM25Index(self.dataset.corpus.passages)
        return self.bm25


class Method(Protocol):
    name: str

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list: ...


def trace_filename(dataset: str) -> str:
    """A dataset's trace file name inside ``traces/<method>/``: ``<dataset>.trace.jsonl``."""
    return f"{dataset}.trace.jsonl"


def write_traces(outputs: Sequence[MethodOutput], path: Path) -> Path:
    """One JSON object a line (the per-question trace file of a run), written atomically (:mod:`kgir_lib.traces`)."""
    from .. import traces

    return traces.write_traces(outputs, path)


def read_traces(path: Path) -> list:
    """The records of a trace file (:func:`kgir_lib.traces.read_traces`: a torn last line is dropped)."""
    from .. import traces

    return traces.read_traces(path)
