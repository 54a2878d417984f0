"""Non-LLM stages at paper scale: ms per question at 1k, 10k and ~100k triples.

    .venv/bin/python benchmarks/bench_scale.py [--levels 1000 10000 100000] [--questions 100]
                                               [--legacy-questions 5] [--dim 1024] [--out results/benchmarks]

**Graph.** musique_train's real GPT-3.5 OpenIE graph (1,890 passages, 17,234 triples), loaded through
``kgir_lib`` (:func:`kgir_lib.data.load_dataset`, :func:`kgir_lib.kg.openie.import_openie`), grown by
copies to HippoRAG 2's MuSiQue corpus size (11,656 passages): copy ``c`` of a passage gets the pid
``<pid>#c`` and text ``<text> [copy c]``; an entity named in two or more passages of the original
(``united states``, ``germany``, ...: the shared, "global" entities) keeps its name in every copy, an
entity of one passage is renamed per copy. So the degree distribution of the tail is the original's
and hubs grow with the corpus (``united states``: 226 triples in the original, ~1,400 at paper size),
as they would in a larger real corpus. The 1k and 10k levels are the first passages of the grown
corpus (in corpus order) up to that many triples.

**Questions.** musique_train's 100 questions. **Embeddings are random** (no encoder here): passages,
facts and phrases get random unit vectors of ``--dim`` (BGE-M3: 1024) dimensions; a question's vector is
its gold passages' mean plus noise, normalised, so its dense top-10 usually holds its gold passages as a
real retriever's would. Model time (encoding, reranker, LLM) is not in any number below.

**Stages** (each timed per question, one question per call, after one warm-up call; mean and p95):

- dense top-10 (:class:`kgir_lib.retrieval.DenseIndex`, cosine over the whole corpus);
- BM25 top-10: rank_bm25's ``BM25Okapi.get_scores`` (the old path), the sparse postings of
  :class:`kgir_lib.retrieval.BM25Index` (same scores bit for bit) and bm25s (same tokens);
- KGIR-RAG Algorithm 1 (:func:`kgir_lib.kgir.subgraph.evidence_subgraph`): G_q of the dense top-10, NER
  replaced by the graph entities written in the question (:func:`kgir_lib.kgir.seeds.entities_in_question`,
  precomputed, so no LLM), n-gram matching, G_tmp, components, edge weights = the source passage's
  score (``"passage"``, no model), maximum spanning trees;
- KG²RAG (:func:`kgir_lib.baselines.kg2rag.plan_question`): 1-hop expansion over the adjacency built once
  per graph, maximum spanning forest, DFS, then tree ranking (scores: random, no reranker) and the
  budget; the old path rebuilds the adjacency per question (``expand`` over the triple list);
- HippoRAG 2: fact linking (top-5 facts of the question's cosine with every fact), phrase seeds, PPR
  (:class:`kgir_lib.baselines.hipporag2.PPRGraph`) per question and for the batch of all questions (how
  the method runs), against ``networkx.pagerank`` per question (the old path; ``--legacy-questions`` only).

One-off costs (building the graph, the PPR operator, the BM25 indexes) are reported apart, in seconds.
The machine is a shared 2-core CPU; the load average is recorded with the numbers. BLAS runs with
one thread (``OMP_NUM_THREADS=1`` unless set), so a number is the cost on one core; the table gives
wall time (what a run waits, inflated when other processes hold the cores) and this process's CPU time.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from collections import Counter
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread: per-question cost on one core, no spin-waiting threads
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kgir_lib.baselines import hipporag2 as h2  # noqa: E402
from kgir_lib.baselines import kg2rag as k2  # noqa: E402
from kgir_lib.config import default_data_dir  # noqa: E402
from kgir_lib.data import Corpus, Passage, load_dataset  # noqa: E402
from kgir_lib.kg import KnowledgeGraph, Triple  # noqa: E402
from kgir_lib.kg.openie import import_openie  # noqa: E402
from kgir_lib.kgir.seeds import entities_in_question  # noqa: E402
from kgir_lib.kgir.subgraph import edge_weights, evidence_subgraph, question_triples  # noqa: E402
from kgir_lib.retrieval import BM25Index, DenseIndex, tokenize  # noqa: E402

PAPER_PASSAGES = 11_656  # HippoRAG 2's MuSiQue corpus
TARGET_MS = 50.0


# ---------------------------------------------------------------------------- the grown graph
def grow(passages: list, kg: KnowledgeGraph, n_passages: int) -> tuple:
    """Copies of the corpus and its triples up to ``n_passages`` passages (see the module docstring)."""
    n_pass_of: Counter = Counter()
    for pid in kg.extracted:
        for e in {x for t in kg.triples_of([pid]) for x in (t.head, t.tail)}:
            n_pass_of[e] += 1
    shared = {e for e, n in n_pass_of.items() if n >= 2}
    out_p, out_t, extracted = [], [], []
    c = 0
    while len(out_p) < n_passages:
        for p in passages:
            if len(out_p) >= n_passages:
                break
            pid = p.pid if c == 0 else f"{p.pid}#{c}"
            text = p.text if c == 0 else f"{p.text} [copy {c}]"
            out_p.append(Passage(pid, p.title, text))
            extracted.append(pid)

            def name(e: str) -> str:
                return e if c == 0 or e in shared else f"{e} <{c}>"
            out_t.extend(Triple(name(t.head), t.relation, name(t.tail), pid) for t in kg.triples_of([p.pid]))
        c += 1
    return out_p, KnowledgeGraph(out_t, extracted)


def level(passages: list, kg: KnowledgeGraph, n_triples: int) -> tuple:
    """The first passages of the grown corpus holding about ``n_triples`` triples."""
    keep, total = [], 0
    for p in passages:
        if total >= n_triples:
            break
        keep.append(p)
        total += len(kg.triples_of([p.pid]))
    pids = [p.pid for p in keep]
    return keep, kg.subset(pids)


# ---------------------------------------------------------------------------- fakes for model stages
class FixedEncoder:
    """Returns precomputed unit vectors by text (random embeddings; no model)."""

    model_name = "random-unit-vectors"
    batch_size = 256

    def __init__(self, table: dict, dim: int):
        self.table, self.dim = table, dim

    def encode(self, texts, progress=False):
        return np.stack([self.table[t] for t in texts]).astype(np.float32) if texts else np.zeros((0, self.dim))


def unit(rng, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


# ---------------------------------------------------------------------------- timing
def time_each(fn, items) -> list:
    """``(wall ms, CPU ms of this process)`` of ``fn(item)`` for each item, after one warm-up call.

    On the shared machine wall time includes waiting for a core; CPU time is what the call
    used (BLAS may use both cores, so CPU can exceed wall for matrix products).
    """
    if items:
        fn(items[0])
    out = []
    for it in items:
        t0, c0 = time.perf_counter(), time.process_time()
        fn(it)
        out.append(((time.perf_counter() - t0) * 1000.0, (time.process_time() - c0) * 1000.0))
    return out


def summary(ms: list) -> dict:
    if not ms:
        return {}
    a = np.asarray([w for w, _ in ms], dtype=float)
    c = np.asarray([x for _, x in ms], dtype=float)
    return {"mean_ms": round(float(a.mean()), 3), "p95_ms": round(float(np.percentile(a, 95)), 3),
            "max_ms": round(float(a.max()), 3), "cpu_ms": round(float(c.mean()), 3), "n": int(a.size)}


def timed_batch(fn, n: int) -> dict:
    """One call over a batch of ``n`` questions: wall and CPU ms per question."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return {"mean_ms": round((time.perf_counter() - t0) * 1000 / n, 3),
            "cpu_ms": round((time.process_time() - c0) * 1000 / n, 3)}


def run_level(passages, kg, questions, n_triples: int, dim: int, n_legacy: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    res: dict = {"passages": len(passages), "triples": len(kg)}
    deg = Counter(e for t in kg.triples for e in (t.head, t.tail))
    res["entities"] = len(deg)
    res["top_hubs"] = [[e, n] for e, n in deg.most_common(3)]
    pids = [p.pid for p in passages]
    pvec = unit(rng, len(passages), dim)
    row = {p: i for i, p in enumerate(pids)}
    table = {p.content: v for p, v in zip(passages, pvec)}
    qvecs = []
    for q in questions:
        gold = [row[p] for p in q.gold_pids if p in row]
        v = rng.standard_normal(dim).astype(np.float32) * 0.03
        v = v + (pvec[gold].mean(axis=0) if gold else unit(rng, 1, dim)[0] * 0.03)
        qvecs.append(v / np.linalg.norm(v))
    for q, v in zip(questions, qvecs):
        table[q.question] = v
    enc = FixedEncoder(table, dim)
    texts = [q.question for q in questions]

    # ---- dense
    dense = DenseIndex(passages, enc, progress=False)
    res["dense_top10"] = summary(time_each(lambda q: dense.search([q], 10), texts))
    hits = dense.search(texts, 10)
    sims = dense.scores(texts)

    # ---- BM25: old rank_bm25 loop, sparse postings, bm25s
    t0 = time.perf_counter()
    bm = BM25Index(passages)
    res["build_bm25_sparse_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    bms = BM25Index(passages, backend="bm25s")
    res["build_bm25s_s"] = round(time.perf_counter() - t0, 2)
    legacy_bm = texts[: max(n_legacy * 4, 10)]
    res["bm25_rank_bm25_loop"] = summary(time_each(lambda q: bm._bm25.get_scores(tokenize(q)), legacy_bm))
    res["bm25_sparse_top10"] = summary(time_each(lambda q: bm.search([q], 10), texts))
    res["bm25s_top10"] = summary(time_each(lambda q: bms.search([q], 10), texts))
    diff, overlap = 0.0, []
    for q in legacy_bm:
        ref = np.asarray(bm._bm25.get_scores(tokenize(q)))
        diff = max(diff, float(np.abs(bm.scores(q) - ref).max()))
    for q in texts:
        a = {p for p, _ in bm.search([q], 10)[0]}
        b = {p for p, _ in bms.search([q], 10)[0]}
        overlap.append(len(a & b) / 10)
    res["bm25_sparse_vs_rank_bm25_max_abs_diff"] = diff
    res["bm25s_vs_rank_bm25_top10_overlap"] = round(float(np.mean(overlap)), 3)

    # ---- KGIR-RAG Algorithm 1 (NER replaced by the graph entities written in the question)
    ents = []
    for q, h in zip(questions, hits):
        G_q = question_triples(kg, [p for p, _ in h])
        ents.append(entities_in_question(q.question, {e for t in G_q for e in (t.head, t.tail)}))

    def alg1(i):
        q, h = questions[i], hits[i]
        scores = {p: s for p, s in h}
        G_q = question_triples(kg, [p for p, _ in h])
        return evidence_subgraph(q.question, h, G_q, ents[i],
                                 weight_fn=lambda qq, ts: edge_weights(qq, ts, "passage", passage_scores=scores))
    idx = list(range(len(questions)))
    res["kgir_algorithm1"] = summary(time_each(alg1, idx))
    subs = [alg1(i) for i in idx]
    res["kgir_G_tmp_mean"] = round(float(np.mean([len(s.G_tmp) for s in subs])), 1)
    res["kgir_seed_rate"] = round(float(np.mean([bool(s.seeds) for s in subs])), 3)

    # ---- KG²RAG: adjacency once, expansion + MST + DFS + ranking (random scores) + budget
    t0 = time.perf_counter()
    adjacency = k2.TripleAdjacency(kg.triples)
    res["build_kg2rag_adjacency_s"] = round(time.perf_counter() - t0, 3)
    col = {p: i for i, p in enumerate(dense.pids)}

    def kg2(i):
        plan = k2.plan_question(kg, adjacency, [p for p, _ in hits[i]], sims[i], col, 1, True)
        trees = plan["trees"]
        texts_ = [k2.tree_triples_text(t) for t in trees]  # what the reranker would read
        order = np.argsort(-rng.random(len(texts_)), kind="stable")
        return k2.fill_budget([k2.tree_passages(trees[j]) for j in order], 10, plan["seed_pids"]), plan
    res["kg2rag_expand_mst_organise"] = summary(time_each(kg2, idx))
    plans = [kg2(i)[1] for i in idx]
    res["kg2rag_G_qm_mean"] = round(float(np.mean([p["n_triples"] for p in plans])), 1)
    res["kg2rag_G_qm_max"] = int(max(p["n_triples"] for p in plans))
    all_triples = kg.triples

    def kg2_old(i):
        seed = kg.triples_of([p for p, _ in hits[i]])
        return k2.expand(all_triples, seed, 1)  # the adjacency rebuilt per question (old path)
    res["kg2rag_expand_old_rebuild"] = summary(time_each(kg2_old, idx[: max(n_legacy * 4, 10)]))

    # ---- HippoRAG 2
    t0 = time.perf_counter()
    hg = h2.build_graph(kg, pids)
    res["build_hippo_graph_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    ppr = hg.ppr
    res["build_ppr_operator_s"] = round(time.perf_counter() - t0, 2)
    res["hippo_nodes"], res["hippo_edges"] = hg.graph.number_of_nodes(), hg.graph.number_of_edges()
    res["hippo_max_phrase_degree"] = max((d for n, d in hg.graph.degree() if n.startswith("entity:")), default=0)
    fact_emb = unit(rng, len(hg.facts), dim)
    qmat = np.stack(qvecs)
    res["hippo_fact_linking"] = summary(time_each(lambda i: h2.link_facts(hg, fact_emb, qmat[i:i + 1], 5), idx))
    res["hippo_fact_linking_batched"] = timed_batch(lambda: h2.link_facts(hg, fact_emb, qmat, 5), len(idx))
    cands, cscores = h2.link_facts(hg, fact_emb, qmat, 5)
    seeds = [h2.phrase_seed_weights([hg.facts[j] for j, _ in cs], [s for _, s in cs], hg.phrase_passages, 5)
             for cs in cscores]
    res["hippo_ppr_single"] = summary(time_each(
        lambda i: h2.ppr_rankings(hg, [seeds[i]], sims[i:i + 1], pids, 0.05, 0.5, k=10), idx))
    res["hippo_ppr_batched"] = timed_batch(lambda: h2.ppr_rankings(hg, seeds, sims, pids, 0.05, 0.5, k=10),
                                           len(idx))
    batch = h2.ppr_rankings(hg, seeds[:max(n_legacy, 1)], sims[:max(n_legacy, 1)], pids, 0.05, 0.5)  # all passages
    res["dense_top10_batched"] = timed_batch(lambda: dense.search(texts, 10), len(idx))
    if n_legacy > 0:
        import networkx as nx

        def old(i):
            pers = {h2.enode(ph): w for ph, w in seeds[i].items()}
            for p, w in zip(pids, h2.min_max(sims[i]) * 0.05):
                pers[h2.pnode(p)] = pers.get(h2.pnode(p), 0.0) + float(w)
            pers = {n: w for n, w in pers.items() if w > 0}
            return nx.pagerank(hg.graph, alpha=0.5, personalization=pers, weight="weight", max_iter=200, tol=1e-10)
        legacy_ms = time_each(old, idx[:n_legacy])
        res["hippo_ppr_old_networkx"] = summary(legacy_ms)
        worst = 0.0
        for i in idx[:n_legacy]:
            ref = old(i)
            new = dict(batch[i])
            worst = max(worst, max(abs(ref[h2.pnode(p)] - new[p]) for p in pids))
        res["hippo_ppr_max_abs_diff_vs_networkx"] = worst
    return res


# ---------------------------------------------------------------------------- report
ROWS = [
    ("dense retrieval, top-10, one question a call (random 1024-d vectors)", "dense_top10"),
    ("dense retrieval, top-10, batch of all questions (as run)", "dense_top10_batched"),
    ("BM25 top-10, sparse postings (rank_bm25 scores; used)", "bm25_sparse_top10"),
    ("BM25 top-10, bm25s", "bm25s_top10"),
    ("BM25 scores, rank_bm25 get_scores loop (old)", "bm25_rank_bm25_loop"),
    ("KGIR-RAG Algorithm 1 (no LLM NER, passage weights)", "kgir_algorithm1"),
    ("KG²RAG expansion + MST + organisation", "kg2rag_expand_mst_organise"),
    ("KG²RAG expansion, adjacency rebuilt per question (old)", "kg2rag_expand_old_rebuild"),
    ("HippoRAG 2 fact linking, one question a call", "hippo_fact_linking"),
    ("HippoRAG 2 fact linking, batch of all questions (as run)", "hippo_fact_linking_batched"),
    ("HippoRAG 2 PPR, one question a call", "hippo_ppr_single"),
    ("HippoRAG 2 PPR, batch of all questions (as run)", "hippo_ppr_batched"),
    ("HippoRAG 2 PPR, networkx.pagerank per question (old)", "hippo_ppr_old_networkx"),
]


def markdown(results: dict, command: str, meta: dict) -> str:
    levels = list(results)
    lines = ["# Non-LLM stages at paper scale", "",
             f"Command: `{command}`", "",
             f"Machine: {meta['machine']}; load average {meta['load_before']} before, {meta['load_after']} after "
             f"(shared 2-core CPU; other sessions were running). Total {meta['seconds']:.0f} s.", "",
             "Graph: musique_train's GPT-3.5 OpenIE graph grown by copies to HippoRAG 2's MuSiQue size "
             "(entities of ≥2 passages shared across copies, so hubs grow; see the script's docstring). "
             "Embeddings are random unit vectors; model time (encoder, reranker, LLM) is excluded.", "",
             "| level | passages | triples | entities | largest hubs (triples) | HippoRAG 2 nodes / edges "
             "| largest phrase-node degree |",
             "|---|---:|---:|---:|---|---:|---:|"]
    for lv in levels:
        r = results[lv]
        hubs = ", ".join(f"{e} ({n})" for e, n in r["top_hubs"])
        lines.append(f"| {lv} | {r['passages']:,} | {r['triples']:,} | {r['entities']:,} | {hubs} | "
                     f"{r['hippo_nodes']:,} / {r['hippo_edges']:,} | {r.get('hippo_max_phrase_degree', '–')} |")
    lines += ["", "## ms per question: wall mean (p95) / CPU mean of this process", "",
              "| stage | " + " | ".join(levels) + f" | ≤ {TARGET_MS:g} ms at {levels[-1]} |",
              "|---|" + "---:|" * len(levels) + "---|"]
    for label, key in ROWS:
        cells = []
        for lv in levels:
            s = results[lv].get(key)
            cells.append("–" if not s else (f"{s['mean_ms']:.2f}" + (f" ({s['p95_ms']:.2f})" if "p95_ms" in s else "")
                                            + f" / {s['cpu_ms']:.2f}"))
        last = results[levels[-1]].get(key)
        verdict = "–" if not last else ("yes" if last["mean_ms"] <= TARGET_MS else "**no**")
        if "(old)" in label and last:
            verdict = "old path"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {verdict} |")
    last = results[levels[-1]]
    lines += ["", "## One-off costs per graph (s) and checks", "",
              "| | " + " | ".join(levels) + " |", "|---|" + "---:|" * len(levels)]
    for label, key in [("HippoRAG 2 graph (networkx)", "build_hippo_graph_s"),
                       ("HippoRAG 2 PPR operator (scipy)", "build_ppr_operator_s"),
                       ("KG²RAG adjacency", "build_kg2rag_adjacency_s"),
                       ("BM25 sparse postings (incl. rank_bm25 fit)", "build_bm25_sparse_s"),
                       ("bm25s index", "build_bm25s_s"),
                       ("max |PPR − networkx.pagerank|", "hippo_ppr_max_abs_diff_vs_networkx"),
                       ("max |sparse BM25 − rank_bm25|", "bm25_sparse_vs_rank_bm25_max_abs_diff"),
                       ("bm25s vs rank_bm25: top-10 overlap", "bm25s_vs_rank_bm25_top10_overlap"),
                       ("KG²RAG |G_q^m| mean (triples)", "kg2rag_G_qm_mean"),
                       ("KG²RAG |G_q^m| max (triples)", "kg2rag_G_qm_max"),
                       ("KGIR |G_tmp| mean", "kgir_G_tmp_mean"),
                       ("KGIR share of questions with a seed", "kgir_seed_rate")]:
        lines.append(f"| {label} | " + " | ".join(str(results[lv].get(key, "–")) for lv in levels) + " |")
    used = [(label, last[key]) for label, key in ROWS if "(old)" not in label and last.get(key)]
    as_run = [(label, s) for label, s in used if "one question a call" not in label]
    single = [(label, s) for label, s in used if "one question a call" in label]
    misses = [f"{label} ({s['mean_ms']:.0f} ms wall, {s['cpu_ms']:.0f} ms CPU)" for label, s in as_run
              if s["mean_ms"] > TARGET_MS]
    close = [f"{label} ({s['mean_ms']:.0f} ms wall, {s['cpu_ms']:.0f} ms CPU)" for label, s in as_run
             if 0.6 * TARGET_MS < s["mean_ms"] <= TARGET_MS]
    tails = [f"{label} (p95 {s['p95_ms']:.0f} ms)" for label, s in as_run
             if s["mean_ms"] <= TARGET_MS and s.get("p95_ms", 0) > TARGET_MS]
    singles = [f"{label} ({s['mean_ms']:.0f} ms wall, {s['cpu_ms']:.0f} ms CPU)" for label, s in single
               if s["mean_ms"] > TARGET_MS]
    lines += ["", "## Verdict", ""]
    if misses:
        lines.append(f"Stages above {TARGET_MS:g} ms per question (mean wall time, as the methods run them) at "
                     f"{levels[-1]}: " + "; ".join(misses) + ".")
    else:
        lines.append(f"Every stage, as the methods run it, is at or below {TARGET_MS:g} ms per question "
                     f"(mean wall time) at {levels[-1]}.")
    if close:
        lines += ["", f"Close to the limit (over {0.6 * TARGET_MS:g} ms): " + "; ".join(close) + "."]
    if tails:
        lines += ["", "Mean within the limit but p95 above it (load from other sessions, or hub-heavy "
                      "questions): " + "; ".join(tails) + "."]
    if singles:
        lines += ["", f"Called for one question at a time (not how the methods call them) these exceed "
                      f"{TARGET_MS:g} ms of wall time: " + "; ".join(singles) + ". Their CPU time is below the "
                      "limit; the wall time includes waiting for a core on the loaded machine (load average "
                      f"{meta['load_before']}–{meta['load_after']} on 2 cores)."]
    pairs = [("HippoRAG 2 PPR: networkx.pagerank per question / PPRGraph as run", "hippo_ppr_old_networkx",
              "hippo_ppr_batched"),
             ("KG²RAG: expansion with the adjacency rebuilt / full stage with the cached adjacency",
              "kg2rag_expand_old_rebuild", "kg2rag_expand_mst_organise"),
             ("BM25: rank_bm25 get_scores / sparse postings top-10", "bm25_rank_bm25_loop", "bm25_sparse_top10")]
    lines += ["", "## Old path / new path (ratio of mean wall times)", "",
              "| | " + " | ".join(levels) + " |", "|---|" + "---:|" * len(levels)]
    for label, old_key, new_key in pairs:
        cells = []
        for lv in levels:
            o, n_ = results[lv].get(old_key), results[lv].get(new_key)
            cells.append(f"{o['mean_ms'] / n_['mean_ms']:.0f}×" if o and n_ and n_["mean_ms"] > 0 else "–")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", meta.get("notes", ""), ""]
    return "\n".join(lines)


NOTES = """Reading the table. "As run" rows are how the methods call the stage: dense retrieval, fact linking
and PPR take all questions of a batch at once (one matrix product, PPR in blocks of 8 reset vectors, top-10 kept);
"one question a call" rows are the same work for a single question. Old paths are what the code did
before this change: networkx.pagerank over the whole graph per question (PPR), the entity → triples
adjacency rebuilt per question (KG²RAG) and rank_bm25's Python loop over every passage per query token
(BM25); the new paths give the same results (max differences in the checks table; tests/
test_methods_hipporag2.py, test_methods_kg2rag.py, test_retrieval.py). KG²RAG's cost grows with the
hubs: a seed passage naming "United States" pulls its ~1,400 triples into G_q^m (max |G_q^m| above), and
Kruskal plus DFS run over all of them. PPR's cost is ~16 power iterations of a sparse product with
~436k non-zeros at paper size; it is networkx's iteration (same start, update and stopping test, so the
same scores), with the update's reset term applied only on the rows that carry reset mass. BLAS threads: {threads}."""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", type=int, nargs="+", default=[1000, 10000, 100000],
                    help="triple counts; the largest is the grown corpus at 11,656 passages")
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--legacy-questions", type=int, default=5, help="questions timed on the old slow paths")
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks"))
    ap.add_argument("--from-json", default=None, help="only re-render scale.md from a scale.json written earlier")
    args = ap.parse_args(argv)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        md = markdown(saved["results"], saved["command"].strip(), saved["meta"])
        md = md.replace("\n\nMachine:", f"\n\n(Report re-rendered from `{args.from_json}` with `--from-json`; "
                                       "numbers from the command above.)\n\nMachine:", 1)
        Path(args.out, "scale.md").write_text(md)
        print(md)
        return 0
    t_start = time.perf_counter()
    load_before = round(os.getloadavg()[0], 2)
    data = default_data_dir()
    ds = load_dataset("musique_train", data)
    openie = sorted((data / "musique_train").glob("openie_musique_train_results_*.json"))[0]
    kg, _ = import_openie(openie, ds.corpus)
    passages, big = grow(list(ds.corpus.passages), kg, PAPER_PASSAGES)
    questions = list(ds.questions)[: args.questions]
    results = {}
    for n in sorted(args.levels):
        ps, sub = (passages, big) if n >= len(big) * 0.9 else level(passages, big, n)
        label = f"{len(sub) // 1000}k triples"
        print(f"[scale] {label}: {len(ps)} passages, {len(sub)} triples", flush=True)
        results[label] = run_level(ps, sub, questions, n, args.dim, args.legacy_questions)
        print(json.dumps(results[label])[:400], flush=True)
    meta = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
                       f"Python {platform.python_version()}",
            "load_before": load_before, "load_after": round(os.getloadavg()[0], 2),
            "seconds": time.perf_counter() - t_start,
            "notes": NOTES.format(threads=os.environ.get("OMP_NUM_THREADS"))}
    command = ".venv/bin/python benchmarks/bench_scale.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.json").write_text(json.dumps({"command": command, "meta": meta, "results": results}, indent=1))
    (out / "scale.md").write_text(markdown(results, command.strip(), meta))
    print((out / "scale.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
