"""KG²RAG (Zhu et al., NAACL 2025), as its paper describes it (the KG²RAG paper §2-3).

1. **Seed retrieval**: the cosine top-``k`` passages ``D_q`` (paper: k = 10) with their
   scores s(q, c).
2. **Graph-guided expansion**: ``G_q^0`` = the triples of ``D_q``; BFS ``m`` hops
   (paper: m = 1) over the global graph ``G`` from the entities of ``G_q^0``: hop 1 adds
   every triple of ``G`` that touches one of those entities, hop 2 every triple that
   touches an entity reached at hop 1, and so on. ``G_q^m`` is the result, ``D_q^m``
   its source passages (:func:`expand`).
3. **Organisation as filter**: an undirected weighted graph over ``G_q^m`` whose edge
   weight is the similarity s(q, c) of the triple's source passage c to q (the
   scores of step 1, computed for every passage); its connected components; the
   maximum spanning tree of each (:func:`max_spanning_forest`, Kruskal).
4. **Organisation as organiser**: per tree a triple representation (its triples,
   one a line) and a text representation: DFS from the highest-weight edge, the
   passages of the edges in traversal order (:func:`dfs_edges`). The trees
   are reranked by relevance of their triple representation to q (the paper's
   bge-reranker-large: ``ws.reranker`` where the profile has one; otherwise the cosine
   of the workspace encoder's embeddings of q and of the representation), and their
   passages are added in that order until the top-K budget is filled
   (:func:`fill_budget`).
5. The shared reader answers from the organised passages.

**Where the authors' code differs** from the paper: it weights an edge by the
passage's retrieval score and builds the text without an explicit DFS; this
module follows the paper (s(q, c) of every source passage, DFS from the heaviest
edge) and says so here.

**Choices the paper leaves open**, made here and documented: parallel edges
(several triples between the same entities) are all offered to Kruskal, which
keeps the heaviest (ties: the earlier triple); a tree's text that overflows the
budget is cut at the budget; if the trees hold fewer than K passages (sparse or
empty graph, e.g. a small model extracted no triple), the rest of the budget is
filled with the seed passages in score order, so the reader never gets an empty
context because extraction failed.

**Global graph.** ``ws.kg`` after the seed passages have been extracted
(``ws.kg_for``). Its entity → triples adjacency (:class:`TripleAdjacency`) is built once
per graph and reused by every question (``benchmarks/bench_scale.py`` times it at paper size). On the ``sample`` profile
the musique/hotpotqa graphs hold notebook 01's pool plus the seed passages this run extracted on demand
(:meth:`~kgir_lib.methods.base.Workspace.method_view`), so the expansion only reaches those; musique_train has
the full published OpenIE graph.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from ..data import Question
from ..kg import KnowledgeGraph, Triple
from ..kg.mst import UnionFind, maximum_spanning_tree
from ..llm import LLMUsage
from ..methods.base import MethodBase, MethodOutput, Workspace
from ..methods.context import context_of, dedup, final_ranking, hits_json, hits_pids, read

VARIANTS = {"full": "KG²RAG", "no_expansion": "KG²RAG w/o expansion",
            "no_organisation": "KG²RAG w/o organisation"}
KEYS = {"full": "kg2rag", "no_expansion": "kg2rag_no_expansion", "no_organisation": "kg2rag_no_organisation"}


# ---------------------------------------------------------------------------- pure graph steps
class TripleAdjacency:
    """Entity → the triples that touch it, over the global graph ``G``; built ONCE per graph.

    :func:`expand` walks it for every question (KG²RAG §3.2 graph-guided expansion), so
    per question only the reached triples are visited, never the whole graph. An
    entity's triples are in graph order; a triple appears once (head == tail once).
    """

    def __init__(self, graph_triples: Sequence[Triple]):
        adjacency: dict = defaultdict(list)
        for t in graph_triples:
            adjacency[t.head].append(t)
            if t.tail != t.head:
                adjacency[t.tail].append(t)
        self.adjacency = dict(adjacency)
        self.n_triples = len(graph_triples)

    def get(self, entity: str, default=()) -> list:
        return self.adjacency.get(entity, default)


def expand(graph, seed_triples: Sequence[Triple], m: int) -> list:
    """``G_q^m``: the seed triples, then hop by hop every triple of the graph touching a reached entity.

    ``graph``: a :class:`TripleAdjacency` (built once per graph; what :class:`KG2RAG` passes)
    or the graph's triples (the adjacency is then built here, O(|G|)).
    Order: seed triples first, then triples in the order the BFS meets them
    (frontier entities in discovery order, each entity's triples in graph order).
    ``m = 0`` returns the seed triples (the "w/o expansion" ablation).
    """
    if m < 0:
        raise ValueError(f"parameter 'kg2rag_m_hops': must be >= 0, got {m}")
    adjacency = graph if isinstance(graph, TripleAdjacency) else TripleAdjacency(graph)
    out = dict.fromkeys(seed_triples)
    frontier = dedup(e for t in seed_triples for e in (t.head, t.tail))
    reached = set(frontier)
    for _ in range(m):
        nxt = []
        for e in frontier:
            for t in adjacency.get(e, ()):
                out.setdefault(t, None)
                for x in (t.head, t.tail):
                    if x not in reached:
                        reached.add(x)
                        nxt.append(x)
        frontier = nxt
    return list(out)


def max_spanning_forest(edges: Sequence[tuple]) -> list:
    """Maximum spanning tree of every connected component (Kruskal; paper: "MST T_i of each B_i").

    ``edges``: ``(triple, weight)`` pairs, an undirected edge head–tail each. Edges are
    taken by descending weight, ties in input order; self-loops are never kept.
    Returns the trees, each a list of ``(triple, weight)`` in the order Kruskal kept
    them (so a tree's first edge is its heaviest), trees ordered by their first edge.
    """
    triples, weights = [t for t, _ in edges], [w for _, w in edges]
    kept = sorted(maximum_spanning_tree(triples, weights), key=lambda i: (-weights[i], i))  # Kruskal's order
    uf = UnionFind()
    for i in kept:
        uf.union(triples[i].head, triples[i].tail)
    trees: dict = {}
    for i in kept:
        trees.setdefault(uf.find(triples[i].head), []).append(edges[i])
    return list(trees.values())


def dfs_edges(tree: Sequence[tuple]) -> list:
    """A tree's edges in depth-first order from its highest-weight edge (paper: the text representation).

    The walk starts at the head entity of the heaviest edge (the tree's first edge,
    :func:`max_spanning_forest`) and, at every entity, follows its untraversed edges
    by descending weight (ties in tree order), so the heaviest edge comes first.
    """
    if not tree:
        return []
    adjacency: dict = defaultdict(list)
    for i, (t, w) in enumerate(tree):
        adjacency[t.head].append((-w, i, t.tail))
        adjacency[t.tail].append((-w, i, t.head))
    for lst in adjacency.values():
        lst.sort()
    start = tree[0][0].head
    seen, out = {start}, []
    stack = [iter(adjacency[start])]
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
            continue
        _, i, node = step
        if node in seen:
            continue
        seen.add(node)
        out.append(tree[i])
        stack.append(iter(adjacency[node]))
    return out


def tree_passages(tree_dfs: Sequence[tuple]) -> list:
    """The text representation's passages: the source passages of the edges in DFS order, each once."""
    return dedup(t.pid for t, _ in tree_dfs)


def tree_triples_text(tree_dfs: Sequence[tuple]) -> str:
    """The triple representation: the tree's triples, one a line, in DFS order."""
    return "\n".join(t.text() for t, _ in tree_dfs)


def fill_budget(ranked_trees: Sequence[Sequence[str]], budget: int, fallback: Sequence[str] = ()) -> list:
    """Add the trees' passages in rank order until ``budget`` passages; then ``fallback`` passages if room is left."""
    out: dict = {}
    for pids in list(ranked_trees) + [list(fallback)]:
        for p in pids:
            if len(out) >= budget:
                return list(out)
            out.setdefault(p, None)
    return list(out)


def plan_question(kg: KnowledgeGraph, adjacency: TripleAdjacency, seed_pids: Sequence[str], sims_row,
                  col: dict, m: int, organise: bool = True) -> dict:
    """Steps 2-4 for one question, all but the tree reranking (which needs the reranker).

    ``sims_row[col[pid]]`` is s(q, c) for every passage (eq. 2 cosine). Returns the plan
    :class:`KG2RAG` traces: seeds, ``G_q^m`` sizes, expanded passages, scores and (when
    ``organise``) the DFS-ordered maximum spanning trees of ``G_q^m``'s components.
    """
    seed_triples = kg.triples_of(seed_pids)
    sub = expand(adjacency, seed_triples, m)
    score = {p: float(sims_row[col[p]]) for p in dedup([*seed_pids, *(t.pid for t in sub)]) if p in col}
    seed_set = set(seed_pids)
    plan: dict[str, Any] = {"seed_pids": list(seed_pids), "n_seed_triples": len(seed_triples), "n_triples": len(sub),
            "expanded_pids": [p for p in dedup(t.pid for t in sub) if p not in seed_set], "score": score}
    if organise:
        plan["edges"] = [(t, score.get(t.pid, 0.0)) for t in sub if t.pid in score]
        plan["trees"] = [dfs_edges(tr) for tr in max_spanning_forest(plan["edges"])]
    return plan


# ---------------------------------------------------------------------------- the method
@dataclass
class KG2RAG(MethodBase):
    """KG²RAG and its ablations ``variant`` = ``full`` | ``no_expansion`` | ``no_organisation``.

    Defaults: ``m_hops`` = ``cfg.kg2rag_m_hops`` (1), ``top_k`` (the seed passages k) = ``cfg.top_k`` (10),
    ``budget`` = ``cfg.kg2rag_budget`` (K = 10). The reader sees the first
    ``cfg.context_passages`` passages of the final list (as for every method).

    - **full**: seeds → m-hop expansion → per-component MSTs → DFS texts → tree
      reranking → budget. **Context**: the first ``cfg.context_passages`` organised
      passages; **candidates**: the organised list (K passages), then the remaining
      seeds in score order.
    - **no_expansion** (paper's "w/o expansion"): as full with m = 0 (trees over
      ``G_q^0`` only).
    - **no_organisation** (paper's "w/o organisation"): no MST, no DFS, no tree
      ranking, no budget: ``D_q ∪ D_q^m`` ranked by s(q, c). Because the seeds are the
      cosine top-k, its first ``cfg.context_passages`` passages are Naive RAG's when
      ``context_passages ≤ top_k``: under a fixed reader context the ablation
      changes only the tail of the ranked list (R@5 can differ only if
      ``top_k < 5``). The paper's version hands the LLM all of ``D_q^m``.

    One LLM call a question (the reader), plus any on-demand triple extraction of
    seed passages, which is indexing cost (stage ``extract``), not per-question cost.
    """

    variant: str = "full"
    m_hops: Optional[int] = None
    top_k: Optional[int] = None
    budget: Optional[int] = None
    uses_kg = True
    knobs = {"m_hops": "kg2rag_m_hops", "top_k": "top_k", "budget": "kg2rag_budget"}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variant not in VARIANTS:
            raise ValueError(f"KG2RAG: unknown variant {self.variant!r} (known: {sorted(VARIANTS)})")

    @property  # (a read-only view of the class-level name the base class declares)
    def name(self) -> str:  # type: ignore[override]  # the display name of the variant (class-level table VARIANTS)
        return VARIANTS[self.variant]

    @property  # (a read-only view of the class-level key the base class declares)
    def key(self) -> str:  # type: ignore[override]  # the registry key of the variant (class-level table KEYS)
        return KEYS[self.variant]

    def _settings(self, ws: Workspace) -> tuple:
        m = 0 if self.variant == "no_expansion" else int(self.setting(ws, "m_hops"))
        return m, int(self.setting(ws, "top_k")), int(self.setting(ws, "budget"))

    def adjacency(self, kg: KnowledgeGraph) -> TripleAdjacency:
        """The global graph's :class:`TripleAdjacency`, rebuilt only when the KG changed.

        The key is the graph object and its content (triple count, processed passages
        and a hash of the triples), so an on-demand extraction or a robustness study's
        thinned copy gets its own adjacency; hashing is O(|G|) once per batch, not per question.
        """
        triples = kg.triples
        sig = (id(kg), len(triples), len(kg.extracted), hash(tuple(triples)))
        cached = getattr(self, "_adjacency", None)
        if cached is None or cached[0] != sig:
            self._adjacency = (sig, TripleAdjacency(triples))
        return self._adjacency[1]

    def tree_scores(self, ws: Workspace, pairs: Sequence[tuple]) -> list:
        """r(q, T_i) for ``(question, triple representation)`` pairs: the reranker, else encoder cosine."""
        if not pairs:
            return []
        if ws.reranker is not None:
            return ws.reranker.score(list(pairs))
        q = ws.dense.embed_queries([p[0] for p in pairs])
        t = np.asarray(ws.dense.encoder.encode([p[1] for p in pairs]))
        return [float(x) for x in np.sum(q * t, axis=1)]

    def plans(self, ws: Workspace, questions: Sequence[Question]) -> list:
        """Steps 1-4 for every question (:func:`plan_question`, then the tree reranking and the budget), with no
        LLM call but the seeds' extraction; each plan also holds its seeds' hits (``"hits"``)."""
        m, top_k, budget = self._settings(ws)
        texts = [q.question for q in questions]
        seeds = ws.dense.search(texts, top_k)
        kg = ws.kg_for(dedup(p for h in seeds for p in hits_pids(h)))
        adjacency = self.adjacency(kg)
        sims = ws.dense.scores(texts) if texts else np.zeros((0, 0))
        col = {p: i for i, p in enumerate(ws.dense.pids)}
        plans = [plan_question(kg, adjacency, hits_pids(hits), sims[qi], col, m,
                               self.variant != "no_organisation") for qi, hits in enumerate(seeds)]
        for pl, hits in zip(plans, seeds):
            pl["hits"] = hits

        if self.variant != "no_organisation":
            pairs = [(texts[qi], tree_triples_text(tr)) for qi, pl in enumerate(plans) for tr in pl["trees"]]
            flat = iter(self.tree_scores(ws, pairs))
            for pl in plans:
                pl["tree_scores"] = [next(flat) for _ in pl["trees"]]
                order = sorted(range(len(pl["trees"])), key=lambda i: (-pl["tree_scores"][i], i))
                pl["ranked_trees"] = [pl["trees"][i] for i in order]
                pl["ranked_scores"] = [pl["tree_scores"][i] for i in order]
                pl["organised"] = fill_budget([tree_passages(t) for t in pl["ranked_trees"]], budget,
                                              pl["seed_pids"])
        else:
            for pl in plans:
                union = dedup(pl["seed_pids"] + pl["expanded_pids"])
                pl["organised"] = sorted(union, key=lambda p: -pl["score"].get(p, 0.0))
        return plans

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        m, _, budget = self._settings(ws)
        texts = [q.question for q in questions]
        plans = self.plans(ws, questions)
        contexts = [context_of(ws, pl["organised"]) for pl in plans]
        answers = read(ws, texts, contexts, stage=f"{self.key}_reader")
        out = []
        for q, pl, ctx, (answer, res) in zip(questions, plans, contexts, answers):
            hits = pl["hits"]
            usage = LLMUsage()
            usage.add(res)
            out.append(MethodOutput(q.qid, answer, final_ranking(ctx, pl["organised"] + pl["seed_pids"]),
                                    usage, self._trace(hits, pl, ctx, res.text, m, budget)))
        return out

    def _trace(self, hits, pl: dict, ctx: list, raw: str, m: int, budget: int) -> dict:
        trace = {"variant": self.variant, "m_hops": m, "budget": budget, "seeds": hits_json(hits),
                 "n_seed_triples": pl["n_seed_triples"], "n_expanded_triples": pl["n_triples"],
                 "expanded_pids": pl["expanded_pids"], "organised_pids": pl["organised"],
                 "context_pids": ctx, "reader_raw": raw}
        if "ranked_trees" in pl:
            trace["n_trees"] = len(pl["ranked_trees"])
            trace["trees"] = [{"score": round(float(s), 6), "triples": [t.text() for t, _ in tr][:20],
                               "pids": tree_passages(tr)}
                              for tr, s in zip(pl["ranked_trees"][:10], pl["ranked_scores"][:10])]
            trace["filled_from_seeds"] = [p for p in pl["organised"]
                                          if not any(p in tree_passages(t) for t in pl["ranked_trees"])]
        return trace
