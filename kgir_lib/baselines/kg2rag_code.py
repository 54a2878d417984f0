"""KG²RAG as its authors' code runs it: the suite's reading of the public KG²RAG code (GitHub
``nju-websoft/KG2RAG`` at commit 7d626c7, ``code/util/kg_post_processor.py`` wired by
``code/kg_rag_distractor.py``), beside the paper-following :mod:`kgir_lib.baselines.kg2rag`.

Written from reading that code, not copied from it. ``benchmarks/peers/kg2rag_crosscheck.sh`` runs the
authors' post-processors on the same inputs and compares every stage with this module's.

**The code's unit is a chunk keyed by its page title.** Every corpus passage is a chunk whose id carries its
title (:class:`ChunkIndex`); the graph's triples are held per chunk. The code's "entities" (``ents``) are the
page titles: a triple's head or tail only leads somewhere when it is, character for character, the title of a
page. Three post-processors run in turn on the seed chunks (the cosine top-``k`` with their scores):

1. **Expansion** (the code's ``KGRetrievePostProcessor``; :func:`expand_by_titles`). The seeds' titles;
   the *highly related* titles: a title met again among the first ``k // 2`` seeds, and the two titles with
   the best mean seed score; the titles named by the seeds' triples; then one hop: the titles named by the
   triples of the other chunks of all those titles. Every chunk of every title reached is added, except the
   other chunks of a seed title that is not highly related. An added chunk's score is its title's
   ``(sum of its scores + mean seed score) / (count + 1)``; a title named by a seed triple scores that seed's
   score, one reached in the hop its parent's mean. The added chunks follow the seeds, best score first.
2. **Organisation** (the code's ``GraphFilterPostProcessor``; :func:`organise_as_code`). A multigraph over the
   triples of all chunks so far, an edge weighing its chunk's score; the titles and relations whose
   character 3-grams are (at least 90 %) in the question (:func:`ngram_overlap`), extended along triples
   whose relation is mentioned, joined pairwise by weight-0 co-occurrence edges; its connected components,
   **largest first**; one maximum spanning tree each (Kruskal); a candidate = the chunks of its tree's edges
   (a single-node component: its heaviest self-loop's chunk). Each candidate's text (its chunks' texts
   concatenated, on MuSiQue with up to three of each chunk's facts) is scored against the question by the
   reranker; candidates are taken best first until the next one would pass ``k`` chunks (the first that
   does ends the selection). With fewer than ``k // 2`` chunks taken, the remaining chunks are scored too
   and added (:func:`fill_as_code`, with the code's own indexing, see below). The chunks taken keep the
   order of step 1, not the candidates' rank order.
3. **Grouping** (the code's ``NaivePostprocessor``; :func:`group_by_title`): the chunks grouped by title
   in order of each title's first appearance. The reader gets this list.

**Where the code breaks ties.** The code iterates Python sets (the chunks added in step 1, the mentioned
titles) and networkx subgraph views, whose node order for a component smaller than half the graph is a set's
order, so ties in step 1's scores, Kruskal's equal weights and the order of a tree's chunks follow Python's
string hashing (``PYTHONHASHSEED``): the authors' code can give different chunks on the same inputs in two
processes. This module breaks every such tie by insertion order (the order a component of more than half the
graph already has); the cross-check measures how often the code's own output moves with the hash seed.

**Kept as the code does it**, though they look unintended: the fill step scores the chunks not yet taken
but reads the i-th best of them as the i-th chunk of *all* chunks (:func:`fill_as_code`); the title
normalisation of the triples at load time is computed and discarded (nothing is normalised here either);
the relational facts of a candidate accumulate over its chunks and are appended after each chunk; a tree's
chunk appears once per edge in its text. No exception is raised here where the code would raise none.

**Mapping onto the suite.** A chunk is a corpus passage; its text is ``"title: text"``, as the code builds
it; its number ``seq`` counts the passages of its title in corpus order. The authors ran two wirings:
HotpotQA's (chunk id ``title##seq``, no facts in the candidate texts, a title's chunks grouped by ``seq``)
and MuSiQue's (``idx##title##seq``, up to three facts a chunk, grouped by position): :func:`code_setting`
picks MuSiQue's for the MuSiQue datasets, HotpotQA's for any other. The code's chunk budget is its
``top_k``, the seed count: here ``top_k`` for both. The reranker is the profile's (``ws.reranker``, the
code's bge-reranker-large on the paper profile), else the cosine of the workspace encoder's embeddings
(:func:`relevance`). The reader is the shared one, over the first ``cfg.context_passages`` chunks.

Steps 1 and 3 are in :mod:`kgir_lib.baselines.kg2rag_code_chunks`, step 2 in
:mod:`kgir_lib.baselines.kg2rag_code_organise`; this module runs them (:func:`run_code`) and is the method.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..data import Question
from ..kg import KnowledgeGraph
from ..llm import LLMUsage
from ..methods.base import MethodBase, MethodOutput, Workspace
from ..methods.context import context_of, dedup, final_ranking, hits_json, hits_pids, read
from .kg2rag_code_chunks import ChunkIndex, code_setting, expand_by_titles, group_by_title
from .kg2rag_code_organise import Scorer, organise_as_code

UPSTREAM = "nju-websoft/KG2RAG"
UPSTREAM_COMMIT = "7d626c77b7af30b55aa3f960cde755b9549a0616"


# ---------------------------------------------------------------------------- the reranker
def relevance(ws: Workspace) -> Scorer:
    """``scorer(question, texts)``: the profile's reranker (``ws.reranker``, the code's bge-reranker-large on
    the paper profile), else the cosine of the workspace encoder's embeddings of the question and each text.
    Equal texts are embedded once, so they score the same."""
    def score(question: str, texts: Sequence[str]) -> list:
        if not texts:
            return []
        if ws.reranker is not None:
            return ws.reranker.score([(question, t) for t in texts])
        unique = dedup(texts)
        q = ws.dense.embed_queries([question])[0]
        emb = np.asarray(ws.dense.encoder.encode(unique))
        by_text = {t: float(x) for t, x in zip(unique, emb @ q)}
        return [by_text[t] for t in texts]
    return score


# ---------------------------------------------------------------------------- one question, all stages
def run_code(index: ChunkIndex, seeds: Sequence[tuple], question: str, scorer: Scorer, k: int,
             use_tpt: bool) -> dict:
    """The three stages on one question: ``{"expansion", "organisation", "final"}`` (``final``: the chunks
    the reader gets, ``[(pid, score)]``)."""
    exp = expand_by_titles(index, seeds)
    org = organise_as_code(index, list(seeds) + exp.added, question, scorer, k, use_tpt)
    return {"expansion": exp, "organisation": org, "final": group_by_title(index, org.kept)}


@dataclass
class KG2RAGCode(MethodBase):
    """KG²RAG as its authors' code runs it (module docstring). ``top_k`` (``cfg.top_k``): the seed chunks
    and the chunk budget, as in the code. **Context**: the first ``cfg.context_passages`` chunks of the
    grouped list; **candidates**: that list, then the remaining seeds in score order. One LLM call a
    question (the shared reader), plus any on-demand triple extraction of seed passages (indexing cost)."""

    top_k: Optional[int] = None
    name = "KG²RAG (authors' code)"
    key = "kg2rag_code"
    uses_kg = True
    knobs = {"top_k": "top_k"}

    def chunk_index(self, ws: Workspace, kg: KnowledgeGraph) -> ChunkIndex:
        """The :class:`ChunkIndex` of ``ws``'s corpus and ``kg``, rebuilt only when the graph changed."""
        wiring = code_setting(ws.dataset.name).wiring
        sig = (id(kg), len(kg), len(kg.extracted), hash(tuple(kg.triples)), ws.dataset.name, wiring)
        cached = getattr(self, "_index", None)
        if cached is None or cached[0] != sig:
            self._index = (sig, ChunkIndex(ws.dataset.corpus.passages, kg, wiring))
        return self._index[1]

    def plans(self, ws: Workspace, questions: Sequence[Question], scorer: Optional[Scorer] = None) -> list:
        """Every question's seeds and stages (:func:`run_code`), no LLM call but the seeds' extraction;
        ``scorer`` replaces :func:`relevance` (the cross-check records what it scores)."""
        k = int(self.setting(ws, "top_k"))
        texts = [q.question for q in questions]
        seeds = ws.dense.search(texts, k)
        kg = ws.kg_for(dedup(p for h in seeds for p in hits_pids(h)))
        index = self.chunk_index(ws, kg)
        use_tpt, scorer = code_setting(ws.dataset.name).use_tpt, scorer or relevance(ws)
        return [{"seeds": hits, **run_code(index, hits, text, scorer, k, use_tpt)}
                for text, hits in zip(texts, seeds)]

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        plans = self.plans(ws, questions)
        contexts = [context_of(ws, hits_pids(pl["final"])) for pl in plans]
        answers = read(ws, [q.question for q in questions], contexts, stage=f"{self.key}_reader")
        out = []
        for q, pl, ctx, (answer, res) in zip(questions, plans, contexts, answers):
            usage = LLMUsage()
            usage.add(res)
            ranked = final_ranking(ctx, hits_pids(pl["final"]) + hits_pids(pl["seeds"]))
            out.append(MethodOutput(q.qid, answer, ranked, usage, self._trace(pl, ctx, res.text)))
        return out

    @staticmethod
    def _trace(pl: dict, ctx: list, raw: str) -> dict:
        exp, org = pl["expansion"], pl["organisation"]
        return {"seeds": hits_json(pl["seeds"]), "highly_related": exp.highly_related,
                "expanded": hits_json(exp.added), "mentioned": org.mentioned,
                "mentioned_relations": org.mentioned_relations, "path": org.path,
                "n_candidates": len(org.candidates),
                "candidates": [{"pids": dedup(c), "score": round(float(s), 6)}  # the first ten, each chunk once
                               for c, s in zip(org.candidates, org.scores)][:10],
                "organised_pids": hits_pids(org.kept), "final_pids": hits_pids(pl["final"]),
                "context_pids": ctx, "reader_raw": raw}


def stage_pids(plan: dict) -> dict:
    """A plan's three stages as pid lists: ``expanded`` (step 1's added chunks, in order), ``organised``
    (step 2's kept chunks, in order) and ``final`` (the grouped list the reader gets)."""
    return {"expanded": hits_pids(plan["expansion"].added), "organised": hits_pids(plan["organisation"].kept),
            "final": hits_pids(plan["final"])}

