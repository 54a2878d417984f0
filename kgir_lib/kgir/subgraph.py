"""KGIR-RAG evidence subgraph (paper §2.2, Algorithm 1).

One small function per step of Algorithm 1::

    D_q    = retrieve(ws, [q], top_k)                   eq. 2  dense cosine top-k
    G_q    = question_triples(kg, D_q)                  eq. 3  triples of the retrieved passages
    E_q    = parse_entities(NER(q))                     eq. 4  LLM named-entity recognition
             (fallback: entities_in_question(q, entities(G_q)) when NER gives nothing usable)
    M      = match_entities(E_q, entities(G_q), n, θ)   eq. 5  name matching (match_method, θ)
             (+ triple_matches: whole-triple matching of entities that matched no name)
    G_tmp  = tmp_graph(G_q, M, reading)                 eq. 5  see "two readings" below
    B_i    = seed_components(G_tmp, seeds)              eq. 6  connected components holding a seed
    w      = edge_weights(...)                          §2.2   relevance of the B_i triples to q
    T_e    = maximum_spanning_tree(B(e), w)             eq. 7  one maximum spanning tree per seed
    G_Ans  = ∪_e T_e                                    eq. 7

:func:`evidence_subgraph` runs steps 3-7 for one question; :func:`subgraphs_of` for many, given
their ``D_q``, ``G_q`` (:func:`graph_triples`) and :class:`Seeds`; :func:`build_subgraphs` is the
whole of Algorithm 1 for many questions with one batched NER call. Notebook 03 measures the steps
over a dataset (:mod:`kgir_lib.eval.algorithm1`).

Choices the paper leaves open, made here and documented where they are made:

- **Two readings of G_tmp** (``cfg.gtmp_reading``). §2.2's prose says "take each entity of E_q as
  a seed and add it and its adjacent edges" (``"seed_star"``: :func:`seed_graph`); the description
  of Algorithm 1 says "connect the entities of the retrieved passages into the passage graph
  G_tmp, take its connected components B_i, weight the edges of B_i with the reranker, MST"
  (``"passages"``: every triple of ``G_q``; the components that hold a seed are the ``B_i``, eq.
  7's MST(e) for e ∈ E_q). **Default ``"passages"``**: (1) it is the reading under which eqs. 6-7
  do any work -- a union of stars is already connected around each seed and its spanning tree can
  drop only parallel edges, edges between two seeds and edges that close a cycle through a
  neighbour two seeds share (notebook 03's audit measures what each reading prunes), whereas the
  paper motivates the MST as the step that removes the noise the adjacent edges bring; (2) the
  overview (§2.1: "extract the connected graph of the question's entities, then an MST weighted by
  relevance") and Algorithm 1 both describe it; (3) it reaches the second hop -- the bridge
  entity's triples hang off the seed's neighbours, not the seed. Notebook 03 measures what each
  reading removes and keeps (:func:`kgir_lib.eval.algorithm1.compare_readings`).
- **edge weight** (:func:`edge_weights`): the cross-encoder reranker score of (question, triple
  text) when a reranker is configured (paper profile, bge-reranker-large, as in Algorithm 1);
  otherwise (``"cosine"``, the default without a reranker) the cosine similarity of the question
  embedding and the triple text's embedding from the same dense encoder as eq. 2. This keeps one
  score per edge, like the reranker; the literal "reuse eq. 2" reading (every triple weighted by
  its source passage's cosine score) is available as ``"passage"``, but it gives all triples of a
  passage the same weight, so the tree among them is decided by tie-breaking alone.
- **parallel edges and ties** (:func:`maximum_spanning_tree`): Kruskal's algorithm over the
  triples sorted by weight, descending; equal weights keep the input order (G_q order = retrieval
  rank of the source passage, then the extractor's order), so the result is deterministic. Of
  several triples between the same two entities at most one is kept (the heaviest; on a tie the
  first). Self-loops (head == tail) are never kept.
- **Entity matching** (steps 3-4: NER, grounding, name matching, whole-triple matching):
  :mod:`kgir_lib.kgir.seeds`, :mod:`kgir_lib.kgir.entity_matching`; **components and spanning
  trees** (eqs. 6-7): :mod:`kgir_lib.kg.mst`. The spanning trees remove edges, never nodes: every
  seed stays in ``G_Ans`` with its tree, so a wrong match of eq. 5 is not pruned later -- hence a
  strict matching rule (``entity_matching``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from ..config.checks import check_value
from ..config.fields import GTMP_READINGS
from ..kg import KnowledgeGraph, Triple
from ..kg.mst import maximum_spanning_tree, seed_components
from ..methods.base import Workspace
from ..retrieval import Reranker, TextEncoder
from .entity_matching import DEFAULT_MATCH_METHOD, DEFAULT_NGRAM_THRESHOLD, seeds_of, triple_text
from .seeds import match_question, ner_requests, parse_entities

WEIGHTINGS = ("reranker", "cosine", "passage")


# ---------------------------------------------------------------- step 1-2: D_q and G_q (eq. 2, 3)
def retrieve(ws: Workspace, queries: Sequence[str], top_k: int) -> list:
    """``D_q`` for each query: the dense cosine top-``top_k`` ``(pid, score)`` over the whole
    corpus (eq. 2)."""
    top_k = check_value("top_k", top_k)  # the config's rule for the field
    return ws.dense.search(list(queries), top_k) if queries else []


def question_triples(kg: KnowledgeGraph, pids: Iterable[str]) -> list:
    """``G_q``: the triples whose source passage is in ``pids`` (eq. 3), in retrieval order."""
    return kg.triples_of(list(pids))


def graph_triples(ws: Workspace, retrieved: Sequence[Sequence[tuple]]) -> list:
    """``G_q`` of each question from its ``D_q`` (eq. 3), the graph read through ``ws.kg_for`` so
    that passages not yet extracted are extracted first (one call for all questions)."""
    kg = ws.kg_for(list(dict.fromkeys(p for r in retrieved for p, _ in r)))
    return [question_triples(kg, [p for p, _ in r]) for r in retrieved]


def seed_graph(triples: Sequence[Triple], matches: dict) -> list:
    """``G_tmp``, reading ``"seed_star"``: the triples of ``G_q`` with a matched seed as head or
    tail (§2.2, eq. 5), ``G_q`` order."""
    seeds = set(seeds_of(matches))
    return [t for t in dict.fromkeys(triples) if t.head in seeds or t.tail in seeds]


def tmp_graph(triples: Sequence[Triple], matches: dict, reading: str = "passages") -> list:
    """``G_tmp`` under one of the two readings of Algorithm 1 (module docstring):

    - ``"passages"``: every triple of ``G_q`` ("connect the entities of the retrieved passages"),
      deduplicated, ``G_q`` order; the seeds then pick the components ``B_i``;
    - ``"seed_star"``: :func:`seed_graph`, the seeds and their adjacent edges.
    """
    if reading == "passages":
        return list(dict.fromkeys(triples))
    if reading == "seed_star":
        return seed_graph(triples, matches)
    raise ValueError(f"unknown G_tmp reading {reading!r} (choose from {GTMP_READINGS})")


# ---------------------------------------------------------------- step 6: edge weights
def edge_weights(question: str, triples: Sequence[Triple], weighting: str = "cosine", *,
                 encoder: Optional[TextEncoder] = None, reranker: Optional[Reranker] = None,
                 passage_scores: Optional[dict] = None,
                 question_vector: Optional[np.ndarray] = None) -> list:
    """Relevance of each triple to the question, one float per triple (§2.2, Algorithm 1).

    - ``"reranker"``: cross-encoder score of (question, triple text), e.g. bge-reranker-large.
    - ``"cosine"``: cosine of the question's and the triple text's embeddings (normalised
      encoder, so a dot product); ``question_vector`` may be given precomputed.
    - ``"passage"``: the eq. 2 cosine score of the triple's source passage
      (``passage_scores[pid]``).
    """
    if not triples:
        return []
    if weighting == "reranker":
        if reranker is None:
            raise ValueError("edge weighting 'reranker' needs a reranker (set 'reranker_model')")
        return reranker.score([(question, triple_text(t)) for t in triples])
    if weighting == "cosine":
        if encoder is None:
            raise ValueError("edge weighting 'cosine' needs the dense encoder")
        qv = question_vector if question_vector is not None else encoder.encode([question])[0]
        tv = encoder.encode([triple_text(t) for t in triples])
        return [float(x) for x in np.asarray(tv) @ np.asarray(qv)]
    if weighting == "passage":
        if passage_scores is None:
            raise ValueError("edge weighting 'passage' needs the retrieval scores of the passages")
        return [float(passage_scores.get(t.pid, 0.0)) for t in triples]
    raise ValueError(f"unknown edge weighting {weighting!r} (choose from {WEIGHTINGS})")


def resolve_weighting(weighting: Optional[str], reranker: Optional[Reranker]) -> str:
    """``None``/``"auto"``: the reranker when one is configured, else cosine."""
    if weighting in (None, "auto"):
        return "reranker" if reranker is not None else "cosine"
    if weighting not in WEIGHTINGS:
        choices = f"{WEIGHTINGS} or 'auto'"
        raise ValueError(f"unknown edge weighting {weighting!r} (choose from {choices})")
    return weighting


WeightFn = Callable[[str, Sequence[Triple]], Sequence[float]]


def question_weight_fn(ws: Workspace, retrieved: Sequence[tuple], weighting: str,
                       question_vector: Optional[np.ndarray] = None) -> WeightFn:
    """The edge-weight function of one question for :func:`evidence_subgraph` (see
    :func:`edge_weights`): the workspace's encoder or reranker, the question's ``D_q`` scores."""
    scores = {p: float(s) for p, s in retrieved}

    def weight_fn(question: str, triples: Sequence[Triple]) -> list:
        return edge_weights(question, triples, weighting, encoder=ws.dense.encoder,
                            reranker=ws.reranker, passage_scores=scores,
                            question_vector=question_vector)
    return weight_fn


# ---------------------------------------------------------------- the whole of Algorithm 1
@dataclass
class EvidenceSubgraph:
    """Everything Algorithm 1 computed for one question; ``G_Ans`` = :attr:`kept`."""

    question: str
    retrieved: list = field(default_factory=list)     # D_q: [(pid, cosine)], best first
    G_q: list = field(default_factory=list)           # triples of D_q (eq. 3)
    llm_entities: list = field(default_factory=list)  # parsed NER output (before grounding)
    E_q: list = field(default_factory=list)           # question entities, the seeds' names (eq. 4)
    used_fallback: bool = False
    fallback_reason: Optional[str] = None             # "no_entities" | "no_match"
    matches: dict = field(default_factory=dict)       # {question entity: [(entity, similarity)]}
    seeds: list = field(default_factory=list)
    G_tmp: list = field(default_factory=list)         # (eq. 5)
    components: list = field(default_factory=list)    # [Component] (eq. 6)
    weights: dict = field(default_factory=dict)       # {Triple: weight} for G_tmp
    kept: list = field(default_factory=list)          # G_Ans triples (eq. 7), G_tmp order
    pruned: list = field(default_factory=list)        # triples of the seed components not kept
    weighting: str = "cosine"
    reading: str = "passages"                         # G_tmp reading (tmp_graph)
    matched_by_triple: list = field(default_factory=list)  # matched via whole triples

    @property
    def removal(self) -> float:
        """Share of the seed components' triples the spanning trees removed (NaN without
        components)."""
        total = len(self.kept) + len(self.pruned)
        return len(self.pruned) / total if total else float("nan")

    @property
    def G_Ans(self) -> list:
        return self.kept

    def ranked_evidence(self) -> list:
        """G_Ans triples, heaviest first (ties: G_tmp order)."""
        return sorted(self.kept, key=lambda t: -self.weights.get(t, 0.0))

    def evidence_pids(self) -> list:
        """Source passages of G_Ans edges, by their best edge weight (ties: first
        appearance)."""
        return list(dict.fromkeys(t.pid for t in self.ranked_evidence()))

    def to_dict(self) -> dict:
        """JSON-serialisable form (for traces)."""
        def tri(t: Triple) -> list:
            weight = round(float(self.weights.get(t, 0.0)), 6)
            return [t.head, t.relation, t.tail, t.pid, weight]
        return {
            "question": self.question,
            "retrieved": [[p, round(float(s), 6)] for p, s in self.retrieved],
            "n_G_q": len(self.G_q),
            "llm_entities": list(self.llm_entities),
            "E_q": list(self.E_q),
            "used_fallback": self.used_fallback,
            "fallback_reason": self.fallback_reason,
            "matches": {k: [[e, s] for e, s in v] for k, v in self.matches.items()},
            "seeds": list(self.seeds),
            "n_G_tmp": len(self.G_tmp),
            "components": [{"seeds": c.seeds, "n_nodes": len(c.nodes),
                            "n_triples": len(c.triples)} for c in self.components],
            "weighting": self.weighting,
            "reading": self.reading,
            "matched_by_triple": list(self.matched_by_triple),
            "G_Ans": [tri(t) for t in self.kept],
            "pruned": [tri(t) for t in self.pruned],
        }

    @classmethod
    def from_dict(cls, d: dict, G_q: Sequence[Triple] = ()) -> "EvidenceSubgraph":
        """The subgraph back from :meth:`to_dict` (a trace). ``G_tmp`` is ``G_Ans`` plus the pruned
        triples; when ``G_q`` is given their order is ``G_q``'s (Algorithm 1 keeps it), else kept
        first."""
        def tri(row: Sequence) -> Triple:
            return Triple(str(row[0]), str(row[1]), str(row[2]), str(row[3]))

        rows = d.get("G_Ans", []) + d.get("pruned", [])
        kept = [tri(x) for x in d.get("G_Ans", [])]
        pruned = [tri(x) for x in d.get("pruned", [])]
        weights = {tri(x): float(x[4]) for x in rows if len(x) > 4}
        tmp = set(kept) | set(pruned)
        in_gq = [t for t in dict.fromkeys(G_q) if t in tmp]
        G_tmp = in_gq if len(in_gq) == len(tmp) else list(dict.fromkeys(kept + pruned))
        seeds = list(d.get("seeds", []))
        kept_set = set(kept)
        pruned_set = set(pruned)
        matches = {k: [(e, float(s)) for e, s in v] for k, v in d.get("matches", {}).items()}
        return cls(question=d.get("question", ""),
                   retrieved=[tuple(x) for x in d.get("retrieved", [])], G_q=list(G_q),
                   llm_entities=list(d.get("llm_entities", [])), E_q=list(d.get("E_q", [])),
                   used_fallback=bool(d.get("used_fallback")),
                   fallback_reason=d.get("fallback_reason"), matches=matches, seeds=seeds,
                   G_tmp=G_tmp, components=seed_components(G_tmp, seeds), weights=weights,
                   kept=[t for t in G_tmp if t in kept_set],
                   pruned=[t for t in G_tmp if t in pruned_set],
                   weighting=d.get("weighting", "cosine"), reading=d.get("reading", "passages"),
                   matched_by_triple=list(d.get("matched_by_triple", [])))


def evidence_subgraph(question: str, retrieved: Sequence[tuple], G_q: Sequence[Triple],
                      llm_entities: Sequence[str], *, weight_fn: WeightFn, n: int = 3,
                      threshold: float = DEFAULT_NGRAM_THRESHOLD, weighting: str = "cosine",
                      fallback_on_no_match: bool = True, reading: str = "passages",
                      method: str = DEFAULT_MATCH_METHOD, match_triples: bool = True,
                      ground: bool = True) -> EvidenceSubgraph:
    """Algorithm 1 for one question, given ``D_q``, ``G_q`` and the parsed NER output.

    ``weight_fn(question, triples) -> weights`` scores the edges of the seed components.
    ``reading`` selects ``G_tmp`` (:func:`tmp_graph`), ``method`` the eq. 5 similarity,
    ``match_triples`` the whole-triple matching of unmatched entities (:func:`triple_matches`),
    ``ground`` whether the entities are grounded in the question (:func:`match_question`). With
    no matched seed, the components and ``G_Ans`` are empty.
    """
    sub = EvidenceSubgraph(question=question, retrieved=list(retrieved), G_q=list(G_q),
                           llm_entities=list(llm_entities), weighting=weighting, reading=reading)
    m = match_question(question, llm_entities, G_q, n, threshold=threshold, method=method,
                       fallback_on_no_match=fallback_on_no_match, match_triples=match_triples,
                       ground=ground)
    sub.E_q = m.E_q
    sub.matches = m.matches
    sub.matched_by_triple = m.matched_by_triple
    sub.used_fallback = m.used_fallback
    sub.fallback_reason = m.fallback_reason
    sub.seeds = m.seeds
    sub.G_tmp = tmp_graph(G_q, m.matches, reading)
    sub.components = seed_components(sub.G_tmp, sub.seeds)
    in_comps = [t for c in sub.components for t in c.triples]
    w = list(weight_fn(question, in_comps)) if in_comps else []
    sub.weights = {t: float(x) for t, x in zip(in_comps, w)}
    kept: set = set()
    for comp in sub.components:  # one tree per seed; seeds sharing a component share its tree
        weights = [sub.weights[t] for t in comp.triples]
        kept.update(comp.triples[i] for i in maximum_spanning_tree(comp.triples, weights))
    sub.kept = [t for t in sub.G_tmp if t in kept]
    sub.pruned = [t for t in in_comps if t not in kept]
    return sub


@dataclass(frozen=True)
class Seeds:
    """What Algorithm 1 seeds one question from (eq. 4): entity names, grounded in the question
    (``ground``: the NER reply's, :func:`~kgir_lib.kgir.seeds.match_question`) or taken as
    given."""

    entities: list
    ground: bool = True


def subgraphs_of(ws: Workspace, queries: Sequence[str], retrieved: Sequence[Sequence[tuple]],
                 G_qs: Sequence, *, seeds: Sequence[Seeds], threshold: float,
                 weighting: Optional[str] = None, reading: Optional[str] = None) -> list:
    """Steps 3-7 of Algorithm 1 for each query, given its ``D_q``, ``G_q`` and :class:`Seeds`:
    one :class:`EvidenceSubgraph` each, under the profile's eq. 5 rule and ``ngram_n``, the eq. 5
    ``threshold``, the edge ``weighting`` (:func:`resolve_weighting`; the query embeddings
    computed in one batch when it is cosine) and the ``G_tmp`` ``reading`` (default: the
    profile's)."""
    cfg = ws.cfg
    weighting = resolve_weighting(weighting, ws.reranker)
    qvecs = ws.dense.embed_queries(list(queries)) if weighting == "cosine" else None
    subs = []
    for i, (q, r, G_q, seed) in enumerate(zip(queries, retrieved, G_qs, seeds)):
        weight_fn = question_weight_fn(ws, r, weighting, qvecs[i] if qvecs is not None else None)
        subs.append(evidence_subgraph(q, r, G_q, seed.entities, weight_fn=weight_fn,
                                      n=cfg.ngram_n, threshold=threshold, weighting=weighting,
                                      reading=reading or cfg.gtmp_reading, method=cfg.match_method,
                                      ground=seed.ground))
    return subs


def build_subgraphs(ws: Workspace, queries: Sequence[str],
                    retrieved: Optional[Sequence[Sequence[tuple]]] = None, *,
                    top_k: Optional[int] = None, threshold: Optional[float] = None,
                    weighting: Optional[str] = None, stage: str = "kgir_ner",
                    reading: Optional[str] = None) -> tuple:
    """Algorithm 1 for many queries with ONE batched NER ``llm.generate`` call.

    ``retrieved`` (``D_q`` per query) is retrieved here when not given, ``top_k`` deep (default:
    the profile's); ``threshold`` (eq. 5) defaults to the profile's, ``reading`` (``G_tmp``) too.
    The KG is read through ``ws.kg_for`` (:func:`graph_triples`). Returns ``(subgraphs,
    ner_results)``: one :class:`EvidenceSubgraph` and one ``ChatResult`` per query.
    """
    cfg = ws.cfg
    weighting = resolve_weighting(weighting, ws.reranker)
    queries = list(queries)
    if not queries:
        return [], []
    if retrieved is None:
        retrieved = retrieve(ws, queries, cfg.top_k if top_k is None else top_k)
    retrieved = [list(r) for r in retrieved]
    G_qs = graph_triples(ws, retrieved)
    results = ws.llm.generate(ner_requests(queries, cfg.max_tokens("ner")), stage=stage)
    seeds = [Seeds(parse_entities(res.text)) for res in results]
    subs = subgraphs_of(ws, queries, retrieved, G_qs, seeds=seeds,
                        threshold=cfg.ngram_threshold if threshold is None else threshold,
                        weighting=weighting, reading=reading)
    return subs, results


def format_triples(triples: Sequence[Triple], max_triples: Optional[int] = 30) -> str:
    """Triples one a line, ``(head, relation, tail)``, as the rewrite and reflection prompts show
    them."""
    ts = list(dict.fromkeys((t.head, t.relation, t.tail) for t in triples))
    if max_triples is not None:
        ts = ts[:max_triples]
    return "\n".join(f"({h}, {r}, {t})" for h, r, t in ts) if ts else "(none)"
