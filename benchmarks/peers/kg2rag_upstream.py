"""The authors' KG²RAG post-processors on the suite's inputs (peer environment, ``.venv-kg2rag``).

    .venv-kg2rag/bin/python kg2rag_upstream.py run --checkout SRC --inputs DIR/inputs/<dataset>.json.gz \\
        --scores DIR/scores.jsonl.gz --embed-url http://127.0.0.1:PORT/v1 --order as-is --out FILE
    .venv-kg2rag/bin/python kg2rag_upstream.py mst --graphs DIR/mst_graphs.jsonl.gz --out FILE

``run``: for every question of the inputs file (written by ``kg2rag_compare.py suite``), upstream's
``KGRetrievePostProcessor``, ``GraphFilterPostProcessor`` and ``NaivePostprocessor`` (``code/util/
kg_post_processor.py`` of the checkout ``SRC``, imported, not changed) in the order ``kg_rag_distractor.py``
wires them, called directly on the suite's seed chunks with their scores (upstream's retriever and its
LLM reader are not run). Inputs as ``kg_rag_distractor.process_sample`` builds them: ``chunks_index``
(title -> chunk key -> ``"title: text"``), ``doc2kg`` (title -> chunk key -> triples, no empty chunk),
``ents`` (every title), the dataset's wiring (``hotpotqa`` / ``musique``) and ``use_tpt``, ``topk`` = the seed
count. The reranker is :class:`SuiteScores`: a ``FlagReranker`` whose ``compute_score`` returns the suite's
score of each (question, text) pair, from the suite's own table when the suite scored that text, else the
cosine of the suite's encoder's embeddings served by ``embed_server.py``. bge-reranker-large itself cannot be
downloaded here. Writes one line a question: the chunks after each stage, every ``compute_score`` call
(text hashes, scores, whether each came from the table) and any exception upstream raised.

``--order as-is`` runs upstream untouched (its set and subgraph orders follow ``PYTHONHASHSEED``, which the
caller sets); ``--order insertion`` runs it with every ``set()`` its module creates ordered by insertion and
networkx's subgraph views iterating in graph order (``nx.filters.show_nodes`` without its ``nodes``
attribute), the one tie order the suite's ``kg2rag_code`` uses: a check of the suite's reading with hash order
taken out, reported beside the untouched runs, never in their place. ``--order sets`` and ``--order views`` take
out one of the two each (the module's sets; networkx's subgraph views), to say where the hash order enters.

``mst``: networkx's ``maximum_spanning_tree`` (upstream's networkx) on each weighted graph of the file (edges
``[u, v, weight]`` in insertion order, a multigraph): the indices of the edges it keeps.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # records, beside this script
from records import read_jsonl  # noqa: E402


def sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


class InsertionOrderedSet:
    """A set that iterates in insertion order: what ``--order insertion`` puts in place of ``set`` inside
    upstream's module (only the operations that module uses)."""

    def __init__(self, items=()):
        self._d = dict.fromkeys(items)

    def add(self, x) -> None:
        self._d[x] = None

    def remove(self, x) -> None:
        del self._d[x]

    def union(self, other) -> "InsertionOrderedSet":
        return InsertionOrderedSet([*self._d, *other])

    __or__ = union

    def intersection(self, other) -> "InsertionOrderedSet":
        return InsertionOrderedSet(x for x in self._d if x in other)

    def __sub__(self, other) -> "InsertionOrderedSet":
        return InsertionOrderedSet(x for x in self._d if x not in other)

    def __contains__(self, x) -> bool:
        return x in self._d

    def __iter__(self):
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)


class _GraphOrderNodes:
    """``nx.filters.show_nodes`` without a ``nodes`` attribute: networkx's views then iterate a subgraph's
    nodes in the graph's order instead of the set's."""

    def __init__(self, nodes):
        self._nodes = set(nodes)

    def __call__(self, node) -> bool:
        return node in self._nodes


ORDERS = ("as-is", "insertion", "sets", "views")


def load_upstream(checkout: Path, order: str):
    sys.path.insert(0, str(checkout / "code"))
    from util import kg_post_processor as kpp  # upstream's module, as the checkout has it

    if order not in ORDERS:
        raise SystemExit(f"--order {order!r}: expected one of {', '.join(ORDERS)}")
    if order in ("insertion", "sets"):
        kpp.set = InsertionOrderedSet
    if order in ("insertion", "views"):
        import networkx as nx

        nx.filters.show_nodes = _GraphOrderNodes
    return kpp


def make_scorer_class(kpp, table: dict, embed_url: str):
    """``SuiteScores``: a ``FlagReranker`` (so upstream's field accepts it) that loads no model."""

    class SuiteScores(kpp.FlagReranker):
        def __init__(self):  # noqa: D107 - no model: the scores are the suite's
            self.pool = None
            self.calls: list = []
            self._qvec: dict = {}

        def _embed(self, texts: list) -> list:
            req = urllib.request.Request(f"{embed_url}/embeddings", method="POST",
                                         data=json.dumps({"input": texts, "model": "suite"}).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=600) as resp:
                return [d["embedding"] for d in json.load(resp)["data"]]

        def compute_score(self, sentence_pairs, **kwargs):
            if isinstance(sentence_pairs[0], str):
                sentence_pairs = [sentence_pairs]
            pairs = [(str(q), str(t)) for q, t in sentence_pairs]
            scores = [table.get((q, t)) for q, t in pairs]
            missing = sorted({t for (q, t), s in zip(pairs, scores) if s is None})
            if missing:
                if not embed_url:
                    raise SystemExit("a text the suite never scored and no --embed-url to score it")
                vecs = dict(zip(missing, self._embed(missing)))
                for i, ((q, t), s) in enumerate(zip(pairs, scores)):
                    if s is None:
                        if q not in self._qvec:
                            self._qvec[q] = self._embed([q])[0]
                        scores[i] = float(sum(a * b for a, b in zip(self._qvec[q], vecs[t])))
            self.calls.append({"n": len(pairs), "texts": [sha(t) for _, t in pairs],
                               "scores": [round(float(s), 9) for s in scores],
                               "from_table": sum(table.get(p) is not None for p in pairs)})
            return [float(s) for s in scores]

    return SuiteScores


def build_inputs(inp: dict) -> tuple:
    """``(chunks_index, doc2kg, ents, texts)`` as ``kg_rag_distractor.process_sample`` builds them."""
    chunks_index: dict = {}
    doc2kg: dict = {}
    texts: dict = {}
    facts = inp["facts"]
    for cid, title, key, text in inp["chunks"]:
        chunks_index.setdefault(title, {})[key] = text
        texts[cid] = text
        if facts.get(cid):
            doc2kg.setdefault(title, {})[key] = [list(f) for f in facts[cid]]
    return chunks_index, doc2kg, set(chunks_index), texts


def run(args) -> None:
    kpp = load_upstream(args.checkout, args.order)
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    with gzip.open(args.inputs, "rt", encoding="utf-8") as fh:
        inp = json.load(fh)
    table = {}
    if args.scores and args.scores.exists():
        for r in read_jsonl(args.scores):
            table[(r["q"], r["t"])] = float(r["s"])
    chunks_index, doc2kg, ents, texts = build_inputs(inp)
    dataset, k = inp["wiring"], int(inp["top_k"])
    reranker = make_scorer_class(kpp, table, args.embed_url)()
    expand = kpp.KGRetrievePostProcessor(dataset=dataset, ents=ents, doc2kg=doc2kg, chunks_index=chunks_index)
    organise = kpp.GraphFilterPostProcessor(dataset=dataset, use_tpt=bool(inp["use_tpt"]), topk=k, ents=ents,
                                            doc2kg=doc2kg, chunks_index=chunks_index, reranker=reranker)
    group = kpp.NaivePostprocessor(dataset=dataset)
    out = []
    t0 = time.time()
    for q in inp["questions"]:
        reranker.calls = []
        seeds = [NodeWithScore(node=TextNode(id_=cid, text=texts[cid]), score=float(s)) for cid, s in q["seeds"]]
        bundle = QueryBundle(query_str=q["question"])
        rec = {"qid": q["qid"], "error": None}
        try:
            nodes = expand.postprocess_nodes(seeds, query_bundle=bundle)
            rec["expanded"] = [[n.node.id_, float(n.score)] for n in nodes[len(seeds):]]
            kept = organise.postprocess_nodes(nodes, query_bundle=bundle)
            rec["organised"] = [[n.node.id_, float(n.score)] for n in kept]
            rec["final"] = [n.node.id_ for n in group.postprocess_nodes(kept, query_bundle=bundle)]
        except Exception as exc:  # upstream's process_sample catches every exception and answers ''
            rec["error"] = f"{type(exc).__name__}: {exc}"
        rec["rerank_calls"] = reranker.calls
        out.append(rec)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out), encoding="utf-8")
    fresh = sum(c["n"] - c["from_table"] for r in out for c in r["rerank_calls"])
    print(f"upstream ({args.order}): {len(out)} questions of {inp['dataset']} in {time.time() - t0:.1f} s, "
          f"{sum(r['error'] is not None for r in out)} exceptions, {fresh} pairs scored fresh -> {args.out}")


def mst(args) -> None:
    import networkx as nx

    out = []
    for g in read_jsonl(args.graphs):
        G = nx.MultiGraph()
        for i, (u, v, w) in enumerate(g["edges"]):
            G.add_edge(u, v, weight=float(w), idx=i)
        T = nx.maximum_spanning_tree(G, weight="weight")
        out.append({"id": g["id"], "kept": sorted(d["idx"] for _, _, d in T.edges(data=True))})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    print(f"mst: networkx {nx.__version__} on {len(out)} graphs -> {args.out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    r = sub.add_parser("run")
    r.add_argument("--checkout", type=Path, required=True, help="the KG2RAG checkout (its code/ folder is imported)")
    r.add_argument("--inputs", type=Path, required=True)
    r.add_argument("--scores", type=Path)
    r.add_argument("--embed-url", default="")
    r.add_argument("--order", default="as-is", choices=ORDERS)
    r.add_argument("--out", type=Path, required=True)
    m = sub.add_parser("mst")
    m.add_argument("--graphs", type=Path, required=True)
    m.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    run(args) if args.step == "run" else mst(args)


if __name__ == "__main__":
    main()
