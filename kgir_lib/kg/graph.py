"""The knowledge graph G = {(h, r, t, c) | c ∈ D} (KGIR-RAG §2.1, eq. 1).

Every triple keeps its source passage id ``pid``. ``extracted`` records which
passages have been processed (a passage may yield no triple), so incremental
updates extract only passages not yet seen, and removing a passage removes its
triples.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pandas is imported where a frame is made (half a second of every process that loads the graph)
    import pandas as pd

COLUMNS = ["head", "relation", "tail", "pid"]


@dataclass(frozen=True)
class Triple:
    head: str
    relation: str
    tail: str
    pid: str

    def text(self) -> str:
        """The triple as one line, as shown to the LLM and the reranker."""
        return f"({self.head}, {self.relation}, {self.tail})"


class KnowledgeGraph:
    """Triples with provenance and the set of processed passages."""

    def __init__(self, triples: Iterable[Triple] = (), extracted: Iterable[str] = ()):
        self._by_pid: dict = {}
        for pid in extracted:
            self._by_pid.setdefault(pid, [])
        for t in triples:
            self._by_pid.setdefault(t.pid, []).append(t)

    # ---- content -------------------------------------------------------------
    @property
    def triples(self) -> list:
        return [t for ts in self._by_pid.values() for t in ts]

    @property
    def extracted(self) -> set:
        return set(self._by_pid)

    def extracted_order(self) -> list:
        """The processed passages in the order they were added."""
        return list(self._by_pid)

    def __len__(self) -> int:
        return sum(len(ts) for ts in self._by_pid.values())

    def triples_of(self, pids: Iterable[str]) -> list:
        """G_q: the triples whose source passage is in ``pids`` (paper eq. 3), in ``pids`` order."""
        return [t for pid in dict.fromkeys(pids) for t in self._by_pid.get(pid, [])]

    def entities(self) -> set:
        return {e for t in self.triples for e in (t.head, t.tail)}

    def relations(self) -> set:
        return {t.relation for t in self.triples}

    def missing(self, pids: Iterable[str]) -> list:
        """Passages of ``pids`` not processed yet (what an incremental update extracts)."""
        return [p for p in dict.fromkeys(pids) if p not in self._by_pid]

    # ---- updates -------------------------------------------------------------
    def add(self, pid: str, triples: Iterable[Triple]) -> None:
        """Record passage ``pid`` as processed with ``triples`` (replacing any earlier ones)."""
        self._by_pid[pid] = [t for t in triples if t.pid == pid]

    def remove(self, pids: Iterable[str]) -> int:
        """Forget passages and their triples; returns how many triples were removed."""
        n = 0
        for pid in pids:
            n += len(self._by_pid.pop(pid, []))
        return n

    def subset(self, pids: Iterable[str]) -> "KnowledgeGraph":
        keep = [p for p in pids if p in self._by_pid]
        return KnowledgeGraph(self.triples_of(keep), keep)

    # ---- views ---------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([(t.head, t.relation, t.tail, t.pid) for t in self.triples], columns=COLUMNS)

    @classmethod
    def from_frame(cls, df: pd.DataFrame, extracted: Iterable[str] = ()) -> "KnowledgeGraph":
        missing = [c for c in COLUMNS if c not in df.columns]
        if missing:
            raise ValueError(f"triples table lacks columns {missing}")
        triples = [Triple(str(h), str(r), str(t), str(p)) for h, r, t, p in df[COLUMNS].itertuples(index=False)]
        return cls(triples, extracted)

    def stats(self) -> dict:
        """Paper Table 3 counts."""
        n_passages = len(self._by_pid)
        return {
            "passages": n_passages,
            "entities": len(self.entities()),
            "relations": len(self.relations()),
            "triples": len(self),
            "triples_per_passage": len(self) / n_passages if n_passages else 0.0,
        }
