"""HippoRAG 2-style retrieval (Gutiérrez et al., 2025, arXiv 2502.14802): personalized PageRank
over a passage + phrase graph seeded from the question's linked triples and passages.

Offline graph (:func:`build_graph`) over the knowledge graph ``ws.kg``:

- **phrase nodes**: the entities (heads and tails), names lower-cased with punctuation
  folded (HippoRAG's phrase normalisation), so spelling variants of case merge;
- **passage nodes**: every passage of the corpus;
- **fact edges** phrase–phrase, one per (head, tail) pair, weight = number of triples
  joining them; **context edges** passage–phrase for every phrase a passage's triples
  name (weight 1); optional **synonymy edges** phrase–phrase where the embeddings
  of two phrases have cosine ≥ ``synonym_threshold`` (0.8 in HippoRAG 2), among
  each phrase's ``synonym_top_k`` nearest, weight = the cosine.

Online, per question (each LLM stage ONE batched call over all questions):

1. **Query-to-triple linking**: cosine between the question and every fact
   (a triple's text), min-max normalised over the facts; the top ``link_top_k`` (5).
2. **Recognition memory**: the LLM keeps the facts relevant to the question
   (``prompts/hipporag2_filter.txt``, JSON in and out). Reply items are matched to
   the candidates (exact after normalisation, else the closest string with ratio ≥
   0.8); unmatched items are counted. A reply with no JSON at all is counted as
   malformed and the unfiltered candidates are kept. If no fact survives, HippoRAG 2
   falls back to dense retrieval; so does this module.
3. **Seeds**: each kept fact's score is given to its head and tail phrases, divided
   by the number of passages the phrase occurs in (node specificity), averaged over
   the facts naming the phrase; every passage node gets its min-max normalised
   dense score × ``passage_node_weight`` (0.05).
4. **PPR**: ``networkx.pagerank(personalization=seeds, alpha=damping)`` with damping
   0.5 (HippoRAG 2's value) on the weighted undirected graph; passages ranked by
   their PPR probability (ties: dense rank).

**Context**: the first ``cfg.context_passages`` passages of the PPR ranking;
**candidates**: its top ``k`` (``cfg.top_k``). LLM calls a question: 1 filter
(when enabled and the question has candidate facts) + 1 reader.

**Deviations.** HippoRAG 2 extracts triples with NER + NER-conditioned OpenIE over
the whole corpus; here the graph is whatever ``ws.kg`` holds: on ``sample`` the
musique/hotpotqa graphs are the extracted subset (notebook 01's pool plus the
questions' dense top-k, extracted on demand), musique_train the full published
GPT-3.5 OpenIE. Synonymy edges need every phrase embedded (≈16 k phrases on
musique_train): ``synonymy=None`` reads the config field ``hipporag2_synonymy``
if the profile has one, else turns them on only for GPU-server backends
(``openai``, ``vllm``) and skips them on CPU. HippoRAG 2 uses a query instruction for its NV-Embed-v2 embeddings;
MiniLM has none.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Optional, Sequence

import networkx as nx
import numpy as np

from ..data import Question
from ..kg import KnowledgeGraph
from ..llm import ChatRequest, extract_json
from ..prompts import load_prompt
from ..retrieval import corpus_fingerprint
from .base import MethodOutput, QuestionUsage, Workspace
from .retrievers import MethodBase, context_of, final_ranking, hits_json, read

FILTER_SCHEMA = {"type": "object", "properties": {"fact": {"type": "array", "items": {
    "type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3}}}, "required": ["fact"]}


def norm_phrase(text: str) -> str:
    """HippoRAG-style phrase key: lower case, punctuation to spaces, white space folded."""
    return " ".join(re.sub(r"[^\w\s]", " ", str(text).lower()).split())


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


@dataclass
class HippoGraph:
    graph: nx.Graph
    facts: list                # unique (head, relation, tail) after normalisation, in KG order
    fact_texts: list           # "(head, relation, tail)" of the first triple of each fact (what is embedded)
    fact_raw: list             # original (head, relation, tail) strings of that triple (shown to the LLM)
    phrase_passages: dict      # phrase -> number of passages whose triples name it
    n_synonym_edges: int = 0


def build_graph(kg: KnowledgeGraph, passage_pids: Sequence[str], phrase_vectors=None,
                synonym_threshold: float = 0.8, synonym_top_k: int = 10) -> HippoGraph:
    """The passage + phrase graph of HippoRAG 2 (see the module docstring).

    ``phrase_vectors``: ``(phrases, matrix)`` of normalised phrase embeddings for
    synonymy edges, or ``None`` for none.
    """
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
        g.add_edge(u, v, weight=w + 1.0, kind="fact")
        for ph in (h, tl):
            occurs.setdefault(ph, set()).add(t.pid)
            if pnode(t.pid) in g:
                g.add_edge(pnode(t.pid), enode(ph), weight=1.0, kind="context")
    n_syn = 0
    if phrase_vectors is not None:
        phrases, mat = phrase_vectors
        for a, b, sim in synonym_pairs(phrases, mat, synonym_threshold, synonym_top_k):
            if not g.has_edge(enode(a), enode(b)):
                g.add_edge(enode(a), enode(b), weight=float(sim), kind="synonym")
                n_syn += 1
    keys = list(facts)
    return HippoGraph(g, keys, [facts[k].text() for k in keys],
                      [(facts[k].head, facts[k].relation, facts[k].tail) for k in keys],
                      {ph: len(ps) for ph, ps in occurs.items()}, n_syn)


def synonym_pairs(phrases: Sequence[str], mat: np.ndarray, threshold: float, top_k: int,
                  block: int = 1024) -> list:
    """``(a, b, cosine)`` for phrase pairs with cosine ≥ ``threshold`` where one is among the other's
    ``top_k`` nearest phrases; each pair once, ``a`` before ``b`` in ``phrases`` order."""
    mat = np.asarray(mat, dtype=np.float32)
    n = len(phrases)
    pairs: dict = {}
    kk = min(top_k, n - 1)
    if kk < 1:
        return []
    for start in range(0, n, block):
        sims = mat[start:start + block] @ mat.T
        rows = np.arange(sims.shape[0])
        sims[rows, start + rows] = -np.inf
        near = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        for r, cols in enumerate(near):
            i = start + r
            for j in cols:
                s = float(sims[r, j])
                if s >= threshold:
                    key = (min(i, int(j)), max(i, int(j)))
                    pairs[key] = max(pairs.get(key, s), s)
    return [(phrases[a], phrases[b], s) for (a, b), s in sorted(pairs.items())]


def phrase_seed_weights(facts: Sequence[tuple], scores: Sequence[float], phrase_passages: dict) -> dict:
    """HippoRAG 2's phrase seeds: fact score / #passages of the phrase, averaged over the facts naming it."""
    total: dict = {}
    count: dict = {}
    for (h, _, t), s in zip(facts, scores):
        for ph in (h, t):
            n = phrase_passages.get(ph, 0)
            total[ph] = total.get(ph, 0.0) + (float(s) / n if n > 0 else float(s))
            count[ph] = count.get(ph, 0) + 1
    return {ph: total[ph] / count[ph] for ph in total}


def ppr_ranking(graph: nx.Graph, personalization: dict, passage_pids: Sequence[str], damping: float) -> list:
    """``(pid, ppr)`` for every passage, by descending PPR probability (ties: ``passage_pids`` order)."""
    pers = {n: float(w) for n, w in personalization.items() if w > 0 and n in graph}
    if not pers:
        raise ValueError("personalized PageRank needs at least one seed node with positive weight")
    pr = nx.pagerank(graph, alpha=damping, personalization=pers, weight="weight", max_iter=200, tol=1e-10)
    scored = [(p, pr.get(pnode(p), 0.0)) for p in passage_pids]
    order = sorted(range(len(scored)), key=lambda i: (-scored[i][1], i))
    return [scored[i] for i in order]


def match_filtered(reply, candidates: Sequence[tuple]) -> tuple:
    """Map the filter's parsed reply to candidate indices: ``(kept, n_unmatched, malformed)``.

    ``reply`` is ``{"fact": [[s, p, o], ...]}`` or the bare list (strings are accepted
    as whole facts). An item matches the candidate with the same normalised text,
    else the closest one with difflib ratio ≥ 0.8. A reply without such a list is
    ``malformed``: every candidate is kept.
    """
    items = reply.get("fact", reply.get("facts")) if isinstance(reply, dict) else reply
    if not isinstance(items, list):
        return list(range(len(candidates))), 0, True
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
        close = [key] if key in keys else difflib.get_close_matches(key, keys, n=1, cutoff=0.8)
        if close:
            kept.add(keys.index(close[0]))
        else:
            unmatched += 1
    return sorted(kept), unmatched, False


def cached_encode(ws: Workspace, texts: Sequence[str], tag: str) -> np.ndarray:
    """Normalised embeddings of ``texts`` with the workspace encoder, cached on disk by content."""
    enc = ws.dense.encoder
    if not texts:
        return np.zeros((0, ws.dense.embeddings.shape[1]), dtype=np.float32)
    fp = corpus_fingerprint(f"{enc.model_name}|{tag}", texts)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", enc.model_name)
    path = ws.cfg.run_dir / "cache" / "embeddings" / f"{tag}-{safe}-{fp}.npy"
    if path.exists():
        return np.load(path)
    emb = np.asarray(enc.encode(list(texts)), dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, emb)
    tmp.replace(path)
    return emb


@dataclass
class HippoRAG2(MethodBase):
    """HippoRAG 2-style PPR retrieval + the shared reader (see the module docstring)."""

    link_top_k: int = 5
    passage_node_weight: float = 0.05
    damping: float = 0.5
    synonymy: Optional[bool] = None
    synonym_threshold: float = 0.8
    synonym_top_k: int = 10
    recognition_filter: bool = True
    k: Optional[int] = None
    name: str = "HippoRAG 2"
    key: str = "hipporag2"
    uses_kg = True  # whether it reads the KG (part of the trace-resume fingerprint)

    def __post_init__(self) -> None:
        self._graphs: dict = {}

    def graph(self, ws: Workspace, kg: KnowledgeGraph) -> tuple:
        """``(HippoGraph, fact embeddings)`` for the current KG (rebuilt when the KG grew)."""
        synonymy = self.synonymy
        if synonymy is None:
            synonymy = getattr(ws.cfg, "hipporag2_synonymy", None)
        if synonymy is None:  # no config field: on for GPU-server backends, off on CPU (phrase embeddings)
            synonymy = ws.cfg.llm_backend in ("openai", "vllm")
        sig = (ws.dataset.name, len(kg), len(kg.extracted), synonymy)
        if self._graphs.get("sig") != sig:
            vectors = None
            if synonymy:
                phrases = sorted({norm_phrase(e) for e in kg.entities()} - {""})
                vectors = (phrases, cached_encode(ws, phrases, "phrases"))
            hg = build_graph(kg, ws.dense.pids, vectors, self.synonym_threshold, self.synonym_top_k)
            self._graphs = {"sig": sig, "graph": hg, "facts": cached_encode(ws, hg.fact_texts, "facts")}
        return self._graphs["graph"], self._graphs["facts"]

    def _filter(self, ws: Workspace, texts: Sequence[str], cands: list) -> list:
        """Recognition memory: ONE batched call; per question ``(kept indices, info, ChatResult|None)``."""
        todo = [i for i, c in enumerate(cands) if c]
        out = [([], {"filter": "no_candidates"}, None) for _ in cands]
        if not self.recognition_filter:
            return [(list(range(len(c))), {"filter": "disabled"}, None) for c in cands]
        import json

        prompt = load_prompt("hipporag2_filter")
        reqs = [ChatRequest.chat(*prompt.render(question=texts[i], facts=json.dumps(
            {"fact": [list(f) for f in cands[i]]}, ensure_ascii=False)), max_tokens=128,
            stop=("\n\n", "\nQuestion:"), json_schema=FILTER_SCHEMA) for i in todo]
        for i, res in zip(todo, ws.llm.generate(reqs, stage="hipporag2_filter") if reqs else []):
            kept, unmatched, malformed = match_filtered(extract_json(res.text), cands[i])
            out[i] = (kept, {"filter": "malformed_kept_all" if malformed else "ok", "unmatched": unmatched,
                             "raw": res.text}, res)
        return out

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        k = self._k(ws, self.k)
        texts = [q.question for q in questions]
        dense_hits = ws.dense.search(texts, k)
        kg = ws.kg_for(list(dict.fromkeys(p for h in dense_hits for p, _ in h)))
        hg, fact_emb = self.graph(ws, kg)
        q_emb = ws.dense.embed_queries(texts) if texts else np.zeros((0, 1))
        dense_all = ws.dense.scores(texts) if texts else np.zeros((0, 0))

        cands, cand_scores = [], []
        for qi in range(len(texts)):
            if len(hg.facts) == 0:
                cands.append([])
                cand_scores.append([])
                continue
            raw = fact_emb @ q_emb[qi]
            norm = min_max(raw)
            top = np.argsort(-raw, kind="stable")[: self.link_top_k]
            cands.append([hg.fact_raw[j] for j in top])
            cand_scores.append([(int(j), float(norm[j])) for j in top])
        filtered = self._filter(ws, texts, cands)

        rankings, infos = [], []
        for qi, (kept, info, _) in enumerate(filtered):
            facts = [hg.facts[cand_scores[qi][i][0]] for i in kept]
            scores = [cand_scores[qi][i][1] for i in kept]
            info = dict(info, candidates=[list(c) for c in cands[qi]], kept=[list(cands[qi][i]) for i in kept])
            if not facts:
                info["fallback"] = "dense (no fact kept)"
                rankings.append(list(dense_hits[qi]))
                infos.append(info)
                continue
            pers = {enode(ph): w for ph, w in phrase_seed_weights(facts, scores, hg.phrase_passages).items()}
            for p, w in zip(ws.dense.pids, min_max(dense_all[qi]) * self.passage_node_weight):
                pers[pnode(p)] = pers.get(pnode(p), 0.0) + float(w)
            rankings.append(ppr_ranking(hg.graph, pers, ws.dense.pids, self.damping)[:k])
            info["seed_phrases"] = sorted((ph for ph in pers if ph.startswith("entity:")))[:20]
            infos.append(info)

        contexts = [context_of(ws, [p for p, _ in r]) for r in rankings]
        answers = read(ws, texts, contexts, stage="hipporag2_reader")
        out = []
        for q, r, ctx, info, (kept, _, fres), (answer, res) in zip(questions, rankings, contexts, infos,
                                                                    filtered, answers):
            usage = QuestionUsage()
            if fres is not None:
                usage.add(fres)
            usage.add(res)
            trace = {**info, "ranking": hits_json(r), "context_pids": ctx, "reader_raw": res.text,
                     "graph": {"nodes": hg.graph.number_of_nodes(), "edges": hg.graph.number_of_edges(),
                               "facts": len(hg.facts), "synonym_edges": hg.n_synonym_edges}}
            out.append(MethodOutput(q.qid, answer, final_ranking(ctx, [p for p, _ in r]), usage, trace))
        return out
