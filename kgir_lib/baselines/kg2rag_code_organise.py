"""KG²RAG as its authors' code runs it, step 2: the organisation (the code's ``GraphFilterPostProcessor``): the
question's multigraph, its mentions and co-occurrence edges, one maximum spanning tree per component (Kruskal in
networkx's edge order), the candidates' texts, the selection under the budget and the code's top-up. The module
:mod:`kgir_lib.baselines.kg2rag_code` says what each step does and why.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Callable, Sequence

from ..kg.graph import Triple
from ..kg.mst import maximum_spanning_tree
from .kg2rag_code_chunks import ChunkIndex

MENTION_THRESHOLD = 0.90   # the code's 3-gram overlap for a title or relation mentioned in the question
QUERY = "query"            # the source of a co-occurrence edge (no chunk)
Scorer = Callable[[str, Sequence[str]], list]


# ---------------------------------------------------------------------------- 2. organisation
def ngram_overlap(span: str, sentence: str, n: int = 3) -> float:
    """The code's mention test: the share of ``span``'s character ``n``-grams found in ``sentence``, both
    lower-cased with their spaces (and tokens that are one punctuation mark) removed; ``n`` shrinks to the
    shorter raw length. ``(|shared| + 0.01) / (|span's| + 0.01)``; 0.0 when ``n`` reaches 0."""
    while len(span) < n or len(sentence) < n:
        n -= 1
    if n <= 0:
        return 0.0

    def grams(text: str) -> set:
        joined = "".join(tok for tok in text.lower().split() if tok not in string.punctuation)
        return {joined[i:i + n] for i in range(len(joined) - n + 1)}
    a, b = grams(span), grams(sentence)
    return (len(a & b) + 0.01) / (len(a) + 0.01)


class OrderedMultiGraph:
    """An undirected multigraph that iterates as a networkx ``MultiGraph`` does: nodes in insertion order,
    each node's neighbours in the order their first edge came, parallel edges by key (0, 1, ...). Edges are
    ``(u, v, source, weight)``; ``adj[u][v]`` lists the indices of the edges between ``u`` and ``v``."""

    def __init__(self) -> None:
        self.adj: dict = {}
        self.edges: list = []

    def add_edge(self, u: str, v: str, source: str, weight: float) -> None:
        self.edges.append((u, v, source, float(weight)))
        i = len(self.edges) - 1
        self.adj.setdefault(u, {}).setdefault(v, []).append(i)
        if u != v:
            self.adj.setdefault(v, {}).setdefault(u, []).append(i)

    def has_edge(self, u: str, v: str) -> bool:
        return u in self.adj and v in self.adj[u]

    def components(self) -> list:
        """Connected components (node lists in graph order), by their first node, then largest first."""
        seen: set = set()
        comps = []
        for start in self.adj:
            if start in seen:
                continue
            comp, todo = {start}, [start]
            while todo:
                for nbr in self.adj[todo.pop()]:
                    if nbr not in comp:
                        comp.add(nbr)
                        todo.append(nbr)
            seen |= comp
            comps.append([n for n in self.adj if n in comp])
        return sorted(comps, key=len, reverse=True)

    def edge_order(self, nodes: Sequence[str]) -> list:
        """The edges among ``nodes`` (a component) as networkx lists them: node by node, each neighbour not
        yet visited, its parallel edges by key."""
        inside, seen, out = set(nodes), set(), []
        for n in nodes:
            for nbr, keys in self.adj[n].items():
                if nbr in inside and nbr not in seen:
                    out.extend(keys)
            seen.add(n)
        return out


def tree_sources(g: OrderedMultiGraph, nodes: Sequence[str]) -> list:
    """A component's candidate: the chunks of its maximum spanning tree's edges, in the order networkx lists
    the tree built from them (the tree's nodes in the component's order, each node's tree edges in the order
    Kruskal kept them), co-occurrence edges left out. Kruskal (:func:`kgir_lib.kg.mst.maximum_spanning_tree`)
    takes the edges in networkx's order (:meth:`OrderedMultiGraph.edge_order`): heaviest first, ties in that
    order, which is networkx's ``maximum_spanning_tree``."""
    order = g.edge_order(nodes)
    triples = [Triple(g.edges[i][0], "", g.edges[i][1], g.edges[i][2]) for i in order]
    weights = [g.edges[i][3] for i in order]
    kept = sorted(maximum_spanning_tree(triples, weights), key=lambda j: (-weights[j], j))  # Kruskal's order
    tree: dict = {n: {} for n in nodes}
    for j in kept:
        u, v, source, _ = g.edges[order[j]]
        tree[u].setdefault(v, source)
        tree[v].setdefault(u, source)
    seen, out = set(), []
    for n in nodes:
        for nbr, source in tree[n].items():
            if nbr not in seen and source != QUERY:
                out.append(source)
        seen.add(n)
    return out


def heaviest_loop(g: OrderedMultiGraph, node: str) -> list:
    """A single-node component's candidate: the chunk of its heaviest self-loop (ties: the first), or none."""
    loops = sorted((g.edges[i] for i in g.adj[node].get(node, ())), key=lambda e: e[3], reverse=True)
    return [e[2] for e in loops if e[2] != QUERY][:1]


def question_graph(index: ChunkIndex, nodes: Sequence[tuple], question: str) -> tuple:
    """The code's graph of one question: ``(graph, mentioned titles, mentioned relations)``. Edges: every
    triple of the chunks ``nodes`` (parts stripped), weighted by its chunk's score; then weight-0
    co-occurrence edges between mentioned entities not yet adjacent, in the order they were mentioned."""
    g = OrderedMultiGraph()
    ents = {index.title[p]: None for p, _ in nodes}
    rels: dict = {}
    for pid, score in nodes:
        for h, r, t in index.facts.get(pid, ()):
            h, r, t = h.strip(), r.strip(), t.strip()
            ents.setdefault(h)
            ents.setdefault(t)
            rels.setdefault(r)
            g.add_edge(h, t, pid, score)
    mentioned = {e: None for e in ents if ngram_overlap(e, question) >= MENTION_THRESHOLD}
    mentioned_rels = {r for r in rels if ngram_overlap(r, question) >= MENTION_THRESHOLD}
    for pid, _ in nodes:  # facts whose relation is mentioned carry a mention across (the parts as stored)
        for h, r, t in index.facts.get(pid, ()):
            if r in mentioned_rels:
                if h in mentioned and t not in mentioned:
                    mentioned[t] = None
                if t in mentioned and h not in mentioned:
                    mentioned[h] = None
    names = list(mentioned)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if not (g.has_edge(a, b) or g.has_edge(b, a)):
                g.add_edge(a, b, QUERY, 0.0)
    return g, names, sorted(mentioned_rels)


def candidate_text(index: ChunkIndex, chunk_pids: Sequence[str], use_tpt: bool) -> str:
    """What the reranker reads for a candidate: its chunks' texts run together; with ``use_tpt`` each chunk
    with triples adds up to three of them as "h has/is r t" to a running list, and the text so far gains
    " Relational facts: <the list so far>." (the code's layout, kept)."""
    text, facts = "", ""
    for pid in chunk_pids:
        text += index.text[pid]
        if use_tpt and index.facts.get(pid):
            facts += ", ".join(f"{h} has/is {r} {t}" for h, r, t in index.facts[pid][:3])
            if facts:
                text = f"{text} Relational facts: {facts}."
    return text


def best_first(scores: Sequence[float]) -> list:
    """Indices by score, best first, ties in input order."""
    return sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)


def fill_as_code(nodes: Sequence[tuple], wanted: set, scores: Sequence[float], k: int) -> set:
    """The code's top-up when fewer than ``k // 2`` chunks were taken: ``scores`` are of the chunks of
    ``nodes`` not in ``wanted`` (in order); the code walks its best ``k`` indices and reads each as an index
    into *all* of ``nodes``, adding that chunk if new, up to ``k`` chunks. Kept as the code does it."""
    out = set(wanted)
    for i in best_first(scores)[:k]:
        pid = nodes[i][0]
        if pid not in out:
            out.add(pid)
            if len(out) >= k:
                break
    return out


@dataclass
class Organisation:
    """Step 2's result: the chunks kept ``[(pid, score)]`` in step 1's order, the candidates (chunk lists, in
    component order) with their texts and scores, and which path ran: ``"trees"``, ``"trees+fill"`` or
    ``"no candidates"`` (every chunk scored alone; then ``kept`` is in score order, as the code returns it)."""

    kept: list
    candidates: list
    texts: list
    scores: list
    path: str
    mentioned: list
    mentioned_relations: list


def organise_as_code(index: ChunkIndex, nodes: Sequence[tuple], question: str, scorer: Scorer, k: int,
                     use_tpt: bool) -> Organisation:
    """The code's organisation of the chunks ``nodes`` (seeds, then step 1's) for ``question`` (module
    docstring, step 2); ``scorer(question, texts)`` is the reranker, ``k`` the chunk budget."""
    g, mentioned, mentioned_rels = question_graph(index, nodes, question)
    candidates = []
    for comp in g.components():
        candidates.append(tree_sources(g, comp) if len(comp) > 1 else heaviest_loop(g, comp[0]))
        if len(comp) == 1 and not candidates[-1]:
            candidates.pop()
    if not candidates:
        scores = scorer(question, [index.text[p] for p, _ in nodes])
        kept = [nodes[i] for i in best_first(scores)[:k]]
        return Organisation(kept, [], [], list(scores), "no candidates", mentioned, mentioned_rels)
    texts = [candidate_text(index, c, use_tpt) for c in candidates]
    scores = scorer(question, texts)
    wanted: set = set()
    for i in best_first(scores):
        if len(wanted | set(candidates[i])) > k:
            break
        wanted |= set(candidates[i])
    path = "trees"
    if len(wanted) < k // 2:
        rest = [p for p, _ in nodes if p not in wanted]
        if rest:
            wanted = fill_as_code(nodes, wanted, scorer(question, [index.text[p] for p in rest]), k)
            path = "trees+fill"
    kept = [(p, s) for p, s in nodes if p in wanted]
    return Organisation(kept, candidates, texts, list(scores), path, mentioned, mentioned_rels)
