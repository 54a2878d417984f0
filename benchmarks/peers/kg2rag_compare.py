"""The suite's side of the KG²RAG cross-check, and its report (main environment).

    .venv/bin/python benchmarks/peers/kg2rag_compare.py suite   --work DIR [--profile local]
    .venv/bin/python benchmarks/peers/kg2rag_compare.py report  --work DIR [--out results/benchmarks/peers_kg2rag.md]
    .venv/bin/python benchmarks/peers/kg2rag_compare.py rescore --work DIR [--out results/benchmarks/peers_kg2rag.md]

``suite``: for every dataset of the profile (the ``local`` profile: all 100 musique_train and 84 hotpotqa
questions), the inputs both sides share and the suite's two KG²RAGs on them, **with no LLM call**: the
committed response log (``results/<profile>/llm_responses.jsonl.gz``) is copied into ``DIR/results/<profile>/``
and read cache only, for the graph notebook 01 extracts (hotpotqa's pool) and the seeds' on-demand extraction;
the readers are not run. Per dataset, in ``DIR/<dataset>/``:

- ``inputs.json.gz``: every corpus passage as the code's chunk (id, title, key, ``"title: text"``), the triples
  of every chunk of the graph the suite's KG²RAG reads (the local run's: notebook 01's graph and the seeds),
  and each question's seed chunks with their cosine scores, for ``kg2rag_upstream.py run``;
- ``suite.jsonl``: per question, the stages of ``kg2rag`` (the paper's reading: ``D_q^m``, the organised list)
  and of ``kg2rag_code`` (the code's reading: added chunks, organised chunks, final list, candidate texts and
  their scores);
- ``scores.jsonl.gz``: every (question, text, score) ``kg2rag_code`` scored: the table upstream's stand-in
  reranker reads, so both sides score the same text with the same number;
- ``mst_graphs.jsonl.gz`` and ``suite_mst.jsonl``: the weighted graphs the suite's maximum spanning trees are
  taken on (Algorithm 1's seed components of KGIR-RAG's first round, and KG²RAG's ``G_q^m``), with the edges
  the suite's Kruskal (:func:`kgir_lib.kg.mst.maximum_spanning_tree`) keeps, in the graph's order and in
  networkx's edge order, for ``kg2rag_upstream.py mst``.

``report``: reads those and upstream's records (``upstream_seed<N>.jsonl``: untouched, one a hash seed;
``upstream_insertion.jsonl``: the hash order taken out; ``upstream_mst.jsonl``) and writes the report and its
per-question CSV (:mod:`kg2rag_report`). ``rescore``: the suite side of this code (the ``suite`` step) against
upstream's per-question lists as the committed CSV keeps them, no peer environment.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # peer_run and records, beside this script
from peer_run import cache_only_config, checkout_commit  # noqa: E402
from records import write_jsonl  # noqa: E402


def open_dataset(cfg, dataset: str, llm):
    """``(ws, questions)``: the dataset's workspace with notebook 01's graph (built cache only where the
    dataset has no published OpenIE), and the profile's questions."""
    from kgir_lib.data import sample_questions
    from kgir_lib.kg.extract import build_kg
    from kgir_lib.pipeline import workspace

    ws = workspace(cfg, dataset, llm=llm, progress=False)
    build_kg(cfg, ws.dataset, ws.llm, ws.dense)
    ws = workspace(cfg, dataset, llm=llm, progress=False)  # again, so the graph's base is notebook 01's
    return ws, sample_questions(ws.dataset.questions, cfg.n_questions, cfg.seed)


def recording(scorer, table: dict):
    """``scorer`` that also keeps every (question, text) -> score it returns in ``table``."""
    def score(question, texts):
        out = scorer(question, texts)
        for t, s in zip(texts, out):
            table[(question, t)] = float(s)
        return out
    return score


def paper_side(ws, questions) -> tuple:
    """The paper-following KG²RAG's stages (no reader) and its organisation graphs."""
    from kgir_lib.baselines.kg2rag import KG2RAG

    method = KG2RAG()
    plans = method.plans(ws, questions)
    rows = [{"expanded": pl["expanded_pids"], "organised": pl["organised"], "final": pl["organised"]}
            for pl in plans]
    graphs = [[[t.head, t.tail, float(w)] for t, w in pl["edges"]] for pl in plans]
    return rows, graphs


def code_side(ws, questions, table: dict) -> tuple:
    """``kg2rag_code``'s stages (no reader), its chunk index and the seeds."""
    from kgir_lib.baselines.kg2rag_code import KG2RAGCode, relevance, stage_pids

    method = KG2RAGCode()
    plans = method.plans(ws, questions, scorer=recording(relevance(ws), table))
    index = method._index[1]
    rows = []
    for pl in plans:
        org = pl["organisation"]
        rows.append({**stage_pids(pl), "path": org.path, "highly_related": pl["expansion"].highly_related,
                     "candidates": org.candidates, "candidate_scores": org.scores,
                     "candidate_texts": [sha(t) for t in org.texts]})
    return rows, index, [pl["seeds"] for pl in plans]


def triple_drops(ws, view) -> dict:
    """What the suite's triple loader dropped (:func:`kgir_lib.kg.parse.validate`) from the passages of the graph
    the cross-check feeds both sides (``view``'s, the method's view of ``ws``; the drops are recorded by passage in
    the shared graph of ``ws``): triples whose head equals the tail up to case, repeats of a triple up to case,
    triples without three parts, and where the graph comes from."""
    from collections import Counter

    from kgir_lib.kg.store import drops_of, openie_file

    by_pid = drops_of(ws.kg)
    drops: Counter = Counter()
    for pid in view.kg.extracted:
        drops.update(by_pid.get(pid, {}))
    source = ("the published OpenIE file" if openie_file(ws.cfg, ws.dataset.name) is not None
              else "notebook 01's extraction and the seeds' on-demand extraction")
    return {"source": source, "head_equals_tail": int(drops.get("head_equals_tail", 0)),
            "duplicate": int(drops.get("duplicate", 0)), "wrong_arity": int(drops.get("wrong_arity", 0))}


def uncleaned(ws):
    """``ws`` whose shared graph holds every passage's triples as extracted, not as the suite's loader cleaned them:
    self-loops and repeats up to case kept (:func:`kgir_lib.kg.parse.validate` with ``clean=False``; a triple
    without three non-empty parts is still dropped: the authors' code unpacks every triple as ``h, r, t``). The
    triples are read again from where the graph came from: the published OpenIE file, or the extraction replies
    (cache only, from the committed response log); a passage extracted on demand later is replaced the same way."""
    import dataclasses

    from kgir_lib.kg.extract import extract_triples
    from kgir_lib.kg.graph import Triple
    from kgir_lib.kg.openie import import_openie
    from kgir_lib.kg.parse import parse_triples
    from kgir_lib.kg.store import openie_file

    published = openie_file(ws.cfg, ws.dataset.name)
    imported = import_openie(published, ws.dataset.corpus, clean=False)[0] if published is not None else None
    done: set = set()

    def unclean(pids) -> None:
        have = ws.kg.extracted
        todo = [p for p in dict.fromkeys(pids) if p in have and p not in done]
        if not todo:
            return
        if imported is not None:
            for p in todo:
                ws.kg.add(p, imported.triples_of([p]))
        else:
            rep = extract_triples(ws.llm, [ws.dataset.corpus[p] for p in todo],
                                  max_tokens=ws.cfg.max_tokens("extract"))
            for p in todo:
                ws.kg.add(p, [Triple(h, r, t, p) for h, r, t in parse_triples(rep.raw[p], clean=False)[0]])
        done.update(todo)

    unclean(ws.kg.extracted_order())
    shared_ensure = ws.ensure_kg

    def ensure(pids) -> None:
        pids = list(pids)
        if shared_ensure is not None:
            shared_ensure(pids)
        unclean(pids)

    return dataclasses.replace(ws, ensure_kg=ensure)


def loader_rules(view) -> dict:
    """How many triples of ``view``'s graph the suite's loader would drop as a self-loop or a repeat (0 and 0 on
    a cleaned graph)."""
    from collections import Counter

    from kgir_lib.kg.parse import validate

    drops: Counter = Counter()
    for pid in view.kg.extracted_order():
        seen: set = set()
        for t in view.kg.triples_of([pid]):
            validate([t.head, t.relation, t.tail], drops, seen)
    return {"head_equals_tail": int(drops["head_equals_tail"]), "duplicate": int(drops["duplicate"]),
            "triples": len(view.kg)}


def sha(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def algorithm1_graphs(ws, questions) -> list:
    """Algorithm 1's weighted graphs, one a question: the triples of its seed components with the weights its
    maximum spanning trees are taken on (KGIR-RAG's first round; NER read from the response log)."""
    from kgir_lib.kgir.subgraph import build_subgraphs

    subs, _ = build_subgraphs(ws, [q.question for q in questions])
    return [[[t.head, t.tail, float(sub.weights[t])] for comp in sub.components for t in comp.triples]
            for sub in subs]


def suite_trees(graphs: list) -> list:
    """The suite's Kruskal on each graph: the edges kept with the graph's own edge order, and with networkx's
    (:meth:`kgir_lib.baselines.kg2rag_code.OrderedMultiGraph.edge_order`), and each tree's total weight."""
    from kgir_lib.baselines.kg2rag_code_organise import OrderedMultiGraph
    from kgir_lib.kg.graph import Triple
    from kgir_lib.kg.mst import maximum_spanning_tree

    out = []
    for g in graphs:
        edges = g["edges"]
        triples = [Triple(u, "", v, str(i)) for i, (u, v, _) in enumerate(edges)]
        weights = [w for _, _, w in edges]
        kept = maximum_spanning_tree(triples, weights)
        og = OrderedMultiGraph()
        for u, v, w in edges:
            og.add_edge(u, v, "", w)
        order = og.edge_order(list(og.adj))
        kept_nx = sorted(order[j] for j in maximum_spanning_tree([triples[i] for i in order],
                                                                  [weights[i] for i in order]))
        out.append({"id": g["id"], "kept": kept, "kept_nx_order": kept_nx,
                    "weight": float(sum(weights[i] for i in kept))})
    return out


def run_suite(work: Path, profile: str, datasets=None, limit=None, mst: bool = True, clean: bool = True) -> None:
    """The ``suite`` step (module docstring) for ``datasets`` (default: the profile's), the first ``limit``
    questions of each (default: all); ``mst=False`` leaves out the spanning-tree graphs; ``clean=False`` feeds both
    sides the triples as extracted (:func:`uncleaned`)."""
    from kgir_lib.baselines.kg2rag_code_chunks import code_setting
    from kgir_lib.llm import build_llm

    cfg = cache_only_config(work, profile)
    llm = build_llm(cfg, progress=False)
    drops: dict = {}
    for dataset in datasets or cfg.datasets:
        if dataset not in cfg.datasets:
            raise SystemExit(f"--datasets: {dataset!r} is not a dataset of the {profile!r} profile ({cfg.datasets})")
        ws, questions = open_dataset(cfg, dataset, llm)
        ws = ws if clean else uncleaned(ws)
        questions = questions[:limit] if limit else questions
        paper, paper_graphs = paper_side(ws.method_view(), questions)
        table: dict = {}
        view = ws.method_view()
        code, index, seeds = code_side(view, questions, table)
        drops[dataset] = {**triple_drops(ws, view), "read": loader_rules(view)}
        setting = code_setting(dataset)
        out = work / dataset
        chunks = [[index.chunk_id(p.pid), p.title, _key(index, p.pid), index.text[p.pid]]
                  for p in ws.dataset.corpus.passages]
        inputs = {"dataset": dataset, "wiring": setting.wiring, "use_tpt": setting.use_tpt,
                  "top_k": cfg.top_k, "chunks": chunks,
                  "facts": {index.chunk_id(p): [list(f) for f in fs] for p, fs in index.facts.items()},
                  "questions": [{"qid": q.qid, "question": q.question,
                                 "seeds": [[index.chunk_id(p), float(s)] for p, s in hits]}
                                for q, hits in zip(questions, seeds)]}
        out.mkdir(parents=True, exist_ok=True)
        with gzip.open(out / "inputs.json.gz", "wt", encoding="utf-8") as fh:
            json.dump(inputs, fh, ensure_ascii=False)
        write_jsonl(out / "suite.jsonl", [{"qid": q.qid, "seeds": [p for p, _ in hits], "paper": pa, "code": co}
                                          for q, hits, pa, co in zip(questions, seeds, paper, code)])
        write_jsonl(out / "scores.jsonl.gz", [{"q": q, "t": t, "s": s} for (q, t), s in table.items()])
        if not mst:
            print(f"suite: {dataset}: {len(questions)} questions -> {out} (no spanning-tree graphs)")
            continue
        graphs = ([{"id": f"algorithm1/{q.qid}", "edges": e} for q, e in zip(questions, algorithm1_graphs(ws, questions))]
                  + [{"id": f"kg2rag/{q.qid}", "edges": e} for q, e in zip(questions, paper_graphs)])
        write_jsonl(out / "mst_graphs.jsonl.gz", graphs)
        write_jsonl(out / "suite_mst.jsonl", suite_trees(graphs))
        print(f"suite: {dataset}: {len(questions)} questions, {len(index.facts)} chunks with triples, "
              f"{len(table)} scored texts -> {out}")
    (work / "suite.meta.json").write_text(json.dumps({"profile": profile, "code": checkout_commit(),
                                                      "triples": "cleaned" if clean else "uncleaned",
                                                      "triple_drops": drops}), encoding="utf-8")


def _key(index, pid: str) -> str:
    """The chunk's key under its title (the code's ``doc2kg[title]`` / ``chunks_index[title]`` key)."""
    return str(index.seq[pid]) if index.wiring == "hotpotqa" else f"{index.idx[pid]}##{index.seq[pid]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["suite", "report", "rescore"])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--profile", default="local")
    ap.add_argument("--datasets", nargs="+", help="suite step: these of the profile's datasets (default: all)")
    ap.add_argument("--limit", type=int, help="suite step: the first N questions of each dataset (default: all)")
    ap.add_argument("--no-mst", action="store_true", help="suite step: leave out the spanning-tree graphs")
    ap.add_argument("--uncleaned", action="store_true",
                    help="suite step: both sides read the triples as extracted (self-loops and repeats kept); "
                         "report step: write the uncleaned run's per-question CSV beside the report instead")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "peers_kg2rag.md")
    ap.add_argument("--command", default="bash benchmarks/peers/kg2rag_crosscheck.sh",
                    help="the command shown in the report")
    ap.add_argument("--hash-seeds", type=int,
                    help="report step: read the untouched runs of hash seeds 0 to N-1 (default: every seed from 0 "
                         "up to the first missing one)")
    args = ap.parse_args()
    if args.step == "suite":
        run_suite(args.work, args.profile, args.datasets, args.limit, not args.no_mst, clean=not args.uncleaned)
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from kg2rag_report import write_report

        if args.uncleaned:
            if args.step != "report":
                raise SystemExit("--uncleaned: only with the suite and report steps")
            from kg2rag_report import write_uncleaned

            write_uncleaned(args.work, args.profile, args.out.parent, args.command)
            return
        write_report(args.work, args.profile, args.out, args.command, rescore=args.step == "rescore",
                     hash_seeds=args.hash_seeds)


if __name__ == "__main__":
    main()
