"""HippoRAG 2's graph and personalized PageRank (:mod:`kgir_lib.baselines.hipporag2` describes the method).

The passage + phrase graph (:func:`build_graph`: phrase, passage, fact, context and synonymy edges as
upstream weights them), its PPR operator built once per graph (:class:`PPRGraph`), query-to-fact linking
(:func:`link_facts`), phrase seed weights and the batched PPR rankings (:func:`ppr_rankings`).
:mod:`kgir_lib.baselines.hipporag2` re-exports every name here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from ..kg import KnowledgeGraph
from ..retrieval import top_k_stable

# networkx (half a second to import) is imported where a graph is built, not by every process that imports the
# registry (the runner's, a notebook kernel's) and builds none
if TYPE_CHECKING:
    import networkx as nx


def norm_phrase(text: str) -> str:
    """HippoRAG-style phrase key: lower case, punctuation to spaces, white space folded."""
    return " ".join(re.sub(r"[^\w\s]", " ", str(text).lower()).split())


def upstream_fold(text: str) -> str:
    """Upstream HippoRAG 2's ``text_processing``: lower case, every character but an ASCII letter, digit or
    space to a space, ends stripped (inner runs of spaces stay)."""
    return re.sub(r"[^A-Za-z0-9 ]", " ", str(text).lower()).strip()


def fact_text(head: str, relation: str, tail: str) -> str:
    """The text a fact is embedded as, upstream's form: the Python ``str`` of the tuple of its three
    :func:`upstream_fold`-ed parts, e.g. ``('key west  florida', 'located in', 'united states')``
    (upstream embeds ``str(fact)`` of its processed triples, ``HippoRAG.index``). Folded parts hold no
    quote or backslash, so this equals ``str(tuple(...))``."""
    return "(" + ", ".join(f"'{upstream_fold(x)}'" for x in (head, relation, tail)) + ")"


def pnode(pid: str) -> str:
    return f"passage:{pid}"


def enode(phrase: str) -> str:
    return f"entity:{phrase}"


def min_max(x: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; a constant vector becomes all ones (every item equally good)."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x
    lo, hi = float(x.min()), float(x.max())
    return np.ones_like(x) if hi - lo < 1e-12 else (x - lo) / (hi - lo)


SYNONYM_MAX_NEIGHBOURS = 101  # upstream add_synonymy_edges stops once more than 100 synonyms were taken
SYNONYM_MIN_ALNUM = 3         # upstream: a phrase needs > 2 alphanumeric characters to look for synonyms
FACT_EDGE_WEIGHT = 2.0        # a triple counts twice on its fact edge (upstream holds both directions)


class PPRGraph:
    """The personalized-PageRank operator of an undirected weighted graph, built once per graph.

    Holds the transposed row-stochastic transition matrix ``Aᵀ`` (scipy CSR), the nodes
    without edges (dangling) and the node order (``list(graph)``, networkx's). :meth:`run`
    is the power iteration of ``networkx.pagerank`` (``_pagerank_scipy``):
    ``x ← α (xA + Σ_dangling x · p) + (1 − α) p`` from the uniform vector, stopping at the
    first iteration whose L1 change is below ``N · tol``, for many reset vectors at once.
    Building ``A`` is O(E) Python work; each question then costs only sparse products.
    """

    def __init__(self, graph: nx.Graph, weight: str = "weight"):
        self.nodes = list(graph)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        n = len(self.nodes)
        if n == 0:
            raise ValueError("personalized PageRank needs a graph with at least one node")
        import networkx as nx

        adj = nx.to_scipy_sparse_array(graph, nodelist=self.nodes, weight=weight, dtype=float)
        out = np.asarray(adj.sum(axis=1)).ravel()
        inv = np.zeros_like(out)
        inv[out != 0] = 1.0 / out[out != 0]
        import scipy.sparse as sp

        transition = sp.dia_array((inv[None, :], 0), shape=adj.shape).tocsr() @ adj
        self.transition_T = sp.csr_array(transition.T)
        self.dangling = np.flatnonzero(out == 0)

    def __len__(self) -> int:
        return len(self.nodes)

    def rows(self, nodes: Sequence) -> np.ndarray:
        """Row index of each node (``KeyError`` for a node not in the graph)."""
        return np.fromiter((self.index[x] for x in nodes), dtype=np.int64, count=len(nodes))

    def run(self, resets: np.ndarray, damping: float, max_iter: int = 200, tol: float = 1e-10,
            chunk: int = 8) -> np.ndarray:
        """PPR probabilities, shape ``(N, Q)``, for reset vectors ``resets`` of shape ``(N, Q)`` (or ``(N,)``).

        Each column is normalised to sum 1 (non-positive and NaN entries count as 0) and
        iterated until its own stopping test holds. Columns go ``chunk`` at a time (one sparse
        product serves them all; small blocks stay in cache) and leave their block when converged.
        """
        r = np.asarray(resets, dtype=np.float64)
        single = r.ndim == 1
        r = r[:, None] if single else r
        if r.shape[0] != len(self.nodes):
            raise ValueError(f"reset vectors have {r.shape[0]} rows for a graph of {len(self.nodes)} nodes")
        r = np.where(np.isnan(r) | (r < 0), 0.0, r)
        totals = r.sum(axis=0)
        if np.any(totals <= 0):
            raise ValueError("personalized PageRank needs at least one seed node with positive weight")
        p = r / totals
        out = np.empty_like(p)
        for start in range(0, p.shape[1], max(1, chunk)):
            block = slice(start, start + max(1, chunk))
            out[:, block] = self._iterate(np.ascontiguousarray(p[:, block]), damping, max_iter, tol)
        return out[:, 0] if single else out

    def _iterate(self, p: np.ndarray, damping: float, max_iter: int, tol: float) -> np.ndarray:
        """networkx's update ``x ← α (xA + Σ_dangling x · p) + (1 − α) p`` on a block, same operation order.

        Where every column of ``p`` is 0 the update is exactly ``α · xA`` (adding 0.0 changes no
        float), so the full formula runs only on the rows where some reset mass sits (the
        passages and the seed phrases): fewer passes over the ``N``-row arrays, same bits.
        """
        n = len(self.nodes)
        rows = np.flatnonzero(p.any(axis=1))
        p_rows = p[rows]
        keep_rows = (1.0 - damping) * p_rows
        x = np.full_like(p, 1.0 / n)
        out = np.empty_like(p)
        active = np.arange(p.shape[1])
        for _ in range(max_iter):
            y = self.transition_T @ x
            mass = x[self.dangling].sum(axis=0)  # row by row, as networkx's sum(x[is_dangling])
            seeded = damping * (y[rows] + mass * p_rows) + keep_rows
            y *= damping
            y[rows] = seeded
            np.subtract(y, x, out=x)
            np.abs(x, out=x)
            err = x.sum(axis=0)
            x = y
            done = err < n * tol
            if done.any():
                out[:, active[done]] = x[:, done]
                stay = ~done
                active = active[stay]
                if active.size == 0:
                    return out
                x = np.ascontiguousarray(x[:, stay])
                p_rows, keep_rows = p_rows[:, stay], keep_rows[:, stay]
        import networkx as nx

        raise nx.PowerIterationFailedConvergence(max_iter)


@dataclass
class HippoGraph:
    graph: nx.Graph
    facts: list                # unique (head, relation, tail) after normalisation, in KG order
    fact_texts: list           # what is embedded: :func:`fact_text` of the first triple of each fact (upstream's form)
    fact_raw: list             # original (head, relation, tail) strings of that triple (shown to the LLM)
    phrase_passages: dict      # phrase -> number of passages whose triples name it
    n_synonym_edges: int = 0
    _ppr: Optional[PPRGraph] = None

    @property
    def ppr(self) -> PPRGraph:
        """The PPR operator of :attr:`graph`, built on first use and kept (one per graph)."""
        if self._ppr is None:
            self._ppr = PPRGraph(self.graph)
        return self._ppr


def build_graph(kg: KnowledgeGraph, passage_pids: Sequence[str], phrase_vectors=None,
                synonym_threshold: float = 0.8, synonym_top_k: int = 2047,
                synonym_max_neighbours: int = SYNONYM_MAX_NEIGHBOURS) -> HippoGraph:
    """The passage + phrase graph of HippoRAG 2 (see the module docstring).

    ``phrase_vectors``: ``(phrases, matrix)`` of normalised phrase embeddings for
    synonymy edges, or ``None`` for none.
    """
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(pnode(p) for p in passage_pids)
    facts: dict = {}
    occurs: dict = {}
    for t in kg.triples:
        h, r, tl = norm_phrase(t.head), norm_phrase(t.relation), norm_phrase(t.tail)
        if not h or not tl or h == tl:
            continue
        facts.setdefault((h, r, tl), t)
        u, v = enode(h), enode(tl)
        w = g.get_edge_data(u, v, {}).get("weight", 0.0)
        g.add_edge(u, v, weight=w + FACT_EDGE_WEIGHT, kind="fact")
        for ph in (h, tl):
            occurs.setdefault(ph, set()).add(t.pid)
            if pnode(t.pid) in g:
                g.add_edge(pnode(t.pid), enode(ph), weight=1.0, kind="context")
    n_syn = 0
    if phrase_vectors is not None:
        phrases, mat = phrase_vectors
        for a, b, sim in synonym_pairs(phrases, mat, synonym_threshold, synonym_top_k, synonym_max_neighbours):
            if not g.has_edge(enode(a), enode(b)):
                g.add_edge(enode(a), enode(b), weight=float(sim), kind="synonym")
                n_syn += 1
    keys = list(facts)
    return HippoGraph(g, keys, [fact_text(facts[k].head, facts[k].relation, facts[k].tail) for k in keys],
                      [(facts[k].head, facts[k].relation, facts[k].tail) for k in keys],
                      {ph: len(ps) for ph, ps in occurs.items()}, n_syn)


def synonym_neighbours(phrases: Sequence[str], mat: np.ndarray, threshold: float, top_k: int,
                       max_neighbours: int = SYNONYM_MAX_NEIGHBOURS, block: int = 256) -> dict:
    """Upstream HippoRAG 2's synonym lists: ``{i: [(j, cosine), ...]}`` over phrase indices.

    For each phrase ``i`` with at least :data:`SYNONYM_MIN_ALNUM` alphanumeric characters:
    its ``top_k`` nearest phrases by cosine (the phrase itself among them, as in a k-NN
    search over all phrases), best first (ties: lower index), skipping itself, taken while
    the cosine is ≥ ``threshold``, at most ``max_neighbours``. Blocks of rows keep memory
    at ``block × len(phrases)`` floats.
    """
    mat = np.asarray(mat, dtype=np.float32)
    n = len(phrases)
    out: dict = {}
    if n < 2 or top_k < 1:
        return out
    eligible = np.array([len(re.sub(r"[^A-Za-z0-9]", "", p)) >= SYNONYM_MIN_ALNUM for p in phrases])
    for start in range(0, n, block):
        sims = mat[start:start + block] @ mat.T
        for r in range(sims.shape[0]):
            i = start + r
            if not eligible[i]:
                continue
            row = sims[r]
            cand = np.flatnonzero(row >= threshold)  # every neighbour that can pass the threshold
            if cand.size == 0:
                continue
            order = cand[np.argsort(-row[cand], kind="stable")]
            # the k-NN list holds the top_k phrases overall; those >= threshold are its head
            order = order[:top_k]
            found = [(int(j), float(row[j])) for j in order if j != i][:max_neighbours]
            if found:
                out[i] = found
    return out


def synonym_pairs(phrases: Sequence[str], mat: np.ndarray, threshold: float, top_k: int,
                  max_neighbours: int = SYNONYM_MAX_NEIGHBOURS, block: int = 256) -> list:
    """``(a, b, weight)`` synonymy edges, each unordered pair once, ``a`` before ``b`` in ``phrases`` order.

    ``weight`` sums the cosines of the directed pairs found by :func:`synonym_neighbours`
    (a→b and/or b→a), as upstream's undirected graph holds both.
    """
    pairs: dict = {}
    for i, found in synonym_neighbours(phrases, mat, threshold, top_k, max_neighbours, block).items():
        for j, s in found:
            key = (min(i, j), max(i, j))
            pairs[key] = pairs.get(key, 0.0) + s
    return [(phrases[a], phrases[b], s) for (a, b), s in sorted(pairs.items())]


def phrase_seed_weights(facts: Sequence[tuple], scores: Sequence[float] | np.ndarray, phrase_passages: dict,
                        top_k: Optional[int] = None) -> dict:
    """HippoRAG 2's phrase seeds: fact score / #passages of the phrase, averaged over the facts naming it.

    ``top_k``: keep only the ``top_k`` heaviest phrases (upstream ``get_top_k_weights`` with
    ``linking_top_k``; ties: the phrase named first); ``None`` keeps all.
    """
    total: dict = {}
    count: dict = {}
    for (h, _, t), s in zip(facts, scores):
        for ph in (h, t):
            n = phrase_passages.get(ph, 0)
            total[ph] = total.get(ph, 0.0) + (float(s) / n if n > 0 else float(s))
            count[ph] = count.get(ph, 0) + 1
    weights = {ph: total[ph] / count[ph] for ph in total}
    if top_k is not None and len(weights) > top_k:
        keep = sorted(weights, key=lambda ph: -weights[ph])[:top_k]  # stable: ties keep first-named order
        weights = {ph: weights[ph] for ph in weights if ph in set(keep)}
    return weights


def ppr_ranking(graph, personalization: dict, passage_pids: Sequence[str], damping: float) -> list:
    """``(pid, ppr)`` for every passage, by descending PPR probability (ties: ``passage_pids`` order).

    ``graph``: a :class:`PPRGraph` (built once per graph) or an ``nx.Graph`` (built here).
    """
    ppr = graph if isinstance(graph, PPRGraph) else PPRGraph(graph)
    reset = np.zeros(len(ppr))
    for node, w in personalization.items():
        if w > 0 and node in ppr.index:
            reset[ppr.index[node]] += float(w)
    if not reset.any():
        raise ValueError("personalized PageRank needs at least one seed node with positive weight")
    return rank_passages(ppr, ppr.run(reset, damping), passage_pids)


def rank_passages(ppr: PPRGraph, scores: np.ndarray, passage_pids: Sequence[str]) -> list:
    """``(pid, score)`` of every passage by descending score, ties in ``passage_pids`` order."""
    vals = scores[ppr.rows([pnode(p) for p in passage_pids])]
    order = np.lexsort((np.arange(len(vals)), -vals))
    return [(passage_pids[i], float(vals[i])) for i in order]


def fact_similarities(fact_emb: np.ndarray, q_emb: np.ndarray, block: int = 64):
    """Per question, ``(raw cosines to every fact, min, max)``; one matrix product per ``block`` questions
    (``(facts, block)`` floats at a time). Step 1's scores are ``(raw - min) / (max - min)``."""
    fact_emb, q_emb = np.asarray(fact_emb), np.asarray(q_emb)
    for qi in range(len(q_emb)):
        if qi % block == 0:
            raw_all = fact_emb @ q_emb[qi:qi + block].T
        raw = raw_all[:, qi % block]
        yield raw, float(raw.min()), float(raw.max())


def normalised(raw: np.ndarray, lo: float, hi: float, idx) -> np.ndarray:
    """Min-max normalised scores of the facts ``idx`` (all ones when every fact scores the same)."""
    idx = np.asarray(idx, dtype=np.int64)
    return np.ones(len(idx)) if hi - lo < 1e-12 else (raw[idx].astype(np.float64) - lo) / (hi - lo)


def link_facts(hg: HippoGraph, fact_emb: np.ndarray, q_emb: np.ndarray, link_top_k: int) -> tuple:
    """Query-to-triple linking for every question at once: ``(candidates, [(fact index, score)])`` each.

    Cosine of the question and every fact (:func:`fact_similarities`), min-max normalised over the
    facts; the ``link_top_k`` best facts (ties: KG order).
    """
    cands, cand_scores = [], []
    if len(hg.facts) == 0 or len(q_emb) == 0:
        return [[] for _ in range(len(q_emb))], [[] for _ in range(len(q_emb))]
    for raw, lo, hi in fact_similarities(fact_emb, q_emb):
        top = top_k_stable(raw, link_top_k)
        norm = normalised(raw, lo, hi, top)
        cands.append([hg.fact_raw[j] for j in top])
        cand_scores.append([(int(j), float(s)) for j, s in zip(top, norm)])
    return cands, cand_scores


def ppr_rankings(hg: HippoGraph, phrase_seeds: Sequence[dict], dense_scores: np.ndarray,
                 passage_pids: Sequence[str], passage_node_weight: float, damping: float,
                 k: Optional[int] = None, block: int = 8) -> list:
    """Steps 3-4 for a batch: reset vectors (phrase seeds + weighted min-max dense scores), PPR.

    Returns, per question, the passages as ``(pid, ppr)`` by descending PPR (ties: corpus
    order): all of them, or the top ``k``. Questions go ``block`` at a time, so memory
    stays at a few ``(nodes × block)`` arrays however many questions there are.
    """
    ppr = hg.ppr
    prow = ppr.rows([pnode(p) for p in passage_pids])
    out = []
    for start in range(0, len(phrase_seeds), block):
        seeds = phrase_seeds[start:start + block]
        resets = np.zeros((len(ppr), len(seeds)))
        for j, weights in enumerate(seeds):
            for ph, w in weights.items():
                if w > 0 and enode(ph) in ppr.index:
                    resets[ppr.index[enode(ph)], j] += float(w)
            col = np.asarray(dense_scores[start + j], dtype=np.float64)
            resets[prow, j] += np.clip(min_max(col) * passage_node_weight, 0.0, None)
        scores = ppr.run(resets, damping, chunk=block)
        for j in range(len(seeds)):
            vals = scores[prow, j]
            order = (np.lexsort((np.arange(len(vals)), -vals)) if k is None else top_k_stable(vals, k))
            out.append([(passage_pids[i], float(vals[i])) for i in order])
    return out
