"""HippoRAG 2-style retrieval (Gutiérrez et al., 2025, arXiv 2502.14802): personalized PageRank
over a passage + phrase graph seeded from the question's linked triples and passages.

Offline graph (:func:`build_graph`) over the knowledge graph ``ws.kg``:

- **phrase nodes**: the entities (heads and tails), names lower-cased with punctuation
  folded (HippoRAG's phrase normalisation), so spelling variants of case merge;
- **passage nodes**: every passage of the corpus;
- **fact edges** phrase–phrase, one per (head, tail) pair, weight = 2 × the number of
  triples joining them; **context edges** passage–phrase for every phrase a passage's
  triples name (weight 1); optional **synonymy edges** phrase–phrase (below). The
  factor 2 and the synonymy weights follow upstream HippoRAG 2 (``HippoRAG.py``,
  ``add_fact_edges`` / ``add_synonymy_edges``): it records every fact edge in both
  directions and every synonym as a directed pair, and loads both into an *undirected*
  igraph, so a fact edge is held twice while a context edge is held once; an
  undirected PPR sums parallel edges. Here one edge carries that summed weight.
- **synonymy** (HippoRAG 2 §3, upstream defaults): for each phrase with more than two
  alphanumeric characters, its ``synonym_top_k`` (2047) nearest phrases by cosine of
  their embeddings, in order, while the cosine is ≥ ``synonym_threshold`` (0.8), at
  most ``SYNONYM_MAX_NEIGHBOURS`` (101, upstream's ``num_nns > 100`` stop) of them;
  the edge a–b weighs the sum of the cosines of the directed pairs a→b and b→a found. A pair
  already joined by a fact keeps its fact edge (upstream overwrites that direction's fact count
  with the cosine).

Online, per question (each LLM stage ONE batched call over all questions):

1. **Query-to-triple linking**: cosine between the question and every fact, embedded
   in upstream's text form (:func:`~kgir_lib.baselines.hippo_graph.fact_text`:
   ``('head', 'relation', 'tail')``, lower case, punctuation as spaces), min-max
   normalised over the facts; the top ``link_top_k`` (5) (upstream ``linking_top_k``).
2. **Recognition memory**: the LLM keeps the facts relevant to the question
   (``prompts/hipporag2_filter.txt``, JSON in and out; the candidates are shown as
   extracted). As upstream's ``DSPyFilter``: each fact of the reply keeps the candidate
   with the same normalised text, else the most similar one (no cutoff); items that
   are not facts are counted. A reply with no fact list is counted as malformed and
   keeps no fact. If no fact survives, HippoRAG 2 falls back to dense retrieval; so
   does this module.
3. **Seeds**: each kept fact's score is given to its head and tail phrases, divided
   by the number of passages the phrase occurs in (node specificity), averaged over
   the facts naming the phrase; only the ``phrase_top_k`` (= ``link_top_k``, 5)
   heaviest phrases stay seeds (upstream ``get_top_k_weights``; ties: first named);
   every passage node gets its min-max normalised dense score × ``passage_node_weight``
   (0.05).
4. **PPR** with damping 0.5 (HippoRAG 2's value) on the weighted undirected graph;
   passages ranked by their PPR probability (ties: corpus order). The transition
   matrix is built ONCE per graph (:class:`PPRGraph`, scipy sparse) and the power
   iteration runs for all questions of a batch at once; it is the iteration of
   ``networkx.pagerank`` (same start, dangling rule and stopping test), so the
   scores equal networkx's to floating-point tolerance (tested).

**Context**: the first ``cfg.context_passages`` passages of the PPR ranking;
**candidates**: its top ``k`` (``cfg.top_k``). LLM calls a question: 1 filter
(when enabled and the question has candidate facts) + 1 reader.

**Config fields**: ``hipporag2_synonymy`` (null: on for GPU-server backends ``openai`` /
``vllm``, off on CPU, where embedding ≈16 k phrases of musique_train costs minutes),
``hipporag2_link_top_k``, ``hipporag2_synonym_threshold``, ``hipporag2_synonym_top_k``.

**Checked against upstream** (PyPI ``hipporag`` 2.0.0a4 on musique_train with the same
corpus, OpenIE file, encoder and LLM: ``benchmarks/peers/``, report
``results/benchmarks/peers_hipporag2.md``): the phrase-phrase fact edges and their
weights are the same, the linked facts are upstream's, and seeded with upstream's kept
facts (:meth:`HippoRAG2.rank_given_facts`) the graph and PPR return upstream's top
passages in upstream's order. What still differs end to end is the LLM's work: the filter
prompt and the reader (below).

**Deviations, kept on purpose.** HippoRAG 2 extracts triples with NER + NER-conditioned
OpenIE over the whole corpus; here the graph is whatever ``ws.kg`` holds: on ``sample``
the musique/hotpotqa graphs are the extracted subset (notebook 01's pool plus the
questions' dense top-k, extracted on demand), musique_train the full published
GPT-3.5 OpenIE. The filter prompt is the suite's own short JSON prompt (upstream's is a
DSPy-optimised prompt with ten demonstrations, not copied here), shown the facts as
extracted rather than folded; the reader is the suite's shared reader (one reader for
every method), not upstream's one-shot chain-of-thought prompt. Triples whose head and
tail are the same entity, or with an empty part, are dropped at import
(:mod:`kgir_lib.kg.parse`); upstream keeps them as facts that can be linked. Upstream
solves PPR with igraph's PRPACK; here the power iteration stops at an L1 change below
N·1e-10 (both send a dangling node's mass back along the reset vector). Phrase keys
(:func:`~kgir_lib.baselines.hippo_graph.norm_phrase`) fold punctuation as upstream's
``text_processing`` does, but also collapse runs of spaces and keep non-ASCII letters
(upstream maps them to spaces). HippoRAG 2 uses a query instruction for its NV-Embed-v2
embeddings; its OpenAI-compatible embedding class, like MiniLM here, uses none.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..data import Question
from ..kg import KnowledgeGraph
from ..llm import LLMUsage, extract_json
from ..llm.prompts import chat
from ..retrieval import corpus_fingerprint, load_embeddings, save_embeddings
from ..methods.base import MethodBase, MethodOutput, Workspace
from .hippo_graph import (FACT_EDGE_WEIGHT, SYNONYM_MAX_NEIGHBOURS, SYNONYM_MIN_ALNUM, HippoGraph,  # noqa: F401
                          PPRGraph, build_graph, enode, link_facts, min_max, norm_phrase, phrase_seed_weights,
                          pnode, ppr_ranking, ppr_rankings, rank_passages, synonym_neighbours, synonym_pairs,
                          top_k_stable, upstream_fold, fact_similarities, normalised)
from ..methods.context import context_of, final_ranking, hits_json, read

FILTER_SCHEMA = {"type": "object", "properties": {"fact": {"type": "array", "items": {
    "type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3}}}, "required": ["fact"]}


def match_filtered(reply, candidates: Sequence[tuple]) -> tuple:
    """Map the filter's parsed reply to candidate indices: ``(kept, n_unmatched, malformed)``.

    ``reply`` is ``{"fact": [[s, p, o], ...]}`` or the bare list (strings are accepted as whole
    facts). As upstream's ``DSPyFilter.rerank``: each fact of the reply keeps the candidate with the
    same normalised text, else the most similar one (difflib ratio, no cutoff). Items that are not
    facts are counted as unmatched. A reply without such a list is ``malformed`` and keeps no fact
    (upstream's parse failure), so the question falls back to dense retrieval.
    """
    items = reply.get("fact", reply.get("facts")) if isinstance(reply, dict) else reply
    if not isinstance(items, list):
        return [], 0, True
    keys = [" | ".join(norm_phrase(x) for x in c) for c in candidates]
    kept, unmatched = set(), 0
    for item in items:
        if isinstance(item, (list, tuple)) and len(item) == 3:
            key = " | ".join(norm_phrase(x) for x in item)
        elif isinstance(item, str) and item.strip():
            key = " | ".join(norm_phrase(x) for x in re.split(r"[,|]", item.strip("()[] ")))
        else:
            unmatched += 1
            continue
        close = [key] if key in keys else difflib.get_close_matches(key, keys, n=1, cutoff=0.0)
        if close:
            kept.add(keys.index(close[0]))
    return sorted(kept), unmatched, False


def cached_encode(ws: Workspace, texts: Sequence[str], tag: str) -> np.ndarray:
    """Normalised embeddings of ``texts`` with the workspace encoder, cached on disk by content."""
    enc = ws.dense.encoder
    if not texts:
        return np.zeros((0, ws.dense.embeddings.shape[1]), dtype=np.float32)
    fp = corpus_fingerprint(f"{getattr(enc, 'cache_name', enc.model_name)}|{tag}", texts)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", enc.model_name)
    path = ws.cfg.run_dir / "cache" / "embeddings" / f"{tag}-{safe}-{fp}.npy"
    emb = load_embeddings(path, len(texts))  # checked against its stored checksum
    if emb is None:
        emb = np.asarray(enc.encode(list(texts)), dtype=np.float32)
        save_embeddings(path, emb)
    return emb


@dataclass
class HippoRAG2(MethodBase):
    """HippoRAG 2-style PPR retrieval + the shared reader (see the module docstring).

    ``None`` settings read the config (``hipporag2_*`` fields, whose defaults are upstream's:
    ``link_top_k`` 5, ``synonym_threshold`` 0.8, ``synonym_top_k`` 2047); ``phrase_top_k``
    defaults to ``link_top_k`` (upstream uses ``linking_top_k`` for both).
    """

    link_top_k: Optional[int] = None
    phrase_top_k: Optional[int] = None
    passage_node_weight: float = 0.05
    damping: float = 0.5
    synonymy: Optional[bool] = None
    synonym_threshold: Optional[float] = None
    synonym_top_k: Optional[int] = None
    recognition_filter: bool = True
    top_k: Optional[int] = None
    name = "HippoRAG 2"
    key = "hipporag2"
    uses_kg = True
    knobs = {"synonymy": "hipporag2_synonymy", "link_top_k": "hipporag2_link_top_k",
             "synonym_threshold": "hipporag2_synonym_threshold", "synonym_top_k": "hipporag2_synonym_top_k",
             "top_k": "top_k"}

    def __post_init__(self) -> None:
        super().__post_init__()
        self._graphs: dict = {}

    def settings(self, ws: Workspace) -> dict:
        """The effective knobs: this object's value, else the config field (:meth:`MethodBase.setting`)."""
        synonymy = self.setting(ws, "synonymy")
        if synonymy is None:  # on for GPU-server backends, off on CPU (phrase embeddings)
            synonymy = ws.cfg.llm_backend in ("openai", "vllm")
        link = int(self.setting(ws, "link_top_k"))
        return {"synonymy": bool(synonymy), "link_top_k": link,
                "phrase_top_k": int(self.phrase_top_k if self.phrase_top_k is not None else link),
                "synonym_threshold": float(self.setting(ws, "synonym_threshold")),
                "synonym_top_k": int(self.setting(ws, "synonym_top_k"))}

    def graph(self, ws: Workspace, kg: KnowledgeGraph) -> tuple:
        """``(HippoGraph, fact embeddings)`` for the current KG (rebuilt when the KG or a setting changed)."""
        st = self.settings(ws)
        sig = (ws.dataset.name, id(kg), len(kg), len(kg.extracted), hash(tuple(kg.triples)), tuple(ws.dense.pids),
               st["synonymy"], st["synonym_threshold"], st["synonym_top_k"])
        if self._graphs.get("sig") != sig:
            vectors = None
            if st["synonymy"]:
                phrases = sorted({norm_phrase(e) for e in kg.entities()} - {""})
                vectors = (phrases, cached_encode(ws, phrases, "phrases"))
            hg = build_graph(kg, ws.dense.pids, vectors, st["synonym_threshold"], st["synonym_top_k"])
            self._graphs = {"sig": sig, "graph": hg, "facts": cached_encode(ws, hg.fact_texts, "facts")}
        return self._graphs["graph"], self._graphs["facts"]

    def _filter(self, ws: Workspace, texts: Sequence[str], cands: list) -> list:
        """Recognition memory: ONE batched call; per question ``(kept indices, info, ChatResult|None)``."""
        todo = [i for i, c in enumerate(cands) if c]
        out: list[tuple] = [([], {"filter": "no_candidates"}, None) for _ in cands]
        if not self.recognition_filter:
            return [(list(range(len(c))), {"filter": "disabled"}, None) for c in cands]
        import json

        budget = ws.cfg.max_tokens("hipporag2_filter")  # the profile's budget
        reqs = [chat("hipporag2_filter", {"question": texts[i], "facts": json.dumps(
            {"fact": [list(f) for f in cands[i]]}, ensure_ascii=False)}, max_tokens=budget,
            stop=("\n\n", "\nQuestion:"), json_schema=FILTER_SCHEMA) for i in todo]
        for i, res in zip(todo, ws.llm.generate(reqs, stage="hipporag2_filter") if reqs else []):
            kept, unmatched, malformed = match_filtered(extract_json(res.text), cands[i])
            out[i] = (kept, {"filter": "malformed" if malformed else "ok", "unmatched": unmatched,
                             "raw": res.text}, res)
        return out

    def retrieve(self, ws: Workspace, questions: Sequence[Question]) -> tuple:
        """Steps 1-4 for a batch (no reader): ``(rankings, infos, filtered, graph)``.

        ``rankings[i]``: question i's top-``k`` ``(pid, score)`` (PPR, or dense when no fact was kept);
        ``infos[i]``: its trace (candidate and kept facts, seeds, filter status); ``filtered[i]``: the
        filter's ``(kept indices, info, ChatResult | None)``. One batched LLM call: the filter.
        """
        k = int(self.setting(ws, "top_k"))
        st = self.settings(ws)
        texts = [q.question for q in questions]
        dense_hits = ws.dense.search(texts, k)
        kg = ws.kg_for(list(dict.fromkeys(p for h in dense_hits for p, _ in h)))
        hg, fact_emb = self.graph(ws, kg)
        q_emb = ws.dense.embed_queries(texts) if texts else np.zeros((0, 1))
        dense_all = ws.dense.scores(texts) if texts else np.zeros((0, 0))
        cands, cand_scores = link_facts(hg, fact_emb, q_emb, st["link_top_k"])
        filtered = self._filter(ws, texts, cands)

        rankings: list = [None] * len(texts)  # each question's, filled below
        infos: list = [None] * len(texts)
        seeds: dict = {}
        for qi, (kept, info, _) in enumerate(filtered):
            facts = [hg.facts[cand_scores[qi][i][0]] for i in kept]
            scores = [cand_scores[qi][i][1] for i in kept]
            info = dict(info, candidates=[list(c) for c in cands[qi]], kept=[list(cands[qi][i]) for i in kept])
            if not facts:
                info["fallback"] = "dense (no fact kept)"
                rankings[qi] = list(dense_hits[qi])
            else:
                seeds[qi] = phrase_seed_weights(facts, scores, hg.phrase_passages, st["phrase_top_k"])
                info["seed_phrases"] = sorted(enode(ph) for ph in seeds[qi])[:20]
            infos[qi] = info
        self._rank_seeded(ws, hg, seeds, dense_all, k, rankings)
        return rankings, infos, filtered, hg

    def rank_given_facts(self, ws: Workspace, questions: Sequence[Question], facts: Sequence[Sequence]) -> tuple:
        """Steps 3-4 seeded with given facts instead of the filter's (no LLM): ``(rankings, missing)``.

        ``facts[i]``: question i's facts as ``(head, relation, tail)`` texts, matched to the graph's facts
        by upstream's folding (:func:`upstream_fold`, spaces collapsed), so another system's kept facts
        (e.g. upstream HippoRAG 2's, lower-cased and stripped of punctuation) seed this graph and PPR.
        Each fact's score is its min-max normalised cosine to the question over all facts, as in step 1.
        ``missing[i]``: the facts not in the graph. No fact found: the dense top-``k`` (HippoRAG 2's fallback).
        """
        k = int(self.setting(ws, "top_k"))
        st = self.settings(ws)
        hg, fact_emb = self.graph(ws, ws.kg)
        fold = lambda f: tuple(" ".join(upstream_fold(x).split()) for x in f)  # noqa: E731
        index: dict = {}
        for i, raw in enumerate(hg.fact_raw):
            index.setdefault(fold(raw), i)
        texts = [q.question for q in questions]
        dense_hits = ws.dense.search(texts, k)
        q_emb, dense_all = ws.dense.embed_queries(texts), ws.dense.scores(texts)
        rankings, missing, seeds = list(dense_hits), [], {}
        for qi, (given, (raw, lo, hi)) in enumerate(zip(facts, fact_similarities(fact_emb, q_emb))):
            found = list(dict.fromkeys(index[fold(f)] for f in given if fold(f) in index))
            missing.append([list(f) for f in given if fold(f) not in index])
            if found:
                seeds[qi] = phrase_seed_weights([hg.facts[i] for i in found], normalised(raw, lo, hi, found),
                                                hg.phrase_passages, st["phrase_top_k"])
        self._rank_seeded(ws, hg, seeds, dense_all, k, rankings)
        return rankings, missing

    def _rank_seeded(self, ws: Workspace, hg, seeds: dict, dense_all, k: int, rankings: list) -> None:
        """Step 4 for the questions with seed phrases (``seeds``: question index -> phrase weights): their PPR
        top-``k`` replaces their entry of ``rankings``; the others keep the dense fallback already there."""
        if not seeds:
            return
        order = list(seeds)
        ranked = ppr_rankings(hg, [seeds[qi] for qi in order], dense_all[order], ws.dense.pids,
                              self.passage_node_weight, self.damping, k=k)
        for qi, r in zip(order, ranked):
            rankings[qi] = r

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        rankings, infos, filtered, hg = self.retrieve(ws, questions)
        texts = [q.question for q in questions]
        contexts = [context_of(ws, [p for p, _ in r]) for r in rankings]
        answers = read(ws, texts, contexts, stage="hipporag2_reader")
        out = []
        for q, r, ctx, info, (_, _, fres), (answer, res) in zip(questions, rankings, contexts, infos,
                                                                    filtered, answers):
            usage = LLMUsage()
            if fres is not None:
                usage.add(fres)
            usage.add(res)
            trace = {**info, "ranking": hits_json(r), "context_pids": ctx, "reader_raw": res.text,
                     "graph": {"nodes": hg.graph.number_of_nodes(), "edges": hg.graph.number_of_edges(),
                               "facts": len(hg.facts), "synonym_edges": hg.n_synonym_edges}}
            out.append(MethodOutput(q.qid, answer, final_ranking(ctx, [p for p, _ in r]), usage, trace))
        return out
