"""What every method shares: the workspace it runs in and the output it returns.

A method takes a :class:`Workspace` (config, one dataset, the LLM, the dense and
BM25 indexes, the knowledge graph) and a list of questions, and returns one
:class:`MethodOutput` per question: the answer, the final ranked passage list
(for Recall@k; each method documents how it builds it), a trace, and the LLM
usage attributed to that question. Every method inherits :class:`MethodBase`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Callable, ClassVar, Optional, Protocol, Sequence

from ..config import Config
from ..config.checks import check_value
from ..data import Dataset, Question
from ..kg import KnowledgeGraph
from ..llm import LLM, LLMUsage
from ..retrieval import BM25Index, DenseIndex, Reranker


@dataclass
class MethodOutput:
    qid: str
    answer: str
    ranked_pids: list
    usage: LLMUsage = field(default_factory=LLMUsage)
    trace: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, rec: dict) -> "MethodOutput":
        """An output back from its trace-file line (:meth:`to_json`); usage keys it lacks count 0."""
        return cls(str(rec["qid"]), rec.get("answer", ""), list(rec.get("ranked_pids", [])),
                   LLMUsage.from_dict(rec.get("usage")), rec.get("trace", {}))


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
    kg_base: Optional[tuple] = None  # notebook 01's passages (``base.json``); None: all of ``kg`` is the base

    def method_view(self) -> "Workspace":
        """The workspace one method run reads: its KG starts as notebook 01's graph (:attr:`kg_base`) and grows
        only by the passages this run itself needs, extracted on demand through the shared graph (and so through
        the LLM cache: a passage another method already extracted costs nothing).

        The paper extracts the whole corpus once (§2.1), so what a method sees cannot depend on which other
        methods ran before it; extracting on demand into one shared graph would make it depend on exactly that
        (and on which traces a resumed run read back instead of running). Without a base (a graph imported
        whole, or kept in memory) this is the workspace itself.
        """
        if self.kg_base is None:
            return self
        shared, shared_ensure = self.kg, self.ensure_kg
        own = shared.subset(self.kg_base)

        def ensure(pids: Sequence[str]) -> None:
            pids = list(pids)
            if shared_ensure is not None:
                shared_ensure(pids)  # every request, so a wrapper that records reads sees them all
            missing = own.missing(pids)
            if not missing:
                return
            have = shared.extracted
            for pid in missing:
                if pid in have:
                    own.add(pid, shared.triples_of([pid]))

        return replace(self, kg=own, ensure_kg=ensure)

    def on_demand(self) -> list:
        """The passages of :attr:`kg` beyond the base, in the order they were added (what this run extracted
        on demand; ``[]`` without a base)."""
        if self.kg_base is None:
            return []
        base = set(self.kg_base)
        return [p for p in self.kg.extracted_order() if p not in base]

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
    key: str

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list: ...


@dataclass
class MethodBase:
    """What every method shares: a display ``name`` and a registry ``key`` (class attributes; a method with
    variants reads them from a class-level table by its ``variant``), whether it reads the KG, and its
    parameters (the dataclass fields).

    ``run(ws, questions)`` answers every question: one :class:`MethodOutput` a question, in order.

    **One name per knob.** A parameter that overrides a :class:`~kgir_lib.config.Config` field is named as the
    field, without the method's prefix (``top_k`` is ``top_k`` for every method; KG²RAG's ``m_hops`` is
    ``kg2rag_m_hops``); :attr:`knobs` maps each such parameter to its field. ``None`` keeps the profile's
    value. A value given is checked when the method is built, by the config's one check
    (:func:`kgir_lib.config.checks.check_value`: type, range, choices); :meth:`setting` is the one place the
    default is filled in.
    """

    name: ClassVar[str] = ""
    key: ClassVar[str] = ""
    uses_kg: ClassVar[bool] = False  # whether it reads the KG (part of the trace-resume fingerprint)
    knobs: ClassVar[dict] = {}       # constructor parameter -> the Config field it overrides

    def __post_init__(self) -> None:
        for param, field_name in self.knobs.items():
            value = getattr(self, param)
            if value is not None:
                label = f"{type(self).__name__} parameter {param!r} (the profile's {field_name!r})"
                setattr(self, param, check_value(field_name, value, label))

    def label(self, cfg) -> str:
        """The method's row label in a run with config ``cfg`` (tables are indexed by it): its :attr:`name`,
        unless a setting changes what the method is (LightRAG over the suite's graph says so)."""
        return self.name

    def setting(self, ws: Workspace, param: str):
        """The value of knob ``param``: this method's own, else the profile's field (:attr:`knobs`)."""
        value = getattr(self, param)
        return value if value is not None else getattr(ws.cfg, self.knobs[param])

    def run_meta(self) -> dict:
        """What a run of the method adds to its trace file's ``.meta.json`` (:func:`kgir_lib.eval.evaluate.run_method`);
        none by default."""
        return {}

    def params(self) -> dict:
        """The constructor parameters (part of the trace-resume fingerprint, :mod:`kgir_lib.eval.evaluate`)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        raise NotImplementedError
