"""The graph with triples dropped at random: the KG²RAG report's robustness study (Table 6), notebook 06.

:func:`drop_triples` drops exactly ``round(fraction · n)`` triples (seeded); :func:`perturbed_workspace` runs a
method on such a graph, extracting passages on demand as usual; :func:`recording_workspace` records which
passages a method read the graph for. The study itself: :func:`kgir_lib.eval.ablation.robustness`.
"""
from __future__ import annotations

import dataclasses
import random
import zlib
from typing import Any, Iterable, Optional, Sequence

from ..kg import KnowledgeGraph
from ..methods.base import Workspace


def check_fraction(fraction: Any, name: str = "fraction") -> float:
    """A share of triples to drop: a number in [0, 1] (the one check of :func:`study_grid` and :func:`drop_triples`)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise ValueError(f"parameter {name!r}: {fraction!r} is not a number")
    if not 0.0 <= float(fraction) <= 1.0:
        raise ValueError(f"parameter {name!r}: {fraction!r} is outside [0, 1]")
    return float(fraction)


def drop_triples(kg: KnowledgeGraph, fraction: float, seed: int) -> KnowledgeGraph:
    """A copy of ``kg`` without exactly ``round(fraction * len(kg))`` triples chosen at random.

    KG²RAG report, robustness study (Table 6): "randomly discard 5 % or 10 % of the
    triples" to simulate an imperfect graph. The choice is ``random.Random(seed)``
    sampling triple positions, so the same ``(kg, fraction, seed)`` always drops
    the same triples. The set of processed passages (``extracted``) is kept: a
    passage that lost all its triples is still "extracted", so the on-demand
    extraction does not silently restore what was dropped. Triple order is kept.
    ``round`` is Python's (half to even).
    """
    check_fraction(fraction)
    triples = kg.triples
    n_drop = round(float(fraction) * len(triples))
    dropped = set(random.Random(seed).sample(range(len(triples)), n_drop))
    kept = [t for i, t in enumerate(triples) if i not in dropped]
    # passages with triples first, in kg order; then the rest (sorted: deterministic across processes)
    order = list(dict.fromkeys(t.pid for t in triples))
    extracted = order + sorted(kg.extracted - set(order))
    return KnowledgeGraph(kept, extracted)


def _keep_by_hash(triples: Sequence, fraction: float, seed: int) -> list:
    """Each triple dropped with probability ``fraction``, decided by a seeded hash of the triple itself.

    Unlike :func:`drop_triples` the count is only expected to be ``fraction * n``,
    but the fate of a triple never depends on which other triples exist, so it is
    stable however the graph grows (``hash`` of a str is not stable across
    processes; CRC-32 is).
    """
    kept = []
    seen: dict = {}  # triple -> how many times it came before
    for t in triples:
        key = (t.head, t.relation, t.tail, t.pid)
        seen[key] = seen.get(key, -1) + 1  # repeated triples get distinct draws
        draw = zlib.crc32("\x1f".join((str(seed), *key, str(seen[key]))).encode("utf-8")) / 2 ** 32
        if draw >= fraction:
            kept.append(t)
    return kept


def perturbed_workspace(ws: Workspace, fraction: float, seed: int,
                        scope: Optional[Iterable[str]] = None) -> Workspace:
    """``ws`` whose knowledge graph lost ``fraction`` of its triples at random (KG²RAG robustness study).

    The passages of ``scope`` (default: every passage extracted so far; a method run then reads notebook
    01's passages of it, :meth:`Workspace.method_view`) form the graph that :func:`drop_triples` perturbs
    exactly. Methods extract passages
    they retrieve on demand (:meth:`Workspace.kg_for`): a passage outside that
    graph is extracted into the base graph as usual and copied into the perturbed
    one with each triple dropped with probability ``fraction``
    (:func:`_keep_by_hash`). The base graph is never modified by the copy.
    """
    base, base_ensure = ws.kg, ws.ensure_kg
    start = base if scope is None else base.subset(list(dict.fromkeys(scope)))
    kg = drop_triples(start, fraction, seed)

    def ensure(pids: Sequence[str]) -> None:
        pids = list(pids)
        if base_ensure is not None and base.missing(pids):
            base_ensure(pids)
        for pid in kg.missing(p for p in pids if p in base.extracted):
            kg.add(pid, _keep_by_hash(base.triples_of([pid]), fraction, seed))

    return dataclasses.replace(ws, kg=kg, ensure_kg=ensure)


def recording_workspace(ws: Workspace) -> tuple:
    """``(ws', read)``: ``ws'`` behaves as ``ws`` and ``read`` collects every passage id it read the KG for."""
    read: list = []
    base_ensure = ws.ensure_kg

    def ensure(pids: Sequence[str]) -> None:
        pids = list(pids)
        read.extend(pids)
        if base_ensure is not None:
            base_ensure(pids)

    return dataclasses.replace(ws, ensure_kg=ensure), read
