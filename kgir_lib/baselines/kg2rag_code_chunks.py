"""KG²RAG as its authors' code runs it, steps 1 and 3: the corpus as the code's chunk index keyed by page title,
the expansion over titles (the code's ``KGRetrievePostProcessor``) and the grouping by title (its
``NaivePostprocessor``). The module :mod:`kgir_lib.baselines.kg2rag_code` says what each step does and why;
step 2 is :mod:`kgir_lib.baselines.kg2rag_code_organise`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..data import Passage
from ..kg import KnowledgeGraph

# ---------------------------------------------------------------------------- the code's two wirings
@dataclass(frozen=True)
class CodeSetting:
    """One of the authors' run configurations (``kg_rag_distractor.py``): the chunk-id layout ``wiring``
    (``"hotpotqa"``: ``title##seq``; ``"musique"``: ``idx##title##seq``) and ``use_tpt`` (facts in the
    candidate texts: off for HotpotQA, on for MuSiQue)."""

    wiring: str
    use_tpt: bool


SETTINGS = {"hotpotqa": CodeSetting("hotpotqa", False), "musique": CodeSetting("musique", True)}


def code_setting(dataset: str) -> CodeSetting:
    """The authors' wiring for a suite dataset: MuSiQue's for ``musique*``, HotpotQA's for any other."""
    return SETTINGS["musique" if dataset.startswith("musique") else "hotpotqa"]


# ---------------------------------------------------------------------------- chunks keyed by title
class ChunkIndex:
    """The corpus as the code's chunk index: a chunk a passage, keyed by its page title.

    ``chunks[title]``: the title's passages in corpus order (the code's ``chunks_index``); ``facts[pid]``: the
    passage's triples ``(head, relation, tail)`` in graph order, only for passages with at least one (the
    code's ``doc2kg``, which holds no empty chunk); ``kg_titles``: the titles with such a passage;
    ``titles``: every title (the code's ``ents``). Built once per graph.
    """

    def __init__(self, passages: Sequence[Passage], kg: KnowledgeGraph, wiring: str = "hotpotqa"):
        if wiring not in ("hotpotqa", "musique"):
            raise ValueError(f"ChunkIndex: unknown wiring {wiring!r} (known: hotpotqa, musique)")
        self.wiring = wiring
        self.title: dict = {}
        self.seq: dict = {}
        self.idx: dict = {}
        self.text: dict = {}
        self.chunks: dict = {}
        for i, p in enumerate(passages):
            self.title[p.pid] = p.title
            self.seq[p.pid] = len(self.chunks.setdefault(p.title, []))
            self.idx[p.pid] = i
            self.text[p.pid] = f"{p.title}: {p.text}"
            self.chunks[p.title].append(p.pid)
        self.titles = set(self.chunks)
        by_pid: dict = {}
        for t in kg.triples:
            if t.pid in self.title:
                by_pid.setdefault(t.pid, []).append((t.head, t.relation, t.tail))
        self.facts = {pid: by_pid[pid] for title in self.chunks for pid in self.chunks[title] if pid in by_pid}
        self.kg_titles = {self.title[p] for p in self.facts}

    def chunk_id(self, pid: str) -> str:
        """The code's id of a chunk: ``title##seq`` (HotpotQA's wiring) or ``idx##title##seq`` (MuSiQue's)."""
        if self.wiring == "hotpotqa":
            return f"{self.title[pid]}##{self.seq[pid]}"
        return f"{self.idx[pid]}##{self.title[pid]}##{self.seq[pid]}"

    def kg_chunks(self, title: str) -> list:
        """The title's passages with triples, in corpus order (the code's ``doc2kg[title]``)."""
        return [p for p in self.chunks.get(title, ()) if p in self.facts]


# ---------------------------------------------------------------------------- 1. expansion
def _bump(count: dict, total: dict, entity: str, score: float) -> None:
    count[entity] = count.get(entity, 0) + 1
    total[entity] = total.get(entity, 0.0) + score


@dataclass
class Expansion:
    """Step 1's result: the added chunks ``[(pid, score)]`` (best first, ties in the order they were found),
    the highly related titles and every related title, in the order they were reached."""

    added: list
    highly_related: list
    related: list


def expand_by_titles(index: ChunkIndex, seeds: Sequence[tuple]) -> Expansion:
    """The code's expansion of the seed chunks ``[(pid, score)]`` (module docstring, step 1), one hop."""
    if not seeds:
        return Expansion([], [], [])
    half = len(seeds) // 2
    retrieved_ids = {p for p, _ in seeds}
    retrieved: dict = {}
    highly: dict = {}
    count: dict = {}
    total: dict = {}
    for i, (pid, score) in enumerate(seeds):
        title = index.title[pid]
        if i < half and title in retrieved:
            highly[title] = None
        retrieved[title] = None
        _bump(count, total, title, float(score))
    for title in sorted(count, key=lambda e: total[e] / count[e], reverse=True)[:2]:
        highly[title] = None

    named: dict = {}  # titles the seeds' triples name
    for pid, score in seeds:
        for h, _, t in index.facts.get(pid, ()):
            for e in (h, t):
                if e in index.titles and e not in retrieved:
                    named[e] = None
                    _bump(count, total, e, float(score))
    frontier = {**named, **retrieved}
    related = dict(frontier)
    reached: dict = {}  # the hop: titles named by the other chunks of the frontier's titles
    for e in frontier:
        mean = total[e] / count[e]
        for pid in index.kg_chunks(e):
            if pid in retrieved_ids:
                continue
            for h, _, t in index.facts[pid]:
                for x in (h, t):
                    if x in index.titles and x not in related:
                        reached[x] = None
                        _bump(count, total, x, mean)
    related.update(reached)

    avg = sum(float(s) for _, s in seeds) / len(seeds)
    plain_seed_titles = {e for e in retrieved if e not in highly}
    added: dict = {}
    for e in related:
        if e in plain_seed_titles or e not in index.kg_titles:
            continue
        for pid in index.chunks[e]:
            if pid not in retrieved_ids:
                added[pid] = (total[e] + avg) / (count[e] + 1)
    ranked = sorted(added.items(), key=lambda kv: kv[1], reverse=True)
    return Expansion(ranked, list(highly), list(related))


# ---------------------------------------------------------------------------- 3. grouping
def group_by_title(index: ChunkIndex, nodes: Sequence[tuple]) -> list:
    """The code's final order: chunks grouped by title in order of each title's first appearance; within a
    title by ``seq`` (HotpotQA's wiring) or by position (MuSiQue's)."""
    first: dict = {}
    keyed = []
    for i, (pid, score) in enumerate(nodes):
        title = index.title[pid]
        first.setdefault(title, len(first))
        keyed.append((first[title], index.seq[pid] if index.wiring == "hotpotqa" else i, (pid, score)))
    keyed.sort(key=lambda x: (x[0], x[1]))
    return [x[2] for x in keyed]
