"""Connected components and maximum spanning trees over triples (paper §2.2 eqs. 6-7; KG²RAG's organisation).

Triples are undirected edges ``head -- tail``. :func:`seed_components` gives the components ``B_i``
of ``G_tmp`` that hold a seed (eq. 6); :func:`maximum_spanning_tree` is Kruskal's algorithm with
deterministic ties (eq. 7). Both use :class:`UnionFind`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .graph import Triple


# ---------------------------------------------------------------- step 5: components (eq. 6)
@dataclass
class Component:
    """A connected component ``B_i`` of ``G_tmp``: its entities, triples and the seeds it holds."""

    nodes: list
    triples: list
    seeds: list


class UnionFind:
    """Disjoint sets over hashable items (path halving): components (eq. 6) and Kruskal (eq. 7)."""

    def __init__(self) -> None:
        self.parent: dict = {}

    def __contains__(self, x) -> bool:
        return x in self.parent

    def find(self, x):
        parent = self.parent
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a, b) -> bool:
        """Join the sets of ``a`` and ``b``; False if they were already one set."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[rb] = ra
        return True


def seed_components(G_tmp: Sequence[Triple], seeds: Sequence[str]) -> list:
    """Connected components of ``G_tmp`` that contain a seed (eq. 6), in order of their first seed.

    Union-find over the triples (undirected: head and tail); seeds absent from
    ``G_tmp`` are ignored. Nodes and triples keep ``G_tmp`` order.
    """
    uf = UnionFind()
    for t in G_tmp:
        uf.union(t.head, t.tail)
    nodes_in_order = list(dict.fromkeys(e for t in G_tmp for e in (t.head, t.tail)))
    comps: dict = {}
    for s in seeds:
        if s in uf:
            comps.setdefault(uf.find(s), []).append(s)
    out = []
    for root, comp_seeds in comps.items():
        out.append(Component(nodes=[n for n in nodes_in_order if uf.find(n) == root],
                             triples=[t for t in G_tmp if uf.find(t.head) == root],
                             seeds=list(dict.fromkeys(comp_seeds))))
    return out


# ---------------------------------------------------------------- step 7: maximum spanning tree (eq. 7)
def maximum_spanning_tree(triples: Sequence[Triple], weights: Sequence[float]) -> list:
    """Indices into ``triples`` of a maximum spanning forest (eq. 7), Kruskal's algorithm.

    Edges are taken by weight, heaviest first; equal weights keep input order
    (stable sort), so ties and parallel edges resolve deterministically to the
    earliest triple. Self-loops are skipped. Returned indices are sorted.
    """
    if len(triples) != len(weights):
        raise ValueError(f"{len(triples)} triples but {len(weights)} weights")
    order = sorted(range(len(triples)), key=lambda i: -float(weights[i]))
    uf = UnionFind()
    kept = [i for i in order if uf.union(triples[i].head, triples[i].tail)]  # False: self-loop, parallel edge, cycle
    return sorted(kept)
